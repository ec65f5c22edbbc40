package keystore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// Request is what Admit admits.
type Request struct {
	Model string // the model asked for; "" when the request names none
	// Reserve is the tokens held while the request runs, counted as used in
	// every window until Finish: an estimate such as prompt + max_tokens.
	// 0: none.
	Reserve int64
	// Optional is more tokens to hold as far as every window has room for
	// them once Reserve is held: a guess, such as the default output of a
	// request that names no maximum, that must not refuse a request on its
	// own account. Admission.Reserved tells what was held.
	Optional int64
	// Cost is the money held in every budget while the request runs: its
	// worst case, such as the prompt and the most output it may produce at
	// their prices. 0: none.
	Cost pricing.USD
}

// Denial is the error of a refused Admit (and of Authenticate and Check
// for a disabled or expired key): which limit refused, and when to retry.
// It matches (errors.Is) ErrNotFound, ErrDisabled, ErrExpired, ErrModel or
// ErrLimited.
type Denial struct {
	// Reason is "unknown", "disabled", "expired", "model", "window",
	// "budget", "rate" or "concurrency".
	Reason string
	// Limit names the limit that refused: "window 5h0m0s" (its length),
	// "100 requests per minute", "4 requests in flight", the model.
	Limit string
	// RetryAfter is when the same request would be admitted, as far as the
	// limit that refused can tell; -1 when it never will be (a reservation
	// over a window's limit, a disabled or expired key, a model not
	// allowed).
	RetryAfter time.Duration

	key string // the id; "" for an unknown secret
	err error  // the sentinel it matches
}

func (d *Denial) Error() string {
	msg := "keystore: "
	if d.key != "" {
		msg += "key " + d.key + ": "
	}
	msg += d.err.Error()
	if d.Limit != "" {
		msg += ": " + d.Limit
	}
	switch {
	case d.RetryAfter > 0:
		msg += fmt.Sprintf("; retry after %v", d.RetryAfter)
	case d.RetryAfter < 0 && d.err == ErrLimited:
		msg += "; the request can never fit"
	}
	return msg
}

// Unwrap returns the sentinel d matches.
func (d *Denial) Unwrap() error { return d.err }

// errFinished is the error of a second Finish.
var errFinished = fmt.Errorf("keystore: admission finished already: %w", ErrInvalid)

// Admission is a request admitted by Admit: it holds a concurrency slot
// and a reservation in every token window of its key until Finish, or
// until Options.LeaseTTL has passed.
type Admission struct {
	s        *Store
	e        *entry
	k        Key
	pol      *policy // the windows the reservation went to
	reserve  int64
	cost     pricing.USD // the money reserved in the budgets of pol
	at       int64       // when the reservation was taken (Unix ns): its buckets, and its slot's lease
	deadline int64       // at + LeaseTTL: the slot is freed then
	moved    int64       // e.moved at Admit (see adjust)
	limits   Limits

	finished bool // guarded by e.mu
}

// Limits is what an admission left of the key's limits, as its decision
// saw them once it had taken its share: for the caller's rate-limit
// headers.
type Limits struct {
	// Tokens is the binding token window's answer: its Limit, what
	// Remains once the reservation is held, and when it is back to empty
	// (ResetAfter).
	Tokens strategies.Result
	// Requests is the request rate's answer, when the key has one
	// (HasRequests): what remains once this request is counted.
	Requests    strategies.Result
	HasRequests bool
	// Budget is the least money any of the key's budgets has left once the
	// cost reserved is held, when it has one (HasBudget).
	Budget    pricing.USD
	HasBudget bool
}

// Cost returns the money the admission holds in the key's budgets:
// Request.Cost.
func (a *Admission) Cost() pricing.USD { return a.cost }

// Limits returns what the admission left of the key's limits.
func (a *Admission) Limits() Limits { return a.limits }

// Key returns the key as it was when the request was admitted.
func (a *Admission) Key() Key { return a.k }

// Reserved returns the tokens the admission holds: Request.Reserve, and
// what fitted of Request.Optional.
func (a *Admission) Reserved() int64 { return a.reserve }

