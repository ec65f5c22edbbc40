package ratestore

import (
	"bytes"
	"sync"

	"github.com/ratestore/ratestore/internal/storage"
)

// records holds the writes of records (Batch.Put and Delete) until they
// are committed. Limiter states wait for their commit in the table, dirty;
// records, which the engine does not cache, wait here. Get reads dirty,
// then flight, then the store, so it never sees an older value than the
// last written.
type records struct {
	mu     sync.Mutex
	dirty  map[string][]byte // written since the last sweep; a nil value deletes
	flight map[string][]byte // swept by the commit under way
}

// put records a write of key (value nil: a delete) in the open generation,
// which it returns.
func (rs *records) put(db *DB, key string, value []byte) (*generation, error) {
	if value != nil {
		value = bytes.Clone(value)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if db.closed.Load() {
		return nil, ErrClosed
	}
	if rs.dirty == nil {
		rs.dirty = make(map[string][]byte)
	}
	rs.dirty[key] = value
	return db.gen.Load(), nil
}

// get returns the pending value of key and whether there is one: a nil
// value with true means deleted.
func (rs *records) get(key string) ([]byte, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	v, ok := rs.dirty[key]
	if !ok {
		v, ok = rs.flight[key]
	}
	return bytes.Clone(v), ok
}

// sweep moves the dirty records in flight and appends their ops to ops.
// The committer calls it after swapping the generation, as it sweeps the
// shards (see DB.commit for why no write is lost or reported early).
func (rs *records) sweep(ops []storage.Op) []storage.Op {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.flight, rs.dirty = rs.dirty, nil
	for k, v := range rs.flight {
		ops = append(ops, storage.Op{Key: []byte(k), Value: v})
	}
	return ops
}

// landed ends the flight of the swept records: on success they are in the
// store; on failure they become dirty again, unless written since.
func (rs *records) landed(ok bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !ok {
		for k, v := range rs.flight {
			if _, newer := rs.dirty[k]; !newer {
				if rs.dirty == nil {
					rs.dirty = make(map[string][]byte)
				}
				rs.dirty[k] = v
			}
		}
	}
	rs.flight = nil
}
