package keystore

import (
	"context"
	"fmt"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/strategies"
)

// The Store keeps its keys' records and usage in a backend.Store, taken as
// it is: the same code runs on a ratestore.DB and on a redisstore.DB.

// limiter is a limiter of the Store's backend.
type limiter = backend.Limiter

// batch is the batch of one update of the Store's backend.
type batch = backend.Batch

// reader reads limiter states: a batch, which is bounded by the context
// of its update, or direct reads outside one.
type reader interface {
	PeekN(l limiter, key string, n int64) (strategies.Result, error)
	Inspect(l limiter, key string, fn func(st strategies.State, now int64) error) error
}

// direct reads limiters outside a batch, bounded by ctx, where only this
// process changes the store (Check, Usage): there, a read-only batch would
// cost more and save no round trip. A call holds one, so that passing it
// as a reader allocates nothing.
type direct struct{ ctx context.Context }

func (d *direct) PeekN(l limiter, key string, n int64) (strategies.Result, error) {
	return l.PeekN(d.ctx, key, n)
}

func (d *direct) Inspect(l limiter, key string, fn func(st strategies.State, now int64) error) error {
	return l.Inspect(d.ctx, key, fn)
}

// errReadOnly is the error of every change of a key store on a database
// opened read-only. It is returned before the change's function runs, so
// nothing changes, in memory either.
var errReadOnly = fmt.Errorf("keystore: no key or team can change: the database is %w", ErrReadOnly)

// update runs fn in a batch whose changes are stored together, holding
// the locks named by locks (key ids, secret hashes) against the batches of
// other processes sharing the backend.
func (s *Store) update(ctx context.Context, locks []string, fn func(batch) error) error {
	if s.readOnly {
		return errReadOnly
	}
	return s.db.Update(ctx, locks, fn)
}

// updateCached is update on the values this process last saw, where
// others may change them: see backend.Store.UpdateCached.
func (s *Store) updateCached(ctx context.Context, locks []string, fn func(batch) error) error {
	if s.readOnly {
		return errReadOnly
	}
	return s.db.UpdateCached(ctx, locks, fn)
}

// now reads the backend's clock, in Unix nanoseconds.
func (s *Store) now() int64 { return s.db.Now().UnixNano() }
