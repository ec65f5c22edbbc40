package strategies

import (
	"bytes"
	"fmt"
	"time"
)

// Composite applies two strategies to the same key, and a call must pass
// both: "10 per second as a token bucket, and 10000 per day in a fixed
// window". The two states are one State, stored and taken as one.
//
// AllowN takes from both parts only if both allow, so a denial changes
// neither; Record takes from both. The Result is that of the binding part,
// as described at Result.and; when the call is denied, the part that would
// have allowed it reports its state as it is, with nothing taken.
//
// The parts may be any strategies but Composite: they do not nest, which
// keeps the encoding one level deep. A changed configuration of a part is
// reconciled by that part, as for the part alone; a part replaced by
// another kind of strategy makes the stored state a mismatch.
type Composite struct{ Primary, Secondary Strategy }

// kindComposite names composite states: "51|<primary>$<secondary>".
var kindComposite = newKind('5', '1', "composite", func() Decider {
	return &compositeDecider{p: byHeader{part: true}, s: byHeader{part: true}}
})

// Validate implements Strategy.
func (cs Composite) Validate() error {
	for _, p := range [...]struct {
		name string
		s    Strategy
	}{{"primary", cs.Primary}, {"secondary", cs.Secondary}} {
		switch p.s.(type) {
		case nil:
			return invalid(kindComposite, "%s must not be nil", p.name)
		case Composite, *Composite:
			return invalid(kindComposite, "%s must not be a Composite: composites do not nest", p.name)
		}
		if err := p.s.Validate(); err != nil {
			return partError(p.name, err)
		}
	}
	return nil
}

// Prepare implements Strategy: the Deciders of its parts.
func (cs Composite) Prepare() Decider {
	if err := cs.Validate(); err != nil {
		return refused{err}
	}
	d := &compositeDecider{p: cs.Primary.Prepare(), s: cs.Secondary.Prepare()}
	_, a := d.p.NewState().(kinded)
	_, b := d.s.NewState().(kinded)
	d.takes = a && b
	return d
}

// compositeDecider is a prepared Composite.
type compositeDecider struct {
	p, s Decider // the primary's and the secondary's
	// takes tells that both parts are of this package, which decide a call
	// exactly as its DryRun would, and change nothing when they deny it or
	// fail: what take needs.
	takes bool
}

// compositeState is the state of a Composite: the states of its parts.
type compositeState struct{ p, s State }

// NewState implements Decider: both parts fresh.
func (d *compositeDecider) NewState() State {
	return &compositeState{d.p.NewState(), d.s.NewState()}
}

// Decode implements Decider. It reads "51|<primary>$<secondary>" and the
// legacy "cmp1|<primary>$<secondary>", each part in any encoding its
// strategy reads.
func (d *compositeDecider) Decode(b []byte) (State, error) {
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
	sp, err := d.p.Decode(body[:i])
	if err != nil {
		return nil, partError("primary", err)
	}
	ss, err := d.s.Decode(body[i+1:])
	if err != nil {
		return nil, partError("secondary", err)
	}
	return &compositeState{sp, ss}, nil
}

// partError is the error of the part named part ("primary" or
// "secondary"), as the Composite's.
func partError(part string, err error) error {
	return fmt.Errorf("strategies: composite: %s: %w", part, err)
}

// AppendEncode implements State: "51|<primary>$<secondary>".
func (v *compositeState) AppendEncode(dst []byte) []byte {
	dst = v.p.AppendEncode(append(kindComposite.appendHeader(dst), '|'))
	return v.s.AppendEncode(append(dst, '$'))
}

func (v *compositeState) kind() *kind { return kindComposite }

func (v *compositeState) describe() Description {
	return describeAs(kindComposite, map[string]any{
		"primary": describe(v.p), "secondary": describe(v.s),
	})
}

// Decide implements Decider. A call that takes something is made by take,
// which takes it from one part and then the other; one that takes nothing,
// and any call that take cannot make, by ask, which asks both parts before
// taking from either.
func (d *compositeDecider) Decide(st State, c Call) (res Result, err error) {
	v, ok := st.(*compositeState)
	if !ok {
		return Result{}, wrongState(kindComposite, st)
	}
	if c.N > 0 && !c.DryRun && d.takes && d.take(v.p, v.s, c, &res) {
		return res, nil
	}
	if err := d.ask(v.p, v.s, c, &res); err != nil {
		return Result{}, err // ask may have written a part's Result
	}
	return res, nil
}

