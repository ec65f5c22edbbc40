package strategies

import (
	"math"
	"testing"
	"time"
)

func TestLeakyBucketVectors(t *testing.T) {
	lb := LeakyBucket{Rate: 10, Capacity: 5} // leaks one every 100ms
	const ms = time.Millisecond
	vectors := []vector{{
		name: "fill, leak, n>1, n=0, n>capacity",
		s:    lb,
		steps: []step{
			{at: 0, op: peek, want: yes(5, 5, 0), enc: "32|0|0"},
			{at: 0, op: allow, n: 1, want: yes(5, 4, 100*ms), enc: "32|1|" + ns(0)},
			{at: 0, op: allow, n: 4, want: yes(5, 0, 500*ms), enc: "32|5|" + ns(0)},
			{at: 0, op: allow, n: 1, want: no(5, 0, 500*ms, 100*ms)},
			{at: 99 * ms, op: allow, n: 1, want: no(5, 0, 401*ms, 1*ms)},
			{at: 100 * ms, op: allow, n: 1, want: yes(5, 0, 500*ms), enc: "32|5|" + ns(100*ms)},
			{at: 350 * ms, op: allow, n: 2, want: yes(5, 0, 450*ms), enc: "32|4.5|" + ns(350*ms)},
			{at: 350 * ms, op: allow, n: 6, want: no(5, 0, 450*ms, -1)},
			{at: 350 * ms, op: allow, n: 3, want: no(5, 0, 450*ms, 250*ms)},
			{at: 350 * ms, op: dry, n: 3, want: no(5, 0, 450*ms, 250*ms)},
			{at: 600 * ms, op: dry, n: 3, want: yes(5, 0, 500*ms)},
			{at: 800 * ms, op: peek, want: yes(5, 5, 0)},
		},
	}, {
		name: "clock backwards: no refill, no penalty",
		s:    lb,
		steps: []step{
			{at: time.Second, op: allow, n: 3, want: yes(5, 2, 300*ms), enc: "32|3|" + ns(time.Second)},
			{at: 500 * ms, op: allow, n: 1, want: yes(5, 1, 900*ms), enc: "32|4|" + ns(time.Second)},
			{at: 1100 * ms, op: peek, want: yes(5, 2, 300*ms)},
			{at: 1400 * ms, op: peek, want: yes(5, 5, 0)},
		},
	}, {
		name: "record overflows, then denied until drained",
		s:    lb,
		steps: []step{
			{at: 0, op: record, n: 15, want: no(5, 0, 1500*ms, 1000*ms), enc: "32|15|" + ns(0)},
			{at: 999 * ms, op: peek, want: no(5, 0, 501*ms, 1*ms)},
			{at: time.Second, op: peek, want: yes(5, 0, 500*ms)},
			{at: 1100 * ms, op: allow, n: 1, want: yes(5, 0, 500*ms)},
		},
	}, {
		name: "huge records saturate",
		s:    lb,
		steps: []step{
			{at: 0, op: record, n: math.MaxInt64, want: no(5, 0, math.MaxInt64, math.MaxInt64), enc: "32|9.223372036854776e+18|" + ns(0)},
			{at: 0, op: record, n: math.MaxInt64, want: no(5, 0, math.MaxInt64, math.MaxInt64), enc: "32|9.223372036854776e+18|" + ns(0)},
		},
	}}
	for _, v := range vectors {
		v.run(t)
	}
}

func TestLeakyBucketCapacityChange(t *testing.T) {
	// A level of 4 stays 4 under a lowered capacity, and leaks away.
	vector{name: "lowered capacity keeps the level", s: LeakyBucket{Rate: 1, Capacity: 2}, start: "32|4|" + ns(0), steps: []step{
		{at: 0, op: peek, want: no(2, 0, 4*time.Second, 2*time.Second)},
		{at: 3 * time.Second, op: allow, n: 1, want: yes(2, 0, 2*time.Second), enc: "32|2|" + ns(3*time.Second)},
	}}.run(t)
}

func TestLeakyBucketLegacy(t *testing.T) {
	lb := LeakyBucket{Rate: 1, Capacity: 5}
	for _, c := range []struct{ in, want string }{
		{"v1|2.25|" + ns(0) + "|10|2", "32|2.25|" + ns(0)},
		{"v2|4|" + ns(0) + "|", "32|4|" + ns(0)},
		{"32|0|0", "32|0|0"},
	} {
		if got := enc(mustDecode(t, lb, c.in)); got != c.want {
			t.Errorf("Decode(%q) encodes as %q, want %q", c.in, got, c.want)
		}
	}
	vector{name: "v2 under the configuration", s: lb, start: "v2|4|" + ns(0) + "|", steps: []step{
		{at: time.Second, op: allow, n: 2, want: yes(5, 0, 5*time.Second), enc: "32|5|" + ns(time.Second)},
	}}.run(t)
}
