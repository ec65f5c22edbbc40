package keystore

import (
	"context"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

// engine is where a Store keeps its keys' records and usage: a
// ratestore.DB (Open), or Redis (OpenRedis), which other processes change
// too. Exactly one of db and rdb is set.
//
// engine, limiter and batch are pairs of pointers that branch on which is
// set, not interfaces: the embedded engine is the hot path, and calls the
// compiler can see through keep the closures and results a request passes
// along on the stack.
type engine struct {
	db  *ratestore.DB
	rdb *redisstore.DB
}

// now reads the engine's clock, in Unix nanoseconds.
func (e engine) now() int64 {
	if e.rdb != nil {
		return e.rdb.Now().UnixNano()
	}
	return e.db.Now().UnixNano()
}

// limiter returns the engine's limiter name with strategy s.
func (e engine) limiter(name string, s strategies.Strategy) (*limiter, error) {
	if e.rdb != nil {
		l, err := e.rdb.Limiter(name, s)
		if err != nil {
			return nil, err
		}
		return &limiter{rl: l}, nil
	}
	l, err := e.db.Limiter(name, s)
	if err != nil {
		return nil, err
	}
	return &limiter{l: l}, nil
}

// update runs fn in a batch whose changes are stored together; in a
// shared engine, holding the locks named by locks (key ids, secret hashes)
// against the batches of other processes.
func (e engine) update(ctx context.Context, locks []string, fn func(batch) error) error {
	if e.rdb != nil {
		return e.rdb.Update(ctx, locks, func(b *redisstore.Batch) error {
			return fn(batch{ctx: ctx, rb: b})
		})
	}
	return e.db.Update(ctx, func(b *ratestore.Batch) error {
		return fn(batch{ctx: ctx, db: e.db, b: b})
	})
}

func (e engine) get(ctx context.Context, key []byte) ([]byte, error) {
	if e.rdb != nil {
		return e.rdb.Get(ctx, key)
	}
	return e.db.Get(ctx, key)
}

func (e engine) scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	if e.rdb != nil {
		return e.rdb.Scan(ctx, prefix, fn)
	}
	return e.db.Scan(ctx, prefix, fn)
}

// flush makes every change durable: Redis's are stored when their Update
// returns.
func (e engine) flush(ctx context.Context) error {
	if e.rdb != nil {
		return nil
	}
	return e.db.Flush(ctx)
}

// shared reports whether other processes change the engine: a key's
// record is then read again before it is used (see Store.refresh).
func (e engine) shared() bool { return e.rdb != nil }

// limiter is a limiter of the engine: exactly one of l and rl is set.
type limiter struct {
	l  *ratestore.Limiter
	rl *redisstore.Limiter
}

// PeekN is the limiter's PeekN, outside any batch.
func (l *limiter) PeekN(ctx context.Context, key string, n int64) (strategies.Result, error) {
	if l.rl != nil {
		return l.rl.PeekN(ctx, key, n)
	}
	return l.l.PeekN(ctx, key, n)
}

// Inspect is the limiter's Inspect, outside any batch.
func (l *limiter) Inspect(ctx context.Context, key string, fn func(st strategies.State, now int64) error) error {
	if l.rl != nil {
		return l.rl.Inspect(ctx, key, fn)
	}
	return l.l.Inspect(ctx, key, fn)
}

// batch is the changes of one update, with the methods of ratestore.Batch:
// a ratestore.Batch (b, of db) or a redisstore.Batch (rb), bounded by ctx.
// A batch with neither is direct: it reads the limiters outside any batch,
// and changes nothing.
type batch struct {
	ctx context.Context
	db  *ratestore.DB
	b   *ratestore.Batch
	rb  *redisstore.Batch
}

// direct reads limiters outside a batch (Check, Usage), bounded by ctx.
func direct(ctx context.Context) batch { return batch{ctx: ctx} }

// PeekN asks l whether n more fit key: a redisstore batch sees its own
// changes; a DB's batch changes the states in memory as it goes, so its
// reads, and direct ones, are the limiters' own.
func (b batch) PeekN(l *limiter, key string, n int64) (strategies.Result, error) {
	if b.rb != nil {
		return b.rb.PeekN(l.rl, key, n)
	}
	return l.PeekN(b.ctx, key, n)
}

// Inspect calls fn with key's state under l, as PeekN reads it.
func (b batch) Inspect(l *limiter, key string, fn func(st strategies.State, now int64) error) error {
	if b.rb != nil {
		return b.rb.Inspect(l.rl, key, fn)
	}
	return l.Inspect(b.ctx, key, fn)
}

// prefetch reads at once, where that saves round trips (Redis), the
// records at records and key's states under limiters, which the batch is
// about to use. A DB's reads are in memory: nothing to do.
func (b batch) prefetch(records [][]byte, key string, limiters []*limiter) error {
	if b.rb == nil {
		return nil
	}
	ls := make([]*redisstore.Limiter, len(limiters))
	for i, l := range limiters {
		ls[i] = l.rl
	}
	return b.rb.Prefetch(records, key, ls...)
}

// now is the instant of the batch's decisions, in Unix nanoseconds: an
// Admission's, so that Finish finds its slot and reservation. A redisstore
// batch decides at one instant; each call of a DB's batch at its own,
// which is no earlier than a clock read before it.
func (b batch) now() int64 {
	if b.rb != nil {
		return b.rb.Now().UnixNano()
	}
	return b.db.Now().UnixNano()
}

func (b batch) AllowN(l *limiter, key string, n int64) (strategies.Result, error) {
	if b.rb != nil {
		return b.rb.AllowN(l.rl, key, n)
	}
	return b.b.AllowN(l.l, key, n)
}

func (b batch) Record(l *limiter, key string, n int64) (strategies.Result, error) {
	if b.rb != nil {
		return b.rb.Record(l.rl, key, n)
	}
	return b.b.Record(l.l, key, n)
}

func (b batch) Modify(l *limiter, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (strategies.Result, error) {
	if b.rb != nil {
		return b.rb.Modify(l.rl, key, fn)
	}
	return b.b.Modify(l.l, key, fn)
}

func (b batch) Reset(l *limiter, key string) error {
	if b.rb != nil {
		return b.rb.Reset(l.rl, key)
	}
	return b.b.Reset(l.l, key)
}

func (b batch) Get(key []byte) ([]byte, error) {
	if b.rb != nil {
		return b.rb.Get(key)
	}
	return b.db.Get(b.ctx, key)
}

func (b batch) Put(key, value []byte) error {
	if b.rb != nil {
		return b.rb.Put(key, value)
	}
	return b.b.Put(key, value)
}

func (b batch) Delete(key []byte) error {
	if b.rb != nil {
		return b.rb.Delete(key)
	}
	return b.b.Delete(key)
}
