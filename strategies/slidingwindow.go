package strategies

import (
	"math"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// SlidingWindow approximates a sliding window from two fixed ones, the
// current and the previous, aligned to the Unix epoch (a window starts at
// floor(now/Window)*Window). The previous window's count is assumed spread
// evenly over it, so the part that still lies within the last Window
// counts:
//
//	used = prev*(1 - elapsed/Window) + curr,  elapsed = now - currStart
//
// and AllowN is allowed iff used + n <= Limit. All of it is computed
// exactly, in 128-bit integer arithmetic on nanoseconds: no rounding
// anywhere, so results are exact and deterministic.
//
//	Remaining  floor(Limit - used) after the call, never negative
//	ResetAfter until both windows count nothing: the end of the current
//	           window if only prev counts, else the end of the next one
//	RetryAfter the first instant the same call fits, which may lie in the
//	           next window, or the one after; -1 when n > Limit
//
// When windows have passed, the state rolls over: one window, and curr
// becomes prev; two or more, and both are forgotten. A clock gone back
// before currStart counts as elapsed = 0: no refill, no penalty. With
// Record, used may exceed Limit until enough has slid out.
//
// When Window changes, a currStart no longer aligned to it is moved forward
// to the next aligned instant, so nothing counted expires earlier than it
// would have; counts and Limit carry over as they are.
type SlidingWindow struct {
	Limit  int64
	Window time.Duration // at most MaxWindow
}

// kindSlidingWindow names sliding window states: "62|prev|curr|start".
var kindSlidingWindow = newKind('6', '2', "sliding window", func() Decider { return new(slidingDecider) })

// slidingWindowState is the two windows: counts are int64 in [0,
// math.MaxInt64], saturating.
type slidingWindowState struct {
	prev, curr int64
	start      int64 // the current window's start, Unix nanoseconds
}

// Validate implements Strategy.
func (sw SlidingWindow) Validate() error {
	if err := checkAtLeastOne(kindSlidingWindow, "limit", sw.Limit); err != nil {
		return err
	}
	return checkWindow(kindSlidingWindow, "window", sw.Window)
}

// Prepare implements Strategy. A sliding window has nothing to compute
// from its configuration ahead of the calls: its Decider is a copy of it.
func (sw SlidingWindow) Prepare() Decider {
	if err := sw.Validate(); err != nil {
		return refused{err}
	}
	return &slidingDecider{sw}
}

// slidingDecider is a prepared SlidingWindow.
type slidingDecider struct{ SlidingWindow }

// NewState implements Decider: nothing counted.
func (sw *slidingDecider) NewState() State { return new(slidingWindowState) }

// at returns the state as of now, rolled over to now's window. A state that
// counts nothing moves to now's window whatever its start, so that it is
// exactly a fresh one.
func (sw SlidingWindow) at(s slidingWindowState, now int64) slidingWindowState {
	w := int64(sw.Window)
	if s.prev == 0 && s.curr == 0 {
		return slidingWindowState{start: alignDown(now, w)}
	}
	s.start = alignUp(s.start, w) // a no-op unless Window changed
	if now < s.start {
		return s // a clock gone backwards: still the current window
	}
	switch gone := uint64(now) - uint64(s.start); {
	case gone < uint64(w):
	case gone < 2*uint64(w):
		s.prev, s.curr, s.start = s.curr, 0, sat.Add(s.start, w)
	default:
		s = slidingWindowState{start: alignDown(now, w)}
	}
	return s
}

// elapsed returns how far now lies into the current window of s, which is
// rolled to now: 0 for an instant before its start (a clock gone
// backwards), and never more than Window.
func (sw SlidingWindow) elapsed(s slidingWindowState, now int64) uint64 {
	return uint64(min(nonNeg(sat.Sub(now, s.start)), int64(sw.Window)))
}

// fits reports whether a call of n fits s as of now (s already rolled):
// prev*(W - e)/W + curr + n <= Limit, multiplied out by W.
func (sw SlidingWindow) fits(s slidingWindowState, now, n int64) bool {
	left := sat.Sub(sat.Sub(sw.Limit, s.curr), n)
	if left < 0 {
		return false
	}
	w := uint64(sw.Window)
	return mulLE(uint64(s.prev), w-sw.elapsed(s, now), uint64(left), w)
}

// Decide implements Decider.
func (sw *slidingDecider) Decide(st State, c Call) (res Result, err error) {
	s, ok := st.(*slidingWindowState)
	if !ok {
		return Result{}, wrongState(kindSlidingWindow, st)
	}
	v := sw.at(*s, c.Now)
	allowed := sw.fits(v, c.Now, c.N)
	need := c.N
	if allowed || c.Record {
		need = 0
		if c.N > 0 {
			v.curr = sat.Add(v.curr, c.N)
			if !c.DryRun {
				*s = v
			}
		}
		if c.Record {
			allowed = sw.fits(v, c.Now, 0)
		}
	}

	w := uint64(sw.Window)
	prevLeft, inexact := mulDiv(uint64(v.prev), w-sw.elapsed(v, c.Now), w)
	if inexact {
		prevLeft++ // used rounds up, so Remaining rounds down
	}
	res = Result{
		Allowed:   allowed,
		Limit:     sw.Limit,
		Remaining: nonNeg(sat.Sub(sat.Sub(sw.Limit, v.curr), int64(prevLeft))),
	}
	switch {
	case v.curr > 0:
		res.ResetAfter = until(sat.Add(sat.Add(v.start, int64(sw.Window)), int64(sw.Window)), c.Now)
	case v.prev > 0:
		res.ResetAfter = until(sat.Add(v.start, int64(sw.Window)), c.Now)
	}
	if !allowed {
		if need > sw.Limit {
			res.RetryAfter = -1
		} else {
			res.RetryAfter = until(sw.fitsAt(v, need), c.Now)
		}
	}
	return res, nil
}

// Clamp implements Decider: a current window that counts something and
// starts after now, which only a clock that ran ahead and came back leaves
// behind, and which would stay current until the clock got there again. It
// becomes now's window, its counts kept: they slide out within horizon.
func (sw *slidingDecider) Clamp(st State, now int64) bool {
	s, ok := st.(*slidingWindowState)
	if !ok || s.prev == 0 && s.curr == 0 || s.start <= now {
		return false
	}
	s.start = alignDown(now, int64(sw.Window))
	return true
}

// Horizon implements Decider: what the current window counts slides out
// by the end of the next one, two Windows from its start.
func (sw *slidingDecider) Horizon() time.Duration {
	return time.Duration(sat.Mul(2, int64(sw.Window)))
}

// fitsAt returns the first instant at which a call of need <= Limit fits
// s, which does not fit it now. The count of a window weighs
// count*(W - e)/W at e nanoseconds into the next window, so a call fits
// once count*(W - e) <= left*W, left being the room the other counts
// leave: from e = W - floor(left*W/count) on. Solving that in the current
// window and then in the next leaves the window after, where nothing is
// counted any more.
func (sw SlidingWindow) fitsAt(s slidingWindowState, need int64) int64 {
	w := int64(sw.Window)
	// In the current window, with prev fading and curr fixed.
	if left := sat.Sub(sat.Sub(sw.Limit, s.curr), need); left >= 0 && left < s.prev {
		q, _ := mulDiv(uint64(left), uint64(w), uint64(s.prev))
		if e := w - int64(q); e < w {
			return sat.Add(s.start, e)
		}
	}
	// In the next window, with curr become prev, fading, and nothing new.
	next := sat.Add(s.start, w)
	left := sw.Limit - need
	if s.curr <= left {
		return next
	}
	if q, _ := mulDiv(uint64(left), uint64(w), uint64(s.curr)); q > 0 {
		return sat.Add(next, w-int64(q))
	}
	return sat.Add(next, w)
}

// Decode implements Decider. It reads "62|prev|curr|currStart".
func (sw *slidingDecider) Decode(b []byte) (State, error) {
	f, r, err := openState(b, kindSlidingWindow)
	if err != nil {
		return nil, err
	}
	if f != formatCurrent {
		return nil, corrupt(kindSlidingWindow, "no legacy encoding exists, got %s", quote(b[:min(len(b), 2)]))
	}
	s := &slidingWindowState{
		prev:  r.int("prev", 0, math.MaxInt64),
		curr:  r.int("curr", 0, math.MaxInt64),
		start: r.int("start", math.MinInt64, math.MaxInt64),
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return s, nil
}

// AppendEncode implements State: "62|prev|curr|currStart".
func (s *slidingWindowState) AppendEncode(dst []byte) []byte {
	dst = appendInt(kindSlidingWindow.appendHeader(dst), s.prev)
	dst = appendInt(dst, s.curr)
	return appendInt(dst, s.start)
}

func (s *slidingWindowState) kind() *kind { return kindSlidingWindow }

func (s *slidingWindowState) describe() Description {
	return describeAs(kindSlidingWindow, map[string]any{"prev": s.prev, "curr": s.curr, "start": instant(s.start)})
}