// Admit authenticates secret and admits one request, all or nothing: the
// key is enabled and unexpired, the model is allowed, the concurrency cap
// and the request rate have room, and every token window has room for
// req.Reserve tokens. Then it takes one request from the rate, holds
// req.Reserve tokens in every window (counted as used by every other
// request until Finish) and a concurrency slot, and returns once that is
// as durable as the database promises, so that a crash keeps the
// reservation charged.
//
// A refusal changes nothing and is a *Denial matching ErrNotFound,
// ErrDisabled, ErrExpired, ErrModel or ErrLimited. Checks run in that
// order, then the concurrency cap, the windows and the request rate: the
// first that refuses is reported. A window refuses a reservation when
// used + Reserve > Limit, so with Reserve 0 a key at exactly its limit is
// still admitted, as Check says.
//
// When only the wait for the commit fails (ctx ended, or the disk did),
// Admit returns the Admission with the error: the request was admitted
// and holds its slot and reservation, which are just not known to be on
// disk. Finish it like any other.
func (s *Store) Admit(ctx context.Context, secret string, req Request) (*Admission, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.Reserve < 0 || req.Optional < 0 || req.Cost < 0 {
		return nil, invalid("admit: negative Reserve %d, Optional %d or Cost %s", req.Reserve, req.Optional, req.Cost)
	}
	h := hashSecret(secret)
	e, err := s.bySecret(ctx, h)
	if errors.Is(err, ErrNotFound) {
		return nil, &Denial{Reason: "unknown", RetryAfter: -1, err: ErrNotFound}
	}
	if err != nil {
		return nil, err
	}
	c := s.newCall(ctx, e)
	defer c.free()
	c.req, c.hash = req, h
	err = s.eng.update(ctx, c.locks(), c.admit)
	if err != nil && c.a == nil {
		return nil, err
	}
	return c.a, err
}

// admit is Admit inside the batch b that stores it: it reads e's record
// again if the engine is shared, merges its pending legacy usage, checks
// that e admits req (admits) and holds what it admits (hold).
func (s *Store) admit(c *call, b batch) (*Admission, error) {
	e, req := c.e, c.req
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.refresh(b, e); err != nil {
		return nil, err
	}
	if e.rec.gone || c.hash != e.rec.hash && !e.previous(c.hash, b.now()) {
		return nil, &Denial{Reason: "unknown", RetryAfter: -1, err: ErrNotFound}
	}
	// Before the checks, which count it; it stands even if they refuse.
	if err := s.mergePending(c.ctx, b, e); err != nil {
		return nil, err
	}
	now := b.now()
	lim, err := e.admits(c.ctx, b, req, now)
	if err != nil {
		return nil, err
	}
	optional := min(req.Optional, lim.Tokens.Remaining)
	lim.Tokens.Remaining -= optional
	reserve := sat.Add(req.Reserve, optional)
	pol := e.rec.pol
	if err := c.hold(b, pol, now, reserve); err != nil {
		return nil, err
	}
	return &Admission{s: s, e: e, k: e.key(), pol: pol, reserve: reserve, cost: req.Cost, at: now,
		deadline: sat.Add(now, int64(s.opts.LeaseTTL)), moved: e.moved, limits: lim}, nil
}

// hold takes what admits allowed: reserve tokens in every window of pol,
// and a concurrency slot, for the key of c. The caller holds its entry's
// lock.
func (c *call) hold(b batch, pol *policy, now, reserve int64) error {
	e := c.e
	if reserve > 0 {
		// At now, in every window: the instant Finish refunds at. A
		// Record would decide at its own instant, which a moving clock
		// may have taken into the next bucket.
		c.now, c.n = now, reserve
		for i, l := range pol.windows {
			c.rw = pol.pub.Windows[i].strategy()
			if _, err := b.Modify(l, e.id, c.merge); err != nil {
				return fmt.Errorf("keystore: key %s: reserving: %w", e.id, err)
			}
		}
	}
	if c.req.Cost > 0 {
		c.now, c.cost = now, c.req.Cost
		for i, l := range pol.budgets {
			c.bud = pol.pub.Budgets[i]
			if _, err := b.Modify(l, e.id, c.reserveBudget); err != nil {
				return fmt.Errorf("keystore: key %s: reserving: %w", e.id, err)
			}
		}
	}
	// The slot, checked by admits: taken whatever the cap, which admits
	// enforced, and whatever the log's Limit, which only bounds its size.
	if _, err := b.Record(pol.inflight, e.id, 1); err != nil {
		return fmt.Errorf("keystore: key %s: taking a slot: %w", e.id, err)
	}
	return nil
}

