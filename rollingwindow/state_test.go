package rollingwindow

import (
	"math"
	"testing"
	"time"
	"unsafe"
)

// TestBoundaries checks the counting rule at bucket boundaries: a bucket
// counts while start > now - Window, so it is gone at exactly start +
// Window and there a nanosecond earlier, whatever the instant of the usage
// within the bucket, for positive and negative instants.
func TestBoundaries(t *testing.T) {
	h5, m5 := 5*time.Hour, 5*time.Minute
	tiny := Config{Window: 10, Bucket: 2}
	for _, tc := range []struct {
		name  string
		c     Config
		evs   []ev
		now   int64
		used  int64
		reset time.Duration
	}{
		{"bucket start, a ns before Window", legacy, []ev{{t0, 10}}, at(h5 - 1), 10, 1},
		{"bucket start, at Window", legacy, []ev{{t0, 10}}, at(h5), 0, 0},
		{"bucket end, a ns before its bucket goes", legacy, []ev{{at(m5 - 1), 10}}, at(h5 - 1), 10, 1},
		{"bucket end: a bucket early", legacy, []ev{{at(m5 - 1), 10}}, at(h5), 0, 0},
		{"next bucket still counts", legacy, []ev{{at(m5), 10}}, at(h5), 10, m5},
		{"next bucket, at its Window", legacy, []ev{{at(m5), 10}}, at(h5 + m5), 0, 0},
		{"at the instant recorded", legacy, []ev{{at(m5 - 1), 10}}, at(m5 - 1), 10, h5 - m5 + 1},
		{"two buckets, first gone", legacy, []ev{{t0, 1}, {at(m5), 2}}, at(h5), 2, m5},
		{"two buckets, both count", legacy, []ev{{t0, 1}, {at(m5), 2}}, at(h5 - 1), 3, m5 + 1},
		{"zero", legacy, []ev{{0, 4}}, int64(h5 - 1), 4, 1},
		{"zero at Window", legacy, []ev{{0, 4}}, int64(h5), 0, 0},
		{"-1 is in the bucket before 0", legacy, []ev{{-1, 4}}, int64(h5 - m5 - 1), 4, 1},
		{"-1 at its Window", legacy, []ev{{-1, 4}}, int64(h5 - m5), 0, 0},
		{"negative start", legacy, []ev{{-int64(m5), 4}}, int64(h5 - m5), 0, 0},
		{"negative, just after a start", legacy, []ev{{-int64(m5) + 1, 4}}, int64(h5 - m5 - 1), 4, 1},
		{"far negative", legacy, []ev{{-int64(h5) - 1, 4}}, -int64(m5) - 1, 4, 1},
		{"far negative at Window", legacy, []ev{{-int64(h5) - 1, 4}}, -int64(m5), 0, 0},
		{"tiny -3 in [-4,-2)", tiny, []ev{{-3, 1}}, 5, 1, 1},
		{"tiny -3 gone at 6", tiny, []ev{{-3, 1}}, 6, 0, 0},
		{"min instant", tiny, []ev{{math.MinInt64, 1}}, math.MinInt64 + 9, 1, 1},
		{"min instant at Window", tiny, []ev{{math.MinInt64, 1}}, math.MinInt64 + 10, 0, 0},
		{"max instant", tiny, []ev{{math.MaxInt64, 1}}, math.MaxInt64, 1, 9}, // bucket MaxInt64-1
		{"single bucket window", Config{Window: 1, Bucket: 1}, []ev{{5, 1}}, 5, 1, 1},
		{"single bucket window, gone", Config{Window: 1, Bucket: 1}, []ev{{5, 1}}, 6, 0, 0},
		{"nothing recorded", legacy, nil, t0, 0, 0},
		{"zero usage is no bucket", legacy, []ev{{t0, 0}, {t0, -5}}, t0, 0, 0},
	} {
		s := newState(t, tc.c, tc.evs...)
		if got := s.ResetAfter(tc.now); got != tc.reset {
			t.Errorf("%s: ResetAfter = %v, want %v", tc.name, got, tc.reset)
		}
		if got := s.Used(tc.now); got != tc.used {
			t.Errorf("%s: Used = %d, want %d", tc.name, got, tc.used)
		}
		if got := s.Len() == 0; got != (tc.used == 0) {
			t.Errorf("%s: Len = %d with used %d", tc.name, s.Len(), tc.used)
		}
		// The same instant, asked again, sees the same.
		if got := s.Used(tc.now); got != tc.used {
			t.Errorf("%s: Used again = %d, want %d", tc.name, got, tc.used)
		}
		checkState(t, s)
	}
}

