package keystore

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ratestore/ratestore/strategies"
)

// Limits of a Policy.
const (
	MaxWindows       = 16      // token windows of one key
	MaxModels        = 256     // model patterns of one key
	MaxMaxConcurrent = 1 << 20 // the largest MaxConcurrent
)

// Limiter names of the key store's engine states (see the package doc):
// a token window's usage is the state of key id under windowPrefix and
// its Window; the request rate under rateName; the requests in flight
// under inflightName.
const (
	windowPrefix = "keys:w:"
	rateName     = "keys:rpm"
	inflightName = "keys:inflight"
)

// rateWindow is the window of Policy.RequestsPerMinute: a rolling minute
// in one-second buckets.
var rateWindow = Window{Window: time.Minute, Bucket: time.Second}

// policy is a Policy as the Store enforces it: validated, with every
// Bucket filled in, and a limiter for each limit. Keys with equal policies
// share one (see policies), so a key costs a pointer for it.
type policy struct {
	pub     Policy
	enc     string    // appendPolicy's encoding: what records store, and the key that shares policies
	windows []limiter // pub.Windows[i]'s
	rate    limiter   // nil: no request-rate limit
	// inflight holds the requests in flight, a lease each: a SlidingLog of
	// the Store's LeaseTTL, its Limit MaxConcurrent, or MaxMaxConcurrent
	// when there is no cap (the Limit then only bounds the log's size).
	inflight limiter
	budgets  []limiter // pub.Budgets[i]'s
	all      []limiter // every limiter above: what a batch on the key prefetches
	models   []sub     // pub.ModelLimits[i]'s
	endUsers *sub      // pub.EndUsers' limits; nil: none
}

// policies interns the policies of a Store. Policies are few (most keys
// share a handful), so none is ever dropped.
type policies struct {
	mu sync.Mutex
	m  map[string]*policy
}

// knownPolicy returns the Store's policy whose encoding is enc, or nil.
func (s *Store) knownPolicy(enc []byte) *policy {
	s.policies.mu.Lock()
	defer s.policies.mu.Unlock()
	return s.policies.m[string(enc)]
}

// policy validates p, fills in its defaults, and returns the Store's
// policy equal to it. op names the call in errors.
func (s *Store) policy(op string, p Policy) (*policy, error) {
	p, err := normalize(op, p)
	if err != nil {
		return nil, err
	}
	enc := string(appendPolicy(nil, &p))
	if pol := s.knownPolicy([]byte(enc)); pol != nil {
		return pol, nil
	}
	pol := &policy{pub: p, enc: enc, windows: make([]limiter, len(p.Windows))}
	if err := s.compileSubs(op, &p, pol); err != nil { // before the lock: they are policies too
		return nil, err
	}
	s.policies.mu.Lock()
	defer s.policies.mu.Unlock()
	if pol, ok := s.policies.m[enc]; ok {
		return pol, nil
	}
	for i, w := range p.Windows {
		if pol.windows[i], err = s.db.Handle(windowName(w.Window), w.strategy()); err != nil {
			return nil, fmt.Errorf("keystore: %s: Policy.Windows[%d]: %w", op, i, err)
		}
	}
	if p.RequestsPerMinute > 0 {
		w := rateWindow
		w.Limit = p.RequestsPerMinute
		if pol.rate, err = s.db.Handle(rateName, w.strategy()); err != nil {
			return nil, fmt.Errorf("keystore: %s: Policy.RequestsPerMinute: %w", op, err)
		}
	}
	lease := s.lease
	if lease.Limit = int64(p.MaxConcurrent); lease.Limit == 0 {
		lease.Limit = MaxMaxConcurrent
	}
	if pol.inflight, err = s.db.Handle(inflightName, lease); err != nil {
		return nil, fmt.Errorf("keystore: %s: Policy.MaxConcurrent: %w", op, err)
	}
	for i, b := range p.Budgets {
		l, err := s.db.Handle(b.name(), b.strategy())
		if err != nil {
			return nil, fmt.Errorf("keystore: %s: Policy.Budgets[%d]: %w", op, i, err)
		}
		pol.budgets = append(pol.budgets, l)
	}
	pol.all = append(append(slices.Clip(pol.windows), pol.budgets...), pol.inflight)
	if pol.rate != nil {
		pol.all = append(pol.all, pol.rate)
	}
	if s.policies.m == nil {
		s.policies.m = make(map[string]*policy)
	}
	s.policies.m[enc] = pol
	return pol, nil
}

