package strategies

import (
	"bytes"
	"fmt"
)

// Composite applies two strategies to the same key, and a call must pass
// both: "10 per second as a token bucket, and 10000 per day in a fixed
// window". The two states are one State, stored and taken as one.
//
// AllowN asks both parts with a DryRun first and takes from both only if
// both allow, so a denial changes neither; Record takes from both. The
// Result is that of the binding part, as described at merge; when the call
// is denied, the part that would have allowed it reports its state as it
// is, with nothing taken.
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
	err = cs.decide(st, c, &res)
	return res, err
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

// decide is Apply, writing the Result to *res. A Composite has nothing to
// compute from its configuration ahead of the calls but what its parts
// have: its prepared form (see Prepare) is a Composite of the prepared
// parts.
func (cs *Composite) decide(st State, c Call, res *Result) error {
	s, ok := st.(*compositeState)
	if !ok {
		return wrongState(kindComposite, st)
	}
	if cs.Primary == nil || cs.Secondary == nil {
		return cs.Validate()
	}
	// Ask both first: this also finds a mismatched part before either
	// part has taken anything.
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

// AppendEncode implements State: "51|<primary>$<secondary>".
func (s *compositeState) AppendEncode(dst []byte) []byte {
	dst = append(kindComposite.appendHeader(dst), '|')
	dst = s.primary.AppendEncode(dst)
	return s.secondary.AppendEncode(append(dst, '$'))
}
