package ledger

import (
	"context"
	"strconv"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/keystore"
)

// batch is the part of a backend's batch the ledger writes with: the
// records a keystore.Recorder is given, since a Note writes its entry in
// the key store's batch and the ledger's own batches write the same way.
type batch = keystore.Records

// getAll returns the values of keys in db (nil: none), in their order: on
// a shared store in round trips of a thousand (Reread), on a DB by a Get
// each, which costs a B-tree's descent and no I/O of its own.
func getAll(ctx context.Context, db backend.Store, keys [][]byte) ([][]byte, error) {
	vals, err := db.Reread(ctx, keys)
	if err != nil || len(vals) == len(keys) {
		return vals, err
	}
	vals = make([][]byte, len(keys))
	for i, k := range keys {
		if vals[i], err = db.Get(ctx, k); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// The prefixes of the entries' records and the rollups'. The package doc
// lists every record of the ledger (TestRecordLayout checks that list
// against these constants and the others').
const (
	entryPrefix  = "L/e/"
	keyPrefix    = "L/k/"
	teamPrefix   = "L/t/"
	writerPrefix = "L/w/"
	dayPrefix    = "L/x/"
)

// A day is a UTC date as days since the Unix epoch.
type day int32

func dayOf(t time.Time) day { return day(t.Unix() / 86400) }

func (d day) time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// appendText appends d as YYYYMMDD.
func (d day) appendText(b []byte) []byte {
	y, m, dd := d.time().Date()
	v := uint32(y)*10000 + uint32(m)*100 + uint32(dd)
	var digits [8]byte
	for i := 7; i >= 0; i-- {
		digits[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, digits[:]...)
}

// parseDay parses YYYYMMDD.
func parseDay(s string) (day, bool) {
	t, err := time.Parse("20060102", s)
	if err != nil {
		return 0, false
	}
	return dayOf(t), true
}

// appendKey appends prefix, d and the parts, each followed by "/" but
// the last.
func appendKey(b []byte, prefix string, d day, parts ...string) []byte {
	b = append(b, prefix...)
	b = d.appendText(b)
	for _, p := range parts {
		b = append(b, '/')
		b = append(b, p...)
	}
	return b
}

// appendSeq appends seq as 8 hex digits and kind.
func appendSeq(b []byte, seq uint32, kind byte) []byte {
	const digits = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, digits[seq>>uint(shift)&15])
	}
	return append(b, kind)
}

// entryKey parses the writer, seq and kind of an entry record's key.
func entryKey(k []byte) (writer string, seq uint32, kind byte, ok bool) {
	// L/e/YYYYMMDD/writer/seqK
	const n = len(entryPrefix) + 8 + 1 + 16 + 1 + 8 + 1
	if len(k) != n {
		return "", 0, 0, false
	}
	writer = string(k[n-26 : n-10])
	v, err := strconv.ParseUint(string(k[n-9:n-1]), 16, 32)
	kind = k[n-1]
	return writer, uint32(v), kind, err == nil && (kind == 'c' || kind == 'b')
}
