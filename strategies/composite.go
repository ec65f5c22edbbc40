package strategies

import (
	"bytes"
	"fmt"
)

// Composite applies two strategies to the same key, and a call must pass
// both: "10 per second as a token bucket, and 10000 per day in a fixed
// window". The two states are one State, stored and taken as one.
//
// AllowN takes from both parts only if both allow, so a denial changes
// neither; Record takes from both. The Result is that of the binding part,
// as described at merge; when the call is denied, the part that would
// have allowed it reports its state as it is, with nothing taken.
//
// The parts may be any strategies of this package but Composite: they do
// not nest, which keeps the encoding one level deep. A changed
// configuration of a part is reconciled by that part, as for the part
// alone; a part replaced by another kind of strategy makes the stored state
// a mismatch.
type Composite struct{ Primary, Secondary Strategy }

// compositeState holds the states of the two parts.
type compositeState struct{ primary, secondary State }

// Validate implements Strategy.
func (cs Composite) Validate() error {
	for _, p := range [...]struct {
		name string
		s    Strategy
	}{{"primary", cs.Primary}, {"secondary", cs.Secondary}} {
		switch Unprepare(p.s).(type) {
		case nil:
			return invalid(kindComposite, "%s must not be nil", p.name)
		case Composite, *Composite:
			return invalid(kindComposite, "%s must not be a Composite: composites do not nest", p.name)
		}
		if err := p.s.Validate(); err != nil {
			return fmt.Errorf("strategies: composite: %s: %w", p.name, err)
		}
	}
	return nil
}

// NewState implements Strategy: both parts fresh.
func (cs Composite) NewState() State {
	return &compositeState{cs.Primary.NewState(), cs.Secondary.NewState()}
}

// Decode implements Strategy. It reads "51|<primary>$<secondary>" and the
// legacy "cmp1|<primary>$<secondary>", each part in any encoding its
// strategy reads.
func (cs Composite) Decode(b []byte) (State, error) {
	if cs.Primary == nil || cs.Secondary == nil {
		return nil, cs.Validate()
	}
	f, r, err := openState(b, kindComposite)
	if err != nil {
		return nil, err
	}
	if f != formatCurrent && f != formatCmp1 {
		return nil, corrupt(kindComposite, "unknown header %s", quote(b[:2]))
	}
	body := r.all("parts")
	if err := r.done(); err != nil {
		return nil, err
	}
	i := bytes.IndexByte(body, '$')
	if i < 0 || bytes.IndexByte(body[i+1:], '$') >= 0 {
		return nil, corrupt(kindComposite, "want exactly one '$' between the two parts, got %s", quote(body))
	}
	s := &compositeState{}
	if s.primary, err = cs.Primary.Decode(body[:i]); err != nil {
		return nil, fmt.Errorf("strategies: composite: primary: %w", err)
	}
	if s.secondary, err = cs.Secondary.Decode(body[i+1:]); err != nil {
		return nil, fmt.Errorf("strategies: composite: secondary: %w", err)
	}
	return s, nil
}

// Apply implements Strategy.
func (cs Composite) Apply(st State, c Call) (res Result, err error) {
	p := cs.plan()
	err = p.decide(st, c, &res)
	return res, err
}

// compositePlan is what a Composite decides with: its parts, and whether
// take may make the calls that take something, which Prepare finds once
// (the prepared form is the plan of the prepared parts).
type compositePlan struct {
	Composite
	takes bool // both parts are ownPart
}

// plan returns the plan of cs.
func (cs Composite) plan() compositePlan {
	return compositePlan{cs, ownPart(cs.Primary) && ownPart(cs.Secondary)}
}

// decidePart is s.Apply for a part, writing the Result to *res. A part
// that Prepare made is called by its decide, which spares the Result a
// copy (see decide in prepare.go); the type assertion, unlike a call
// through an interface, also lets res stay on the caller's stack.
func decidePart(s Strategy, st State, c Call, res *Result) error {
	if p, ok := s.(*prepared); ok {
		return p.decide(st, c, res)
	}
	r, err := s.Apply(st, c)
	*res = r
	return err
}

// decide is Apply, writing the Result to *res. A call that takes
// something is made by take, which takes it from one part and then the
// other; one that takes nothing, and any call that take cannot make, by
// ask, which asks both parts before taking from either.
func (p *compositePlan) decide(st State, c Call, res *Result) error {
	s, ok := st.(*compositeState)
	if !ok {
		return wrongState(kindComposite, st)
	}
	if p.Primary == nil || p.Secondary == nil {
		return p.Validate()
	}
	if c.N > 0 && !c.DryRun && p.takes && p.take(s, c, res) {
		return nil
	}
	return p.ask(s, c, res)
}

