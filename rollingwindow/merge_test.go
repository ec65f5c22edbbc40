package rollingwindow

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestAddAt covers the legacy path: usage merged at a past instant lands
// in that instant's bucket, in time order, and expires with it.
func TestAddAt(t *testing.T) {
	h, m := time.Hour, time.Minute
	type addAt struct{ now, t, n int64 }
	for _, tc := range []struct {
		name  string
		evs   []ev    // recorded first with Add
		adds  []addAt // then merged with AddAt
		want  []bk
		reset time.Duration // ResetAfter at the last AddAt's now
	}{
		{"a legacy window into an empty state", nil,
			[]addAt{{at(h), at(2 * m), 902}}, []bk{{t0, 902}}, 4 * h},
		{"a window already over adds nothing", nil,
			[]addAt{{at(5 * h), at(4*m + 59*time.Second), 902}}, nil, 0},
		{"a window a ns from its end", nil,
			[]addAt{{at(5*h - 1), at(4 * m), 902}}, []bk{{t0, 902}}, 1},
		{"before the newest", []ev{{at(h), 10}},
			[]addAt{{at(h), at(20 * m), 5}}, []bk{{at(20 * m), 5}, {at(h), 10}}, 5 * h},
		{"into the middle", []ev{{t0, 1}, {at(h), 2}},
			[]addAt{{at(h), at(30*m + 1), 4}}, []bk{{t0, 1}, {at(30 * m), 4}, {at(h), 2}}, 5 * h},
		{"into the oldest, merged", []ev{{t0, 1}, {at(h), 2}},
			[]addAt{{at(h), at(m), 4}}, []bk{{t0, 5}, {at(h), 2}}, 5 * h},
		{"before the oldest", []ev{{at(10 * m), 1}, {at(h), 2}},
			[]addAt{{at(h), t0, 4}}, []bk{{t0, 4}, {at(10 * m), 1}, {at(h), 2}}, 5 * h},
		{"into the newest, merged", []ev{{t0, 1}, {at(h), 2}},
			[]addAt{{at(h + m), at(h + 2*m), 4}}, []bk{{t0, 1}, {at(h), 6}}, 5*h - m},
		{"after the newest", []ev{{t0, 1}},
			[]addAt{{at(h), at(h - 1), 4}}, []bk{{t0, 1}, {at(55 * m), 4}}, 5*h - 5*m},
		{"many windows of one key, out of order", nil,
			[]addAt{{at(3 * h), at(2 * h), 3}, {at(3 * h), t0, 1}, {at(3 * h), at(h), 2}, {at(3 * h), at(2*h + m), 4}, {at(3 * h), at(-3 * h), 9}},
			[]bk{{t0, 1}, {at(h), 2}, {at(2 * h), 7}}, 4 * h},
		{"the future counts as now", nil,
			[]addAt{{at(h), at(3 * h), 7}}, []bk{{at(h), 7}}, 5 * h},
		{"a clock gone back: the oldest bucket the ring holds", []ev{{at(10 * h), 1}},
			[]addAt{{at(h), at(h), 7}}, []bk{{at(5*h + 5*m), 7}, {at(10 * h), 1}}, 14 * h},
		{"a clock gone back, merged there", []ev{{at(5*h + 5*m), 2}, {at(10 * h), 1}},
			[]addAt{{at(h), at(2 * h), 7}}, []bk{{at(5*h + 5*m), 9}, {at(10 * h), 1}}, 14 * h},
		{"a clock gone back, within the ring's span", []ev{{at(5 * h), 2}, {at(6 * h), 1}},
			[]addAt{{at(2 * h), at(2 * h), 7}}, []bk{{at(2 * h), 7}, {at(5 * h), 2}, {at(6 * h), 1}}, 9 * h},
		{"n <= 0 adds nothing", []ev{{at(h), 1}},
			[]addAt{{at(h), t0, 0}, {at(h), t0, -3}}, []bk{{at(h), 1}}, 5 * h},
		{"saturates", []ev{{at(h), math.MaxInt64 - 2}},
			[]addAt{{at(h), t0, math.MaxInt64}, {at(h), t0, 1}}, []bk{{t0, 2}, {at(h), math.MaxInt64 - 2}}, 5 * h},
		{"negative instants", nil,
			[]addAt{{-1, -int64(h), 3}, {-1, -1, 2}}, []bk{{-int64(h), 3}, {-int64(5 * m), 2}}, 5*h - 5*m + 1},
	} {
		s := newState(t, legacy, tc.evs...)
		var now int64
		for _, a := range tc.adds {
			s.AddAt(a.now, a.t, a.n)
			checkState(t, s)
			now = a.now
		}
		if got := bucketsOf(s); !equalBuckets(got, tc.want) {
			t.Errorf("%s: buckets %v, want %v", tc.name, got, tc.want)
		}
		if got := s.ResetAfter(now); got != tc.reset {
			t.Errorf("%s: ResetAfter = %v, want %v", tc.name, got, tc.reset)
		}
	}
}