// Clamp implements Decider: each part by its own rule.
func (d *compositeDecider) Clamp(st State, now int64) bool {
	v, ok := st.(*compositeState)
	if !ok {
		return false
	}
	a := d.p.Clamp(v.p, now)
	b := d.s.Clamp(v.s, now)
	return a || b
}

// Horizon implements Decider: the longer of the parts'.
func (d *compositeDecider) Horizon() time.Duration { return max(d.p.Horizon(), d.s.Horizon()) }

// ask decides c on the parts' states sp and ss by asking both parts with a
// DryRun first, which also finds a part that fails (a mismatched state)
// before either has taken anything, and taking from both only if both
// allow, or for a Record: four decisions for an allowed call. The
// primary's Result is written to *res, into which the secondary's is then
// merged (see Result.and).
func (d *compositeDecider) ask(sp, ss State, c Call, res *Result) error {
	dry := c
	dry.DryRun = true
	rp, err := d.p.Decide(sp, dry)
	if err != nil {
		return partError("primary", err)
	}
	rs, err := d.s.Decide(ss, dry)
	if err != nil {
		return partError("secondary", err)
	}
	switch {
	case c.Record || rp.Allowed && rs.Allowed:
		if c.N > 0 && !c.DryRun {
			// The same calls on the same states: they cannot fail now.
			rp, _ = d.p.Decide(sp, c)
			rs, _ = d.s.Decide(ss, c)
		}
	case c.N > 0:
		// Denied: the part that would have allowed takes nothing, and
		// reports its state as it is.
		peek := Call{Now: c.Now, DryRun: true}
		if rp.Allowed {
			rp, _ = d.p.Decide(sp, peek)
		}
		if rs.Allowed {
			rs, _ = d.s.Decide(ss, peek)
		}
	}
	*res = rp
	res.and(rs.Allowed, rs.Limit, rs.Remaining, rs.ResetAfter, rs.RetryAfter)
	return nil
}

// take decides c, which takes something (c.N > 0, no DryRun), on the
// parts' states sp and ss, as ask would, with about one decision per part
// instead of two: it takes c from one part, a, then from the other, b,
// and undoes a's take when b denies the call. It reports false, having
// changed nothing but maybe *res, when it cannot decide c so: when neither
// part's state can be saved for an undo, and when a part fails,
// which ask then reports as it always does.
//
// Every Result is the one ask would report: a's and b's takes answer as
// ask's DryRuns and takes do, and after an undone take a reports its
// state as it is, by a peek, as the part that would have allowed. As in
// ask, the primary's Result is written to *res and the secondary's merged
// into it.
func (d *compositeDecider) take(sp, ss State, c Call, res *Result) bool {
	// a is the primary unless only the secondary's take can be undone.
	var ra, rb Result
	a, sa, b, sb, swapped := d.p, sp, d.s, ss, false
	var u undo
	if !u.save(sa) {
		a, sa, b, sb, swapped = b, sb, a, sa, true
		if !u.save(sa) {
			return false
		}
	}
	var err error
	if ra, err = a.Decide(sa, c); err != nil {
		return false // nothing taken
	}
	switch {
	case !c.Taken(ra.Allowed):
		// a denies: b takes nothing either, and reports as in ask.
		dry := c
		dry.DryRun = true
		if rb, err = b.Decide(sb, dry); err != nil {
			return false
		}
		if rb.Allowed {
			rb, _ = b.Decide(sb, Call{Now: c.Now, DryRun: true})
		}
	default:
		if rb, err = b.Decide(sb, c); err != nil {
			u.restore(sa)
			return false
		}
		if !c.Taken(rb.Allowed) {
			u.restore(sa)
			ra, _ = a.Decide(sa, Call{Now: c.Now, DryRun: true})
		}
	}
	if swapped {
		ra, rb = rb, ra
	}
	*res = ra
	res.and(rb.Allowed, rb.Limit, rb.Remaining, rb.ResetAfter, rb.RetryAfter)
	return true
}

// undo is what a call may change in the state of a part, saved before the
// part takes the call so that take can put it back: the state of a
// bucket, a GCRA or a sliding window, or of a fixed window of up to two
// quotas, whose state holds its windows and is copied whole (the names it
// refers to are never changed). A rolling window's ring, which a take
// moves and rewrites, is not saved, nor are the windows of more than two
// quotas, nor a state of another package: take leaves those to ask.
type undo struct {
	bucket  bucketState
	tat     int64
	sliding slidingWindowState
	fixed   fixedWindowState
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
		if s.more != nil {
			return false
		}
		u.fixed = *s
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
	}
}