// TestRetryAfter checks RetryAfter against buckets of 30, 50 and 20 at
// t0, t0+10m and t0+20m.
func TestRetryAfter(t *testing.T) {
	h, m := time.Hour, time.Minute
	evs := []ev{{t0, 30}, {at(10*m + 1), 50}, {at(24 * m), 20}} // buckets t0, t0+10m, t0+20m
	for _, tc := range []struct {
		now      int64
		limit, n int64
		want     time.Duration
	}{
		{at(h), 100, 0, 0},                     // used == limit: allowed
		{at(h), 100, 1, 4 * h},                 // the first bucket must go
		{at(h), 100, 30, 4 * h},                // it frees exactly 30
		{at(h), 100, 31, 4*h + 10*m},           // then the second
		{at(h), 100, 80, 4*h + 10*m},           // 30+50 == 80
		{at(h), 100, 81, 4*h + 20*m},           // all three
		{at(h), 100, 100, 4*h + 20*m},          // n == limit: once all have gone
		{at(h), 100, 101, -1},                  // never
		{at(h), 100, math.MaxInt64, -1},        // never
		{at(h), 120, 20, 0},                    // used + n == limit
		{at(h), 120, 21, 4 * h},                // one more
		{at(h), 120, -7, 0},                    // n < 0 counts as 0
		{at(h), 99, 0, 4 * h},                  // past the limit: a peek waits too
		{at(h), 50, 0, 4*h + 10*m},             // 100-30 = 70 > 50; 100-80 = 20 <= 50
		{at(h), 0, 0, 4*h + 20*m},              // limit 0: only empty fits
		{at(h), -1, 0, -1},                     // a limit below any n
		{at(5*h - 1), 100, 1, 1},               // a ns before the first goes
		{at(5 * h), 100, 1, 0},                 // it has gone
		{at(5 * h), 100, 31, 10 * m},           // the second goes at t0+5h10m
		{at(5*h + 20*m - 1), 100, 100, 1},      // the last, a ns before
		{at(5*h + 20*m), 100, 100, 0},          // all gone
		{at(-h), 100, 1, 6 * h},                // a clock gone back: the same instants
		{at(-h), 100, 100, 6*h + 20*m},         // ...measured from now
		{math.MinInt64, 100, 1, math.MaxInt64}, // too far to say: saturated
	} {
		s := newState(t, legacy, evs...)
		got := s.RetryAfter(tc.now, tc.limit, tc.n)
		if got != tc.want {
			t.Errorf("RetryAfter(t0%+v, limit %d, n %d) = %v, want %v", time.Duration(tc.now-t0), tc.limit, tc.n, got, tc.want)
			continue
		}
		if got <= 0 || got == math.MaxInt64 {
			continue
		}
		// Exact: the call fits at now + got, not a nanosecond before.
		before, after := clone(t, s), clone(t, s)
		if used := before.Used(tc.now + int64(got) - 1); used+tc.n <= tc.limit {
			t.Errorf("RetryAfter(limit %d, n %d) = %v: fits a ns earlier (used %d)", tc.limit, tc.n, got, used)
		}
		if used := after.Used(tc.now + int64(got)); used+tc.n > tc.limit {
			t.Errorf("RetryAfter(limit %d, n %d) = %v: does not fit then (used %d)", tc.limit, tc.n, got, used)
		}
	}
}

// TestPastLimitAndRecovery records past a limit, as Record does, and
// follows the key back under it.
func TestPastLimitAndRecovery(t *testing.T) {
	const limit = 100
	h := time.Hour
	s := newState(t, legacy, ev{t0, 80}, ev{at(h), 80}) // 160: past the limit
	if got := s.Used(at(h)); got != 160 {
		t.Fatalf("Used = %d, want 160", got)
	}
	steps := []struct {
		now   int64
		n     int64
		used  int64
		retry time.Duration
		reset time.Duration
	}{
		{at(h), 0, 160, 4 * h, 5 * h},      // a peek waits for the first bucket
		{at(h), 1, 160, 4 * h, 5 * h},      // 80 + 1 <= 100 then
		{at(h), 21, 160, 5 * h, 5 * h},     // 80 + 21 > 100: the second must go too
		{at(h), 21, 160, 5 * h, 5 * h},     // (asked twice: nothing changed)
		{at(2 * h), 50, 160, 4 * h, 4 * h}, // 160-80 = 80 + 50 > 100: both
		{at(5 * h), 20, 80, 0, h},          // the first has gone: 80 + 20 fits
		{at(5 * h), 21, 80, h, h},          // 80 + 21 does not, until t0+6h
		{at(6*h - 1), 100, 80, 1, 1},       // a ns before the second goes
		{at(6 * h), 100, 0, 0, 0},          // all gone: the state is fresh
		{at(6 * h), 101, 0, -1, 0},         // still never
	}
	for i, st := range steps {
		if got := s.RetryAfter(st.now, limit, st.n); got != st.retry {
			t.Errorf("step %d: RetryAfter(n %d) = %v, want %v", i, st.n, got, st.retry)
		}
		if got := s.Used(st.now); got != st.used {
			t.Errorf("step %d: Used = %d, want %d", i, got, st.used)
		}
		if got := s.ResetAfter(st.now); got != st.reset {
			t.Errorf("step %d: ResetAfter = %v, want %v", i, got, st.reset)
		}
	}
	// Taking again works as for a fresh key.
	s.Add(at(6*h), 100)
	if got, want := bucketsOf(s), []bk{{at(6 * h), 100}}; !equalBuckets(got, want) {
		t.Errorf("buckets = %v, want %v", got, want)
	}
}