// normalize validates p and returns a copy of it that owns its slices,
// with every Window's Bucket set.
func normalize(op string, p Policy) (Policy, error) {
	switch {
	case len(p.Windows) > MaxWindows:
		return Policy{}, fieldError(op, "Policy.Windows", "%d token windows, more than %d", len(p.Windows), MaxWindows)
	case p.RequestsPerMinute < 0:
		return Policy{}, fieldError(op, "Policy.RequestsPerMinute", "%d is negative", p.RequestsPerMinute)
	case p.MaxConcurrent < 0 || p.MaxConcurrent > MaxMaxConcurrent:
		return Policy{}, fieldError(op, "Policy.MaxConcurrent", "%d is out of range [0, %d]", p.MaxConcurrent, MaxMaxConcurrent)
	case len(p.Models) > MaxModels:
		return Policy{}, fieldError(op, "Policy.Models", "%d models, more than %d", len(p.Models), MaxModels)
	}
	if err := normalizeWindows(op, &p); err != nil {
		return Policy{}, err
	}
	if p.RequestsPerMinute > 0 {
		w := rateWindow
		w.Limit = p.RequestsPerMinute
		if err := w.strategy().Validate(); err != nil {
			return Policy{}, &FieldError{Op: op, Field: "Policy.RequestsPerMinute", Msg: "out of range", Err: err}
		}
	}
	if err := normalizeBudgets(op, &p); err != nil {
		return Policy{}, err
	}
	if err := normalizeSubs(op, &p); err != nil {
		return Policy{}, err
	}
	if len(p.Models) == 0 {
		p.Models = nil
	} else {
		p.Models = slices.Clone(p.Models)
	}
	for i, m := range p.Models {
		field := fmt.Sprintf("Policy.Models[%d]", i)
		if m == "" {
			return Policy{}, fieldError(op, field, "empty: want a model name or glob (gpt-4o, claude-*)")
		}
		// As stored: see newModels for the patterns an operator sets.
		if why := storedText(m); why != "" {
			return Policy{}, fieldError(op, field, "%s", why)
		}
		if _, err := path.Match(m, ""); err != nil {
			return Policy{}, fieldError(op, field, "%q is not a valid pattern: %v", m, err)
		}
	}
	return p, nil
}

// newText says what is wrong with s, a name or model an operator sets in
// place of old ("" for a new key or team), or returns "": s must pass
// badText unless it is old unchanged. A text stored before badText
// refused what it holds stays readable and usable as it is; it is refused
// when it comes in, not when a change leaves it where it was.
func newText(s, old string) string {
	if s == old {
		return ""
	}
	return badText(s)
}

// newModels checks the model patterns of p, which an operator sets in
// place of old's (the zero Policy for a new key or team), as newText
// checks a name: each must pass badText unless old has it already.
func newModels(op string, p, old *Policy) error {
	for i, m := range p.Models {
		if slices.Contains(old.Models, m) {
			continue
		}
		if why := badText(m); why != "" {
			return fieldError(op, fmt.Sprintf("Policy.Models[%d]", i), "%s", why)
		}
	}
	return newSubModels(op, p, old)
}

// normalizeWindows checks p.Windows and fills in their buckets, in a copy
// p owns; none is nil.
func normalizeWindows(op string, p *Policy) error {
	if len(p.Windows) == 0 {
		p.Windows = nil
		return nil
	}
	p.Windows = slices.Clone(p.Windows)
	for i := range p.Windows {
		w := &p.Windows[i]
		if w.Bucket == 0 && w.Window > 0 {
			w.Bucket = defaultBucket(w.Window)
		}
		field := fmt.Sprintf("Policy.Windows[%d]", i)
		if w.Limit <= 0 {
			return fieldError(op, field+".Limit", "must be positive, got %d", w.Limit)
		}
		if err := w.strategy().Validate(); err != nil {
			return &FieldError{Op: op, Field: field, Msg: "not a valid window", Err: err}
		}
		for j := range i {
			if p.Windows[j].Window == w.Window {
				return fieldError(op, field+".Window", "%v, the length of window %d already: give each length once", w.Window, j)
			}
		}
	}
	return nil
}

// defaultBucket is the Bucket of a Window given without one: a sixtieth
// of it when that divides it (5 hours count in 5-minute buckets, 7 days in
// 2h48m ones), else a sixtieth rounded down to whole hours, minutes,
// seconds, milliseconds or microseconds where it is that long, then down
// to a divisor of window.
func defaultBucket(window time.Duration) time.Duration {
	b := window / 60
	if b <= 0 {
		return window
	}
	if window%b == 0 {
		return b
	}
	unit := time.Duration(1)
	for _, u := range []time.Duration{time.Hour, time.Minute, time.Second, time.Millisecond, time.Microsecond} {
		if b >= u {
			unit = u
			break
		}
	}
	for b = b / unit * unit; b > unit && window%b != 0; b -= unit {
	}
	if window%b != 0 {
		for b = unit; window%b != 0; b-- {
		}
	}
	return b
}

