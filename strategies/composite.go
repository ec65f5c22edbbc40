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
// as described at Result.and; when the call is denied, the part that would
// have allowed it reports its state as it is, with nothing taken.
//
// The parts may be any strategies of this package but Composite: they do
// not nest, which keeps the encoding one level deep. A changed
// configuration of a part is reconciled by that part, as for the part
// alone; a part replaced by another kind of strategy makes the stored state
// a mismatch.
type Composite struct{ Primary, Secondary Strategy }

// compositeState is the state of a Composite: the states of its two
// parts, in one object (see pair), or apart when one is not of this
// package (see loose).
type compositeState interface {
	State
	// parts returns the states of the primary and of the secondary.
	parts() (primary, secondary State)
}

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
			return partError(p.name, err)
		}
	}
	return nil
}

// NewState implements Strategy: both parts fresh.
func (cs Composite) NewState() State {
	st, _ := join(cs.Primary, cs.Secondary, nil) // a fresh state cannot fail
	return st
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
	return join(cs.Primary, cs.Secondary, &[2][]byte{body[:i], body[i+1:]})
}

// join makes the state of a Composite of parts a and b: fresh, or
// decoded from enc, the encodings of the parts, when it is not nil. The
// strategy of a part tells the type of its state, which joined needs to
// make both in one object: join finds a's, and joinWith b's, when both
// are of this package (ownState); joinLoose makes the others.
func join(a, b Strategy, enc *[2][]byte) (State, error) {
	if !ownState(a) || !ownState(b) {
		return joinLoose(a, b, enc)
	}
	switch v := a.(type) {
	case TokenBucket:
		return joinWith[tokenBucketState](v, b, enc)
	case LeakyBucket:
		return joinWith[leakyBucketState](v, b, enc)
	case GCRA:
		return joinWith[gcraState](v, b, enc)
	case SlidingWindow:
		return joinWith[slidingWindowState](v, b, enc)
	case RollingWindow:
		return joinWith[rollingWindowState](v, b, enc)
	case FixedWindow:
		return joinWith[fixedWindowState](fixedPart{v}, b, enc)
	case *prepared:
		if v.kind == kindFixedWindow {
			return joinWith[fixedWindowState](&v.fixed, b, enc)
		}
		return join(v.Strategy, b, enc) // which makes the same states
	}
	return joinLoose(a, b, enc) // not reached: a is ownState
}

// joinWith is join, given the part a whose state is a P.
func joinWith[P any, PP holder[P], A maker[P]](a A, b Strategy, enc *[2][]byte) (State, error) {
	switch v := b.(type) {
	case TokenBucket:
		return joined[P, tokenBucketState, PP](a, v, enc)
	case LeakyBucket:
		return joined[P, leakyBucketState, PP](a, v, enc)
	case GCRA:
		return joined[P, gcraState, PP](a, v, enc)
	case SlidingWindow:
		return joined[P, slidingWindowState, PP](a, v, enc)
	case RollingWindow:
		return joined[P, rollingWindowState, PP](a, v, enc)
	case FixedWindow:
		return joined[P, fixedWindowState, PP](a, fixedPart{v}, enc)
	case *prepared:
		if v.kind == kindFixedWindow {
			return joined[P, fixedWindowState, PP](a, &v.fixed, enc)
		}
		return joinWith[P, PP](a, v.Strategy, enc)
	}
	return nil, invalid(kindComposite, "secondary: %T has no state of this package", b) // not reached: join checked
}

// joined makes the state of a Composite of parts a and b, whose states
// are in a P and an S, as join says: a pair, one object that holds both,
// which the parts make in place.
func joined[P, S any, PP holder[P], SP holder[S], A maker[P], B maker[S]](a A, b B, enc *[2][]byte) (State, error) {
	v := new(pair[P, S, PP, SP])
	if enc == nil {
		a.newIn(&v.p)
		b.newIn(&v.s)
		return v, nil
	}
	if _, err := a.decodeIn(&v.p, enc[0]); err != nil {
		return nil, partError("primary", err)
	}
	if _, err := b.decodeIn(&v.s, enc[1]); err != nil {
		return nil, partError("secondary", err)
	}
	return v, nil
}

// pair is the state of a Composite whose parts' states are held in a P and
// an S: nothing but the two, one after the other.
//
// A decision reads the state of each part. Held apart, with a third
// object to point to them, those are three places in memory, and for a
// key not used lately each is a cache miss of its own, which waits for
// the one before it: at 10k keys in use, a trip to L3 each. A pair is one
// object, and has no pointers to its parts, which parts makes from its
// address: the usual GCRA or bucket with a fixed window of one or two
// quotas is 56 or 64 bytes, which Go allocates in its 64-byte size class,
// whose objects are 64-byte aligned: one cache line.
type pair[P, S any, PP holder[P], SP holder[S]] struct {
	p P
	s S
}

func (v *pair[P, S, PP, SP]) parts() (State, State) { return PP(&v.p), SP(&v.s) }

