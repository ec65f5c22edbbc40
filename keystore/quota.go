package keystore

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/ratestore/ratestore/internal/text"
)

// A Quota is a policy on a name that is not a key: the limits that the
// requests of many keys share, checked and taken in the same decision as
// each key's own (Request.Quotas). An upstream's quota (the tokens and
// requests a provider allows per minute) is one; so is a model's limit
// within a key, or an end user's.
//
// A quota's usage is engine state under its name, like a key's windows,
// and nothing else: it has no record, so a Store may have as many as its
// engine has states. A Quota is its Store's: the same name and policy
// made on another Store of the same backend (another gateway on one Redis)
// count as one.
type Quota struct {
	s      *Store // whose backend's limiters pol's are
	name   string
	id     string // the state key of its limits: "q/" and name
	pol    *policy
	stripe uint8 // its lock among quotaStripes
}

// MaxQuotaName is the longest quota name, in bytes.
const MaxQuotaName = 512

// Quota returns the quota of name under policy p: windows, budgets, a
// request rate and a concurrency cap, as a key's, and no models (which
// requests a quota applies to is the caller's choice). name is 1 to
// MaxQuotaName bytes of UTF-8 that shows what it is (see Names).
// Quotas are cheap: make one per request if need be.
func (s *Store) Quota(name string, p Policy) (*Quota, error) {
	if name == "" {
		return nil, fieldError("quota", "name", "is empty")
	}
	if why := text.Problem(name, MaxQuotaName); why != "" {
		return nil, fieldError("quota", "name", "%s", why)
	}
	if len(p.Models) > 0 {
		return nil, fieldError("quota "+name, "Models", "a quota has no models: the caller chooses the requests it applies to")
	}
	pol, err := s.policy("quota "+name, p)
	if err != nil {
		return nil, err
	}
	id := quotaPrefix + name
	return &Quota{s: s, name: name, id: id, pol: pol, stripe: uint8(maphash.String(stripeSeed, id) % quotaStripes)}, nil
}

// Name returns the quota's name.
func (q *Quota) Name() string { return q.name }

// Policy returns the quota's policy.
func (q *Quota) Policy() Policy { return q.pol.pub }

// quotaPrefix keeps a quota's states apart from those of keys and teams,
// whose ids have no "/".
const quotaPrefix = "q/"

// quotaStripes is how many locks the quotas of a Store share: an Admit
// holds those of its quotas from their checks to their takes, as it holds
// its key's and its team's, so that two requests never both take the room
// one of them checked. Quotas are not kept (a caller may make one per
// request), so their locks are stripes, by name.
const quotaStripes = 64

var stripeSeed = maphash.MakeSeed()

// quotaLocks are a Store's quota stripes.
type quotaLocks [quotaStripes]sync.Mutex

// lock locks the stripes of qs, in order (so that two Admits never wait
// for each other's), and returns which it locked, for unlock.
func (l *quotaLocks) lock(qs []*Quota) (held uint64) {
	for _, q := range qs {
		held |= 1 << q.stripe
	}
	for i := range quotaStripes {
		if held&(1<<i) != 0 {
			l[i].Lock()
		}
	}
	return held
}

// unlock unlocks the stripes lock locked.
func (l *quotaLocks) unlock(held uint64) {
	for i := range quotaStripes {
		if held&(1<<i) != 0 {
			l[i].Unlock()
		}
	}
}

// quotaChecks checks that every quota of req admits it, in the batch b, and
// returns the least of what it leaves of their limits. It takes nothing.
func (s *Store) quotaChecks(ctx context.Context, b batch, req Request) (Limits, error) {
	var lim Limits
	for _, q := range req.Quotas {
		if s.shared {
			if err := b.Prefetch(nil, q.id, q.pol.all...); err != nil {
				return Limits{}, err
			}
		}
		ql, err := checks(ctx, b, q.id, "", q.pol, req)
		if d, ok := err.(*Denial); ok {
			d.Quota, d.key = q.name, ""
		}
		if err != nil {
			return Limits{}, err
		}
		lim = lim.tighter(ql)
	}
	return lim, nil
}

// finishQuotas settles c's admission in its quotas: its tokens and cost in
// place of the reservation, and its slot.
func (c *call) finishQuotas(b batch, now int64) error {
	c.at = c.a.qat
	for _, q := range c.a.quotas {
		c.moved = 0 // a quota's policy is the one it was admitted under
		if err := c.settleFor(b, now, q.id, q.pol, q.pol); err != nil {
			return err
		}
		if _, err := b.Modify(q.pol.inflight, q.id, c.release); err != nil {
			return fmt.Errorf("keystore: quota %s: freeing the slot: %w", q.name, err)
		}
	}
	return nil
}

// QuotaUsage reports q's usage as Usage reports a key's: each window's
// tokens used (reservations in flight included), its requests in flight,
// its budgets.
func (s *Store) QuotaUsage(ctx context.Context, q *Quota) (Usage, error) {
	if q == nil || q.s != s {
		return Usage{}, invalid("quota usage: a quota that is not this Store's (make it with Store.Quota)")
	}
	c := s.newCall(ctx, nil)
	defer c.free()
	err := s.usageFor(c, &c.direct, q.id, q.pol)
	return c.u, err
}

// Move moves a's hold from its quotas to qs, in one decision: every quota
// of qs must admit a's reservation and cost (else a *Denial naming the
// one that refuses, and nothing changes); they are then held in qs, and
// what a held in its old quotas is given back there, its slot and its
// reservation, as a Finish of nothing would. The key's and its team's
// holds stay as they are: a request an upstream refused goes on to the
// next without being counted again against its key.
//
// A finished admission cannot move (ErrInvalid). When only the wait for
// the commit fails, Move returns the error with the move done, as Admit
// does.
func (a *Admission) Move(ctx context.Context, qs []*Quota) error {
	for _, q := range qs {
		if q == nil || q.s != a.s {
			return invalid("move: a quota that is not this Store's (make it with Store.Quota)")
		}
	}
	c := a.s.newCall(ctx, a.e)
	defer c.free()
	c.a, c.req = a, Request{Reserve: a.reserve, Cost: a.cost, Quotas: qs}
	c.lockQuotas(a.quotas)
	c.lockQuotas(qs)
	return a.s.update(ctx, c.locks(), c.move)
}

// moveIn is Move in the batch b, with the state of c.
func (c *call) moveIn(b batch) error {
	s, a := c.s, c.a
	a.e.mu.Lock()
	defer a.e.mu.Unlock()
	if a.finished {
		return errFinished
	}
	all := append(slices.Clone(a.quotas), c.req.Quotas...)
	defer s.quotaLocks.unlock(s.quotaLocks.lock(all))
	if _, err := s.quotaChecks(c.ctx, b, c.req); err != nil {
		return err
	}
	now := b.Now().UnixNano()
	c.tokens, c.cost = 0, 0
	if err := c.finishQuotas(b, now); err != nil {
		return err
	}
	c.cost = a.cost // holdFor reserves c.req.Cost, which is a's
	for _, q := range c.req.Quotas {
		if err := takeRate(b, q.id, q.pol); err != nil {
			return err
		}
		if err := c.holdFor(b, q.id, q.pol, now, a.reserve); err != nil {
			return err
		}
	}
	a.quotas, a.qat = slices.Clone(c.req.Quotas), now
	return nil
}