// strategy is w's rolling window.
func (w Window) strategy() strategies.RollingWindow {
	return strategies.RollingWindow{Limit: w.Limit, Window: w.Window, Bucket: w.Bucket}
}

// windowName is the limiter name of the token windows of length window:
// windowPrefix and the duration as time.Duration writes it, with "u" for
// "µ" (limiter names are ASCII).
func windowName(window time.Duration) string {
	return windowPrefix + strings.ReplaceAll(window.String(), "µ", "u")
}

// clone returns p with slices of its own: what Update's fn may change in
// place without changing the policy, which keys share.
func (p *Policy) clone() Policy {
	c := *p
	c.Windows, c.Models, c.Budgets = slices.Clone(p.Windows), slices.Clone(p.Models), slices.Clone(p.Budgets)
	c.ModelLimits = slices.Clone(p.ModelLimits)
	for i, m := range c.ModelLimits {
		c.ModelLimits[i].Models, c.ModelLimits[i].Windows, c.ModelLimits[i].Budgets = slices.Clone(m.Models), slices.Clone(m.Windows), slices.Clone(m.Budgets)
	}
	u := &c.EndUsers
	u.Windows, u.Budgets = slices.Clone(u.Windows), slices.Clone(u.Budgets)
	return c
}

// tokenLimit is the limit of p's first token window, Key.TokenLimit: 0
// when p has none.
func (p *Policy) tokenLimit() int64 {
	if len(p.Windows) == 0 {
		return 0
	}
	return p.Windows[0].Limit
}

// allows reports whether p lets a key ask for model. A request that names
// no model is not refused by this check: there is nothing to check.
func (p *Policy) allows(model string) bool {
	if len(p.Models) == 0 || model == "" {
		return true
	}
	for _, m := range p.Models {
		if ok, _ := path.Match(m, model); ok {
			return true
		}
	}
	return false
}

// unlimited is the answer of a policy without token windows to any
// number of tokens: allowed, with no Limit (0, as Key.TokenLimit says
// there is none), nothing Remaining to count down and nothing to wait for.
var unlimited = strategies.Result{Allowed: true}

// peek asks every token window of key id whether n more tokens fit,
// changing nothing, and returns the binding answer (see bind) and the
// index of the binding window: unlimited and -1 when pol has none.
func (pol *policy) peek(rd reader, id string, n int64) (strategies.Result, int, error) {
	res, binding := unlimited, -1
	for i, l := range pol.windows {
		r, err := rd.PeekN(l, id, n)
		if err != nil {
			return strategies.Result{}, -1, fmt.Errorf("keystore: key %s: %w", id, err)
		}
		if fold(i, r, &res) {
			binding = i
		}
	}
	return res, binding, nil
}

// fold merges r, the answer of window i to a call, into *res, the
// answer of windows 0 to i-1 (see bind), and reports whether r binds.
func fold(i int, r strategies.Result, res *strategies.Result) bool {
	switch {
	case i == 0:
		*res = r
		return true
	case binds(r, *res):
		*res = bind(r, *res)
		return true
	}
	*res = bind(*res, r)
	return false
}

// binds reports whether r, one window's answer, is more binding than
// res: denied where res is allowed; among denials, the one that can never
// allow the call (RetryAfter -1), else the longer wait; among allowed
// answers, the one with less Remaining.
func binds(r, res strategies.Result) bool {
	switch {
	case r.Allowed != res.Allowed:
		return !r.Allowed
	case r.Allowed:
		return r.Remaining < res.Remaining
	case r.RetryAfter < 0 || res.RetryAfter < 0:
		return r.RetryAfter < 0 && res.RetryAfter >= 0
	}
	return r.RetryAfter > res.RetryAfter
}

// bind merges two windows' answers to one call, a the binding one: as
// for a Composite, Allowed only if both allow, the binding window's Limit
// and Remaining, the largest ResetAfter, and RetryAfter the largest, or -1
// when either can never allow the call.
func bind(a, b strategies.Result) strategies.Result {
	r := a
	r.Allowed = a.Allowed && b.Allowed
	r.ResetAfter = max(a.ResetAfter, b.ResetAfter)
	if a.RetryAfter < 0 || b.RetryAfter < 0 {
		r.RetryAfter = -1
	} else {
		r.RetryAfter = max(a.RetryAfter, b.RetryAfter)
	}
	return r
}

// reset forgets the usage of key id in every limit of pol, in b.
func (pol *policy) reset(b batch, id string) error {
	for _, l := range pol.windows {
		if err := b.Reset(l, id); err != nil {
			return err
		}
	}
	if pol.rate != nil {
		if err := b.Reset(pol.rate, id); err != nil {
			return err
		}
	}
	for _, l := range pol.budgets {
		if err := b.Reset(l, id); err != nil {
			return err
		}
	}
	return b.Reset(pol.inflight, id)
}
