package keystore

import (
	"context"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

// engine is where a Store keeps its keys' records and usage: a
// ratestore.DB (Open), or Redis (OpenRedis), which other processes change
// too.
type engine interface {
	now() int64
	limiter(name string, s strategies.Strategy) (limiter, error)
	// update runs fn in a batch whose changes are stored together; in a
	// shared engine, holding the locks named by locks (key ids, secret
	// hashes) against the batches of other processes.
	update(ctx context.Context, locks []string, fn func(batch) error) error
	get(ctx context.Context, key []byte) ([]byte, error)
	scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error
	flush(ctx context.Context) error
	// shared reports whether other processes change the engine: a key's
	// record is then read again before it is used (see Store.refresh).
	shared() bool
}

// limiter is a limiter of an engine, read outside batches.
type limiter interface {
	PeekN(ctx context.Context, key string, n int64) (strategies.Result, error)
	Inspect(ctx context.Context, key string, fn func(st strategies.State, now int64) error) error
}

// reader reads limiters: a batch (which sees its own changes), or the
// engine outside one (direct).
type reader interface {
	PeekN(l limiter, key string, n int64) (strategies.Result, error)
	Inspect(l limiter, key string, fn func(st strategies.State, now int64) error) error
}

// batch is the changes of one update, with the methods of ratestore.Batch.
type batch interface {
	reader
	// prefetch reads at once, where that saves round trips, the records at
	// records and key's states under limiters, which the batch is about
	// to use.
	prefetch(records [][]byte, key string, limiters []limiter) error
	// now is the instant of the batch's decisions, in Unix nanoseconds:
	// an Admission's, so that Finish finds its slot and reservation.
	now() int64
	AllowN(l limiter, key string, n int64) (strategies.Result, error)
	Record(l limiter, key string, n int64) (strategies.Result, error)
	Modify(l limiter, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (strategies.Result, error)
	Reset(l limiter, key string) error
	Get(key []byte) ([]byte, error)
	Put(key, value []byte) error
	Delete(key []byte) error
}

// direct reads limiters outside a batch, bounded by ctx.
type direct struct{ ctx context.Context }

func (d direct) PeekN(l limiter, key string, n int64) (strategies.Result, error) {
	return l.PeekN(d.ctx, key, n)
}

func (d direct) Inspect(l limiter, key string, fn func(st strategies.State, now int64) error) error {
	return l.Inspect(d.ctx, key, fn)
}

// embedded is the engine of a ratestore.DB.
type embedded struct{ db *ratestore.DB }

func (e embedded) now() int64 { return e.db.Now().UnixNano() }

func (e embedded) limiter(name string, s strategies.Strategy) (limiter, error) {
	l, err := e.db.Limiter(name, s)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (e embedded) update(ctx context.Context, _ []string, fn func(batch) error) error {
	return e.db.Update(ctx, func(b *ratestore.Batch) error {
		return fn(embeddedBatch{typed[*ratestore.Limiter, *ratestore.Batch]{b}, ctx, e.db})
	})
}

func (e embedded) get(ctx context.Context, key []byte) ([]byte, error) { return e.db.Get(ctx, key) }

func (e embedded) scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return e.db.Scan(ctx, prefix, fn)
}

func (e embedded) flush(ctx context.Context) error { return e.db.Flush(ctx) }
func (e embedded) shared() bool                    { return false }

// embeddedBatch is a ratestore.Batch. Its reads are the limiters' own: a
// DB's batch changes the states in memory as it goes.
type embeddedBatch struct {
	typed[*ratestore.Limiter, *ratestore.Batch]
	ctx context.Context
	db  *ratestore.DB
}

func (b embeddedBatch) PeekN(l limiter, key string, n int64) (strategies.Result, error) {
	return l.PeekN(b.ctx, key, n)
}

func (b embeddedBatch) Inspect(l limiter, key string, fn func(st strategies.State, now int64) error) error {
	return l.Inspect(b.ctx, key, fn)
}

func (b embeddedBatch) Get(key []byte) ([]byte, error) { return b.db.Get(b.ctx, key) }

// prefetch does nothing: a DB's reads are in memory.
func (embeddedBatch) prefetch([][]byte, string, []limiter) error { return nil }

// now reads the clock: each call of a DB's batch decides at its own
// instant, which is no earlier.
func (b embeddedBatch) now() int64 { return b.db.Now().UnixNano() }

// changes is the methods a store's batch has on its own limiters, L.
type changes[L limiter] interface {
	AllowN(l L, key string, n int64) (strategies.Result, error)
	Record(l L, key string, n int64) (strategies.Result, error)
	Modify(l L, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (strategies.Result, error)
	Reset(l L, key string) error
	Put(key, value []byte) error
	Delete(key []byte) error
}

// typed is a batch B of a store whose limiters are L, taking the
// limiters of the engine interface.
type typed[L limiter, B changes[L]] struct{ b B }

func (t typed[L, B]) AllowN(l limiter, key string, n int64) (strategies.Result, error) {
	return t.b.AllowN(l.(L), key, n)
}

func (t typed[L, B]) Record(l limiter, key string, n int64) (strategies.Result, error) {
	return t.b.Record(l.(L), key, n)
}

func (t typed[L, B]) Modify(l limiter, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (strategies.Result, error) {
	return t.b.Modify(l.(L), key, fn)
}

func (t typed[L, B]) Reset(l limiter, key string) error { return t.b.Reset(l.(L), key) }
func (t typed[L, B]) Put(key, value []byte) error       { return t.b.Put(key, value) }
func (t typed[L, B]) Delete(key []byte) error           { return t.b.Delete(key) }

// remote is the engine of a redisstore.DB.
type remote struct{ db *redisstore.DB }

func (e remote) now() int64 { return e.db.Now().UnixNano() }

func (e remote) limiter(name string, s strategies.Strategy) (limiter, error) {
	l, err := e.db.Limiter(name, s)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (e remote) update(ctx context.Context, locks []string, fn func(batch) error) error {
	return e.db.Update(ctx, locks, func(b *redisstore.Batch) error {
		return fn(remoteBatch{typed[*redisstore.Limiter, *redisstore.Batch]{b}})
	})
}

func (e remote) get(ctx context.Context, key []byte) ([]byte, error) { return e.db.Get(ctx, key) }

func (e remote) scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return e.db.Scan(ctx, prefix, fn)
}

func (e remote) flush(context.Context) error { return nil } // every Update is stored when it returns
func (e remote) shared() bool                { return true }

// remoteBatch is a redisstore.Batch, whose reads see its changes.
type remoteBatch struct {
	typed[*redisstore.Limiter, *redisstore.Batch]
}

func (b remoteBatch) PeekN(l limiter, key string, n int64) (strategies.Result, error) {
	return b.b.PeekN(l.(*redisstore.Limiter), key, n)
}

func (b remoteBatch) Inspect(l limiter, key string, fn func(st strategies.State, now int64) error) error {
	return b.b.Inspect(l.(*redisstore.Limiter), key, fn)
}

func (b remoteBatch) Get(key []byte) ([]byte, error) { return b.b.Get(key) }

func (b remoteBatch) prefetch(records [][]byte, key string, limiters []limiter) error {
	ls := make([]*redisstore.Limiter, len(limiters))
	for i, l := range limiters {
		ls[i] = l.(*redisstore.Limiter)
	}
	return b.b.Prefetch(records, key, ls...)
}
func (b remoteBatch) now() int64 { return b.b.Now().UnixNano() }
