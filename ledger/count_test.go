package ledger_test

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/ratestore/ratestore/backend"
)

// reads counts what a ledger reads of its store: the scans of each
// prefix of its records ("L/e/", "L/s/", ...), and the records read by
// them and by direct reads.
type reads struct {
	scans   [256]atomic.Int64 // by the letter after "L/"
	records atomic.Int64
	updates atomic.Int64 // batches written
	rollups atomic.Int64 // puts of rollups (L/k, L/t, L/u)
}

func (r *reads) scan(prefix []byte) {
	if len(prefix) > 2 {
		r.scans[prefix[2]].Add(1)
	}
}

// scansOf returns the scans of prefix "L/c/".
func (r *reads) scansOf(c byte) int64 { return r.scans[c].Load() }

func (r *reads) reset() {
	for i := range r.scans {
		r.scans[i].Store(0)
	}
	r.records.Store(0)
	r.updates.Store(0)
	r.rollups.Store(0)
}

// counted is a store whose reads are counted in n.
type counted struct {
	backend.Store
	n *reads
}

// count returns db, its reads counted in n when n is not nil.
func count(db backend.Store, n *reads) backend.Store {
	if n == nil {
		return db
	}
	return counted{db, n}
}

func (c counted) each(fn func(k, v []byte) error) func(k, v []byte) error {
	return func(k, v []byte) error {
		c.n.records.Add(1)
		return fn(k, v)
	}
}

func (c counted) Scan(ctx context.Context, prefix []byte, fn func(k, v []byte) error) error {
	c.n.scan(prefix)
	return c.Store.Scan(ctx, prefix, c.each(fn))
}

func (c counted) ScanFrom(ctx context.Context, prefix, start []byte, fn func(k, v []byte) error) error {
	c.n.scan(prefix)
	return c.Store.ScanFrom(ctx, prefix, start, c.each(fn))
}

func (c counted) Update(ctx context.Context, locks []string, fn func(backend.Batch) error) error {
	c.n.updates.Add(1)
	return c.Store.Update(ctx, locks, func(b backend.Batch) error { return fn(countedBatch{b, c.n}) })
}

// countedBatch is a batch whose puts of rollups are counted in n.
type countedBatch struct {
	backend.Batch
	n *reads
}

func (b countedBatch) Put(key, value []byte) error {
	if len(key) > 3 && key[0] == 'L' && key[1] == '/' && strings.IndexByte("ktu", key[2]) >= 0 && key[3] == '/' {
		b.n.rollups.Add(1)
	}
	return b.Batch.Put(key, value)
}

func (c counted) Get(ctx context.Context, key []byte) ([]byte, error) {
	c.n.records.Add(1)
	return c.Store.Get(ctx, key)
}

func (c counted) Reread(ctx context.Context, keys [][]byte) ([][]byte, error) {
	vals, err := c.Store.Reread(ctx, keys)
	c.n.records.Add(int64(len(vals)))
	return vals, err
}