// admits checks that e admits req at now, and takes one request from its
// rate if so: the last check, so that a refusal changes nothing. It
// returns what req leaves of the key's limits, its Tokens.Remaining the
// room every window has once req.Reserve is held. The caller holds e.mu.
func (e *entry) admits(ctx context.Context, b batch, req Request, now int64) (lim Limits, err error) {
	if err := e.refusal(now); err != nil {
		return Limits{}, err
	}
	pol := e.rec.pol
	if !pol.pub.allows(req.Model) {
		return Limits{}, &Denial{Reason: "model", Limit: fmt.Sprintf("model %q", req.Model), RetryAfter: -1, key: e.id, err: ErrModel}
	}
	if max := pol.pub.MaxConcurrent; max > 0 {
		r, err := b.PeekN(ctx, pol.inflight, e.id, 1)
		if err != nil {
			return Limits{}, fmt.Errorf("keystore: key %s: requests in flight: %w", e.id, err)
		}
		if !r.Allowed {
			// When a request in flight finishes is not known; the earliest
			// lease's end, r.RetryAfter, is when a slot is sure to be free.
			return Limits{}, &Denial{Reason: "concurrency", Limit: fmt.Sprintf("%d requests in flight", max),
				RetryAfter: r.RetryAfter, key: e.id, err: ErrLimited}
		}
	}
	res, i, err := pol.peek(ctx, b, e.id, req.Reserve)
	if err != nil {
		return Limits{}, err
	}
	if !res.Allowed {
		return Limits{}, &Denial{Reason: "window", Limit: "window " + pol.pub.Windows[i].Window.String(),
			RetryAfter: res.RetryAfter, key: e.id, err: ErrLimited}
	}
	lim.Tokens = res
	for i, l := range pol.budgets {
		r, err := b.PeekN(ctx, l, e.id, int64(req.Cost))
		if err != nil {
			return Limits{}, fmt.Errorf("keystore: key %s: budget: %w", e.id, err)
		}
		if !r.Allowed {
			return Limits{}, &Denial{Reason: "budget", Limit: "budget " + pol.pub.Budgets[i].String(),
				RetryAfter: r.RetryAfter, key: e.id, err: ErrLimited}
		}
		if !lim.HasBudget || pricing.USD(r.Remaining) < lim.Budget {
			lim.Budget, lim.HasBudget = pricing.USD(r.Remaining), true
		}
	}
	if pol.rate != nil {
		r, err := b.AllowN(pol.rate, e.id, 1)
		if err != nil {
			return Limits{}, fmt.Errorf("keystore: key %s: request rate: %w", e.id, err)
		}
		if !r.Allowed {
			return Limits{}, &Denial{Reason: "rate", Limit: fmt.Sprintf("%d requests per minute", pol.pub.RequestsPerMinute),
				RetryAfter: r.RetryAfter, key: e.id, err: ErrLimited}
		}
		lim.Requests, lim.HasRequests = r, true
	}
	return lim, nil
}

// Finish charges tokens, the request's real usage, in place of its
// reservation, in the buckets the reservation went to (never below zero
// there), adds them to LifetimeTokens, sets LastUsed, frees the
// concurrency slot, and returns the key's usage after it, once that is as
// durable as the database promises. Windows the key's policy gained since
// Admit are charged tokens now.
//
// An admission past its lease (Options.LeaseTTL) has had its slot freed
// and keeps its reservation charged: Finish then charges what tokens
// exceed it, and gives nothing back. Finishing twice is an error matching
// ErrInvalid and changes nothing; tokens < 0 likewise. For a key deleted
// in the meantime Finish returns ErrNotFound.
func (a *Admission) Finish(ctx context.Context, tokens int64) (Usage, error) {
	return a.FinishSpend(ctx, tokens, a.cost)
}

// FinishSpend is Finish with the request's real cost, which its budgets
// are charged in place of the cost reserved (Request.Cost), as its
// windows are charged tokens: in the reservation's bucket or calendar
// period, never below zero there. A cost < 0 is an error matching
// ErrInvalid and changes nothing.
func (a *Admission) FinishSpend(ctx context.Context, tokens int64, cost pricing.USD) (Usage, error) {
	if tokens < 0 || cost < 0 {
		return Usage{}, invalid("finish: negative tokens %d or cost %s", tokens, cost)
	}
	c := a.s.newCall(ctx, a.e)
	defer c.free()
	c.a, c.tokens, c.cost = a, tokens, cost
	err := a.s.eng.update(ctx, c.locks(), c.finish)
	return c.u, err
}

// finishIn is Finish in the batch b, with the state of c.
func (a *Admission) finishIn(c *call, b batch) error {
	s, e := a.s, a.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.refresh(b, e); err != nil {
		return err
	}
	if a.finished {
		return errFinished
	}
	if e.rec.gone {
		a.finished = true
		return notFound(e.id)
	}
	now := b.now()
	if err := c.settle(b, now); err != nil {
		return err
	}
	if _, err := b.Modify(e.rec.pol.inflight, e.id, c.release); err != nil {
		return fmt.Errorf("keystore: key %s: freeing the slot: %w", e.id, err)
	}
	a.finished = true
	e.used(c.tokens, now)
	e.rec.spent = sat.Add(e.rec.spent, int64(c.cost))
	if err := s.putRecord(b, e, now); err != nil {
		return err
	}
	return s.usageOf(c, b)
}