// ask decides c by asking both parts with a DryRun first, which also
// finds a part that fails (a mismatched state) before either has taken
// anything, and taking from both only if both allow, or for a Record:
// four decisions for an allowed call.
func (cs *Composite) ask(s *compositeState, c Call, res *Result) error {
	dry := c
	dry.DryRun = true
	var rp, rs Result
	if err := decidePart(cs.Primary, s.primary, dry, &rp); err != nil {
		return fmt.Errorf("strategies: composite: primary: %w", err)
	}
	if err := decidePart(cs.Secondary, s.secondary, dry, &rs); err != nil {
		return fmt.Errorf("strategies: composite: secondary: %w", err)
	}
	switch {
	case c.Record || rp.Allowed && rs.Allowed:
		if c.N > 0 && !c.DryRun {
			// The same calls on the same states: they cannot fail now.
			decidePart(cs.Primary, s.primary, c, &rp)
			decidePart(cs.Secondary, s.secondary, c, &rs)
		}
	case c.N > 0:
		// Denied: the part that would have allowed takes nothing, and
		// reports its state as it is.
		peek := Call{Now: c.Now, DryRun: true}
		if rp.Allowed {
			decidePart(cs.Primary, s.primary, peek, &rp)
		}
		if rs.Allowed {
			decidePart(cs.Secondary, s.secondary, peek, &rs)
		}
	}
	merge(res, &rp, &rs)
	return nil
}

// take decides c, which takes something (c.N > 0, no DryRun), as ask
// would, with about one decision per part instead of two: it takes c from
// one part, a, then from the other, b, and undoes a's take when b denies
// the call. It reports false, having changed nothing, when it cannot
// decide c so: when neither part's state is one that undo can put back,
// and when a part fails, which ask then reports as it always does. Both
// parts must be ownPart.
//
// Every Result is the one ask would report: a's and b's takes answer as
// ask's DryRuns and takes do, and after an undone take a reports its
// state as it is, by a peek, as the part that would have allowed.
func (cs *Composite) take(s *compositeState, c Call, res *Result) bool {
	// a is the primary unless only the secondary's take can be undone.
	a, sa, b, sb, swapped := cs.Primary, s.primary, cs.Secondary, s.secondary, false
	var u undo
	if !u.save(sa) {
		a, sa, b, sb, swapped = b, sb, a, sa, true
		if !u.save(sa) {
			return false
		}
	}
	var ra, rb Result
	if decidePart(a, sa, c, &ra) != nil {
		return false // nothing taken
	}
	switch {
	case !c.Taken(ra.Allowed):
		// a denies: b takes nothing either, and reports as in ask.
		dry := c
		dry.DryRun = true
		if decidePart(b, sb, dry, &rb) != nil {
			return false
		}
		if rb.Allowed {
			decidePart(b, sb, Call{Now: c.Now, DryRun: true}, &rb)
		}
	case decidePart(b, sb, c, &rb) != nil:
		u.restore(sa)
		return false
	case !c.Taken(rb.Allowed):
		u.restore(sa)
		decidePart(a, sa, Call{Now: c.Now, DryRun: true}, &ra)
	}
	if swapped {
		merge(res, &rb, &ra)
	} else {
		merge(res, &ra, &rb)
	}
	return true
}

// ownPart reports whether s, a part of a Composite, is a strategy of this
// package, prepared or not, other than a Composite: one that take may
// call, since it answers a call exactly as its DryRun, and changes nothing
// when it denies a call or fails. A FixedWindow without quotas, which is
// not a valid configuration, is not one: it takes every call, yet reports
// it denied.
func ownPart(s Strategy) bool {
	switch v := s.(type) {
	case *prepared:
		return v.kind != kindComposite && (v.kind != kindFixedWindow || len(v.fixed.Quotas) > 0)
	case FixedWindow:
		return len(v.Quotas) > 0
	case TokenBucket, LeakyBucket, GCRA, SlidingWindow, RollingWindow:
		return true
	}
	return false
}

// undo is what a call may change in the state of a part, saved before the
// part takes the call so that Composite.take can put it back: the state of
// a bucket, a GCRA or a sliding window, or of a fixed window of up to two
// quotas, whose take changes a few numbers in place. A rolling window's
// ring, which a take moves and rewrites, is not saved.
type undo struct {
	bucket  bucketState
	tat     int64
	sliding slidingWindowState
	fixed   fixedWindowState // its slice and layout, which conform replaces
	windows [2]window        // and what a take changes in place
}

// save saves st, reporting whether it is a state undo can restore.
func (u *undo) save(st State) bool {
	switch s := st.(type) {
	case *tokenBucketState:
		u.bucket = s.bucketState
	case *leakyBucketState:
		u.bucket = s.bucketState
	case *gcraState:
		u.tat = s.tat
	case *slidingWindowState:
		u.sliding = *s
	case *fixedWindowState:
		if len(s.quotas) > len(u.windows) {
			return false
		}
		u.fixed = *s
		for i, w := range s.quotas {
			u.windows[i] = w.window
		}
	default:
		return false
	}
	return true
}

// restore puts st back as save found it.
func (u *undo) restore(st State) {
	switch s := st.(type) {
	case *tokenBucketState:
		s.bucketState = u.bucket
	case *leakyBucketState:
		s.bucketState = u.bucket
	case *gcraState:
		s.tat = u.tat
	case *slidingWindowState:
		*s = u.sliding
	case *fixedWindowState:
		*s = u.fixed
		for i := range s.quotas {
			s.quotas[i].window = u.windows[i]
		}
	}
}

// AppendEncode implements State: "51|<primary>$<secondary>".
func (s *compositeState) AppendEncode(dst []byte) []byte {
	dst = append(kindComposite.appendHeader(dst), '|')
	dst = s.primary.AppendEncode(dst)
	return s.secondary.AppendEncode(append(dst, '$'))
}