func TestResetAfter(t *testing.T) {
	h, m := time.Hour, time.Minute
	for _, tc := range []struct {
		name string
		evs  []ev
		now  int64
		want time.Duration
	}{
		{"empty", nil, t0, 0},
		{"one bucket", []ev{{at(3 * m), 1}}, at(h), 4 * h},
		{"the newest decides", []ev{{t0, 1}, {at(2*h + 7*m), 1}}, at(3 * h), 4*h + 5*m},
		{"at the last ns", []ev{{t0, 1}}, at(5*h - 1), 1},
		{"expired", []ev{{t0, 1}}, at(5 * h), 0},
		{"the instant recorded", []ev{{at(h), 1}}, at(h), 5 * h},
		{"clock gone back", []ev{{at(h), 1}}, t0, 6 * h},
		{"clock gone far back", []ev{{at(h), 1}}, math.MinInt64, math.MaxInt64},
	} {
		s := newState(t, legacy, tc.evs...)
		if got := s.ResetAfter(tc.now); got != tc.want {
			t.Errorf("%s: ResetAfter = %v, want %v", tc.name, got, tc.want)
		}
		if (s.Len() == 0) != (tc.want == 0) {
			t.Errorf("%s: ResetAfter %v with %d buckets", tc.name, tc.want, s.Len())
		}
	}
}

// TestClockBackwards checks the rule of the package doc: usage at an
// instant whose bucket is older than the newest goes to the newest,
// nothing expires early, nothing panics.
func TestClockBackwards(t *testing.T) {
	h := time.Hour
	s := newState(t, legacy, ev{at(h), 5}, ev{t0, 3}, ev{at(-10 * h), 2}) // all in t0+1h's bucket
	if got, want := bucketsOf(s), []bk{{at(h), 10}}; !equalBuckets(got, want) {
		t.Fatalf("buckets = %v, want %v", got, want)
	}
	if got := s.ResetAfter(t0); got != 6*h {
		t.Errorf("ResetAfter(t0) = %v, want 6h", got)
	}
	if got := s.Used(at(6*h - 1)); got != 10 {
		t.Errorf("Used(t0+6h-1ns) = %d, want 10: expired early", got)
	}

	// Expiry only moves forward: what a later instant dropped stays dropped.
	s = newState(t, legacy, ev{t0, 1}, ev{at(3 * h), 2})
	if got := s.Used(at(5 * h)); got != 2 {
		t.Fatalf("Used(t0+5h) = %d, want 2", got)
	}
	if got := s.Used(t0); got != 2 {
		t.Errorf("Used(t0) after Used(t0+5h) = %d, want 2", got)
	}
	s.Add(t0, 4) // into t0+3h's bucket
	if got, want := bucketsOf(s), []bk{{at(3 * h), 6}}; !equalBuckets(got, want) {
		t.Errorf("buckets = %v, want %v", got, want)
	}

	// An empty state keeps no memory: it is a fresh one.
	s = newState(t, legacy, ev{at(h), 1})
	s.Expire(at(7 * h))
	s.Add(t0, 1)
	if got, want := bucketsOf(s), []bk{{t0, 1}}; !equalBuckets(got, want) {
		t.Errorf("buckets = %v, want %v", got, want)
	}

	// Extremes: from the end of time back to its start and forward again.
	s = newState(t, Config{Window: 10, Bucket: 2}, ev{math.MaxInt64, 3}, ev{math.MinInt64, 4}, ev{0, 1})
	if got, want := bucketsOf(s), []bk{{math.MaxInt64 - 1, 8}}; !equalBuckets(got, want) {
		t.Errorf("buckets = %v, want %v", got, want)
	}
	if got := s.ResetAfter(math.MinInt64); got != math.MaxInt64 {
		t.Errorf("ResetAfter(MinInt64) = %v, want MaxInt64", got)
	}
	if got := s.RetryAfter(math.MinInt64, 7, 0); got != math.MaxInt64 {
		t.Errorf("RetryAfter(MinInt64) = %v, want MaxInt64", got)
	}
	if got := s.Used(math.MaxInt64); got != 8 {
		t.Errorf("Used(MaxInt64) = %d, want 8", got)
	}
	checkState(t, s)
}

