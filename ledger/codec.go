package ledger

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/pricing"
)

// The ledger's values are compact binary: unsigned varints, and strings
// that are often ids stored in 8 bytes. A block of entries keeps each
// distinct string once, in a table its entries refer to by index, and an
// entry's seq and time as differences from the entry before's (the
// first's from the block's first seq and base time): an entry costs
// about 40 bytes at 10k keys.
//
//	block  = version base-ms (latest-base)-ms nstrings string* nentries entry*
//	entry  = seq-delta time-delta(zigzag) request-id(string) key team+1 model route upstream+1 end-user+1
//	         (status-200)(zigzag) latency-ms flags input output cache-read cache-write reasoning cost-nano
//	string = 0 len bytes | tag 8-bytes  (tag 1..3: "key_", "team_", "req_" and 16 hex digits)
//	rollup = version nrows (team model totals)*
//	totals = requests input output cache-read cache-write reasoning cost refused nreasons (reason count)*
//
// key, team+1, model, route, upstream+1 and end-user+1 are indexes into
// the block's table; team+1, upstream+1 and end-user+1 are 0 for none, a
// byte. A block's version is blockVersion, 3; a block of version 2,
// written before entries named their end user, has no end-user+1 and is
// read with EndUser "", and one of version 1, written before they named
// their upstream either, has neither: all three are read, any other
// version is corrupt. Rollups, summaries, day totals and the end-user
// directory are of codecVersion.
const (
	codecVersion = 1
	blockVersion = 3
)

// errCorrupt is matched by the errors of values that cannot be decoded.
var errCorrupt = fmt.Errorf("ledger: corrupt value: %w", backend.ErrCorrupt)

// idPrefixes are the prefixes of the ids stored in 8 bytes, by tag - 1.
var idPrefixes = [...]string{"key_", "team_", "req_"}

// appendString appends s, as an id when it is one.
func appendString(b []byte, s string) []byte {
	for i, p := range idPrefixes {
		if len(s) == len(p)+16 && s[:len(p)] == p && isLowerHex(s[len(p):]) {
			b = append(b, byte(i+1))
			b, _ = hex.AppendDecode(b, []byte(s[len(p):])) // checked: lowercase hex
			return b
		}
	}
	b = append(b, 0)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// reader decodes a value, remembering the first error: after it, every
// read returns zero, so decoders check once at the end.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errCorrupt, what)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int reads a uvarint that must fit an int64.
func (r *reader) int() int64 {
	v := r.uvarint()
	if v > 1<<63-1 {
		r.fail("count over int64")
		return 0
	}
	return int64(v)
}

// count reads a length of at most max.
func (r *reader) count(max int) int {
	v := r.uvarint()
	if v > uint64(max) {
		r.fail("count")
		return 0
	}
	return int(v)
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.fail("truncated")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	tag := r.byte()
	switch {
	case tag == 0:
		return string(r.bytes(r.count(len(r.b))))
	case int(tag) <= len(idPrefixes):
		id := r.bytes(8)
		if id == nil {
			return ""
		}
		return idPrefixes[tag-1] + hex.EncodeToString(id)
	}
	r.fail("string tag")
	return ""
}

// counters are t's counters, its reasons aside, in their encoded order.
func (t *Totals) counters() [8]*int64 {
	k := &t.Tokens
	return [...]*int64{&t.Requests, &k.Input, &k.Output, &k.CacheRead, &k.CacheWrite, &k.Reasoning, (*int64)(&t.Cost), &t.Refused}
}

// appendTotals appends t.
func appendTotals(b []byte, t *Totals) []byte {
	for _, v := range t.counters() {
		b = binary.AppendUvarint(b, uint64(max(*v, 0)))
	}
	b = binary.AppendUvarint(b, uint64(len(t.Reasons)))
	if len(t.Reasons) == 0 {
		return b
	}
	for _, reason := range sortedKeys(t.Reasons) {
		b = appendString(b, reason)
		b = binary.AppendUvarint(b, uint64(max(t.Reasons[reason], 0)))
	}
	return b
}

// maxReasons bounds the reasons of one row: refusal reasons are a few
// fixed words.
const maxReasons = 64

func (r *reader) totals() Totals {
	var t Totals
	for _, p := range t.counters() {
		*p = r.int()
	}
	n := r.count(maxReasons)
	for range n {
		reason := r.string()
		if t.Reasons == nil {
			t.Reasons = make(map[string]int64, n)
		}
		t.Reasons[reason] += r.int()
	}
	return t
}

// rowKey is a rollup's row: a (day, key) rollup has a row per team and
// model, a (day, team) rollup one per model.
type rowKey struct{ team, model string }

// appendRows appends a rollup of rows.
func appendRows(b []byte, rows []row) []byte {
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, uint64(len(rows)))
	for i := range rows {
		b = appendRow(b, &rows[i])
	}
	return b
}

