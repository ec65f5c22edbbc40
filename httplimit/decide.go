package httplimit

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
)

// decide decides a request of several rules as one, in the two steps that
// the package documentation describes, under the locks of its (limiter,
// key) pairs. It reports whether the request is allowed; on an error, the
// index of the rule whose limiter failed.
func (m *Middleware) decide(ctx context.Context, c *call) (allowed bool, failed int, err error) {
	var arr [inline]uint64
	held, err := m.lock(ctx, c, arr[:0])
	if err != nil {
		return false, 0, err
	}
	defer m.locks.release(held)

	// Step 1: does each rule fit?
	fitAll, failed, err := m.peek(ctx, c)
	if err != nil {
		return false, failed, err
	}
	// Step 2: take the rules that do not fit first, then those that do.
	if !fitAll {
		if allowed, failed, err := m.allowMisfits(ctx, c); !allowed || err != nil {
			return false, failed, err
		}
	}
	return m.takeFits(ctx, c)
}

// lock acquires the locks of c's (limiter, key) pairs, appending their
// hashes to held, which it returns. They are taken in ascending order, one
// order for all requests, so that two requests never wait for each other;
// a hash collision is one lock, taken once. When ctx ends first, lock
// releases what it took and returns ctx's error.
func (m *Middleware) lock(ctx context.Context, c *call, held []uint64) ([]uint64, error) {
	for i := range m.rules {
		held = append(held, m.locks.hash(m.rules[i].lim.Name(), c.keys[i]))
	}
	slices.Sort(held)
	held = slices.Compact(held) // sorted: one order for all; a collision is one lock
	for j, h := range held {
		if err := m.locks.acquire(ctx, h); err != nil {
			m.locks.release(held[:j])
			return nil, err
		}
	}
	return held, nil
}

// peek is step 1: it peeks every rule, recording in c whether each fits
// (it allows and has room for its cost), and reports whether all fit.
func (m *Middleware) peek(ctx context.Context, c *call) (fitAll bool, failed int, err error) {
	fitAll = true
	for i := range m.rules {
		r, err := m.rules[i].lim.Peek(ctx, c.keys[i])
		if err != nil {
			return false, i, err
		}
		c.res[i] = r
		c.fit[i] = r.Allowed && r.Remaining >= c.costs[i]
		fitAll = fitAll && c.fit[i]
	}
	return fitAll, 0, nil
}

// allowMisfits is step 2 for the rules that do not fit: each is asked with
// AllowN, and it reports whether all of them allowed. A rule that does not
// fit denies AllowN and changes nothing, by the contract of Remaining.
// Should one allow after all, it took its cost, and the request goes on
// as if it had fit.
func (m *Middleware) allowMisfits(ctx context.Context, c *call) (allowed bool, failed int, err error) {
	allowed = true
	for i := range m.rules {
		if c.fit[i] {
			continue
		}
		r, err := m.rules[i].lim.AllowN(ctx, c.keys[i], c.costs[i])
		if err != nil {
			return false, i, err
		}
		c.res[i] = r
		allowed = allowed && r.Allowed
	}
	return allowed, 0, nil
}

// takeFits is step 2 for the rules that fit, once every rule is known to
// allow: each takes its cost with AllowN. It reports whether all of them
// allowed.
func (m *Middleware) takeFits(ctx context.Context, c *call) (allowed bool, failed int, err error) {
	for i := range m.rules {
		if !c.fit[i] {
			continue // taken by allowMisfits
		}
		r, err := m.rules[i].lim.AllowN(ctx, c.keys[i], c.costs[i])
		if err != nil {
			return false, i, err
		}
		c.res[i] = r
		if !r.Allowed {
			// Taken from outside the Middleware between the steps: what
			// the rules before this one took stands.
			return false, 0, nil
		}
	}
	return true, 0, nil
}

// keyLocks are the locks of (limiter, key) pairs, by a 64-bit hash of the
// pair: a collision only makes two pairs share a lock. A lock exists while
// it is held or waited for. Waiting ends with the request's context.
type keyLocks struct {
	seed   maphash.Seed
	shards [lockShards]lockShard
}

const lockShards = 64

type lockShard struct {
	mu   sync.Mutex
	held map[uint64]*keyLock
	free []*keyLock
}

type keyLock struct {
	sem  chan struct{} // one slot, the holder's
	refs int           // the holder and the waiters; under the shard's mu
}

func newKeyLocks() *keyLocks {
	ls := &keyLocks{seed: maphash.MakeSeed()}
	for i := range ls.shards {
		ls.shards[i].held = map[uint64]*keyLock{}
	}
	return ls
}

func (ls *keyLocks) hash(limiter, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(ls.seed)
	h.WriteString(limiter)
	h.WriteByte(0) // a limiter name has no NUL: the pair is unambiguous
	h.WriteString(key)
	return h.Sum64()
}

// acquire locks h, or returns ctx's error when ctx ends first.
func (ls *keyLocks) acquire(ctx context.Context, h uint64) error {
	s := &ls.shards[h%lockShards]
	s.mu.Lock()
	l := s.held[h]
	if l == nil {
		if n := len(s.free); n > 0 {
			l, s.free = s.free[n-1], s.free[:n-1]
		} else {
			l = &keyLock{sem: make(chan struct{}, 1)}
		}
		s.held[h] = l
	}
	l.refs++
	s.mu.Unlock()
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.drop(h, l)
		s.mu.Unlock()
		return ctx.Err()
	}
}

// release unlocks every hash of hs, which the caller holds.
func (ls *keyLocks) release(hs []uint64) {
	for _, h := range hs {
		s := &ls.shards[h%lockShards]
		s.mu.Lock()
		l := s.held[h]
		<-l.sem
		s.drop(h, l)
		s.mu.Unlock()
	}
}

// drop counts out one holder or waiter of l, and recycles l when none is
// left. s.mu is held.
func (s *lockShard) drop(h uint64, l *keyLock) {
	if l.refs--; l.refs > 0 {
		return
	}
	delete(s.held, h)
	if len(s.free) < 64 {
		s.free = append(s.free, l)
	}
}
