package strategies

import (
	"math"
	"testing"
	"time"
)

func TestSlidingWindowVectors(t *testing.T) {
	sw := SlidingWindow{Limit: 10, Window: 10 * time.Second}
	const s = time.Second
	vectors := []vector{{
		name: "weighting, rollover, n=0, n>limit",
		s:    sw,
		steps: []step{
			{at: 0, op: peek, want: yes(10, 10, 0), enc: "62|0|0|0"},
			{at: 0, op: allow, n: 6, want: yes(10, 4, 20*s), enc: "62|0|6|" + ns(0)},
			// 6 + 5 > 10 in this window; in the next, 6*(1-e/10s) + 5 <= 10
			// from e = 10s - floor(5*10s/6) = 1666666667ns.
			{at: 5 * s, op: allow, n: 5, want: no(10, 4, 15*s, 6666666667)},
			{at: 11666666666, op: allow, n: 5, want: no(10, 4, 8333333334, 1)},
			{at: 11666666667, op: dry, n: 5, want: yes(10, 0, 18333333333)},
			{at: 5 * s, op: allow, n: 11, want: no(10, 4, 15*s, -1)},
			// 12s: prev 6 weighs 4.8; 4.8 + 5 <= 10.
			{at: 12 * s, op: allow, n: 5, want: yes(10, 0, 18*s), enc: "62|6|5|" + ns(10*s)},
			// 4.8 + 5 + 1 > 10 until 6*(1-e/10s) <= 4: e = 3333333334ns.
			{at: 12 * s, op: allow, n: 1, want: no(10, 0, 18*s, 1333333334)},
			{at: 13333333334, op: allow, n: 1, want: yes(10, 0, 16666666666), enc: "62|6|6|" + ns(10*s)},
			// Back at 12s with curr 6: 6*(1-e/10s) + 6 + 1 <= 10 from e = 5s.
			{at: 12 * s, op: dry, n: 1, want: no(10, 0, 18*s, 3*s)},
			// Two windows later, nothing counts.
			{at: 35 * s, op: peek, want: yes(10, 10, 0)},
			{at: 35 * s, op: allow, n: 10, want: yes(10, 0, 15*s), enc: "62|0|10|" + ns(30*s)},
		},
	}, {
		name: "record past the limit, then denied until it slid out",
		s:    sw,
		steps: []step{
			{at: 5 * s, op: record, n: 25, want: no(10, 0, 15*s, 11*s), enc: "62|0|25|" + ns(0)},
			{at: 16*s - 1, op: peek, want: no(10, 0, 4*s+1, 1)},
			{at: 16 * s, op: peek, want: yes(10, 0, 4*s)},
			{at: 16 * s, op: allow, n: 1, want: no(10, 0, 4*s, 400*time.Millisecond)},
		},
	}, {
		name: "clock backwards: still the current window",
		s:    sw,
		steps: []step{
			{at: 15 * s, op: allow, n: 4, want: yes(10, 6, 15*s), enc: "62|0|4|" + ns(10*s)},
			{at: 2 * s, op: allow, n: 1, want: yes(10, 5, 28*s), enc: "62|0|5|" + ns(10*s)},
			// Fits once 5*(1-e/10s) + 6 <= 10 in the next window: e = 2s.
			{at: 2 * s, op: allow, n: 6, want: no(10, 5, 28*s, 20*s)},
		},
	}, {
		name: "huge counts saturate",
		s:    sw,
		steps: []step{
			{at: 0, op: record, n: math.MaxInt64, want: no(10, 0, 20*s, 20*s)},
			{at: 0, op: record, n: math.MaxInt64, want: no(10, 0, 20*s, 20*s), enc: "62|0|9223372036854775807|" + ns(0)},
			{at: 0, op: allow, n: math.MaxInt64, want: no(10, 0, 20*s, -1)},
		},
	}}
	for _, v := range vectors {
		v.run(t)
	}
}

func TestSlidingWindowWindowChange(t *testing.T) {
	// Stored under 10s windows; under 15s windows the start (10s) is not
	// aligned and moves forward to 15s: the counts expire later, not
	// earlier.
	stored := "62|0|4|" + ns(10*time.Second)
	vector{name: "window changed", s: SlidingWindow{Limit: 10, Window: 15 * time.Second}, start: stored, steps: []step{
		{at: 12 * time.Second, op: peek, want: yes(10, 6, 33*time.Second), enc: stored},
		{at: 12 * time.Second, op: allow, n: 1, want: yes(10, 5, 33*time.Second), enc: "62|0|5|" + ns(15*time.Second)},
		{at: 30 * time.Second, op: peek, want: yes(10, 5, 15*time.Second)},
	}}.run(t)
}
