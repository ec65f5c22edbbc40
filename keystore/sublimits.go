package keystore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/ratestore/ratestore/internal/text"
)

// ModelLimit is a limit of a Policy on the requests for some models only:
// "100k tokens a day on gpt-4o". Its windows, budgets, request rate and
// concurrency cap count those requests alone, and apply to them in the
// same decision as the policy's own limits. Every entry of a policy whose
// Models match a request applies to it.
type ModelLimit struct {
	Models            []string // path.Match globs ("gpt-4o*"): the requests it counts; at least one
	Windows           []Window
	Budgets           []Budget
	RequestsPerMinute int64
	MaxConcurrent     int
}

// EndUsers is a policy's limit on each end user of its key (or of its
// team's keys together), separately: the key's own customers, whom a
// request names (Request.EndUser). Its limits are those of a Policy
// without models. A request that names no end user is the key's own
// traffic, and is refused when Required.
type EndUsers struct {
	Windows           []Window
	Budgets           []Budget
	RequestsPerMinute int64
	MaxConcurrent     int
	Required          bool // a request must name its end user (ErrNoEndUser)
}

// Limits of the sub-limits of a Policy.
const (
	MaxModelLimits = 64  // entries of Policy.ModelLimits
	MaxEndUser     = 256 // the longest end user name, in bytes
)

// ErrNoEndUser is matched by the Denial of a request that names no end
// user to a key whose policy (or whose team's) requires one.
var ErrNoEndUser = errors.New("the request names no end user, and its key's policy requires one")

// IsZero reports whether u limits nothing and requires nothing: a policy
// without end-user limits.
func (u *EndUsers) IsZero() bool {
	return !u.limits() && !u.Required
}

// limits reports whether u has a limit (it may only be Required).
func (u *EndUsers) limits() bool {
	return len(u.Windows) > 0 || len(u.Budgets) > 0 || u.RequestsPerMinute != 0 || u.MaxConcurrent != 0
}

// Policy is the limits u holds for each end user, as a Policy without
// models.
func (u *EndUsers) Policy() Policy {
	return Policy{Windows: u.Windows, Budgets: u.Budgets, RequestsPerMinute: u.RequestsPerMinute, MaxConcurrent: u.MaxConcurrent}
}

// Policy is the limits m holds for its models' requests, as a Policy
// without models.
func (m *ModelLimit) Policy() Policy {
	return Policy{Windows: m.Windows, Budgets: m.Budgets, RequestsPerMinute: m.RequestsPerMinute, MaxConcurrent: m.MaxConcurrent}
}

