package strategies

// Prepare returns a Strategy that behaves exactly like s, with what Apply
// derives from the configuration alone computed once, here, instead of on
// every call: a GCRA's emission interval (a division and a rounding), its
// burst span and a divisor by it that multiplies, a bucket's rate per
// nanosecond and the constants of its ResetAfter and RetryAfter. It is
// meant to be called once per limiter handle (by package ratestore's
// DB.Limiter), after Validate succeeded, so that every decision made
// through the handle saves that work.
//
// The prepared strategy is a pointer, so that calls through the Strategy
// interface copy nothing, and it is immutable: it may be used concurrently,
// like s. It is identical to s in every method: Validate returns the same
// error, NewState and Decode the same states, Apply the same Result and
// error, leaving the same state behind. States are interchangeable: a state
// made or decoded by s may be applied by Prepare(s), and the reverse, under
// the same configuration or another one of the same kind.
//
// A Composite is prepared with its parts, and finds once whether it may
// take a call from them one after the other (see Composite.take). A
// FixedWindow's Quotas are copied: the states of the prepared form share
// the names of its quotas, which tell that they are laid out for it (see
// FixedWindow.decide), and which a change to s's slice after Prepare must
// not falsify. A Strategy
// that Prepare does not know (one implemented outside this package, a
// pointer to a configuration, nil) is returned as it is, and so is a
// prepared one: Prepare(Prepare(s)) is Prepare(s). Unprepare returns the
// configuration.
//
// s should be valid. Prepare does not check it: it computes what Apply on
// s would compute on each call, by the same arithmetic, so even an invalid
// s gives a prepared form that behaves as s does, failing Validate with the
// same error and answering Apply alike (with no panic, as s has none).
func Prepare(s Strategy) Strategy {
	p := prepared{Strategy: s}
	switch v := s.(type) {
	case TokenBucket:
		p.kind, p.bucket = kindTokenBucket, v.bucket()
	case LeakyBucket:
		p.kind, p.bucket = kindLeakyBucket, v.bucket()
	case GCRA:
		p.kind = kindGCRA
		p.gcra.init(v, true)
	case FixedWindow:
		p.kind, p.fixed = kindFixedWindow, newFixedPlan(v)
	case SlidingWindow:
		p.kind, p.sliding = kindSlidingWindow, v
	case RollingWindow:
		p.kind, p.rolling = kindRollingWindow, v
	case Composite:
		p.kind, p.composite = kindComposite, v.prepare()
	default:
		return s
	}
	q := p
	return &q
}

// Unprepare returns the configuration that Prepare made s from, as a value
// (a *GCRA given to Prepare comes back as a GCRA; a Composite with its
// parts as they were given). A strategy that is not prepared is returned as
// it is.
func Unprepare(s Strategy) Strategy {
	if p, ok := s.(*prepared); ok {
		return p.Strategy
	}
	return s
}

// Decide is s.Apply(st, c) with the Result written to *res (the zero Result
// when it returns an error). Engines call it on every decision: for a
// prepared s it reaches the decision with no copy of the Result on the way
// (see prepared.decide for why that matters).
func Decide(s Strategy, st State, c Call, res *Result) error {
	if p, ok := s.(*prepared); ok {
		if err := p.decide(st, c, res); err != nil {
			*res = Result{}
			return err
		}
		return nil
	}
	r, err := s.Apply(st, c)
	if err != nil {
		r = Result{}
	}
	*res = r
	return err
}

// prepared is a strategy as Prepare returns it: the configuration, and the
// plan that its Apply follows, made once: the plan of its kind.
type prepared struct {
	Strategy // the configuration, a value: Validate and Decode are its own
	kind     kind

	bucket    bucket        // TokenBucket, LeakyBucket: its constants
	gcra      gcraPlan      // GCRA
	fixed     fixedPlan     // FixedWindow: a copy, and the names its states share
	sliding   SlidingWindow // SlidingWindow: as it is
	rolling   RollingWindow // RollingWindow: as it is
	composite compositePlan // Composite: the plan of its prepared parts
}

// NewState implements Strategy: the configuration's fresh state. A
// FixedWindow's is known to be laid out for the prepared form (see
// FixedWindow.decide), and a Composite's parts are its prepared parts'.
func (p *prepared) NewState() State {
	switch p.kind {
	case kindFixedWindow:
		return p.fixed.newState()
	case kindComposite:
		return p.composite.NewState()
	}
	return p.Strategy.NewState()
}

// Apply implements Strategy: as the configuration's Apply, with the plan
// made once.
func (p *prepared) Apply(st State, c Call) (res Result, err error) {
	err = p.decide(st, c, &res)
	return res, err
}

// decide is Apply, writing the Result to *res.
//
// Every Apply of this package is a decide: it hands its Result back
// through a pointer, which it sets entirely unless it returns an error.
// Go keeps a struct of more than four fields, such as Result, in memory,
// and passing one that a call returned on to a caller costs a copy with
// wide moves, which stall when they read back the narrower stores that just
// wrote it (store forwarding fails): several nanoseconds a level. A
// Composite calls its prepared parts by decide too (decidePart).
func (p *prepared) decide(st State, c Call, res *Result) error {
	switch p.kind {
	case kindGCRA:
		return p.gcra.decide(st, c, res)
	case kindFixedWindow:
		return p.fixed.decide(st, c, res)
	case kindSlidingWindow:
		return p.sliding.decide(st, c, res)
	case kindRollingWindow:
		return p.rolling.decide(st, c, res)
	case kindComposite:
		return p.composite.decide(st, c, res)
	}
	return p.bucket.decide(st, c, res)
}
