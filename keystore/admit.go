package keystore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/backend"
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
	// Quotas are more limits the request must pass, shared with other
	// keys' requests: checked after the key's and its team's, held and
	// settled with them, in the same decision.
	Quotas []*Quota
	// EndUser names the key's customer the request is for, whose own
	// limits (Policy.EndUsers of the key and of its team) it must pass:
	// at most MaxEndUser bytes of printable UTF-8; "": the key's own
	// traffic.
	EndUser string
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
	// Team is the id of the key's team when the limit that refused is the
	// team's; "" when it is the key's own.
	Team string
	// Quota is the name of the quota (Request.Quotas) whose limit
	// refused; "" when it is the key's or its team's.
	Quota string
	// EndUser is the end user (Request.EndUser) whose limit refused: the
	// key's Policy.EndUsers, or its team's when Team is set.
	EndUser string
	// Models are the globs of the model limit (Policy.ModelLimits) that
	// refused, the key's or (Team set) its team's; nil otherwise.
	Models []string

	key string // the id; "" for an unknown secret
	err error  // the sentinel it matches
}

func (d *Denial) Error() string {
	msg := "keystore: "
	switch {
	case d.Quota != "":
		msg += "quota " + d.Quota + ": "
	case d.EndUser != "" && d.Team != "":
		msg += fmt.Sprintf("end user %q of team %s: ", d.EndUser, d.Team)
	case d.EndUser != "":
		msg += fmt.Sprintf("end user %q of key %s: ", d.EndUser, d.key)
	case d.Team != "":
		msg += "team " + d.Team + ": "
	case d.key != "":
		msg += "key " + d.key + ": "
	}
	if d.Models != nil {
		msg += "limit of models " + strings.Join(d.Models, ",") + ": "
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
	team     *team    // the key's team at Admit; nil: none
	tpol     *policy  // the team's policy the reservation went to
	tmoved   int64    // team.moved at Admit
	quotas   []*Quota // Request.Quotas, or those of Move
	subs     []held   // the sub-limits it holds (model limits, end user), at at
	qat      int64    // when the quotas' holds were taken: at, or Move's instant

	finished bool        // guarded by e.mu
	settled  atomic.Bool // its reservation is no longer in flight (Store.Reserved)
}

// Limits is what an admission left of the key's limits (and its team's),
// as its decision saw them once it had taken its share: for the caller's
// rate-limit headers. Its quotas' limits are not among them: an upstream's
// quota is its operator's account, not the caller's.
type Limits struct {
	// Tokens is the binding token window's answer, when the key or its
	// team has a token window (HasTokens): its Limit, what Remains once
	// the reservation is held, and when it is back to empty (ResetAfter).
	Tokens strategies.Result
	// Requests is the request rate's answer, when the key has one
	// (HasRequests): what remains once this request is counted.
	Requests strategies.Result
	// Budget is the least money any of the key's budgets has left once the
	// cost reserved is held, when it has one (HasBudget).
	Budget pricing.USD
	// HasTokens, HasRequests and HasBudget say which of the three the key
	// or its team has. (Together they take one word, not three.)
	HasTokens, HasRequests, HasBudget bool
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
	if why := checkEndUser(req.EndUser); why != "" && req.EndUser != "" {
		return nil, fieldError("admit", "Request.EndUser", "%s", why)
	}
	for _, q := range req.Quotas {
		if q == nil || q.s != s {
			return nil, invalid("admit: a quota that is not this Store's (make it with Store.Quota)")
		}
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
	e.mu.Lock()
	c.lockTeam(e.rec.team)
	e.mu.Unlock()
	c.lockQuotas(req.Quotas)
	err = s.update(ctx, c.locks(), c.admit)
	if err != nil && c.a == nil {
		return nil, err
	}
	s.held(c.a)
	return c.a, err
}

// admit is Admit inside the batch b that stores it: it reads e's record
// again if the engine is shared, merges its pending legacy usage, checks
// that e admits req (admits) and holds what it admits (hold).
func (s *Store) admit(c *call, b batch) (*Admission, error) {
	e, req := c.e, c.req
	e.mu.Lock()
	defer e.mu.Unlock()
	// The sub-limits' states, as far as the policy held tells, go in the
	// read of refresh: one round trip for them all.
	if err := c.prefetchSubs(b); err != nil {
		return nil, err
	}
	if err := s.refresh(b, e); err != nil {
		return nil, err
	}
	if e.rec.gone || c.hash != e.rec.hash && !e.previous(c.hash, b.Now().UnixNano()) {
		return nil, &Denial{Reason: "unknown", RetryAfter: -1, err: ErrNotFound}
	}
	// Before the checks, which count it; it stands even if they refuse.
	if err := s.mergePending(c.ctx, b, e); err != nil {
		return nil, err
	}
	now := b.Now().UnixNano()
	lim, err := e.admits(c.ctx, b, req, now)
	if err != nil {
		return nil, err
	}
	t, err := s.teamIn(c.ctx, b, e.rec.team)
	if err != nil {
		return nil, err
	}
	if t != nil {
		defer t.mu.Unlock()
		tl, err := checks(c.ctx, b, t.id, t.id, t.pol, req)
		if err != nil {
			return nil, err
		}
		lim = lim.tighter(tl)
	}
	if lim, err = c.subChecks(b, t, lim); err != nil {
		return nil, err
	}
	if len(req.Quotas) > 0 {
		defer s.quotaLocks.unlock(s.quotaLocks.lock(req.Quotas))
	}
	ql, err := s.quotaChecks(c.ctx, b, req)
	if err != nil {
		return nil, err
	}
	a, err := c.take(b, t, lim, lim.tighter(ql), now)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// take takes what the checks of c's request allowed, for its key and its
// team t (nil: none): one request from each request rate, the reservation
// (Request.Reserve, and what fits of Request.Optional) in every window and
// budget, and a slot of each. lim is what the checks left of the key's and
// its team's limits, which the Admission reports; room is lim with its
// quotas', which bounds the Optional tokens it takes. The caller holds the
// key's and t's locks.
func (c *call) take(b batch, t *team, lim, room Limits, now int64) (*Admission, error) {
	s, e, req := c.s, c.e, c.req
	if err := takeRate(b, e.id, e.rec.pol); err != nil {
		return nil, err
	}
	optional := req.Optional // all of it, where no window limits it
	if room.HasTokens {
		optional = min(optional, room.Tokens.Remaining)
	}
	if lim.HasTokens {
		lim.Tokens.Remaining -= optional
	}
	reserve := sat.Add(req.Reserve, optional)
	if err := c.holdFor(b, e.id, e.rec.pol, now, reserve); err != nil {
		return nil, err
	}
	a := &Admission{s: s, e: e, k: e.key(), pol: e.rec.pol, reserve: reserve, cost: req.Cost, at: now,
		deadline: sat.Add(now, int64(s.opts.LeaseTTL)), moved: e.moved, limits: lim}
	if t != nil {
		if err := takeRate(b, t.id, t.pol); err != nil {
			return nil, err
		}
		if err := c.holdFor(b, t.id, t.pol, now, reserve); err != nil {
			return nil, err
		}
		a.team, a.tpol, a.tmoved = t, t.pol, t.moved
	}
	for _, q := range req.Quotas {
		if err := takeRate(b, q.id, q.pol); err != nil {
			return nil, err
		}
		if err := c.holdFor(b, q.id, q.pol, now, reserve); err != nil {
			return nil, err
		}
	}
	if err := c.takeSubs(b, a, now); err != nil {
		return nil, err
	}
	a.quotas, a.qat = slices.Clone(req.Quotas), now
	return a, nil
}

// tighter is the least of l and o, the limits of a key and of its team:
// what the request leaves of the one that has less, or of the one that
// has the limit at all.
func (l Limits) tighter(o Limits) Limits {
	if o.HasTokens && (!l.HasTokens || o.Tokens.Remaining < l.Tokens.Remaining) {
		l.Tokens, l.HasTokens = o.Tokens, true
	}
	if o.HasRequests && (!l.HasRequests || o.Requests.Remaining < l.Requests.Remaining) {
		l.Requests, l.HasRequests = o.Requests, true
	}
	if o.HasBudget && (!l.HasBudget || o.Budget < l.Budget) {
		l.Budget, l.HasBudget = o.Budget, true
	}
	return l
}

// holdFor takes what checks allowed for id, a key or its team: reserve
// tokens in every window of pol, the request's cost in every budget, and a
// concurrency slot. The caller holds id's lock.
func (c *call) holdFor(b batch, id string, pol *policy, now, reserve int64) error {
	if err := c.reserveFor(b, id, pol, now, reserve); err != nil {
		return err
	}
	return takeSlot(b, id, pol)
}

// reserveFor is holdFor without the slot: the reservation and the cost.
func (c *call) reserveFor(b batch, id string, pol *policy, now, reserve int64) error {
	if reserve > 0 {
		// At now, in every window: the instant Finish refunds at. A
		// Record would decide at its own instant, which a moving clock
		// may have taken into the next bucket.
		c.now, c.n = now, reserve
		for i, l := range pol.windows {
			c.rw = pol.pub.Windows[i].strategy()
			if _, err := b.Modify(l, id, c.merge); err != nil {
				return fmt.Errorf("keystore: %s: reserving: %w", id, err)
			}
		}
	}
	if c.req.Cost > 0 {
		c.now, c.cost = now, c.req.Cost
		for i, l := range pol.budgets {
			c.bud = pol.pub.Budgets[i]
			if _, err := b.Modify(l, id, c.reserveBudget); err != nil {
				return fmt.Errorf("keystore: %s: reserving: %w", id, err)
			}
		}
	}
	return nil
}

// takeSlot takes a concurrency slot of id: taken whatever the cap, which
// checks enforced, and whatever the log's Limit, which only bounds its
// size.
func takeSlot(b batch, id string, pol *policy) error {
	if _, err := b.Record(pol.inflight, id, 1); err != nil {
		return fmt.Errorf("keystore: %s: taking a slot: %w", id, err)
	}
	return nil
}

// admits checks that e admits req at now: the key's own refusals (see
// refusal), then its policy (checks). It takes nothing: a refusal changes
// nothing. The caller holds e.mu.
func (e *entry) admits(ctx context.Context, b batch, req Request, now int64) (Limits, error) {
	if err := e.refusal(now); err != nil {
		return Limits{}, err
	}
	return checks(ctx, b, e.id, "", e.rec.pol, req)
}

// checks checks that the policy pol of id, a key or (team not "") the
// key's team, admits req, and returns what req would leave of its limits:
// Tokens.Remaining the room every window has once req.Reserve is held
// (HasTokens when pol has a window), Requests what the request rate has
// once it is counted. It takes nothing.
func checks(ctx context.Context, b batch, id, team string, pol *policy, req Request) (lim Limits, err error) {
	deny := func(reason, limit string, wait time.Duration, err error) (Limits, error) {
		return Limits{}, &Denial{Reason: reason, Limit: limit, RetryAfter: wait, Team: team, key: id, err: err}
	}
	if !pol.pub.allows(req.Model) {
		return deny("model", fmt.Sprintf("model %q", req.Model), -1, ErrModel)
	}
	if max := pol.pub.MaxConcurrent; max > 0 {
		r, err := b.PeekN(pol.inflight, id, 1)
		if err != nil {
			return Limits{}, fmt.Errorf("keystore: %s: requests in flight: %w", id, err)
		}
		if !r.Allowed {
			// When a request in flight finishes is not known; the earliest
			// lease's end, r.RetryAfter, is when a slot is sure to be free.
			return deny("concurrency", fmt.Sprintf("%d requests in flight", max), r.RetryAfter, ErrLimited)
		}
	}
	res, i, err := pol.peek(b, id, req.Reserve)
	if err != nil {
		return Limits{}, err
	}
	if !res.Allowed {
		return deny("window", "window "+pol.pub.Windows[i].Window.String(), res.RetryAfter, ErrLimited)
	}
	if i >= 0 {
		lim.Tokens, lim.HasTokens = res, true
	}
	for i, l := range pol.budgets {
		r, err := b.PeekN(l, id, int64(req.Cost))
		if err != nil {
			return Limits{}, fmt.Errorf("keystore: %s: budget: %w", id, err)
		}
		if !r.Allowed {
			return deny("budget", "budget "+pol.pub.Budgets[i].String(), r.RetryAfter, ErrLimited)
		}
		if !lim.HasBudget || pricing.USD(r.Remaining) < lim.Budget {
			lim.Budget, lim.HasBudget = pricing.USD(r.Remaining), true
		}
	}
	if pol.rate != nil {
		r, err := b.PeekN(pol.rate, id, 1)
		if err != nil {
			return Limits{}, fmt.Errorf("keystore: %s: request rate: %w", id, err)
		}
		if !r.Allowed {
			return deny("rate", fmt.Sprintf("%d requests per minute", pol.pub.RequestsPerMinute), r.RetryAfter, ErrLimited)
		}
		lim.Requests, lim.HasRequests = r, true
	}
	return lim, nil
}

// takeRate counts one request in the request rate of id under pol, which
// checks found room for.
func takeRate(b batch, id string, pol *policy) error {
	if pol.rate == nil {
		return nil
	}
	if _, err := b.AllowN(pol.rate, id, 1); err != nil {
		return fmt.Errorf("keystore: %s: request rate: %w", id, err)
	}
	return nil
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
	return a.finish(ctx, tokens, cost, nil)
}

// finish is FinishSpend, with the Recorder of FinishWith.
func (a *Admission) finish(ctx context.Context, tokens int64, cost pricing.USD, rec Recorder) (Usage, error) {
	if tokens < 0 || cost < 0 {
		return Usage{}, invalid("finish: negative tokens %d or cost %s", tokens, cost)
	}
	defer a.s.unheld(a)
	c := a.s.newCall(ctx, a.e)
	defer c.free()
	c.a, c.tokens, c.cost, c.rec = a, tokens, cost, rec
	if a.team != nil {
		c.lockTeam(a.team.id)
	}
	c.lockQuotas(a.quotas)
	// The key's values are those its Admit read and stored, as a rule:
	// on a shared store, none is read again, and the commit checks them.
	err := a.s.updateCached(ctx, c.locks(), c.finish)
	if errors.Is(err, backend.ErrConflict) && !errors.Is(err, backend.ErrUncertain) {
		// Another process changed them since: nothing was stored. What the
		// batch did in memory is undone (the key's record is read again),
		// and the request finished on values read under the locks.
		a.e.mu.Lock()
		a.finished = false
		a.e.mu.Unlock()
		if rec != nil {
			rec.Discard()
		}
		err = a.s.update(ctx, c.locks(), c.finish)
	}
	return c.u, err
}

// finishIn is Finish in the batch b, with the state of c.
func (a *Admission) finishIn(c *call, b batch) error {
	s, e := a.s, a.e
	e.mu.Lock()
	defer e.mu.Unlock()
	// The sub-limits' states go in the read of refresh, under the key's
	// lock alone: read later, under the team's, a read that takes the
	// shared store's locks would wait for an Admit that holds them and
	// waits for the team's lock.
	if err := a.prefetchSubs(b); err != nil {
		return err
	}
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
	now := b.Now().UnixNano()
	c.at = a.at // the key's and team's holds; finishQuotas sets the quotas'
	if err := c.settle(b, now); err != nil {
		return err
	}
	if _, err := b.Modify(e.rec.pol.inflight, e.id, c.release); err != nil {
		return fmt.Errorf("keystore: key %s: freeing the slot: %w", e.id, err)
	}
	if err := c.finishTeam(b, now); err != nil {
		return err
	}
	if err := c.finishSubs(b, now, false); err != nil {
		return err
	}
	if err := c.finishQuotas(b, now); err != nil {
		return err
	}
	a.finished = true
	e.used(c.tokens, now)
	e.rec.spent = sat.Add(e.rec.spent, int64(c.cost))
	if err := s.putRecord(b, e, now); err != nil {
		return err
	}
	if err := s.usageOf(c, b); err != nil {
		return err
	}
	if c.rec == nil {
		return nil
	}
	return c.rec.Record(b, time.Unix(0, now).UTC())
}

// settle replaces a's reservation by tokens in the windows of the key's
// policy: in a window the reservation went to (one of the same length),
// by adding or refunding the difference in the reservation's bucket; in a
// window the policy gained since Admit, by recording tokens now. Windows
// the policy lost since do not count any more and are left as they are.
// The caller holds the entry's lock. It settles c.a with c.tokens.
func (c *call) settle(b batch, now int64) error {
	a := c.a
	c.moved = a.e.moved - a.moved
	return c.settleFor(b, now, a.e.id, a.e.rec.pol, a.pol)
}

// finishTeam settles c's admission in the team it was admitted in, if
// any: its tokens and cost in place of the reservation, and its slot.
func (c *call) finishTeam(b batch, now int64) error {
	a := c.a
	if a.team == nil {
		return nil
	}
	t := a.team
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := c.s.refreshTeam(b, t); err != nil || t.gone {
		return err
	}
	c.moved = t.moved - a.tmoved
	if err := c.settleFor(b, now, t.id, t.pol, a.tpol); err != nil {
		return err
	}
	if _, err := b.Modify(t.pol.inflight, t.id, c.release); err != nil {
		return fmt.Errorf("keystore: team %s: freeing the slot: %w", t.id, err)
	}
	return c.finishSubs(b, now, true) // under the team's lock, as its Admits check them
}

// settleFor is settle for id, a key or its team, whose policy is now pol
// and was apol when the request was admitted.
func (c *call) settleFor(b batch, now int64, id string, pol, apol *policy) error {
	a, tokens := c.a, c.tokens
	c.n = tokens - a.reserve
	if now >= a.deadline && c.n < 0 {
		c.n = 0 // past its lease: the reservation stays charged
	}
	for i, w := range pol.pub.Windows {
		var err error
		if slices.ContainsFunc(apol.pub.Windows, func(o Window) bool { return o.Window == w.Window }) {
			c.rw = w.strategy()
			_, err = b.Modify(pol.windows[i], id, c.adjust)
		} else if tokens > 0 {
			_, err = b.Record(pol.windows[i], id, tokens)
		}
		if err != nil {
			return fmt.Errorf("keystore: %s: finishing: %w", id, err)
		}
	}
	return c.settleBudgets(b, now, id, pol, apol)
}

// settleBudgets replaces a's reserved cost by c.cost in the budgets of
// id's policy pol, as settleFor does for tokens: a budget the reservation
// went to (one of apol's) is adjusted by the difference, one the policy
// gained since is charged the cost now.
func (c *call) settleBudgets(b batch, now int64, id string, pol, apol *policy) error {
	a := c.a
	delta := c.cost - a.cost
	if now >= a.deadline && delta < 0 {
		delta = 0 // past its lease: the reservation stays charged
	}
	for i, bud := range pol.pub.Budgets {
		c.bud, c.now = bud, c.at
		if slices.ContainsFunc(apol.pub.Budgets, bud.sameSpan) {
			c.delta = delta
			if _, err := b.Modify(pol.budgets[i], id, c.settleBudget); err != nil {
				return fmt.Errorf("keystore: %s: finishing: %w", id, err)
			}
			continue
		}
		if c.cost > 0 {
			c.now = now
			if _, err := b.Modify(pol.budgets[i], id, c.reserveBudget); err != nil {
				return fmt.Errorf("keystore: %s: finishing: %w", id, err)
			}
		}
	}
	return nil
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

// reachAdd is moved plus the reach of a change from old to next (see
// adjust).
func reachAdd(moved int64, old, next *policy) int64 { return sat.Add(moved, reach(old, next)) }
