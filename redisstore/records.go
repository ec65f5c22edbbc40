package redisstore

import (
	"context"
	"fmt"
	"slices"

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