// settle replaces a's reservation by tokens in the windows of the key's
// policy: in a window the reservation went to (one of the same length),
// by adding or refunding the difference in the reservation's bucket; in a
// window the policy gained since Admit, by recording tokens now. Windows
// the policy lost since do not count any more and are left as they are.
// The caller holds the entry's lock. It settles c.a with c.tokens.
func (c *call) settle(b batch, now int64) error {
	a, tokens := c.a, c.tokens
	id := a.e.id
	c.n = tokens - a.reserve
	if now >= a.deadline && c.n < 0 {
		c.n = 0 // past its lease: the reservation stays charged
	}
	pol := a.e.rec.pol
	for i, w := range pol.pub.Windows {
		var err error
		if a.reserved(w.Window) {
			c.rw = w.strategy()
			_, err = b.Modify(pol.windows[i], id, c.adjust)
		} else if tokens > 0 {
			_, err = b.Record(pol.windows[i], id, tokens)
		}
		if err != nil {
			return fmt.Errorf("keystore: key %s: finishing: %w", id, err)
		}
	}
	return c.settleBudgets(b, now)
}

// settleBudgets replaces a's reserved cost by c.cost in the budgets of the
// key's policy, as settle does for tokens: a budget the reservation went to
// is adjusted by the difference, one the policy gained since is charged
// the cost now. The caller holds the entry's lock.
func (c *call) settleBudgets(b batch, now int64) error {
	a := c.a
	delta := c.cost - a.cost
	if now >= a.deadline && delta < 0 {
		delta = 0 // past its lease: the reservation stays charged
	}
	pol := a.e.rec.pol
	for i, bud := range pol.pub.Budgets {
		c.bud, c.now = bud, a.at
		if slices.ContainsFunc(a.pol.pub.Budgets, bud.sameSpan) {
			c.delta = delta
			_, err := b.Modify(pol.budgets[i], a.e.id, c.settleBudget)
			if err != nil {
				return fmt.Errorf("keystore: key %s: finishing: %w", a.e.id, err)
			}
			continue
		}
		if c.cost > 0 {
			c.now = now
			if _, err := b.Modify(pol.budgets[i], a.e.id, c.reserveBudget); err != nil {
				return fmt.Errorf("keystore: key %s: finishing: %w", a.e.id, err)
			}
		}
	}
	return nil
}

// reserved reports whether a's reservation went to a window of length
// window.
func (a *Admission) reserved(window time.Duration) bool {
	return slices.ContainsFunc(a.pol.pub.Windows, func(w Window) bool { return w.Window == window })
}

// adjust adds delta tokens to st, the state of rw, in the bucket that
// holds at, the instant of the reservation, or gives -delta back from
// there.
//
// Tokens added whose bucket has expired (a request that ran longer than
// the window) go to now's bucket instead: never less is charged.
//
// Tokens given back come from at's bucket, never below zero. A change of
// the window's Bucket while the request ran moves the reservation to a
// bucket that starts at or after its own, less than the new Bucket later
// (strategies.RollingWindow), and so a series of changes less than moved,
// the sum of their Buckets, later: what at's bucket does not hold is given
// back from the buckets after it within that reach, oldest first. Where
// other usage shares those buckets, what is given back may come from it
// rather than from the reservation: the total is the same, and the usage
// left counts no shorter than the reservation would have.
func adjust(rw strategies.RollingWindow, st strategies.State, now, at, moved, delta int64) error {
	bucket, window := int64(rw.Bucket), int64(rw.Window)
	start := at - at%bucket
	if delta >= 0 {
		if start <= now-window {
			at = now
		}
		return rw.Merge(st, now, at, delta)
	}
	for end, left := start+moved+bucket, -delta; left > 0 && start < end; start += bucket {
		got, err := rw.Refund(st, now, start, left)
		if err != nil {
			return err
		}
		left -= got
	}
	return nil
}

// reach is how far a change of a key's policy from old to pol moves the
// reservations in its windows (see adjust): the longest Bucket of a window
// whose Bucket changed, 0 when none did.
func reach(old, pol *policy) int64 {
	var r int64
	for _, w := range pol.pub.Windows {
		i := slices.IndexFunc(old.pub.Windows, func(o Window) bool { return o.Window == w.Window })
		if i >= 0 && old.pub.Windows[i].Bucket != w.Bucket {
			r = max(r, int64(w.Bucket))
		}
	}
	return r
}
