package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A record's value is stored in Redis as it is, unless it is empty or
// starts with a zero byte: then a zero byte is put before it, so that an
// empty record is a value and not the absence of one. An empty string in
// a Batch means none.
func escape(v []byte) string {
	if len(v) == 0 || v[0] == 0 {
		return "\x00" + string(v)
	}
	return string(v)
}

// unescape is the record stored as v, not "".
func unescape(v string) []byte {
	if len(v) > 0 && v[0] == 0 {
		v = v[1:]
	}
	return []byte(v)
}

// Get returns the record stored at key by a Batch, or nil.
func (db *DB) Get(ctx context.Context, key []byte) ([]byte, error) {
	vals, err := db.Reread(ctx, [][]byte{key})
	if err != nil {
		return nil, err
	}
	return vals[0], nil
}

// Reread returns the stored value (nil: none) of each record at keys:
// other processes may have changed any of them.
func (db *DB) Reread(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	vals := make([][]byte, 0, len(keys))
	for chunk := range slices.Chunk(keys, 1000) {
		rks := make([]string, len(chunk))
		for i, k := range chunk {
			rks[i] = db.recordKey(k)
		}
		tctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
		got, err := db.mget(tctx, rks)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("redisstore: reread: %w", err)
		}
		for _, g := range got {
			var v []byte
			if g != "" {
				v = unescape(g)
			}
			vals = append(vals, v)
		}
	}
	return vals, nil
}

// mget reads the values of rks ("": none) in one round trip: one MGET,
// or on a Cluster a pipeline of one per slot.
func (db *DB) mget(ctx context.Context, rks []string) ([]string, error) {
	groups := db.bySlot(rks)
	cmds := make([]*redis.SliceCmd, 0, len(groups))
	var keys [][]string
	_, err := db.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, g := range groups {
			cmds = append(cmds, p.MGet(ctx, g...))
			keys = append(keys, g)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]string, len(rks))
	for i, c := range cmds {
		for j, v := range c.Val() {
			byKey[keys[i][j]], _ = v.(string)
		}
	}
	out := make([]string, len(rks))
	for i, rk := range rks {
		out[i] = byKey[rk]
	}
	return out, nil
}

// RereadPrefix is Scan: other processes may have added or changed any
// record.
func (db *DB) RereadPrefix(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return db.Scan(ctx, prefix, fn)
}

// Flush returns at once: an Update has stored its changes when it
// returns.
func (db *DB) Flush(ctx context.Context) error {
	if db.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// Scan calls fn with every record whose key starts with prefix, in key
// order, until fn returns an error, which Scan returns. It lists the keys
// first (SCAN, on every primary of a Cluster), then reads them a thousand
// at a time: records changed meanwhile may be seen either way.
func (db *DB) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	rks, err := db.scanKeys(ctx, globEscape(db.opts.Prefix)+"{*}/r/"+globEscape(string(prefix))+"*")
	if err != nil {
		return fmt.Errorf("redisstore: scan: %w", err)
	}
	type found struct{ key, rk string } // a record's key, and its Redis key
	var recs []found
	for _, rk := range rks {
		if k, ok := db.recordOf(rk); ok && strings.HasPrefix(k, string(prefix)) {
			recs = append(recs, found{k, rk})
		}
	}
	slices.SortFunc(recs, func(a, b found) int { return strings.Compare(a.key, b.key) })
	for chunk := range slices.Chunk(recs, 1000) {
		keys := make([]string, len(chunk))
		for i, r := range chunk {
			keys[i] = r.rk
		}
		sctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
		vals, err := db.mget(sctx, keys)
		cancel()
		if err != nil {
			return fmt.Errorf("redisstore: scan: %w", err)
		}
		for i, r := range chunk {
			if vals[i] == "" {
				continue // deleted meanwhile
			}
			if err := fn([]byte(r.key), unescape(vals[i])); err != nil {
				return err
			}
		}
	}
	return nil
}

// ScanFrom is Scan beginning at the first key >= start (nil: the first
// key with prefix).
func (db *DB) ScanFrom(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	return db.Scan(ctx, prefix, func(k, v []byte) error {
		if string(k) < string(start) {
			return nil
		}
		return fn(k, v)
	})
}

// recordOf is the record key of rk, a Redis key of the DB, and whether rk
// is a record's.
func (db *DB) recordOf(rk string) (string, bool) {
	rest, ok := strings.CutPrefix(rk, db.opts.Prefix+"{")
	if !ok {
		return "", false
	}
	i := strings.IndexByte(rest, '}')
	if i < 0 {
		return "", false
	}
	k, ok := strings.CutPrefix(rest[i+1:], "/r/")
	return k, ok && db.recordKey([]byte(k)) == rk
}

// scanKeys returns the Redis keys matching match: of every primary node,
// on a Cluster.
func (db *DB) scanKeys(ctx context.Context, match string) ([]string, error) {
	cc, ok := db.client.(*redis.ClusterClient)
	if !ok {
		return scanNode(ctx, db.client, match, db.opts.Timeout)
	}
	var mu sync.Mutex
	var all []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, err := scanNode(ctx, c, match, db.opts.Timeout)
		mu.Lock()
		all = append(all, keys...)
		mu.Unlock()
		return err
	})
	return all, err
}

// scanNode returns the keys matching match of the node c talks to, each
// SCAN call bounded by timeout.
func scanNode(ctx context.Context, c redis.Cmdable, match string, timeout time.Duration) ([]string, error) {
	var all []string
	var cursor uint64
	for {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		keys, next, err := c.Scan(sctx, cursor, match, 1000).Result()
		cancel()
		if err != nil {
			return nil, err
		}
		all = append(all, keys...)
		if cursor = next; cursor == 0 {
			slices.Sort(all)
			return slices.Compact(all), nil
		}
	}
}

// globEscape escapes the characters SCAN's MATCH pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte(`*?[]\`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
