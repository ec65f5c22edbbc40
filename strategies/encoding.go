package strategies

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// The shared text encoding of states; DATA_FORMAT.md is its specification.
//
// A current encoding is a header of two lowercase hex digits, the strategy's
// kind and its format version, followed by '|'-separated fields:
// "12|4.5|1768723200000000000". Older encodings start with "v1", "v2" or
// "cmp1" and do not name the strategy: the configured one says how to read
// them.

// kind is a strategy as its encodings name it: the two hex digits of its
// current header, and its name in messages and descriptions. Each
// strategy declares its kind next to its encoding, and kinds lists them
// all, so that a header of another strategy is told from garbage.
type kind struct {
	id      byte   // the first hex digit of the header
	version byte   // the second: the current format version
	name    string // "gcra", "token bucket", ...
	// blank returns a Decider that reads the current encoding of the kind
	// without a configuration, which none of them needs (see Describe).
	blank func() Decider
}

// String names the kind in error messages.
func (k *kind) String() string { return k.name }

// appendHeader appends the kind's current header; the fields that follow
// bring their own separators.
func (k *kind) appendHeader(dst []byte) []byte {
	return append(dst, k.id, k.version)
}

// kinds are the strategies of this package, by the first digit of their
// header.
var kinds = map[byte]*kind{}

// newKind declares a strategy's kind.
func newKind(id, version byte, name string, blank func() Decider) *kind {
	k := &kind{id, version, name, blank}
	kinds[id] = k
	return k
}

// kinded is a State of this package, which knows its kind.
type kinded interface {
	State
	kind() *kind
	// describe lays out the state's fields for Describe.
	describe() Description
}

// format is the layout a header announces.
type format int

const (
	formatCurrent format = iota // "<kind><version>|..."
	formatV1                    // "v1|...": legacy, fields depend on the strategy
	formatV2                    // "v2|...": legacy, fields depend on the strategy
	formatCmp1                  // "cmp1|<primary>$<secondary>": legacy composite
)

// corrupt returns an error about undecodable bytes, matching ErrCorrupt.
func corrupt(k *kind, format string, args ...any) error {
	return fmt.Errorf("strategies: %v: %s: %w", k, fmt.Sprintf(format, args...), ErrCorrupt)
}

// quote shows stored bytes in an error message, cut short when long.
func quote(b []byte) string {
	const maxShown = 48
	if len(b) > maxShown {
		return strconv.Quote(string(b[:maxShown])) + "..."
	}
	return strconv.Quote(string(b))
}

