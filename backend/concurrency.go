package backend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/strategies"
)

// Concurrency bounds how many holders act on a key at once: a caller
// acquires a Lease before it starts (a request in flight, a job running)
// and releases it when done. A lease that is never released, because its
// holder crashed or forgot it, ends by itself after the TTL, so no slot is
// held forever.
//
// Leases are the state of a strategies.SlidingLog{Limit: max, Window: ttl}
// under the Concurrency's name, one unit per lease, stored as the DB's
// durability says: they survive a restart, and end after their TTL all
// the same. Calls on one key are linearizable, so under any concurrency at
// most max leases of a key are held at once.
//
// It is one implementation for every backend (NewConcurrency), written on
// the backend contract: a lease is a unit of the log taken by AllowN and
// given back by a Modify in an Update.
type Concurrency struct {
	l       Limiter
	ttl     time.Duration
	now     func() time.Time
	release func(ctx context.Context, key string, at int64) error
}

// NewConcurrency returns the leases of Store.Concurrency on db.
func NewConcurrency(db Store, name string, max int64, ttl time.Duration) (*Concurrency, error) {
	sl := strategies.SlidingLog{Limit: max, Window: ttl}
	l, err := db.Handle(name, sl)
	if err != nil {
		return nil, err
	}
	release := func(ctx context.Context, key string, at int64) error {
		return db.Update(ctx, nil, func(b Batch) error {
			_, err := b.Modify(l, key, func(st strategies.State, now int64) (strategies.State, error) {
				_, err := sl.Release(st, now, at, 1)
				return st, err
			})
			return err
		})
	}
	return &Concurrency{l: l, ttl: ttl, now: db.Now, release: release}, nil
}

// A Lease is a slot of a key held by one holder, until Release or its
// Expires.
type Lease struct {
	c   *Concurrency
	key string
	at  int64 // Unix ns: when it was acquired

	mu       sync.Mutex
	released bool
}

// Acquire takes a slot of key for the caller. When the key has a free
// slot, it returns the Lease and Result.Allowed; otherwise a nil Lease,
// and the Result says when a slot frees by itself (RetryAfter: the oldest
// lease's end), though a release may free one earlier. Errors are those
// of Limiter.AllowN. A call the backend allowed without deciding it
// (redisstore's FailOpen: Allowed with Limit 0) gives a lease that holds
// no slot, whose Release frees nothing.
func (c *Concurrency) Acquire(ctx context.Context, key string) (*Lease, strategies.Result, error) {
	at := c.now().UnixNano()
	r, err := c.l.AllowN(ctx, key, 1)
	if err != nil || !r.Allowed {
		return nil, r, err
	}
	return &Lease{c: c, key: key, at: at, released: r.Limit == 0}, r, nil
}

// Expires is when the lease ends if not released before.
func (ls *Lease) Expires() time.Time {
	return time.Unix(0, sat.Add(ls.at, int64(ls.c.ttl))).UTC()
}

// Release frees the lease's slot. Releasing it again, or after it
// expired, or a nil Lease (an Acquire that found no slot), does nothing.
// An error matching ErrUncertain means the release may not be on disk:
// the slot is then freed by the lease's end at the latest.
func (ls *Lease) Release(ctx context.Context) error {
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.released {
		return nil
	}
	if err := ls.c.release(ctx, ls.key, ls.at); err != nil {
		return fmt.Errorf("ratestore: concurrency %q: key %q: release: %w", ls.c.l.Name(), ls.key, err)
	}
	ls.released = true
	return nil
}
