package keystore

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/ratestore/ratestore/strategies"
)

// Prefixes of the key store's part of the keyspace (see the package doc).
const (
	recordPrefix = "k/"
	hashPrefix   = "h/"
	legacyPrefix = "l/"
)

// Limits of what a record and a legacy record hold.
const (
	// MaxName is the longest Name or Model, in bytes.
	MaxName = 256
	// MaxLegacyWindows is the most legacy usage windows one key may carry.
	MaxLegacyWindows = 1 << 20

	maxWindowBytes = 16 << 20 // a window of 65536 buckets, written as text, with room to spare
)

const (
	recordVersion = 1
	legacyVersion = 1
)

// Record flags.
const (
	flagDisabled = 1 << iota
	flagExpires
	flagCreated
	flagLastUsed
	flagLegacy

	flagsKnown = flagDisabled | flagExpires | flagCreated | flagLastUsed | flagLegacy
)

// record is a key as stored at k/<id>, its window still encoded.
type record struct {
	hash       [sha256.Size]byte
	name       string
	model      string
	tokenLimit int64
	lifetime   int64
	expiresAt  int64 // Unix ns, when hasExpiry
	createdAt  int64 // when hasCreated
	lastUsed   int64 // when hasLastUsed
	hasExpiry  bool
	hasCreated bool
	hasUsed    bool
	disabled   bool
	legacy     bool   // l/<id> holds usage windows not merged yet
	window     []byte // the strategy's encoding of the usage window; empty: nothing in use

	// Not stored: the decoded window, set by Store.decode, and whether
	// pending legacy usage was merged into it (Store.mergeLegacy).
	st     strategies.State
	merged bool
}

func (r *record) flags() byte {
	var f byte
	for _, b := range [...]struct {
		on  bool
		bit byte
	}{
		{r.disabled, flagDisabled}, {r.hasExpiry, flagExpires}, {r.hasCreated, flagCreated},
		{r.hasUsed, flagLastUsed}, {r.legacy, flagLegacy},
	} {
		if b.on {
			f |= b.bit
		}
	}
	return f
}

// appendEncode appends the record's encoding to dst.
func (r *record) appendEncode(dst []byte) []byte {
	dst = append(dst, recordVersion, r.flags())
	dst = append(dst, r.hash[:]...)
	dst = binary.AppendUvarint(dst, uint64(r.tokenLimit))
	dst = binary.AppendUvarint(dst, uint64(r.lifetime))
	for _, t := range [...]struct {
		on bool
		ns int64
	}{{r.hasExpiry, r.expiresAt}, {r.hasCreated, r.createdAt}, {r.hasUsed, r.lastUsed}} {
		if t.on {
			dst = binary.AppendVarint(dst, t.ns)
		}
	}
	dst = appendBytes(dst, r.name)
	dst = appendBytes(dst, r.model)
	return appendBytes(dst, string(r.window))
}