// TestAddAtGrows inserts into the middle of a ring that wraps around its
// end, and into full rings, which must grow.
func TestAddAtGrows(t *testing.T) {
	c := Config{Window: 16, Bucket: 1}
	s := newState(t, c, ev{0, 1}, ev{1, 1}, ev{2, 1}, ev{3, 1}) // 4 slots, full
	s.AddAt(10, 8, 1)                                           // after the newest: grows to 8
	s.Expire(17)                                                // drops 0 and 1: the ring starts at slot 2
	s.Add(17, 1)
	for _, t := range []int64{12, 13, 14, 9, 3} { // 14 wraps to slot 0; 9 shifts across the end
		s.AddAt(17, t, 1+4*int64(t%3))
	}
	if len(s.ring) != 8 || s.head != 2 {
		t.Fatalf("ring of %d slots from %d, want 8 from 2", len(s.ring), s.head)
	}
	s.AddAt(17, 15, 1) // full: grows to 16
	want := []bk{{2, 1}, {3, 2}, {8, 1}, {9, 1}, {12, 1}, {13, 5}, {14, 9}, {15, 1}, {17, 1}}
	if got := bucketsOf(s); !equalBuckets(got, want) {
		t.Errorf("buckets %v, want %v", got, want)
	}
	checkState(t, s)
	if len(s.ring) != 16 {
		t.Errorf("ring of %d slots, want 16", len(s.ring))
	}
	if got := s.RetryAfter(17, 19, 0); got != 2 { // used 22: the 2 and 3 buckets go at 19
		t.Errorf("RetryAfter = %v, want 2ns", got)
	}
}

func TestReconfigure(t *testing.T) {
	h, m := time.Hour, time.Minute
	for _, tc := range []struct {
		name string
		to   Config // from legacy
		evs  []ev
		want []bk
	}{
		{"coarser buckets merge, later", Config{Window: 5 * h, Bucket: h},
			[]ev{{at(5 * m), 1}, {at(10 * m), 2}, {at(h), 4}}, []bk{{at(h), 7}}},
		{"aligned buckets stay", Config{Window: 5 * h, Bucket: h},
			[]ev{{t0, 1}, {at(10 * m), 2}, {at(h), 4}}, []bk{{t0, 1}, {at(h), 6}}},
		{"finer buckets keep their starts", Config{Window: 5 * h, Bucket: m},
			[]ev{{t0, 1}, {at(10 * m), 2}}, []bk{{t0, 1}, {at(10 * m), 2}}},
		{"a shorter window moves the old up", Config{Window: h, Bucket: 5 * m},
			[]ev{{t0, 1}, {at(30 * m), 2}, {at(2 * h), 4}}, []bk{{at(h + 5*m), 3}, {at(2 * h), 4}}},
		{"a longer window", Config{Window: 10 * h, Bucket: 5 * m},
			[]ev{{t0, 1}, {at(4 * h), 2}}, []bk{{t0, 1}, {at(4 * h), 2}}},
		{"empty", Config{Window: h, Bucket: m}, nil, nil},
		{"the end of time", Config{Window: 7 * m, Bucket: 7 * m},
			[]ev{{math.MaxInt64, 1}}, []bk{{math.MaxInt64 - math.MaxInt64%int64(7*m), 1}}},
	} {
		s := newState(t, legacy, tc.evs...)
		if err := s.Reconfigure(tc.to); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.Config() != tc.to {
			t.Errorf("%s: Config = %+v", tc.name, s.Config())
		}
		if got := bucketsOf(s); !equalBuckets(got, tc.want) {
			t.Errorf("%s: buckets %v, want %v", tc.name, got, tc.want)
		}
		checkState(t, s)
	}

	s := newState(t, legacy, ev{t0, 1})
	if err := s.Reconfigure(Config{Window: h, Bucket: 7 * m}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Reconfigure(invalid) = %v", err)
	}
	if s.Config() != legacy || !equalBuckets(bucketsOf(s), []bk{{t0, 1}}) {
		t.Errorf("a failed Reconfigure changed the state: %+v %v", s.Config(), bucketsOf(s))
	}
}
