package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Scans read the index (see layout.go) a page at a time: the keys of the
// next page from each index concerned (ZRANGE BYLEX, from where the last
// page ended), merged in key order, then their records (MGET). Pages grow
// from firstPage keys to maxPage: a caller that stops after n records
// (ScanFrom of a page of a list) has read O(n) keys, in O(n + log N).
const (
	firstPage = 128
	maxPage   = 1024
	// maxSegments bounds the indexes a scan of a prefix with no "/"
	// merges (see layout.go).
	maxSegments = 1024
)

// pageScript answers {Redis's TIME in milliseconds, the members of the
// index KEYS[1] from ARGV[1] to ARGV[2] (ZRANGE BYLEX), at most ARGV[3]}.
// The time is what DB.prune on a Cluster takes the keys to be read at.
var pageScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {now, redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX', 'LIMIT', 0, ARGV[3])}
`)

// Scan calls fn with every record whose key starts with prefix, in key
// order, until fn returns an error, which Scan returns. It reads the index
// of the records a page at a time: records changed meanwhile may be seen
// either way, and an index entry whose record does not exist (a commit
// that failed, or a record deleted meanwhile) is skipped, and dropped.
func (db *DB) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return db.ScanFrom(ctx, prefix, nil, fn)
}

// ScanFrom is Scan beginning at the first key >= start (nil: the first
// key with prefix). Its first page costs O(n + log N) in Redis for n
// records of N indexed.
func (db *DB) ScanFrom(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	from := max(string(prefix), string(start))
	curs, err := db.cursors(ctx, string(prefix), from)
	if err != nil {
		return fmt.Errorf("redisstore: scan: %w", err)
	}
	for size := firstPage; ; size = min(2*size, maxPage) {
		page, err := db.take(ctx, curs, size)
		if err != nil || len(page) == 0 {
			return err
		}
		vals, err := db.values(ctx, page)
		if err != nil {
			return err
		}
		for i, h := range page {
			if vals[i] == "" {
				continue
			}
			if err := fn([]byte(h.key), unescape(vals[i])); err != nil {
				return err
			}
		}
	}
}

// A cursor is where a scan is in one index: the range left to read, and
// the keys read but not yet taken.
type cursor struct {
	seg    string
	lo, hi string   // the range left, as ZRANGE BYLEX takes it
	buf    []string // keys read, in order
	at     int64    // Redis's TIME, in ms, of the last read
	done   bool     // the range is read to its end
}

// hit is a key a scan took from cur.
type hit struct {
	key string
	cur *cursor
	at  int64
}

// cursors are the cursors of a scan of the keys >= from with prefix: of
// its segment's index, or with no "/" in prefix, of every segment's with
// prefix and of segment "".
func (db *DB) cursors(ctx context.Context, prefix, from string) ([]*cursor, error) {
	hi := "+"
	if s, ok := successor(prefix); ok {
		hi = "(" + s
	}
	newCursor := func(seg string) *cursor { return &cursor{seg: seg, lo: "[" + from, hi: hi} }
	if strings.Contains(prefix, "/") {
		return []*cursor{newCursor(segment(prefix))}, nil
	}
	sctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	defer cancel()
	segs, err := db.client.ZRangeArgs(sctx, redis.ZRangeArgs{Key: db.segmentsKey(), ByLex: true,
		Start: "[" + prefix, Stop: hi, Count: maxSegments + 1}).Result()
	switch {
	case err != nil:
		return nil, err
	case len(segs) > maxSegments:
		return nil, fmt.Errorf("more than %d segments of records under the prefix %.40q", maxSegments, prefix)
	}
	curs := []*cursor{newCursor("")}
	for _, s := range segs {
		curs = append(curs, newCursor(s))
	}
	return curs, nil
}

// successor is the least string after every string with prefix p, and
// false when there is none (p is empty or all 0xff).
func successor(p string) (string, bool) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			return p[:i] + string(p[i]+1), true
		}
	}
	return "", false
}

// take takes the next n keys (fewer at the end) of curs, in key order,
// reading from the indexes where a cursor has none left.
func (db *DB) take(ctx context.Context, curs []*cursor, n int) ([]hit, error) {
	page := make([]hit, 0, n)
	for len(page) < n {
		if err := db.fill(ctx, curs, n); err != nil {
			return nil, fmt.Errorf("redisstore: scan: %w", err)
		}
		var next *cursor
		for _, c := range curs {
			if len(c.buf) > 0 && (next == nil || c.buf[0] < next.buf[0]) {
				next = c
			}
		}
		if next == nil {
			break
		}
		page = append(page, hit{next.buf[0], next, next.at})
		next.buf = next.buf[1:]
	}
	return page, nil
}

// fill reads the next n keys of each cursor of curs that has none left
// and is not done, in one round trip.
func (db *DB) fill(ctx context.Context, curs []*cursor, n int) error {
	var empty []*cursor
	var calls []scriptCall
	for _, c := range curs {
		if len(c.buf) == 0 && !c.done {
			empty = append(empty, c)
			calls = append(calls, scriptCall{[]string{db.indexKey(c.seg)}, []any{c.lo, c.hi, n}})
		}
	}
	if len(calls) == 0 {
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	defer cancel()
	for i, cmd := range db.runScripts(fctx, pageScript, calls) {
		v, err := cmd.Slice()
		if err == nil && len(v) != 2 {
			err = fmt.Errorf("page script: reply of %d elements", len(v))
		}
		if err != nil {
			return err
		}
		c := empty[i]
		c.at, _ = v[0].(int64)
		keys, _ := v[1].([]any)
		for _, k := range keys {
			s, _ := k.(string)
			c.buf = append(c.buf, s)
		}
		c.done = len(keys) < n
		if len(c.buf) > 0 {
			c.lo = "(" + c.buf[len(c.buf)-1]
		}
	}
	return nil
}

// values reads the records of page ("": none), and drops the index
// entries of those that do not exist.
func (db *DB) values(ctx context.Context, page []hit) ([]string, error) {
	rks := make([]string, len(page))
	for i, h := range page {
		rks[i] = db.recordKey([]byte(h.key))
	}
	mctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	vals, err := db.mget(mctx, rks)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("redisstore: scan: %w", err)
	}
	var gone []hit
	for i, v := range vals {
		if v == "" {
			gone = append(gone, page[i])
		}
	}
	if len(gone) > 0 {
		db.prune(ctx, gone)
	}
	return vals, nil
}
