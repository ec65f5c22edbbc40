package legacy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ratestore/ratestore/internal/varint"
)

// MaxWindows is the most legacy usage windows one key may carry: the most
// a record holds.
const MaxWindows = 1 << 20

// recordVersion is the version of the record AppendRecord writes.
const recordVersion = 1

// AppendRecord appends to dst the record of a key's legacy usage windows
// ws, as the key store keeps them until their merge: version 1, the count,
// then each window's start in Unix nanoseconds (a zigzag varint for the
// first, the unsigned delta from the one before after it) and its tokens.
// ws must be sorted by Start, within the instants Unix nanoseconds hold,
// each with Tokens > 0, at most MaxWindows of them.
func AppendRecord(dst []byte, ws []Window) []byte {
	dst = append(dst, recordVersion)
	dst = binary.AppendUvarint(dst, uint64(len(ws)))
	var prev int64
	for i, w := range ws {
		start := w.Start.UnixNano()
		if i == 0 {
			dst = binary.AppendVarint(dst, start)
		} else {
			dst = binary.AppendUvarint(dst, uint64(start)-uint64(prev))
		}
		dst = binary.AppendUvarint(dst, uint64(w.Tokens))
		prev = start
	}
	return dst
}

// DecodeRecord reads a record AppendRecord wrote; its windows' starts are
// in UTC. Every error says what is damaged, without naming the record: the
// key store, which knows whose record it read, names the key. It accepts
// only what AppendRecord writes (minimal varints, starts in order, tokens
// > 0 adding up within an int64, no trailing bytes), so that a decoded
// record encodes back to the same bytes.
func DecodeRecord(b []byte) ([]Window, error) {
	d := reader{b: b}
	if v := d.byte("version"); d.err == nil && v != recordVersion {
		return nil, fmt.Errorf("unsupported version %d", v)
	}
	n := d.int("count", 1)
	if d.err == nil && (n > MaxWindows || n > int64(len(d.b))) {
		return nil, fmt.Errorf("count %d is out of range", n)
	}
	ws := make([]Window, 0, n)
	var start, sum int64
	for i := range int(n) {
		if i == 0 {
			start = varint.Unzigzag(d.uvarint("window start"))
		} else {
			delta := d.uvarint("window start")
			if d.err == nil && delta > uint64(math.MaxInt64-start) {
				return nil, fmt.Errorf("window %d starts past the int64 range", i)
			}
			start = int64(uint64(start) + delta)
		}
		tokens := d.int("window tokens", 1)
		if d.err != nil {
			return nil, d.err
		}
		if tokens > math.MaxInt64-sum {
			return nil, errors.New("the tokens of the windows add up past 2^63-1")
		}
		sum += tokens
		ws = append(ws, Window{Start: time.Unix(0, start).UTC(), Tokens: tokens})
	}
	if d.err == nil && len(d.b) > 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(d.b))
	}
	return ws, d.err
}

// reader reads the fields of a record. Its first error sticks: later
// reads return zero values.
type reader struct {
	b   []byte
	err error
}

func (d *reader) fail(field, why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s %s", field, why)
	}
}

func (d *reader) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail(field, "is cut short")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// uvarint reads a minimal unsigned varint.
func (d *reader) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n, why := varint.Read(d.b)
	if why != "" {
		d.fail(field, why)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads an unsigned varint within [lo, math.MaxInt64].
func (d *reader) int(field string, lo int64) int64 {
	u := d.uvarint(field)
	if d.err == nil && (u > math.MaxInt64 || int64(u) < lo) {
		d.fail(field, fmt.Sprintf("%d is out of range [%d, %d]", u, lo, int64(math.MaxInt64)))
		return 0
	}
	return int64(u)
}