// TestManyBuckets slides the legacy window, 60 buckets of 5 minutes, over
// a day of usage every minute: the ring stays at 64 slots, and the used
// total is always the last 5 hours' to bucket precision.
func TestManyBuckets(t *testing.T) {
	s := newState(t, legacy)
	m := int64(time.Minute)
	for i := range int64(24 * 60) {
		now := t0 + i*m + 17 // a minute's usage of i+1 units, never at a bucket start
		s.Add(now, i+1)
		// Counted: minutes j whose bucket start floor(j/5)*5 > i - 300.
		var want int64
		for j := range i + 1 {
			if j/5*5 > i-300 {
				want += j + 1
			}
		}
		if got := s.Used(now); got != want {
			t.Fatalf("minute %d: Used = %d, want %d", i, got, want)
		}
		if i >= 300 && s.Len() != 60 {
			t.Fatalf("minute %d: %d buckets, want 60", i, s.Len())
		}
	}
	checkState(t, s)
	if len(s.ring) != 64 {
		t.Errorf("ring of %d slots, want 64", len(s.ring))
	}
	// The newest bucket holds minutes 1435-1439; the oldest, 1140-1144.
	if got, want := s.RetryAfter(t0+1439*m, 0, 0), time.Duration(1435*m+300*m-1439*m); got != want {
		t.Errorf("RetryAfter(limit 0) = %v, want %v", got, want)
	}
	if got, want := s.RetryAfter(t0+1439*m, s.Used(t0+1439*m), 1), time.Duration(1140*m+300*m-1439*m); got != want {
		t.Errorf("RetryAfter(limit 0) = %v, want %v", got, want)
	}
}

// TestLargeRing fills a window of MaxBuckets buckets, then lets it expire
// in steps, checking the binary searches of Expire and RetryAfter.
func TestLargeRing(t *testing.T) {
	c := Config{Window: MaxBuckets * time.Second, Bucket: time.Second}
	s := newState(t, c)
	sec := int64(time.Second)
	for i := range int64(MaxBuckets) {
		s.Add(t0+i*sec+i%sec, 2) // usage anywhere within each second
	}
	checkState(t, s)
	if s.Len() != MaxBuckets || len(s.ring) != MaxBuckets {
		t.Fatalf("%d buckets in %d slots, want %d in as many", s.Len(), len(s.ring), MaxBuckets)
	}
	now := t0 + (MaxBuckets-1)*sec
	if got, want := s.RetryAfter(now, 2*MaxBuckets, 2), time.Duration(sec); got != want {
		t.Errorf("RetryAfter(one bucket) = %v, want %v", got, want)
	}
	if got, want := s.RetryAfter(now, 2*MaxBuckets, 2*MaxBuckets), time.Duration(MaxBuckets*sec); got != want {
		t.Errorf("RetryAfter(all) = %v, want %v", got, want)
	}
	if got, want := s.RetryAfter(now, 2*MaxBuckets, 2*1000+1), time.Duration(1001*sec); got != want {
		t.Errorf("RetryAfter(1001 buckets) = %v, want %v", got, want)
	}
	// Expire 12346 buckets at once, then the rest but one.
	if got := s.Used(t0 + (MaxBuckets+12345)*sec); got != 2*(MaxBuckets-12346) {
		t.Errorf("Used = %d, want %d", got, 2*(MaxBuckets-12346))
	}
	// A push after the jump reuses the slots freed.
	s.Add(t0+(MaxBuckets+12345)*sec, 1)
	if got := s.Used(t0 + (2*MaxBuckets-2)*sec); got != 3 {
		t.Errorf("Used = %d, want 3", got)
	}
	checkState(t, s)
	if len(s.ring) != MaxBuckets {
		t.Errorf("the ring grew to %d", len(s.ring))
	}
}

