package strategies

import (
	"math"
	"math/bits"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// GCRA is the generic cell rate algorithm: a token bucket kept as one
// instant. Calls are spaced by the emission interval T = 1/Rate, and up to
// Burst of them may come at once. The state is the theoretical arrival time
// TAT: the instant at which the key would be idle again. A TAT at or before
// now means the key is idle, with the full burst available.
//
//	AllowN:     newTAT = max(TAT, now) + n*T; allowed iff newTAT - now <= Burst*T
//	Remaining   floor((Burst*T - (TAT - now))/T) after the call, in [0, Burst]
//	ResetAfter  max(0, TAT - now)
//	RetryAfter  TAT - now + n*T - Burst*T; -1 when n > Burst
//
// Record sets TAT = max(TAT, now) + n*T unconditionally. Everything is
// int64 nanoseconds, so results are exact: T is 1e9/Rate rounded to the
// nearest nanosecond.
//
// Every finite positive Rate and every Burst from 1 up is accepted; the
// extremes saturate where no caller can tell the difference. T is at least
// 1ns: a Rate above 1e9 per second acts as 1e9, faster than any caller can
// call. The burst's span Burst*T is at most MaxWindow (100 years), so that
// every instant the algorithm computes stays within MaxWindow of a call's
// and is exact (an unbounded TAT would saturate at the end of the int64
// range and lose count): a burst that would take longer than that to
// refill keeps its size and refills in MaxWindow instead (T becomes
// MaxWindow/Burst), and a burst above MaxWindow/1ns (3e18 calls) acts as
// that many. Both are beyond what a caller can exhaust or wait for. A
// Record that pushes TAT past the int64 range saturates there.
//
// With a single instant as state, a clock that goes backwards makes the key
// look busier for as long as it is behind (TAT - now grows), but changes
// nothing stored: no refill and no penalty once it has caught up. A
// changed Rate or Burst applies to the stored TAT as it is.
type GCRA struct {
	Rate  float64 // calls per second, any finite positive number
	Burst int64   // calls allowed at once, at least 1
}

// MaxGCRARate is the highest GCRA rate that counts: one call per
// nanosecond. A higher one is accepted and acts as it.
const MaxGCRARate = 1e9

// kindGCRA names GCRA states: "42|tat".
var kindGCRA = newKind('4', '2', "gcra", func() Decider { return new(gcraDecider) })

// gcraState is the GCRA state: the theoretical arrival time.
type gcraState struct {
	tat int64 // Unix nanoseconds
}

// Validate implements Strategy.
func (g GCRA) Validate() error {
	if err := checkRate(kindGCRA, g.Rate); err != nil {
		return err
	}
	return checkAtLeastOne(kindGCRA, "burst", g.Burst)
}

// Prepare implements Strategy: it computes T, the burst's span, and a
// divisor by T that multiplies, which spares every call a floating-point
// division and rounding, and an integer division. A burst that would take
// longer than MaxWindow to refill refills in MaxWindow (see GCRA).
func (g GCRA) Prepare() Decider {
	if err := g.Validate(); err != nil {
		return refused{err}
	}
	t := math.Round(nanosPerSecond / g.Rate)
	if !(t < float64(MaxWindow)) {
		t = float64(MaxWindow)
	}
	p := &gcraDecider{burst: g.Burst, t: max(int64(t), 1)}
	if g.Burst > int64(MaxWindow)/p.t {
		p.t = max(int64(MaxWindow)/g.Burst, 1)
	}
	p.tau = min(p.span(g.Burst), int64(MaxWindow))
	p.perT = newDivisor(uint64(p.t))
	return p
}

// gcraDecider is a prepared GCRA.
type gcraDecider struct {
	burst int64
	t     int64   // the emission interval T, in nanoseconds, in [1, MaxWindow]
	tau   int64   // the burst, as a span of time: Burst*T, at most MaxWindow
	perT  divisor // divides by T
}

// NewState implements Decider: idle since forever.
func (p *gcraDecider) NewState() State { return &gcraState{tat: math.MinInt64} }

// Decode implements Decider. It reads "42|tat" and the legacy
// "v1|tat|interval|limit" and "v2|tat|".
func (p *gcraDecider) Decode(b []byte) (State, error) {
	f, r, err := openState(b, kindGCRA)
	if err != nil {
		return nil, err
	}
	s := &gcraState{tat: r.int("tat", math.MinInt64, math.MaxInt64)}
	switch f {
	case formatV1:
		r.int("interval", 0, math.MaxInt64)
		r.int("limit", 0, math.MaxInt64)
	case formatV2:
		r.empty("end")
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return s, nil
}

// span returns n*T saturated at math.MaxInt64, and 0 for n <= 0: what
// sat.Mul(n, T) returns, by a 128-bit product instead of a division.
func (p *gcraDecider) span(n int64) int64 {
	if n <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(n), uint64(p.t))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// Decide implements Decider.
func (p *gcraDecider) Decide(st State, c Call) (res Result, err error) {
	s, ok := st.(*gcraState)
	if !ok {
		return Result{}, wrongState(kindGCRA, st)
	}
	tau := p.tau
	tat := s.tat
	next := sat.Add(max(tat, c.Now), p.span(c.N))
	allowed := sat.Sub(next, c.Now) <= tau
	if allowed || c.Record {
		tat = next
		if c.N > 0 && !c.DryRun {
			s.tat = tat
		}
		if c.Record {
			allowed = sat.Sub(tat, c.Now) <= tau
		}
	}

	ahead := nonNeg(sat.Sub(tat, c.Now)) // how far the key is booked ahead of now
	res = Result{
		Allowed:    allowed,
		Limit:      p.burst,
		Remaining:  int64(p.perT.div(uint64(nonNeg(tau - min(ahead, tau))))),
		ResetAfter: time.Duration(ahead),
	}
	if !allowed {
		switch {
		case !c.Record && c.N > p.burst:
			res.RetryAfter = -1
		case c.Record:
			res.RetryAfter = until(ahead, tau)
		default:
			res.RetryAfter = until(sat.Add(ahead, p.span(c.N)), tau)
		}
	}
	return res, nil
}

// Clamp implements Decider: a TAT past now + Burst*T, which only a clock
// that ran ahead and came back leaves behind, becomes now + Burst*T, a
// burst used up at now that drains in Burst*T. A Record's excess books the
// same way, and a TAT that far ahead cannot be told from a clock's, so an
// excess of more than one burst is capped at one burst too: GCRA is the
// one strategy whose Clamp can lose usage.
func (p *gcraDecider) Clamp(st State, now int64) bool {
	s, ok := st.(*gcraState)
	if !ok {
		return false
	}
	if end := sat.Add(now, p.tau); s.tat > end {
		s.tat = end
		return true
	}
	return false
}

// Horizon implements Decider: one burst, Burst*T.
func (p *gcraDecider) Horizon() time.Duration { return time.Duration(p.tau) }

// AppendEncode implements State: "42|tat".
func (s *gcraState) AppendEncode(dst []byte) []byte {
	return appendInt(kindGCRA.appendHeader(dst), s.tat)
}

func (s *gcraState) kind() *kind { return kindGCRA }

func (s *gcraState) describe() Description {
	return describeAs(kindGCRA, map[string]any{"tat": instant(s.tat)})
}
