package keystore

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"

	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// call is one Admit, Finish or Usage as it passes through the engine, and
// the state of the functions the engine calls back.
//
// The backend is an interface (backend.Store), and whatever is passed to
// an interface's method escapes to the heap: a closure made per request would
// be allocated per request, with every variable it captures, and so would
// the slice of its locks. A call holds its callbacks, bound once when the
// pool makes it, beside the fields they read and write, and calls are
// reused: passing them to the engine allocates nothing.
type call struct {
	s      *Store
	ctx    context.Context
	direct direct // reads outside a batch, bounded by ctx
	e      *entry
	lock   []string // the locks of its batches: the key's id, its team's and its quotas'
	subs   []held   // Admit's: the sub-limits of its request

	req    Request
	hash   [sha256.Size]byte // Admit's: the hash of the secret it was given
	a      *Admission        // Admit's result, and the admission Finish finishes
	tokens int64             // Finish's
	cost   pricing.USD       // Finish's, or the cost Admit reserves
	u      Usage             // Finish's and Usage's result
	rec    Recorder          // FinishWith's
	t      *team             // TeamUsage's team
	k      Key               // Check's results: the key, its Result, and
	res    strategies.Result // whether it has legacy usage to merge first
	legacy bool

	// What the callback in progress reads: a window's strategy, its
	// instant, its count (a reservation, a difference), and the usage it
	// reports into.
	rw    strategies.RollingWindow
	now   int64
	n     int64
	wu    *WindowUsage
	ru    WindowUsage // the request rate's minute, which wu points to while usageFor reads it
	bud   Budget
	delta pricing.USD
	bu    *BudgetUsage
	moved int64 // how far policy changes moved the reservation settled (see adjust)
	at    int64 // the instant of the hold settled: the admission's, or its quotas' (Admission.Move)

	admit, finish, move, check, usageIn func(batch) error
	merge, adjust                       func(st strategies.State, now int64) (strategies.State, error)
	reserveBudget, settleBudget         func(st strategies.State, now int64) (strategies.State, error)
	release                             func(st strategies.State, now int64) (strategies.State, error)
	inflight, usage, budgetUsage        func(st strategies.State, now int64) error
}

var calls = sync.Pool{New: func() any { return newCall() }}

// newCall returns a call with its callbacks bound.
func newCall() *call {
	c := &call{}
	c.admit = func(b batch) (err error) {
		c.a, err = c.s.admit(c, b)
		return err
	}
	c.finish = func(b batch) error { return c.a.finishIn(c, b) }
	c.move = func(b batch) error { return c.moveIn(b) }
	c.check = func(b batch) error { return c.s.checkIn(c, b) }
	c.usageIn = func(b batch) error { return c.s.usageFrom(c, b) }
	c.merge = func(st strategies.State, at int64) (strategies.State, error) {
		return st, c.rw.Merge(st, at, min(c.now, at), c.n)
	}
	c.adjust = func(st strategies.State, now int64) (strategies.State, error) {
		return st, adjust(c.rw, st, now, c.at, c.moved, c.n)
	}
	c.reserveBudget = func(st strategies.State, now int64) (strategies.State, error) {
		return st, reserveIn(c.bud, st, now, c.now, c.cost)
	}
	c.settleBudget = func(st strategies.State, now int64) (strategies.State, error) {
		return st, settleIn(c.bud, st, now, c.now, c.moved, c.delta)
	}
	c.budgetUsage = func(st strategies.State, now int64) error { return budgetUsage(c.bud, c.bu, st, now) }
	c.release = func(st strategies.State, now int64) (strategies.State, error) {
		_, err := c.s.lease.Release(st, now, c.at, 1)
		return st, err
	}
	c.inflight = func(st strategies.State, now int64) error {
		n, err := c.s.lease.Used(st, now)
		c.u.InFlight = int(n)
		return err
	}
	c.usage = func(st strategies.State, now int64) error { return windowUsage(c.rw, c.wu, st, now) }
	return c
}

// newCall returns a call of s on e, bounded by ctx, from the pool.
func (s *Store) newCall(ctx context.Context, e *entry) *call {
	c := calls.Get().(*call)
	c.s, c.ctx, c.direct, c.e, c.lock, c.t, c.k, c.res, c.legacy = s, ctx, direct{ctx}, e, c.lock[:0], nil, Key{}, strategies.Result{}, false
	if e != nil {
		c.lock = append(c.lock, e.id)
	}
	return c
}

// locks are the locks of the call's batches.
func (c *call) locks() []string { return c.lock }

// lockTeam adds team id's lock to the call's, for a key of a team.
func (c *call) lockTeam(id string) {
	if id != "" {
		c.lock = append(c.lock, id)
	}
}

// lockQuotas adds the locks of qs to the call's: on a shared store, the
// processes that take from one quota take turns.
func (c *call) lockQuotas(qs []*Quota) {
	for _, q := range qs {
		if !slices.Contains(c.lock, q.id) {
			c.lock = append(c.lock, q.id)
		}
	}
}

// free returns c to the pool, holding nothing of the request it served.
func (c *call) free() {
	clear(c.lock)
	c.s, c.ctx, c.direct, c.e, c.lock = nil, nil, direct{}, nil, c.lock[:0]
	c.req, c.hash, c.a, c.tokens, c.cost, c.u, c.rec = Request{}, [sha256.Size]byte{}, nil, 0, 0, Usage{}, nil
	c.rw, c.now, c.n, c.wu = strategies.RollingWindow{}, 0, 0, nil
	c.bud, c.delta, c.bu, c.moved = Budget{}, 0, nil, 0
	clear(c.subs)
	c.subs = c.subs[:0]
	calls.Put(c)
}