// TestSaturation records amounts near math.MaxInt64: the total never
// wraps, and what would pass it is not counted.
func TestSaturation(t *testing.T) {
	const max = math.MaxInt64
	m := time.Minute
	s := newState(t, legacy, ev{t0, max - 10}, ev{at(5 * m), 4}, ev{at(10 * m), max})
	if got, want := bucketsOf(s), []bk{{t0, max - 10}, {at(5 * m), 4}, {at(10 * m), 6}}; !equalBuckets(got, want) {
		t.Fatalf("buckets = %v, want %v", got, want)
	}
	if got := s.RetryAfter(at(10*m), max, 1); got != 5*time.Hour-10*m {
		t.Errorf("RetryAfter = %v", got)
	}
	if got := s.RetryAfter(at(10*m), max, max); got != 5*time.Hour {
		t.Errorf("RetryAfter(n MaxInt64) = %v", got)
	}
	s.Add(at(10*m), 1) // nothing left to count
	if got := s.Used(at(5 * time.Hour)); got != 10 {
		t.Errorf("Used after the first expired = %d, want 10", got)
	}
	s.Add(at(5*time.Hour), max) // room again: MaxInt64 - 10
	if got := s.Used(at(5 * time.Hour)); got != max {
		t.Errorf("Used = %d, want MaxInt64", got)
	}
	checkState(t, s)
}

// TestZeroState checks that the zero State, which has no Config, never
// panics and counts nothing.
func TestZeroState(t *testing.T) {
	var s State
	s.Add(t0, 5)
	s.AddAt(t0, t0, 5)
	if got := s.Used(t0); got != 0 {
		t.Errorf("Used = %d", got)
	}
	if got := s.RetryAfter(t0, 1, 1); got != 0 {
		t.Errorf("RetryAfter = %v", got)
	}
	if got := s.ResetAfter(t0); got != 0 {
		t.Errorf("ResetAfter = %v", got)
	}
	if err := s.Append(t0, 1); err == nil {
		t.Error("Append on the zero State: no error")
	}
}

// TestNoAllocs checks that a state at its working size allocates nothing
// per call, whichever method.
func TestNoAllocs(t *testing.T) {
	s := newState(t, legacy)
	now := t0
	step := func() {
		now += int64(37 * time.Second)
		s.Add(now, 3)
		_ = s.Used(now)
		_ = s.RetryAfter(now, 100, 5)
		_ = s.ResetAfter(now)
		s.Expire(now)
		for start, n := range s.All() {
			_, _ = start, n
		}
	}
	for range 2000 { // past its working size
		step()
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Errorf("%v allocations per call", a)
	}
	m := int64(time.Minute)
	if a := testing.AllocsPerRun(100, func() { s.AddAt(now, now-60*m, 1) }); a != 0 {
		t.Errorf("AddAt: %v allocations per call", a)
	}
}

// TestOneBucketInline checks that a State is 64 bytes, one of Go's size
// classes, and holds its first bucket in itself: New then Add allocates the
// State alone. Set copies one so that the copy holds its bucket in its own
// slot, while a shallow copy shares it, as it shares a larger ring.
func TestOneBucketInline(t *testing.T) {
	if size := unsafe.Sizeof(State{}); size != 64 {
		t.Errorf("a State is %d bytes, not 64", size)
	}
	c := Config{Window: 24 * time.Hour, Bucket: 24 * time.Minute}
	var s *State
	if a := testing.AllocsPerRun(100, func() {
		s, _ = New(c)
		s.Add(t0, 1)
	}); a != 1 {
		t.Errorf("New then Add: %v allocations, not 1", a)
	}
	checkState(t, s)
	if got := s.Config(); got != c {
		t.Errorf("Config = %+v, not %+v", got, c)
	}
	var w State
	w.Set(s)
	checkState(t, &w)
	w.Add(t0, 2)
	if s.Used(t0) != 1 || w.Used(t0) != 3 {
		t.Errorf("after Set and Add: Used %d and %d, not 1 and 3", s.Used(t0), w.Used(t0))
	}
	v := *s // shallow: shares the slot
	if &v.ring[0] != &s.one[0] {
		t.Error("a shallow copy does not share the slot")
	}
	s.Add(t0+int64(c.Bucket), 1) // grows to 2, leaving the slot behind
	checkState(t, s)
	w.Set(s)
	if len(w.ring) != 2 || &w.ring[0] != &s.ring[0] || w.Used(t0+int64(c.Bucket)) != 2 {
		t.Errorf("Set of a ring of 2: %d slots, Used %d", len(w.ring), w.Used(t0+int64(c.Bucket)))
	}
}