// decodeRollup calls fn with each row of v, its team and model encoded.
func decodeRollup(v []byte, fn func(team, model []byte, t *Totals)) error {
	r := reader{b: v}
	if r.byte() != codecVersion {
		return fmt.Errorf("%w: rollup version", errCorrupt)
	}
	n := r.count(len(v))
	var t Totals // one for every row: fn's pointer escapes once
	for i := 0; i < n && r.err == nil; i++ {
		team, model := r.rawString(), r.rawString()
		t = r.totals()
		if r.err == nil {
			fn(team, model, &t)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

// millis is t in Unix milliseconds.
func millis(t time.Time) int64 { return t.UnixMilli() }

// usd reads a cost, never negative.
func usd(v int64) pricing.USD { return pricing.USD(max(v, 0)) }

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func sortedKeys(m map[string]int64) []string { return slices.Sorted(maps.Keys(m)) }

// rawString reads a string and returns it encoded, without decoding it.
func (r *reader) rawString() []byte {
	start := r.b
	switch tag := r.byte(); {
	case tag == 0:
		r.bytes(r.count(len(r.b)))
	case int(tag) <= len(idPrefixes):
		r.bytes(8)
	default:
		r.fail("string tag")
	}
	if r.err != nil {
		return nil
	}
	return start[:len(start)-len(r.b)]
}

// An interner numbers the strings a query decodes, from their encoded
// form: the same key, team or model read from many records is decoded
// once, and grouped by a small number rather than hashed as a string. A
// nil interner decodes every time. Number 0 is "".
type interner struct {
	ids  map[string]uint32
	strs []string
	raws []string // the strings encoded
	// byID numbers the ids stored in 8 bytes (key_, team_, req_ and 16
	// hex digits), by tag - 1: an integer hashes faster than a string,
	// and a summary's rows are hundreds of thousands of keys.
	byID [len(idPrefixes)]map[uint64]uint32
}

func newInterner() *interner {
	empty := string(appendString(nil, ""))
	in := &interner{ids: map[string]uint32{empty: 0}, strs: []string{""}, raws: []string{empty}}
	for i := range in.byID {
		in.byID[i] = map[uint64]uint32{}
	}
	return in
}

// id returns the number of the string encoded as raw.
func (in *interner) id(raw []byte) uint32 {
	if tag, v, ok := packedID(raw); ok {
		if id, ok := in.byID[tag][v]; ok {
			return id
		}
	} else if id, ok := in.ids[string(raw)]; ok {
		return id
	}
	return in.add(string(raw))
}

// idRaw is id of a string, encoded, held as a string: another
// interner's, whose numbers a query merges into its own.
func (in *interner) idRaw(raw string) uint32 {
	if tag, v, ok := packedID(raw); ok {
		if id, ok := in.byID[tag][v]; ok {
			return id
		}
	} else if id, ok := in.ids[raw]; ok {
		return id
	}
	return in.add(raw)
}

func (in *interner) add(raw string) uint32 {
	id := uint32(len(in.strs))
	in.ids[raw] = id
	if tag, v, ok := packedID(raw); ok {
		in.byID[tag][v] = id
	}
	in.strs = append(in.strs, decodeString([]byte(raw)))
	in.raws = append(in.raws, raw)
	return id
}

// packedID returns the tag - 1 and the 8 bytes of raw, a string encoded,
// when it is an id stored in 8 bytes.
func packedID[T string | []byte](raw T) (tag int, v uint64, ok bool) {
	if len(raw) != 9 || raw[0] == 0 || int(raw[0]) > len(idPrefixes) {
		return 0, 0, false
	}
	for i := 1; i < 9; i++ {
		v = v<<8 | uint64(raw[i])
	}
	return int(raw[0]) - 1, v, true
}

// idOf returns the number of s.
func (in *interner) idOf(s string) uint32 { return in.id(appendString(nil, s)) }

// get returns the string encoded as raw.
func (in *interner) get(raw []byte) string {
	if in == nil {
		return decodeString(raw)
	}
	return in.strs[in.id(raw)]
}

func decodeString(raw []byte) string {
	r := reader{b: raw}
	return r.string()
}

// encodeAll returns the non-empty strings of ss, encoded.
func encodeAll(ss ...string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		if s != "" {
			out = append(out, appendString(nil, s))
		}
	}
	return out
}