// matches reports whether m counts a request for model. A request that
// names no model matches no model limit.
func (m *ModelLimit) matches(model string) bool {
	if model == "" {
		return false
	}
	for _, g := range m.Models {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

// sub is a sub-limit of a key's or team's policy as the Store enforces it:
// a model limit, or the end-user limit.
type sub struct {
	models string  // the model limit's globs joined by ","; "" for the end-user limit
	pol    *policy // its limits, interned like any policy
}

// normalizeSubs validates p's ModelLimits and EndUsers, in copies p owns,
// naming the field of an error from the Policy down.
func normalizeSubs(op string, p *Policy) error {
	if len(p.ModelLimits) > MaxModelLimits {
		return fieldError(op, "Policy.ModelLimits", "%d entries, more than %d", len(p.ModelLimits), MaxModelLimits)
	}
	if len(p.ModelLimits) == 0 {
		p.ModelLimits = nil
	} else {
		p.ModelLimits = slices.Clone(p.ModelLimits)
	}
	for i := range p.ModelLimits {
		if err := normalizeModelLimit(op, fmt.Sprintf("Policy.ModelLimits[%d]", i), &p.ModelLimits[i]); err != nil {
			return err
		}
	}
	if p.EndUsers.IsZero() {
		p.EndUsers = EndUsers{}
		return nil
	}
	u := &p.EndUsers
	sp, err := normalizeSub(op, "Policy.EndUsers", u.Policy())
	if err != nil {
		return err
	}
	u.Windows, u.Budgets = sp.Windows, sp.Budgets
	return nil
}

// normalizeModelLimit validates m, the entry of a policy at field.
func normalizeModelLimit(op, field string, m *ModelLimit) error {
	if len(m.Models) == 0 {
		return fieldError(op, field+".Models", "empty: want the model globs the limit counts (gpt-4o*)")
	}
	if len(m.Models) > MaxModels {
		return fieldError(op, field+".Models", "%d models, more than %d", len(m.Models), MaxModels)
	}
	m.Models = slices.Clone(m.Models)
	for j, g := range m.Models {
		f := fmt.Sprintf("%s.Models[%d]", field, j)
		if g == "" {
			return fieldError(op, f, "empty: want a model name or glob (gpt-4o, claude-*)")
		}
		if why := storedText(g); why != "" || strings.Contains(g, ",") {
			if why == "" {
				why = "holds a comma"
			}
			return fieldError(op, f, "%s", why)
		}
		if _, err := path.Match(g, ""); err != nil {
			return fieldError(op, f, "%q is not a valid pattern: %v", g, err)
		}
	}
	sp, err := normalizeSub(op, field, m.Policy())
	if err != nil {
		return err
	}
	if len(sp.Windows) == 0 && len(sp.Budgets) == 0 && sp.RequestsPerMinute == 0 && sp.MaxConcurrent == 0 {
		return fieldError(op, field, "limits nothing: give it a window, a budget, requests_per_minute or max_concurrent")
	}
	m.Windows, m.Budgets = sp.Windows, sp.Budgets
	return nil
}

// normalizeSub normalizes the limits p of a sub-limit at field, naming
// its fields from there ("Policy.EndUsers.Windows[0].Limit").
func normalizeSub(op, field string, p Policy) (Policy, error) {
	p, err := normalize(op, p)
	var fe *FieldError
	if errors.As(err, &fe) {
		c := *fe
		c.Field = field + strings.TrimPrefix(fe.Field, "Policy")
		return Policy{}, &c
	}
	return p, err
}

// newSubModels checks the model globs of p's model limits, which an
// operator sets in place of old's, as newModels checks a policy's.
func newSubModels(op string, p, old *Policy) error {
	for i, m := range p.ModelLimits {
		for j, g := range m.Models {
			if slices.ContainsFunc(old.ModelLimits, func(o ModelLimit) bool { return slices.Contains(o.Models, g) }) {
				continue
			}
			if why := badText(g); why != "" {
				return fieldError(op, fmt.Sprintf("Policy.ModelLimits[%d].Models[%d]", i, j), "%s", why)
			}
		}
	}
	return nil
}

// compileSubs makes the Store's policies of p's sub-limits into pol.
func (s *Store) compileSubs(op string, p *Policy, pol *policy) error {
	for i := range p.ModelLimits {
		m := &p.ModelLimits[i]
		sp, err := s.policy(op, m.Policy())
		if err != nil {
			return fmt.Errorf("keystore: %s: Policy.ModelLimits[%d]: %w", op, i, err)
		}
		pol.models = append(pol.models, sub{models: strings.Join(m.Models, ","), pol: sp})
	}
	if p.EndUsers.limits() {
		sp, err := s.policy(op, p.EndUsers.Policy())
		if err != nil {
			return fmt.Errorf("keystore: %s: Policy.EndUsers: %w", op, err)
		}
		pol.endUsers = &sub{pol: sp}
	}
	return nil
}

// checkEndUser says what is wrong with name as Request.EndUser, or
// returns "".
func checkEndUser(name string) string {
	return text.Problem(name, MaxEndUser)
}

// modelPrefix and endUserPrefix make the state ids of sub-limits: a
// key's (or team's) id, then "/m:" and the model limit's globs, or "/u:"
// and the end user's name. Key and team ids hold no "/", so these never
// meet a key's, a team's or a quota's ("q/...") states.
const (
	modelPrefix   = "/m:"
	endUserPrefix = "/u:"
)

// endUserID is the state id of end user name of owner, a key or a team.
func endUserID(owner, name string) string { return owner + endUserPrefix + name }

// appendSubs appends p's sub-limits to a policy's encoding: nothing for a
// policy without them, so that the encodings of policies stored before
// they existed stay what they were.
func appendSubs(dst []byte, p *Policy) []byte {
	if len(p.ModelLimits) == 0 && p.EndUsers.IsZero() {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(p.ModelLimits)))
	for i := range p.ModelLimits {
		mp := p.ModelLimits[i].Policy()
		mp.Models = p.ModelLimits[i].Models
		dst = appendPolicy(dst, &mp)
	}
	u := &p.EndUsers
	required := byte(0)
	if u.Required {
		required = 1
	}
	dst = append(dst, required)
	up := u.Policy()
	return appendPolicy(dst, &up)
}

// subs reads what appendSubs wrote, if anything is left to read.
func (d *decoder) subs(p *Policy) {
	if d.err != nil || len(d.b) == 0 {
		return
	}
	n := d.int("model limit count", 0)
	if d.err == nil && n > MaxModelLimits {
		d.fail("model limit count", fmt.Sprintf("%d is over %d", n, MaxModelLimits))
	}
	for i := int64(0); i < n && d.err == nil; i++ {
		sp := d.policy(true)
		if d.err == nil && len(sp.Models) == 0 {
			d.fail("model limit", "has no models")
		}
		p.ModelLimits = append(p.ModelLimits, ModelLimit{Models: sp.Models, Windows: sp.Windows, Budgets: sp.Budgets,
			RequestsPerMinute: sp.RequestsPerMinute, MaxConcurrent: sp.MaxConcurrent})
	}
	required := d.byte("end users required")
	sp := d.policy(true)
	p.EndUsers = EndUsers{Windows: sp.Windows, Budgets: sp.Budgets, RequestsPerMinute: sp.RequestsPerMinute,
		MaxConcurrent: sp.MaxConcurrent, Required: required == 1}
}

// held is a sub-limit an admission holds: its state id and its policy.
type held struct {
	id     string
	owner  string // the key's id, or its team's
	team   bool   // owner is the team
	models string // as sub.models
	pol    *policy
}

// subsFor appends to dst the sub-limits of pol, owner's policy, that req
// must pass: the model limits its model matches, and its end user's.
func subsFor(dst []held, owner string, team bool, pol *policy, req *Request) []held {
	for i := range pol.models {
		if pol.pub.ModelLimits[i].matches(req.Model) {
			m := &pol.models[i]
			dst = append(dst, held{id: owner + modelPrefix + m.models, owner: owner, team: team, models: m.models, pol: m.pol})
		}
	}
	if pol.endUsers != nil && req.EndUser != "" {
		dst = append(dst, held{id: endUserID(owner, req.EndUser), owner: owner, team: team, pol: pol.endUsers.pol})
	}
	return dst
}

// prefetchSubs gathers the states of the sub-limits c's request will
// check into the batch's next read, on a shared store, as far as the
// policies held in memory tell (the team's as prefetchTeam sees it).
func (c *call) prefetchSubs(b batch) error {
	if !c.s.shared {
		return nil
	}
	e := c.e
	c.subs = subsFor(c.subs[:0], e.id, false, e.rec.pol, &c.req)
	if id := e.rec.team; id != "" {
		c.s.mu.RLock()
		t := c.s.teams[id]
		c.s.mu.RUnlock()
		if t != nil {
			t.mu.Lock()
			pol := t.pol
			t.mu.Unlock()
			c.subs = subsFor(c.subs, id, true, pol, &c.req)
		}
	}
	for _, h := range c.subs {
		if err := b.Prefetch(nil, h.id, h.pol.all...); err != nil {
			return fmt.Errorf("keystore: %s: %w", h.id, err)
		}
	}
	return nil
}

// prefetchSubs gathers the states of the sub-limits a holds into the
// batch's next read, on a shared store.
func (a *Admission) prefetchSubs(b batch) error {
	if !a.s.shared {
		return nil
	}
	for _, h := range a.subs {
		// What finishSubs changes, no more: a limiter never written (the
		// request rate's, a slot log of a limit without a cap) has no
		// value this process holds, and would cost a read.
		ls := append(slices.Clip(h.pol.windows), h.pol.budgets...)
		if h.pol.pub.MaxConcurrent > 0 {
			ls = append(ls, h.pol.inflight)
		}
		if err := b.Prefetch(nil, h.id, ls...); err != nil {
			return fmt.Errorf("keystore: %s: %w", h.id, err)
		}
	}
	return nil
}

// subChecks checks the sub-limits of c's request under its key's policy
// and its team t's (nil: none), into c.subs, and returns lim tightened by
// what they leave. A request that names no end user where a policy
// requires one is refused first.
func (c *call) subChecks(b batch, t *team, lim Limits) (Limits, error) {
	e, req := c.e, &c.req
	if req.EndUser == "" {
		if e.rec.pol.pub.EndUsers.Required {
			return Limits{}, &Denial{Reason: "end_user", RetryAfter: -1, key: e.id, err: ErrNoEndUser}
		}
		if t != nil && t.pol.pub.EndUsers.Required {
			return Limits{}, &Denial{Reason: "end_user", RetryAfter: -1, Team: t.id, key: e.id, err: ErrNoEndUser}
		}
	}
	c.subs = subsFor(c.subs[:0], e.id, false, e.rec.pol, req)
	if t != nil {
		c.subs = subsFor(c.subs, t.id, true, t.pol, req)
	}
	for _, h := range c.subs {
		sl, err := checks(c.ctx, b, h.id, "", h.pol, *req)
		if d, ok := err.(*Denial); ok {
			d.key = e.id
			if h.team {
				d.Team = h.owner
			}
			if h.models != "" {
				d.Models = strings.Split(h.models, ",")
			} else {
				d.EndUser = req.EndUser
			}
		}
		if err != nil {
			return Limits{}, err
		}
		lim = lim.tighter(sl)
	}
	return lim, nil
}

// takeSubs takes what subChecks allowed in c.subs for the admission a:
// the request rate, its reservation, and a slot where a sub-limit caps the
// requests in flight (one that does not has no slot to free: an end user
// is then one state per window, not one more for its leases).
func (c *call) takeSubs(b batch, a *Admission, now int64) error {
	if len(c.subs) == 0 {
		return nil
	}
	for _, h := range c.subs {
		if err := takeRate(b, h.id, h.pol); err != nil {
			return err
		}
		if err := c.reserveFor(b, h.id, h.pol, now, a.reserve); err != nil {
			return err
		}
		if h.pol.pub.MaxConcurrent > 0 {
			if err := takeSlot(b, h.id, h.pol); err != nil {
				return err
			}
		}
	}
	a.subs = slices.Clone(c.subs)
	return nil
}

// finishSubs settles c's admission in its sub-limits of the key (team
// false) or of its team, as finishQuotas does in its quotas, at the
// admission's instant. The caller holds the key's or the team's lock.
func (c *call) finishSubs(b batch, now int64, team bool) error {
	a := c.a
	c.at, c.moved = a.at, 0
	for _, h := range a.subs {
		if h.team != team {
			continue
		}
		if err := c.settleFor(b, now, h.id, h.pol, h.pol); err != nil {
			return err
		}
		if h.pol.pub.MaxConcurrent == 0 {
			continue
		}
		if _, err := b.Modify(h.pol.inflight, h.id, c.release); err != nil {
			return fmt.Errorf("keystore: %s: freeing the slot: %w", h.id, err)
		}
	}
	return nil
}

// EndUserUsage reports the usage of end user name of key id as Usage
// reports a key's (its requests in flight counted where the end users'
// limits cap them, as ModelUsage counts them): under the key's Policy.EndUsers, or, when the key has
// no end-user limits, under its team's. A key (and team) without them
// reports a Usage with no window (Binding -1). It reads states only: an
// end user never seen has an empty usage, and is not an error.
func (s *Store) EndUserUsage(ctx context.Context, id, name string) (Usage, error) {
	if why := checkEndUser(name); why != "" {
		return Usage{}, fieldError("end user usage", "end user", "%s", why)
	}
	e, err := s.settled(ctx, id)
	if err != nil {
		return Usage{}, err
	}
	e.mu.Lock()
	pol, teamID := e.rec.pol, e.rec.team
	e.mu.Unlock()
	owner, sp := id, pol.endUsers
	if sp == nil && teamID != "" {
		t, err := s.findTeam(ctx, teamID)
		if err != nil && !isNotFound(err) {
			return Usage{}, err
		}
		if t != nil {
			t.mu.Lock()
			owner, sp = t.id, t.pol.endUsers
			t.mu.Unlock()
		}
	}
	if sp == nil {
		return Usage{Binding: -1}, nil
	}
	c := s.newCall(ctx, nil)
	defer c.free()
	err = s.usageFor(c, &c.direct, endUserID(owner, name), sp.pol)
	return c.u, err
}

// ModelUsage reports the usage of each of key id's model limits
// (Policy.ModelLimits, in their order) as Usage reports a key's: their
// windows, budgets and requests in flight (counted where the limit caps
// them: one without MaxConcurrent takes no slot). A key without model
// limits reports none.
func (s *Store) ModelUsage(ctx context.Context, id string) ([]Usage, error) {
	e, err := s.settled(ctx, id)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	pol := e.rec.pol
	e.mu.Unlock()
	if len(pol.models) == 0 {
		return nil, nil
	}
	c := s.newCall(ctx, nil)
	defer c.free()
	us := make([]Usage, len(pol.models))
	for i, m := range pol.models {
		if err := s.usageFor(c, &c.direct, id+modelPrefix+m.models, m.pol); err != nil {
			return nil, err
		}
		us[i] = c.u
	}
	return us, nil
}