func appendBytes(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decodeRecord parses the record of id. Its errors match
// strategies.ErrCorrupt and name id. The window is checked by its strategy
// later (Store.decode).
func decodeRecord(id string, b []byte) (*record, error) {
	d := decoder{id: id, what: "record", b: b}
	if v := d.byte("version"); d.err == nil && v != recordVersion {
		return nil, corrupt(id, "record: unsupported version %d", v)
	}
	flags := d.byte("flags")
	if d.err == nil && flags&^flagsKnown != 0 {
		return nil, corrupt(id, "record: unknown flags %#02x", flags)
	}
	r := &record{
		disabled:   flags&flagDisabled != 0,
		hasExpiry:  flags&flagExpires != 0,
		hasCreated: flags&flagCreated != 0,
		hasUsed:    flags&flagLastUsed != 0,
		legacy:     flags&flagLegacy != 0,
	}
	copy(r.hash[:], d.fixed("hash", sha256.Size))
	r.tokenLimit = d.int("token limit", 1)
	r.lifetime = d.int("lifetime tokens", 0)
	if r.hasExpiry {
		r.expiresAt = d.varint("expires at")
	}
	if r.hasCreated {
		r.createdAt = d.varint("created at")
	}
	if r.hasUsed {
		r.lastUsed = d.varint("last used")
	}
	r.name = d.text("name")
	r.model = d.text("model")
	r.window = d.bytes("window", maxWindowBytes)
	if err := d.done(); err != nil {
		return nil, err
	}
	return r, nil
}

// legacyWindow is one legacy usage window as stored: start in Unix ns.
type legacyWindow struct{ start, tokens int64 }

// appendLegacy appends the encoding of ws, sorted by start, each with
// tokens > 0, to dst.
func appendLegacy(dst []byte, ws []legacyWindow) []byte {
	dst = append(dst, legacyVersion)
	dst = binary.AppendUvarint(dst, uint64(len(ws)))
	for i, w := range ws {
		if i == 0 {
			dst = binary.AppendVarint(dst, w.start)
		} else {
			dst = binary.AppendUvarint(dst, uint64(w.start)-uint64(ws[i-1].start))
		}
		dst = binary.AppendUvarint(dst, uint64(w.tokens))
	}
	return dst
}

// decodeLegacy parses the legacy record of id.
func decodeLegacy(id string, b []byte) ([]legacyWindow, error) {
	d := decoder{id: id, what: "legacy record", b: b}
	if v := d.byte("version"); d.err == nil && v != legacyVersion {
		return nil, corrupt(id, "legacy record: unsupported version %d", v)
	}
	n := d.int("count", 1)
	if d.err == nil && (n > MaxLegacyWindows || n > int64(len(d.b))) {
		return nil, corrupt(id, "legacy record: count %d is out of range", n)
	}
	ws := make([]legacyWindow, 0, n)
	var sum int64
	for i := range int(n) {
		var w legacyWindow
		if i == 0 {
			w.start = d.varint("window start")
		} else {
			prev := ws[i-1].start
			delta := d.uvarint("window start")
			if d.err == nil && delta > uint64(math.MaxInt64-prev) {
				return nil, corrupt(id, "legacy record: window %d starts past the int64 range", i)
			}
			w.start = int64(uint64(prev) + delta)
		}
		w.tokens = d.int("window tokens", 1)
		if d.err != nil {
			return nil, d.err
		}
		if w.tokens > math.MaxInt64-sum {
			return nil, corrupt(id, "legacy record: the tokens of the windows add up past 2^63-1")
		}
		sum += w.tokens
		ws = append(ws, w)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return ws, nil
}

// corrupt returns an error about the stored data of key id, matching
// strategies.ErrCorrupt.
func corrupt(id, format string, args ...any) error {
	return fmt.Errorf("keystore: key %s: %s: %w", id, fmt.Sprintf(format, args...), strategies.ErrCorrupt)
}

// corruptWrap returns err, which is about the stored data of key id, as an
// error matching strategies.ErrCorrupt.
func corruptWrap(id, what string, err error) error {
	if errors.Is(err, strategies.ErrCorrupt) {
		return fmt.Errorf("keystore: key %s: %s: %w", id, what, err)
	}
	return fmt.Errorf("keystore: key %s: %s: %v: %w", id, what, err, strategies.ErrCorrupt)
}

// decoder reads the fields of one record. Its first error sticks: later
// reads return zero values.
type decoder struct {
	id, what string
	b        []byte
	err      error
}

func (d *decoder) fail(field, why string) {
	if d.err == nil {
		d.err = corrupt(d.id, "%s: %s %s", d.what, field, why)
	}
}

func (d *decoder) byte(field string) byte {
	if b := d.fixed(field, 1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) fixed(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.fail(field, "is cut short")
		return nil
	}
	f := d.b[:n]
	d.b = d.b[n:]
	return f
}

// uvarint reads a minimal unsigned varint.
func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	switch {
	case n == 0:
		d.fail(field, "is cut short")
		return 0
	case n < 0:
		d.fail(field, "overflows 64 bits")
		return 0
	case n != (bits.Len64(v|1)+6)/7:
		d.fail(field, "is not a minimal varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads a minimal zigzag varint.
func (d *decoder) varint(field string) int64 {
	u := d.uvarint(field)
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// int reads an unsigned varint within [lo, math.MaxInt64].
func (d *decoder) int(field string, lo int64) int64 {
	u := d.uvarint(field)
	if d.err == nil && (u > math.MaxInt64 || int64(u) < lo) {
		d.fail(field, fmt.Sprintf("%d is out of range [%d, %d]", u, lo, int64(math.MaxInt64)))
		return 0
	}
	return int64(u)
}

// bytes reads a length-prefixed field of at most max bytes.
func (d *decoder) bytes(field string, max int) []byte {
	n := d.uvarint(field)
	if d.err != nil {
		d.err = fmt.Errorf("%w (its length)", d.err)
		return nil
	}
	if n > uint64(max) {
		d.fail(field, fmt.Sprintf("length %d is over %d", n, max))
		return nil
	}
	return d.fixed(field, int(n))
}

// text reads a name or model.
func (d *decoder) text(field string) string {
	b := d.bytes(field, MaxName)
	if d.err == nil {
		if why := badText(string(b)); why != "" {
			d.fail(field, why)
			return ""
		}
	}
	return string(b)
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = corrupt(d.id, "%s: %d trailing bytes", d.what, len(d.b))
	}
	return d.err
}
