package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/strategies"
)

// Concurrency bounds how many holders, in every instance, act on a key at
// once, as ratestore.Concurrency does: a lease is one unit of a
// strategies.SlidingLog{Limit: max, Window: ttl} under the Concurrency's
// name, and ends by itself after the TTL, so a crashed holder frees its
// slot then.
type Concurrency struct {
	l   *Limiter
	log strategies.SlidingLog
}

// Concurrency returns the leases of at most max holders per key under
// name, each ending after ttl unless released before.
func (db *DB) Concurrency(name string, max int64, ttl time.Duration) (*Concurrency, error) {
	sl := strategies.SlidingLog{Limit: max, Window: ttl}
	l, err := db.Limiter(name, sl)
	if err != nil {
		return nil, err
	}
	return &Concurrency{l: l, log: sl}, nil
}

// Lease is one slot of a key held by a Concurrency's caller.
type Lease struct {
	c        *Concurrency
	key      string
	at       int64 // Unix ns: the instant it was logged at
	mu       sync.Mutex
	released bool
}

// Acquire takes a slot of key: the Lease and Result.Allowed when one is
// free, otherwise a nil Lease and the Result of the denial. Errors are
// those of Limiter.AllowN; with Options.FailOpen a failure gives a Lease
// whose Release does nothing.
func (c *Concurrency) Acquire(ctx context.Context, key string) (*Lease, Result, error) {
	at := c.l.db.now().UnixNano()
	r, failedOpen, err := c.l.do(ctx, key, strategies.Call{N: 1})
	if err != nil || !r.Allowed {
		return nil, r, err
	}
	// A lease allowed by FailOpen holds no slot: its Release must not free
	// another's.
	return &Lease{c: c, key: key, at: at, released: failedOpen}, r, nil
}

// Expires is when the lease ends if not released before.
func (ls *Lease) Expires() time.Time {
	return time.Unix(0, sat.Add(ls.at, int64(ls.c.log.Window))).UTC()
}

// Release frees the lease's slot. Releasing it again, after it ended, or a
// nil Lease, does nothing. An error matching ErrUncertain means the
// release may not have been stored: the slot is freed by the lease's end
// at the latest.
func (ls *Lease) Release(ctx context.Context) error {
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.released {
		return nil
	}
	l := ls.c.l
	err := l.modify(ctx, ls.key, func(st strategies.State, now int64) error {
		_, err := ls.c.log.Release(st, now, ls.at, 1)
		return err
	})
	if err != nil {
		return fmt.Errorf("redisstore: concurrency %q: key %q: release: %w", l.name, ls.key, err)
	}
	ls.released = true
	return nil
}

// modify applies fn to key's state at the call's instant and stores the
// result, as ratestore.Batch.Modify does, through the same
// compare-and-swap as a decision: fn may run more than once, each time on
// the state Redis holds.
func (l *Limiter) modify(ctx context.Context, key string, fn func(st strategies.State, now int64) error) error {
	if err := l.check(ctx, key, 0); err != nil {
		return err
	}
	_, err := l.update(ctx, key, func(cur string, now int64) (outcome, error) {
		seen, st, err := l.decode(cur)
		if err != nil || st == nil {
			return outcome{next: cur}, err // nothing held
		}
		at, _ := l.instant(seen, now, st)
		if err := fn(st, at); err != nil {
			return outcome{}, err
		}
		res, err := l.d.Decide(st, strategies.Call{Now: at, DryRun: true})
		if err != nil {
			return outcome{}, err
		}
		o := outcome{res: res, changed: true}
		if res.ResetAfter > 0 {
			o.next, o.ttl = encode(at, st), res.ResetAfter+ttlSlack
		}
		return o, nil
	})
	return err
}
