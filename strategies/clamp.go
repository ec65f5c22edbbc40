package strategies

import (
	"math"
	"time"
)

// Clamp bounds st, a state of s read at the instant now (Unix
// nanoseconds), to what a state can legitimately hold at now, and reports
// whether it changed st.
//
// Every strategy keeps instants in its state (a GCRA's TAT, a bucket's
// last refill, a window's start, a rolling window's buckets), and none of
// them lies further ahead of the instant of the call that wrote it than
// the strategy's longest wait (Horizon): a GCRA books at most one burst
// ahead, a bucket's last refill is the call's instant, a window starts at
// it. A state further ahead than that was written by a clock that ran
// ahead (a wrong NTP step, a VM restored with a bad clock, a test) and
// came back. Decided as it is, such a state would lock its key out until
// the clock got there again, since a clock gone backwards gives no refill:
// for a clock 100 years ahead, 100 years. Clamp moves what lies too far
// ahead back to the latest instant now allows, so the key waits at most
// its strategy's own period from now. The rule of each strategy is next to
// its decide function:
//
//	GCRA           TAT > now + Burst*T            TAT = now + Burst*T (one burst in use)
//	TokenBucket,   last > now                     last = now, tokens or level kept
//	LeakyBucket
//	FixedWindow    a counting window starts after now   start = now, count kept
//	SlidingWindow  counting, start after now      start = now's window, counts kept
//	RollingWindow  buckets after now's bucket     their usage moves to now's bucket
//	Composite      both parts, each by its rule
//
// Only a GCRA can lose something: its state cannot tell a clock's TAT from
// a Record's excess of more than one burst, which is capped at one burst.
// The other strategies keep every count and amount; only instants move.
//
// A state within bounds is left exactly as it is, so Clamp may be applied
// to every state as it is read from storage, at no cost to later
// decisions. A strategy that is not of this package, and a state of
// another strategy, are left as they are (false).
func Clamp(s Strategy, st State, now int64) bool {
	switch v := s.(type) {
	case *prepared:
		switch v.kind {
		case kindGCRA:
			return v.gcra.clamp(st, now)
		case kindFixedWindow:
			return clampFixed(st, now)
		case kindSlidingWindow:
			return v.sliding.clamp(st, now)
		case kindRollingWindow:
			return v.rolling.clamp(st, now)
		case kindComposite:
			return v.composite.clamp(st, now)
		}
		return v.bucket.clamp(st, now)
	case GCRA:
		var p gcraPlan
		p.init(v, false)
		return p.clamp(st, now)
	case TokenBucket:
		b := v.bucket()
		return b.clamp(st, now)
	case LeakyBucket:
		b := v.bucket()
		return b.clamp(st, now)
	case FixedWindow:
		return clampFixed(st, now)
	case SlidingWindow:
		return v.clamp(st, now)
	case RollingWindow:
		return v.clamp(st, now)
	case Composite:
		p := v.plan()
		return p.clamp(st, now)
	}
	return false
}

// clampFixed is Clamp for a FixedWindow, whose rule needs only the state.
func clampFixed(st State, now int64) bool {
	s, ok := st.(*fixedWindowState)
	return ok && s.clamp(now)
}

// Horizon returns the longest a state of s can make a key wait when no
// Record took it past its limit: the bound Clamp holds states to. An
// engine that sees its clock go back by more than that since a key's last
// call knows the clock jumped, rather than stepped back a little, and
// clamps the key's state. It is math.MaxInt64 for a strategy that is not
// of this package.
func Horizon(s Strategy) time.Duration {
	switch v := s.(type) {
	case *prepared:
		switch v.kind {
		case kindGCRA:
			return time.Duration(v.gcra.horizon())
		case kindFixedWindow:
			return time.Duration(v.fixed.horizon())
		case kindSlidingWindow:
			return time.Duration(v.sliding.horizon())
		case kindRollingWindow:
			return time.Duration(v.rolling.horizon())
		case kindComposite:
			return max(Horizon(v.composite.Primary), Horizon(v.composite.Secondary))
		}
		return time.Duration(v.bucket.horizon())
	case GCRA:
		var p gcraPlan
		p.init(v, false)
		return time.Duration(p.horizon())
	case TokenBucket:
		b := v.bucket()
		return time.Duration(b.horizon())
	case LeakyBucket:
		b := v.bucket()
		return time.Duration(b.horizon())
	case FixedWindow:
		return time.Duration(v.horizon())
	case SlidingWindow:
		return time.Duration(v.horizon())
	case RollingWindow:
		return time.Duration(v.horizon())
	case Composite:
		return max(Horizon(v.Primary), Horizon(v.Secondary))
	}
	return math.MaxInt64
}

// clamp is Clamp for a Composite: each part by its own rule.
func (p *compositePlan) clamp(st State, now int64) bool {
	sp, ss, ok := p.parts(st)
	if !ok {
		return false
	}
	a := Clamp(p.Primary, sp, now)
	b := Clamp(p.Secondary, ss, now)
	return a || b
}
