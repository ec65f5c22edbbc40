package strategies

import (
	"math"
	"strconv"
	"testing"
	"time"
)

func TestGCRAVectors(t *testing.T) {
	g := GCRA{Rate: 10, Burst: 5} // T = 100ms, Burst*T = 500ms
	const ms = time.Millisecond
	tat := func(d time.Duration) string { return "42|" + ns(d) }
	vectors := []vector{{
		name: "burst, spacing, n>1, n=0, n>burst",
		s:    g,
		steps: []step{
			{at: 0, op: peek, want: yes(5, 5, 0), enc: "42|-9223372036854775808"},
			{at: 0, op: allow, n: 1, want: yes(5, 4, 100*ms), enc: tat(100 * ms)},
			{at: 0, op: allow, n: 4, want: yes(5, 0, 500*ms), enc: tat(500 * ms)},
			{at: 0, op: allow, n: 1, want: no(5, 0, 500*ms, 100*ms)},
			{at: 99 * ms, op: allow, n: 1, want: no(5, 0, 401*ms, 1*ms)},
			{at: 100 * ms, op: allow, n: 1, want: yes(5, 0, 500*ms), enc: tat(600 * ms)},
			{at: 100 * ms, op: peek, want: yes(5, 0, 500*ms)},
			{at: 350 * ms, op: allow, n: 2, want: yes(5, 0, 450*ms), enc: tat(800 * ms)},
			{at: 350 * ms, op: allow, n: 6, want: no(5, 0, 450*ms, -1)},
			{at: 350 * ms, op: allow, n: 3, want: no(5, 0, 450*ms, 250*ms)},
			{at: 350 * ms, op: dry, n: 3, want: no(5, 0, 450*ms, 250*ms)},
			{at: 600 * ms, op: dry, n: 3, want: yes(5, 0, 500*ms)},
			{at: 800 * ms, op: peek, want: yes(5, 5, 0)},
			{at: 10 * time.Second, op: allow, n: 5, want: yes(5, 0, 500*ms), enc: tat(10*time.Second + 500*ms)},
		},
	}, {
		name: "clock backwards: no refill, no penalty",
		s:    g,
		steps: []step{
			{at: time.Second, op: allow, n: 3, want: yes(5, 2, 300*ms), enc: tat(1300 * ms)},
			// 500ms back the key looks busier, but taking costs the same.
			{at: 500 * ms, op: allow, n: 1, want: no(5, 0, 800*ms, 400*ms)},
			{at: 900 * ms, op: allow, n: 1, want: yes(5, 0, 500*ms), enc: tat(1400 * ms)},
			{at: 1400 * ms, op: peek, want: yes(5, 5, 0)},
		},
	}, {
		name: "record past the limit, then denied until repaid",
		s:    g,
		steps: []step{
			{at: 0, op: record, n: 15, want: no(5, 0, 1500*ms, 1000*ms), enc: tat(1500 * ms)},
			{at: 999 * ms, op: peek, want: no(5, 0, 501*ms, 1*ms)},
			{at: 999 * ms, op: allow, n: 1, want: no(5, 0, 501*ms, 101*ms)},
			{at: time.Second, op: peek, want: yes(5, 0, 500*ms)},
			{at: time.Second, op: record, n: 1, want: no(5, 0, 600*ms, 100*ms), enc: tat(1600 * ms)},
			{at: 1200 * ms, op: allow, n: 1, want: yes(5, 0, 500*ms)},
		},
	}, {
		name: "huge records saturate",
		s:    g,
		steps: []step{
			{at: 0, op: record, n: math.MaxInt64, want: no(5, 0, time.Duration(math.MaxInt64-t0), time.Duration(math.MaxInt64-t0-int64(500*ms))), enc: "42|9223372036854775807"},
			{at: 0, op: record, n: math.MaxInt64, want: no(5, 0, time.Duration(math.MaxInt64-t0), time.Duration(math.MaxInt64-t0-int64(500*ms))), enc: "42|9223372036854775807"},
			{at: 0, op: allow, n: math.MaxInt64, want: no(5, 0, time.Duration(math.MaxInt64-t0), -1)},
		},
	}, {
		name: "rate rounds to the nearest nanosecond",
		s:    GCRA{Rate: 3, Burst: 1}, // T = 333333333ns
		steps: []step{
			{at: 0, op: allow, n: 1, want: yes(1, 0, 333333333)},
			{at: 0, op: allow, n: 1, want: no(1, 0, 333333333, 333333333)},
			{at: 333333333, op: allow, n: 1, want: yes(1, 0, 333333333)},
		},
	}}
	for _, v := range vectors {
		v.run(t)
	}
}

func TestGCRALegacy(t *testing.T) {
	g := GCRA{Rate: 10, Burst: 5}
	for _, c := range []struct{ in, want string }{
		{"v1|" + ns(time.Second) + "|100000000|500000000", "42|" + ns(time.Second)},
		{"v1|-5|0|0", "42|-5"},
		{"v2|" + ns(time.Second) + "|", "42|" + ns(time.Second)},
		{"42|" + strconv.FormatInt(math.MinInt64, 10), "42|" + strconv.FormatInt(math.MinInt64, 10)},
	} {
		if got := enc(mustDecode(t, g, c.in)); got != c.want {
			t.Errorf("Decode(%q) encodes as %q, want %q", c.in, got, c.want)
		}
	}
	// The stored interval of v1 is ignored: the configuration wins.
	vector{name: "v1 under the configuration", s: g, start: "v1|" + ns(time.Second) + "|1|1", steps: []step{
		{at: 800 * time.Millisecond, op: allow, n: 2, want: yes(5, 1, 400*time.Millisecond), enc: "42|" + ns(1200*time.Millisecond)},
	}}.run(t)
}

func TestGCRABurstChange(t *testing.T) {
	// A TAT 300ms ahead: 2 calls of room at Burst 5, none at Burst 3.
	stored := "42|" + ns(300*time.Millisecond)
	vector{name: "lowered burst", s: GCRA{Rate: 10, Burst: 3}, start: stored, steps: []step{
		{at: 0, op: allow, n: 1, want: no(3, 0, 300*time.Millisecond, 100*time.Millisecond), enc: stored},
	}}.run(t)
	vector{name: "raised burst", s: GCRA{Rate: 10, Burst: 10}, start: stored, steps: []step{
		{at: 0, op: allow, n: 7, want: yes(10, 0, time.Second)},
	}}.run(t)
}
