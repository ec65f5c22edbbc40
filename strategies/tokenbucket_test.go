package strategies

import (
	"math"
	"testing"
	"time"
)

func TestTokenBucketVectors(t *testing.T) {
	tb := TokenBucket{Rate: 10, Burst: 5} // a token every 100ms
	const ms = time.Millisecond
	vectors := []vector{{
		name: "burst, refill, n>1, n=0, n>burst",
		s:    tb,
		steps: []step{
			{at: 0, op: peek, want: yes(5, 5, 0), enc: "12|5|0"},
			{at: 0, op: allow, n: 1, want: yes(5, 4, 100*ms), enc: "12|4|" + ns(0)},
			{at: 0, op: allow, n: 4, want: yes(5, 0, 500*ms), enc: "12|0|" + ns(0)},
			{at: 0, op: allow, n: 1, want: no(5, 0, 500*ms, 100*ms)},
			{at: 99 * ms, op: allow, n: 1, want: no(5, 0, 401*ms, 1*ms)},
			{at: 100 * ms, op: allow, n: 1, want: yes(5, 0, 500*ms), enc: "12|0|" + ns(100*ms)},
			{at: 100 * ms, op: peek, want: yes(5, 0, 500*ms)},
			{at: 350 * ms, op: allow, n: 2, want: yes(5, 0, 450*ms), enc: "12|0.5|" + ns(350*ms)},
			{at: 350 * ms, op: allow, n: 6, want: no(5, 0, 450*ms, -1)},
			{at: 350 * ms, op: allow, n: 3, want: no(5, 0, 450*ms, 250*ms)},
			{at: 350 * ms, op: dry, n: 3, want: no(5, 0, 450*ms, 250*ms)},
			{at: 600 * ms, op: dry, n: 3, want: yes(5, 0, 500*ms)},
			{at: 800 * ms, op: peek, want: yes(5, 5, 0)},
			{at: 10 * time.Second, op: allow, n: 5, want: yes(5, 0, 500*ms)},
		},
	}, {
		name: "clock backwards: no refill, no penalty",
		s:    tb,
		steps: []step{
			{at: time.Second, op: allow, n: 3, want: yes(5, 2, 300*ms), enc: "12|2|" + ns(time.Second)},
			// 500ms back: no refill, and last stays where it was.
			{at: 500 * ms, op: allow, n: 1, want: yes(5, 1, 900*ms), enc: "12|1|" + ns(time.Second)},
			{at: 500 * ms, op: allow, n: 2, want: no(5, 1, 900*ms, 600*ms)},
			// Refill resumes from last, not from the earlier instant.
			{at: 1100 * ms, op: peek, want: yes(5, 2, 300*ms)},
			{at: 1400 * ms, op: peek, want: yes(5, 5, 0)},
		},
	}, {
		name: "record past the limit, then denied until repaid",
		s:    tb,
		steps: []step{
			{at: 0, op: record, n: 15, want: no(5, 0, 1500*ms, 1000*ms), enc: "12|-10|" + ns(0)},
			{at: 999 * ms, op: peek, want: no(5, 0, 501*ms, 1*ms)},
			{at: 999 * ms, op: allow, n: 1, want: no(5, 0, 501*ms, 101*ms)},
			{at: time.Second, op: peek, want: yes(5, 0, 500*ms)},
			{at: time.Second, op: record, n: 1, want: no(5, 0, 600*ms, 100*ms), enc: "12|-1|" + ns(time.Second)},
			{at: 1100 * ms, op: allow, n: 1, want: no(5, 0, 500*ms, 100*ms)},
			{at: 1200 * ms, op: allow, n: 1, want: yes(5, 0, 500*ms)},
			{at: 1200 * ms, op: record, n: 0, want: yes(5, 0, 500*ms)},
		},
	}, {
		name: "huge records saturate",
		s:    tb,
		steps: []step{
			{at: 0, op: record, n: math.MaxInt64, want: no(5, 0, math.MaxInt64, math.MaxInt64), enc: "12|-9.223372036854776e+18|" + ns(0)},
			{at: 0, op: record, n: math.MaxInt64, want: no(5, 0, math.MaxInt64, math.MaxInt64), enc: "12|-9.223372036854776e+18|" + ns(0)},
			{at: 0, op: allow, n: math.MaxInt64, want: no(5, 0, math.MaxInt64, -1)},
		},
	}, {
		name: "fractional rate",
		s:    TokenBucket{Rate: 3, Burst: 2},
		steps: []step{
			{at: 0, op: allow, n: 2, want: yes(2, 0, 666666667)},
			{at: 0, op: allow, n: 1, want: no(2, 0, 666666667, 333333334)},
			{at: 333333334, op: allow, n: 1, want: yes(2, 0, 666666666)}, // 2e-9 tokens left
		},
	}}
	for _, v := range vectors {
		v.run(t)
	}
}

func TestTokenBucketBurstChange(t *testing.T) {
	// 8 tokens stored under Burst 10: Burst 5 clamps them to 5 at the
	// next call, Burst 20 refills from 8.
	stored := "12|8|" + ns(0)
	vector{name: "lowered burst clamps", s: TokenBucket{Rate: 1, Burst: 5}, start: stored, steps: []step{
		{at: 0, op: peek, want: yes(5, 5, 0), enc: stored},
		{at: 0, op: allow, n: 1, want: yes(5, 4, time.Second), enc: "12|4|" + ns(0)},
	}}.run(t)
	vector{name: "raised burst refills", s: TokenBucket{Rate: 1, Burst: 20}, start: stored, steps: []step{
		{at: 0, op: peek, want: yes(20, 8, 12*time.Second)},
		{at: 2 * time.Second, op: allow, n: 1, want: yes(20, 9, 11*time.Second), enc: "12|9|" + ns(2*time.Second)},
	}}.run(t)
}

func TestTokenBucketLegacy(t *testing.T) {
	tb := TokenBucket{Rate: 1, Burst: 5}
	for _, c := range []struct{ in, want string }{
		{"v1|3.5|" + ns(0) + "|10|2", "12|3.5|" + ns(0)},
		{"v1|-2|" + ns(0) + "|5|0.5", "12|-2|" + ns(0)},
		{"v2|3|" + ns(0) + "|", "12|3|" + ns(0)},
		{"v2|7|" + ns(0) + "|", "12|7|" + ns(0)}, // more than Burst: clamped when used
		{"12|3|" + ns(0), "12|3|" + ns(0)},
	} {
		st := mustDecode(t, tb, c.in)
		if got := enc(st); got != c.want {
			t.Errorf("Decode(%q) encodes as %q, want %q", c.in, got, c.want)
		}
	}
	// The stored capacity and rate of v1 are ignored: the configuration wins.
	vector{name: "v1 under the configuration", s: tb, start: "v1|3.5|" + ns(0) + "|10|2", steps: []step{
		{at: time.Second, op: allow, n: 4, want: yes(5, 0, 4500*time.Millisecond), enc: "12|0.5|" + ns(time.Second)},
	}}.run(t)
}