// openState reads the header of b for a strategy of kind k and returns the
// format it announces, with a reader positioned on the first field after
// it. A current header of another known kind, or a "cmp1" header under a
// non-composite strategy, is ErrMismatch; anything else unknown, including
// an unknown version of k itself, is ErrCorrupt. Whether k reads the legacy
// format v1 or v2 is the caller's business.
func openState(b []byte, k *kind) (format, *reader, error) {
	r := &reader{kind: k, rest: b, more: true}
	head := r.next("header")
	switch string(head) {
	case "v1":
		return formatV1, r, nil
	case "v2":
		return formatV2, r, nil
	case "cmp1":
		if k != kindComposite {
			return 0, nil, mismatch(k, head)
		}
		return formatCmp1, r, nil
	}
	if len(head) == 2 && isHex(head[0]) && isHex(head[1]) {
		switch other := kinds[head[0]]; {
		case other == k && head[1] == k.version:
			return formatCurrent, r, nil
		case other == k:
			return 0, nil, corrupt(k, "unsupported format version %s", quote(head))
		case other != nil:
			return 0, nil, mismatch(k, head)
		}
	}
	return 0, nil, corrupt(k, "unknown header %s", quote(head))
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// mismatch is the error of a well-formed header that another strategy wrote.
func mismatch(k *kind, head []byte) error {
	writer := "a composite"
	if len(head) == 2 {
		writer = "a " + kinds[head[0]].name
	}
	return fmt.Errorf("strategies: %v: state %s was written by %s: %w", k, quote(head), writer, ErrMismatch)
}

// wrongState is the error of Decide given a state another strategy made.
func wrongState(k *kind, st State) error {
	if of, ok := st.(kinded); ok {
		return fmt.Errorf("strategies: %v: cannot apply to a state of a %v: %w", k, of.kind(), ErrMismatch)
	}
	return fmt.Errorf("strategies: %v: cannot apply to a state of type %T: %w", k, st, ErrMismatch)
}

// reader walks the '|'-separated fields of one encoded state. Its first
// error sticks: later reads return zero values, and done reports it.
type reader struct {
	kind  *kind
	rest  []byte // what follows the last field read
	more  bool   // whether another field follows (rest may be empty: an empty last field)
	field int    // 1-based number of the last field read, for messages
	err   error
}

// next returns the next field, failing when there is none.
func (r *reader) next(name string) []byte {
	if r.err != nil {
		return nil
	}
	r.field++
	if !r.more {
		r.err = corrupt(r.kind, "field %d (%s) is missing", r.field, name)
		return nil
	}
	i := bytes.IndexByte(r.rest, '|')
	if i < 0 {
		f := r.rest
		r.rest, r.more = nil, false
		return f
	}
	f := r.rest[:i]
	r.rest = r.rest[i+1:]
	return f
}

// all returns everything left, '|' included, as one field: the composite
// reads its two parts this way.
func (r *reader) all(name string) []byte {
	f := r.rest
	if r.err == nil && !r.more {
		r.field++
		r.err = corrupt(r.kind, "field %d (%s) is missing", r.field, name)
	}
	r.rest, r.more = nil, false
	return f
}

// fail records an error about the field just read.
func (r *reader) fail(name string, f []byte, why string) {
	if r.err == nil {
		r.err = corrupt(r.kind, "field %d (%s) %s %s", r.field, name, quote(f), why)
	}
}

// int reads a decimal integer field within [lo, hi]. The grammar is
// -?[0-9]+; no sign '+', no spaces, no base prefix.
func (r *reader) int(name string, lo, hi int64) int64 {
	f := r.next(name)
	if r.err != nil {
		return 0
	}
	digits := f
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || bytes.IndexFunc(digits, func(c rune) bool { return c < '0' || c > '9' }) >= 0 {
		r.fail(name, f, "is not a decimal integer")
		return 0
	}
	v, err := strconv.ParseInt(string(f), 10, 64)
	if err != nil || v < lo || v > hi {
		r.fail(name, f, fmt.Sprintf("is out of range [%d, %d]", lo, hi))
		return 0
	}
	return v
}

// float reads a finite decimal number field within [lo, hi], as written by
// strconv.FormatFloat with format 'g', 'e' or 'f' (any decimal
// precision). Hexadecimal floats, underscores, "NaN" and "Inf" are
// refused. With nonNegative, -0 is refused too: the field is a magnitude.
func (r *reader) float(name string, lo, hi float64, nonNegative bool) float64 {
	f := r.next(name)
	if r.err != nil {
		return 0
	}
	if len(f) == 0 || bytes.IndexFunc(f, func(c rune) bool {
		return (c < '0' || c > '9') && c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+'
	}) >= 0 {
		r.fail(name, f, "is not a finite decimal number")
		return 0
	}
	v, err := strconv.ParseFloat(string(f), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		r.fail(name, f, "is not a finite decimal number")
		return 0
	}
	if v < lo || v > hi || nonNegative && math.Signbit(v) {
		r.fail(name, f, fmt.Sprintf("is out of range [%g, %g]", lo, hi))
		return 0
	}
	return v
}

// empty reads a field that must be empty: the trailing '|' of the v2
// encodings.
func (r *reader) empty(name string) {
	if f := r.next(name); r.err == nil && len(f) != 0 {
		r.fail(name, f, "must be empty")
	}
}

// done returns the first error, or an error if anything is left over.
func (r *reader) done() error {
	if r.err == nil && r.more {
		r.err = corrupt(r.kind, "trailing data after field %d: %s", r.field, quote(r.rest))
	}
	return r.err
}

// appendInt appends the field separator and an integer field.
func appendInt(dst []byte, v int64) []byte {
	return strconv.AppendInt(append(dst, '|'), v, 10)
}

// appendFloat appends the field separator and a float field in the
// shortest form that reads back to the same float64.
func appendFloat(dst []byte, v float64) []byte {
	return strconv.AppendFloat(append(dst, '|'), v, 'g', -1, 64)
}
