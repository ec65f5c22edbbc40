package keystore

import (
	"context"
	"fmt"
	"sync"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/strategies"
)

// limiter is a limiter of the Store's backend.
type limiter = ratestore.StoreLimiter

// engine is the backend a Store keeps its keys' records and usage in,
// seen through the backend contract (ratestore.Store): backend[L, B] for
// whatever backend Open was given. The Store's code is written once
// against it.
type engine interface {
	// now reads the backend's clock, in Unix nanoseconds.
	now() int64
	// readOnly reports whether the backend was opened read-only
	// (ratestore.Options.ReadOnly): update and updateCached then fail
	// with ErrReadOnly, before fn runs.
	readOnly() bool
	limiter(name string, s strategies.Strategy) (limiter, error)
	// update runs fn in a batch whose changes are stored together,
	// holding the locks named by locks (key ids, secret hashes) against
	// the batches of other processes sharing the backend.
	update(ctx context.Context, locks []string, fn func(batch) error) error
	// updateCached is update on the values this process last saw, where
	// others may change them: see ratestore.Store.UpdateCached.
	updateCached(ctx context.Context, locks []string, fn func(batch) error) error
	get(ctx context.Context, key []byte) ([]byte, error)
	scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error
	reread(ctx context.Context, keys [][]byte) ([][]byte, error)
	rereadPrefix(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error
	// changes reads the feed of topic after position after (see
	// ratestore.Store.Changes).
	changes(ctx context.Context, topic, after string, max int) ([][]byte, string, error)
	flush(ctx context.Context) error
}

// reader reads limiter states: a batch, which is bounded by the context
// of its update and ignores ctx, or direct reads outside one, bounded by
// ctx.
type reader interface {
	PeekN(ctx context.Context, l limiter, key string, n int64) (strategies.Result, error)
	Inspect(ctx context.Context, l limiter, key string, fn func(st strategies.State, now int64) error) error
}

// batch is the batch of one update: ratestore.StoreBatch on limiters.
type batch interface {
	reader
	AllowN(l limiter, key string, n int64) (strategies.Result, error)
	Record(l limiter, key string, n int64) (strategies.Result, error)
	Reset(l limiter, key string) error
	Modify(l limiter, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (strategies.Result, error)
	Get(key []byte) ([]byte, error)
	Put(key, value []byte) error
	Delete(key []byte) error
	Reread(keys [][]byte) ([][]byte, error)
	Prefetch(records [][]byte, key string, limiters ...limiter) error
	Announce(topic string, msg []byte) error
	// now is the instant of the batch's decisions, in Unix nanoseconds:
	// an Admission's, so that Finish finds its slot and reservation.
	now() int64
}

// backend is the engine of a backend meeting the contract, L its limiters
// and B its batches. Its limiters are handed out as limiter and come back
// as L: every limiter a Store holds is one of its backend's.
type backend[L ratestore.StoreLimiter, B ratestore.StoreBatch[L]] struct {
	db      ratestore.Store[L, B]
	runners sync.Pool // of *runner[L, B]
	ro      bool      // see engine.readOnly
}

// runner is the function an update passes to the backend's Update: fn on
// the backend's batch. Runners are reused, their run bound once, so that
// an update allocates no closure (see call).
type runner[L ratestore.StoreLimiter, B ratestore.StoreBatch[L]] struct {
	fn  func(batch) error
	run func(B) error
}

func newBackend[L ratestore.StoreLimiter, B ratestore.StoreBatch[L]](db ratestore.Store[L, B]) *backend[L, B] {
	e := &backend[L, B]{db: db}
	// A DB opened read-only says so; a backend that has no read-only
	// mode (Redis) has no such method.
	if ro, ok := any(db).(interface{ ReadOnly() bool }); ok {
		e.ro = ro.ReadOnly()
	}
	e.runners.New = func() any {
		r := &runner[L, B]{}
		r.run = func(b B) error { return r.fn(batchOf[L, B]{b}) }
		return r
	}
	return e
}

func (e *backend[L, B]) now() int64 { return e.db.Now().UnixNano() }

func (e *backend[L, B]) readOnly() bool { return e.ro }

// errReadOnly is the error of every change of a key store on a database
// opened read-only. It is returned before the change's function runs, so
// nothing changes, in memory either.
var errReadOnly = fmt.Errorf("keystore: no key or team can change: the database is %w", ErrReadOnly)

func (e *backend[L, B]) limiter(name string, s strategies.Strategy) (limiter, error) {
	l, err := e.db.Limiter(name, s)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (e *backend[L, B]) update(ctx context.Context, locks []string, fn func(batch) error) error {
	return e.run(ctx, locks, fn, e.db.Update)
}

func (e *backend[L, B]) updateCached(ctx context.Context, locks []string, fn func(batch) error) error {
	return e.run(ctx, locks, fn, e.db.UpdateCached)
}

// direct reads limiters outside a batch, where only this process changes
// the store (Check, Usage): there, a read-only batch would cost more and
// save no round trip. It is empty, so that passing it as a reader
// allocates nothing.
type direct struct{}

func (direct) PeekN(ctx context.Context, l limiter, key string, n int64) (strategies.Result, error) {
	return l.PeekN(ctx, key, n)
}

func (direct) Inspect(ctx context.Context, l limiter, key string, fn func(st strategies.State, now int64) error) error {
	return l.Inspect(ctx, key, fn)
}

// run runs fn in a batch of update (the backend's Update or UpdateCached).
func (e *backend[L, B]) run(ctx context.Context, locks []string, fn func(batch) error, update func(context.Context, []string, func(B) error) error) error {
	if e.ro {
		return errReadOnly
	}
	r := e.runners.Get().(*runner[L, B])
	r.fn = fn
	err := update(ctx, locks, r.run)
	r.fn = nil
	e.runners.Put(r)
	return err
}

func (e *backend[L, B]) get(ctx context.Context, key []byte) ([]byte, error) {
	return e.db.Get(ctx, key)
}

func (e *backend[L, B]) scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return e.db.Scan(ctx, prefix, fn)
}

func (e *backend[L, B]) reread(ctx context.Context, keys [][]byte) ([][]byte, error) {
	return e.db.Reread(ctx, keys)
}

func (e *backend[L, B]) rereadPrefix(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return e.db.RereadPrefix(ctx, prefix, fn)
}

func (e *backend[L, B]) changes(ctx context.Context, topic, after string, max int) ([][]byte, string, error) {
	return e.db.Changes(ctx, topic, after, max)
}

func (e *backend[L, B]) flush(ctx context.Context) error { return e.db.Flush(ctx) }

// batchOf is the batch of a backend's Update.
type batchOf[L ratestore.StoreLimiter, B ratestore.StoreBatch[L]] struct{ b B }

func (b batchOf[L, B]) now() int64 { return b.b.Now().UnixNano() }

func (b batchOf[L, B]) PeekN(_ context.Context, l limiter, key string, n int64) (strategies.Result, error) {
	return b.b.PeekN(l.(L), key, n)
}

func (b batchOf[L, B]) Inspect(_ context.Context, l limiter, key string, fn func(st strategies.State, now int64) error) error {
	return b.b.Inspect(l.(L), key, fn)
}

func (b batchOf[L, B]) AllowN(l limiter, key string, n int64) (strategies.Result, error) {
	return b.b.AllowN(l.(L), key, n)
}

func (b batchOf[L, B]) Record(l limiter, key string, n int64) (strategies.Result, error) {
	return b.b.Record(l.(L), key, n)
}

func (b batchOf[L, B]) Reset(l limiter, key string) error { return b.b.Reset(l.(L), key) }

func (b batchOf[L, B]) Modify(l limiter, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (strategies.Result, error) {
	return b.b.Modify(l.(L), key, fn)
}

func (b batchOf[L, B]) Get(key []byte) ([]byte, error) { return b.b.Get(key) }
func (b batchOf[L, B]) Put(key, value []byte) error    { return b.b.Put(key, value) }
func (b batchOf[L, B]) Delete(key []byte) error        { return b.b.Delete(key) }

func (b batchOf[L, B]) Reread(keys [][]byte) ([][]byte, error) { return b.b.Reread(keys) }

func (b batchOf[L, B]) Announce(topic string, msg []byte) error { return b.b.Announce(topic, msg) }

func (b batchOf[L, B]) Prefetch(records [][]byte, key string, limiters ...limiter) error {
	return b.b.Prefetch(records, key, limiters...)
}