func (v *pair[P, S, PP, SP]) splitter() splitter { return split[P, S, PP, SP] }

// split returns the parts of st if it is a pair[P, S, PP, SP]: as its
// parts method would, with one comparison of st's type instead of an
// assertion of st to compositeState, which looks the type up in the
// runtime's cache of interface tables, and a call through that table. A
// prepared Composite finds its split once (see compositePlan).
func split[P, S any, PP holder[P], SP holder[S]](st State) (State, State, bool) {
	if v, ok := st.(*pair[P, S, PP, SP]); ok {
		return PP(&v.p), SP(&v.s), true
	}
	return nil, nil, false
}

// splitter is the split of a type of pair.
type splitter func(State) (primary, secondary State, ok bool)

// AppendEncode implements State: "51|<primary>$<secondary>".
func (v *pair[P, S, PP, SP]) AppendEncode(dst []byte) []byte {
	return appendParts(dst, PP(&v.p), SP(&v.s))
}

// holder is a pointer to T, the state of a part of a Composite, which a
// pair holds in place.
type holder[T any] interface {
	*T
	State
}

// partError is the error of the part named part ("primary" or
// "secondary"), as the Composite's.
func partError(part string, err error) error {
	return fmt.Errorf("strategies: composite: %s: %w", part, err)
}

// maker is a part of a Composite that makes its state in place, in a T
// that joined allocated: NewState and Decode, in place, each returning the
// state, which is the T. Every strategy of this package is one (a
// FixedWindow as a fixedPart, prepared as its fixedPlan), but a Composite.
type maker[T any] interface {
	newIn(dst *T) State
	decodeIn(dst *T, b []byte) (State, error)
}

// ownState reports whether the states of s, a part of a Composite, are
// states of this package, which a pair holds in place: whether s is one
// of its strategies, prepared or not, other than a Composite.
func ownState(s Strategy) bool {
	switch v := s.(type) {
	case *prepared:
		return v.kind != kindComposite
	case TokenBucket, LeakyBucket, GCRA, SlidingWindow, RollingWindow, FixedWindow:
		return true
	}
	return false
}

// joinLoose makes the state of a Composite of parts a and b as join says,
// when one of them is not ownState (a strategy of another package, or an
// invalid Composite part): each state is made as it always is, on its
// own, and a loose pair refers to both.
func joinLoose(a, b Strategy, enc *[2][]byte) (State, error) {
	if enc == nil {
		return &loose{a.NewState(), b.NewState()}, nil
	}
	sa, err := a.Decode(enc[0])
	if err != nil {
		return nil, partError("primary", err)
	}
	sb, err := b.Decode(enc[1])
	if err != nil {
		return nil, partError("secondary", err)
	}
	return &loose{sa, sb}, nil
}

// loose is the state of a Composite with a part that is not ownState.
type loose struct{ p, s State }

func (v *loose) parts() (State, State) { return v.p, v.s }

// AppendEncode implements State: "51|<primary>$<secondary>".
func (v *loose) AppendEncode(dst []byte) []byte { return appendParts(dst, v.p, v.s) }

// appendParts appends the encoding of a Composite's state of parts a and b.
func appendParts(dst []byte, a, b State) []byte {
	dst = a.AppendEncode(append(kindComposite.appendHeader(dst), '|'))
	return b.AppendEncode(append(dst, '$'))
}

// Apply implements Strategy.
func (cs Composite) Apply(st State, c Call) (res Result, err error) {
	p := cs.plan()
	err = p.decide(st, c, &res)
	return res, err
}

// compositePlan is what a Composite decides with: its parts, and whether
// take may make the calls that take something, which Prepare finds once
// (the prepared form is the plan of the prepared parts), with the split
// of its states.
type compositePlan struct {
	Composite
	takes bool     // both parts are ownPart
	split splitter // prepared: the split of the pairs its NewState makes; else nil
}

// plan returns the plan of cs.
func (cs Composite) plan() compositePlan {
	return compositePlan{Composite: cs, takes: ownPart(cs.Primary) && ownPart(cs.Secondary)}
}

// prepare returns the plan of cs prepared: of its parts prepared, with
// the split of the states it makes, which are those of every call but the
// first after a change of a part's configuration.
func (cs Composite) prepare() compositePlan {
	p := Composite{Prepare(cs.Primary), Prepare(cs.Secondary)}.plan()
	if ownState(p.Primary) && ownState(p.Secondary) {
		if v, ok := p.NewState().(interface{ splitter() splitter }); ok {
			p.split = v.splitter()
		}
	}
	return p
}

