package strategies

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestSlidingLogVectors(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	sl := SlidingLog{Limit: 3, Window: 10 * s}
	e := func(fields ...string) string {
		out := "81"
		for _, f := range fields {
			out += "|" + f
		}
		return out
	}
	vector{
		name: "each unit counts for exactly a Window",
		s:    sl,
		steps: []step{
			{at: 0, op: allow, n: 1, want: yes(3, 2, 10*s), enc: e(ns(0), "1")},
			{at: 2 * s, op: allow, n: 2, want: yes(3, 0, 10*s), enc: e(ns(0), "1", "2000000000", "2")},
			{at: 3 * s, op: allow, n: 1, want: no(3, 0, 9*s, 7*s), enc: e(ns(0), "1", "2000000000", "2")},
			{at: 3 * s, op: allow, n: 2, want: no(3, 0, 9*s, 9*s)},
			{at: 3 * s, op: allow, n: 4, want: no(3, 0, 9*s, -1)},
			{at: 10*s - 1, op: peek, want: yes(3, 0, 2*s+1)},
			{at: 10 * s, op: peek, want: yes(3, 1, 2*s)},
			{at: 10 * s, op: allow, n: 1, want: yes(3, 0, 10*s), enc: e(ns(2*s), "2", "8000000000", "1")},
			{at: 12 * s, op: dry, n: 2, want: yes(3, 0, 10*s)},
			{at: 20 * s, op: peek, want: yes(3, 3, 0)},
		},
	}.run(t)
	vector{
		name: "Record past the limit, then a clock gone backwards",
		s:    sl,
		steps: []step{
			{at: 5 * s, op: record, n: 5, want: no(3, 0, 10*s, 10*s), enc: e(ns(5*s), "5")},
			{at: 4 * s, op: allow, n: 1, want: no(3, 0, 11*s, 11*s)},
			{at: 4 * s, op: record, n: 1, want: no(3, 0, 11*s, 11*s), enc: e(ns(5*s), "6")},
			{at: 15*s - ms, op: peek, want: no(3, 0, ms, ms)},
			{at: 15 * s, op: allow, n: 3, want: yes(3, 0, 10*s), enc: e(ns(15*s), "3")},
		},
	}.run(t)
}

// TestSlidingLogBounded: the log never holds more than Limit entries; a
// call beyond merges into the newest, which then expires no earlier than
// either would have.
func TestSlidingLogBounded(t *testing.T) {
	sl := SlidingLog{Limit: 3, Window: time.Second}
	d := sl.Prepare()
	st := d.NewState()
	for i := range 10 {
		if _, err := d.Decide(st, Call{Now: at(time.Duration(i) * time.Millisecond), N: 1, Record: true}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := enc(st), "81|"+ns(0)+"|1|1000000|1|8000000|8"; got != want {
		t.Errorf("log %s, want %s", got, want)
	}
	r, err := d.Decide(st, Call{Now: at(time.Second)})
	if err != nil || r.Remaining != 0 || r.RetryAfter != 9*time.Millisecond {
		t.Errorf("after the first two expired: %+v, %v", r, err)
	}
	big := SlidingLog{Limit: math.MaxInt64, Window: MaxWindow}.Prepare()
	st = big.NewState()
	for _, c := range []Call{{Now: math.MinInt64, N: math.MaxInt64}, {Now: math.MaxInt64, N: math.MaxInt64, Record: true}, {Now: 0, N: 1}} {
		if r, err := big.Decide(st, c); err != nil || r.Remaining < 0 {
			t.Fatalf("%+v: %+v, %v", c, r, err)
		}
		clone(t, SlidingLog{Limit: math.MaxInt64, Window: MaxWindow}, st)
	}
}

// TestSlidingLogRelease: a release gives back the units of the call
// logged at its instant, or in the first entry after it that still counts,
// never an earlier one, and nothing once expired.
func TestSlidingLogRelease(t *testing.T) {
	sl := SlidingLog{Limit: 5, Window: time.Minute}
	st := mustDecode(t, sl, "81|"+ns(0)+"|2|1000000000|1")
	got, err := sl.Release(st, at(2*time.Second), at(0), 1)
	if err != nil || got != 1 || enc(st) != "81|"+ns(0)+"|1|1000000000|1" {
		t.Fatalf("release at 0: %d, %v, %s", got, err, enc(st))
	}
	got, _ = sl.Release(st, at(2*time.Second), at(500*time.Millisecond), 5) // the call of 1s
	if got != 1 || enc(st) != "81|"+ns(0)+"|1" {
		t.Fatalf("release between: %d, %s", got, enc(st))
	}
	if got, _ = sl.Release(st, at(time.Minute), at(0), 1); got != 0 {
		t.Fatalf("an expired call gave back %d", got)
	}
	// A call expired, whose units a later entry holds: the later call keeps them.
	st = mustDecode(t, sl, "81|"+ns(0)+"|1|30000000000|1")
	if got, _ = sl.Release(st, at(time.Minute), at(0), 1); got != 0 || enc(st) != "81|"+ns(0)+"|1|30000000000|1" {
		t.Fatalf("an expired call gave back %d of a later one: %s", got, enc(st))
	}
	if _, err := sl.Release(st, 0, 0, -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative n: %v", err)
	}
	if _, err := sl.Release(newState(GCRA{Rate: 1, Burst: 1}), 0, 0, 1); !errors.Is(err, ErrMismatch) {
		t.Fatalf("another state: %v", err)
	}
}

// TestSlidingLogUsed: Used counts the entries still live at now, beyond a
// Limit lowered since they were logged, and changes nothing.
func TestSlidingLogUsed(t *testing.T) {
	sl := SlidingLog{Limit: 1, Window: time.Minute}
	const state = "81|0|2|1000000000|3"
	st := mustDecode(t, sl, state)
	for _, c := range []struct {
		now  time.Duration
		want int64
	}{{0, 5}, {59 * time.Second, 5}, {time.Minute, 3}, {time.Minute + time.Second, 0}} {
		if got, err := sl.Used(st, int64(c.now)); err != nil || got != c.want {
			t.Errorf("Used at %v = %d, %v; want %d", c.now, got, err, c.want)
		}
	}
	if enc(st) != state {
		t.Errorf("Used changed the state to %s", enc(st))
	}
	if _, err := sl.Used(newState(GCRA{Rate: 1, Burst: 1}), 0); !errors.Is(err, ErrMismatch) {
		t.Errorf("another state: %v", err)
	}
}