// parts returns the states of the parts of st, or false if st is not the
// state of a Composite.
func (p *compositePlan) parts(st State) (primary, secondary State, ok bool) {
	if p.split != nil {
		if primary, secondary, ok = p.split(st); ok {
			return primary, secondary, true
		}
	}
	s, ok := st.(compositeState)
	if !ok {
		return nil, nil, false
	}
	primary, secondary = s.parts()
	return primary, secondary, true
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
	sp, ss, ok := p.parts(st)
	if !ok {
		return wrongState(kindComposite, st)
	}
	if p.Primary == nil || p.Secondary == nil {
		return p.Validate()
	}
	if c.N > 0 && !c.DryRun && p.takes && p.take(sp, ss, c, res) {
		return nil
	}
	if err := p.ask(sp, ss, c, res); err != nil {
		*res = Result{} // ask may have written a part's
		return err
	}
	return nil
}

// ask decides c on the parts' states sp and ss by asking both parts with a
// DryRun first, which also finds a part that fails (a mismatched state)
// before either has taken anything, and taking from both only if both
// allow, or for a Record: four decisions for an allowed call. The
// primary's Result is written to *res, into which the secondary's is then
// merged (see Result.and).
func (cs *Composite) ask(sp, ss State, c Call, res *Result) error {
	dry := c
	dry.DryRun = true
	var rs Result
	if err := decidePart(cs.Primary, sp, dry, res); err != nil {
		return partError("primary", err)
	}
	if err := decidePart(cs.Secondary, ss, dry, &rs); err != nil {
		return partError("secondary", err)
	}
	switch {
	case c.Record || res.Allowed && rs.Allowed:
		if c.N > 0 && !c.DryRun {
			// The same calls on the same states: they cannot fail now.
			decidePart(cs.Primary, sp, c, res)
			decidePart(cs.Secondary, ss, c, &rs)
		}
	case c.N > 0:
		// Denied: the part that would have allowed takes nothing, and
		// reports its state as it is.
		peek := Call{Now: c.Now, DryRun: true}
		if res.Allowed {
			decidePart(cs.Primary, sp, peek, res)
		}
		if rs.Allowed {
			decidePart(cs.Secondary, ss, peek, &rs)
		}
	}
	res.and(rs.Allowed, rs.Limit, rs.Remaining, rs.ResetAfter, rs.RetryAfter)
	return nil
}

// take decides c, which takes something (c.N > 0, no DryRun), on the
// parts' states sp and ss, as ask would, with about one decision per part
// instead of two: it takes c from one part, a, then from the other, b,
// and undoes a's take when b denies the call. It reports false, having
// changed nothing but maybe *res, when it cannot decide c so: when neither
// part's state is one that undo can put back, and when a part fails,
// which ask then reports as it always does. Both parts must be ownPart.
//
// Every Result is the one ask would report: a's and b's takes answer as
// ask's DryRuns and takes do, and after an undone take a reports its
// state as it is, by a peek, as the part that would have allowed. As in
// ask, the primary's Result is written to *res and the secondary's merged
// into it.
func (cs *Composite) take(sp, ss State, c Call, res *Result) bool {
	// a is the primary unless only the secondary's take can be undone.
	var other Result
	a, sa, ra, b, sb, rb := cs.Primary, sp, res, cs.Secondary, ss, &other
	var u undo
	if !u.save(sa) {
		a, sa, ra, b, sb, rb = b, sb, rb, a, sa, ra
		if !u.save(sa) {
			return false
		}
	}
	if decidePart(a, sa, c, ra) != nil {
		return false // nothing taken
	}
	switch {
	case !c.Taken(ra.Allowed):
		// a denies: b takes nothing either, and reports as in ask.
		dry := c
		dry.DryRun = true
		if decidePart(b, sb, dry, rb) != nil {
			return false
		}
		if rb.Allowed {
			decidePart(b, sb, Call{Now: c.Now, DryRun: true}, rb)
		}
	case decidePart(b, sb, c, rb) != nil:
		u.restore(sa)
		return false
	case !c.Taken(rb.Allowed):
		u.restore(sa)
		decidePart(a, sa, Call{Now: c.Now, DryRun: true}, ra)
	}
	res.and(other.Allowed, other.Limit, other.Remaining, other.ResetAfter, other.RetryAfter)
	return true
}

// ownPart reports whether s, a part of a Composite, is ownState and one
// that take may call, since it answers a call exactly as its DryRun, and
// changes nothing when it denies a call or fails. A FixedWindow without
// quotas, which is not a valid configuration, is not one: it takes every
// call, yet reports it denied.
func ownPart(s Strategy) bool {
	switch v := s.(type) {
	case *prepared:
		if v.kind == kindFixedWindow {
			return len(v.fixed.Quotas) > 0
		}
	case FixedWindow:
		return len(v.Quotas) > 0
	}
	return ownState(s)
}

// undo is what a call may change in the state of a part, saved before the
// part takes the call so that Composite.take can put it back: the state of
// a bucket, a GCRA or a sliding window, or of a fixed window of up to two
// quotas, whose state holds its windows, and is copied whole: the names it
// refers to are never changed. A rolling window's ring, which a take moves
// and rewrites, is not saved, nor are the windows of more than two quotas.
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
