package rollingwindow

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// seq returns buckets as the sequence Rebuild reads.
func seq(bs ...bk) func(func(int64, int64) bool) {
	return func(yield func(int64, int64) bool) {
		for _, b := range bs {
			if !yield(b.start, b.n) {
				return
			}
		}
	}
}

func TestRebuild(t *testing.T) {
	h, m := time.Hour, time.Minute
	for _, tc := range []struct {
		name string
		c    Config
		bs   []bk
		want string // a part of the error; "" for none
	}{
		{"empty", legacy, nil, ""},
		{"one", legacy, []bk{{t0, 1}}, ""},
		{"a full window", legacy, []bk{{t0, 1}, {at(h), 2}, {at(5*h - 5*m), 3}}, ""},
		{"negative and min starts", Config{Window: 4, Bucket: 4}, []bk{{math.MinInt64, 1}}, ""},
		{"the total at MaxInt64", legacy, []bk{{t0, math.MaxInt64 - 1}, {at(m * 5), 1}}, ""},
		{"long expired: dropped on use, not rejected", legacy, []bk{{-int64(h), 1}}, ""},
		{"a bad config", Config{Window: h, Bucket: 7 * m}, nil, "not a multiple of Bucket"},
		{"n == 0", legacy, []bk{{t0, 1}, {at(h), 0}}, "bucket 1 (start " + "1768726800000000000, n 0): count is not positive"},
		{"n < 0", legacy, []bk{{t0, -1}}, "count is not positive"},
		{"misaligned", legacy, []bk{{t0 + 1, 1}}, "start is not a multiple of Bucket 5m0s"},
		{"negative misaligned", legacy, []bk{{-int64(m), 1}}, "start is not a multiple of Bucket"},
		{"the same start twice", legacy, []bk{{t0, 1}, {t0, 1}}, "start is not after the previous bucket's"},
		{"out of order", legacy, []bk{{at(h), 1}, {t0, 1}}, "start is not after the previous bucket's"},
		{"a window apart", legacy, []bk{{t0, 1}, {at(5 * h), 1}}, "start is Window 5h0m0s or more after the oldest bucket's"},
		{"more than a window apart", legacy, []bk{{t0, 1}, {at(h), 1}, {at(9 * h), 1}}, "or more after the oldest"},
		{"the total overflows", legacy, []bk{{t0, math.MaxInt64}, {at(h), 1}}, "the total passes math.MaxInt64"},
	} {
		s, err := Rebuild(tc.c, seq(tc.bs...))
		if tc.want != "" {
			if s != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %v, %v, want an error containing %q", tc.name, s, err, tc.want)
			} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v matches neither ErrCorrupt nor ErrInvalid", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkState(t, s)
		if got := bucketsOf(s); !equalBuckets(got, tc.bs) {
			t.Errorf("%s: buckets %v, want %v", tc.name, got, tc.bs)
		}
	}
}

// TestAppendLeavesStateOnError checks that a rejected bucket changes
// nothing, and that a State rebuilt from All behaves as the original.
func TestAppendAndRoundTrip(t *testing.T) {
	h, m := time.Hour, time.Minute
	s := newState(t, legacy, ev{t0, 3}, ev{at(h + m), 4}, ev{at(4 * h), 5})
	before := bucketsOf(s)
	for _, b := range []bk{{at(4 * h), 1}, {at(5 * h), 1}, {at(4*h + 5*m), math.MaxInt64}, {at(4*h + 1), 1}} {
		if err := s.Append(b.start, b.n); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Append(%v) = %v", b, err)
		}
	}
	if got := bucketsOf(s); !equalBuckets(got, before) {
		t.Fatalf("rejected Appends changed the buckets: %v, want %v", got, before)
	}
	if err := s.Append(at(4*h+5*m), 6); err != nil {
		t.Fatal(err)
	}
	c := clone(t, s)
	if !slices.Equal(bucketsOf(c), bucketsOf(s)) {
		t.Fatalf("round trip: %v, want %v", bucketsOf(c), bucketsOf(s))
	}
	for _, now := range []int64{at(h), at(5 * h), at(6*h + m), at(9*h + 5*m - 1), at(10 * h)} {
		if a, b := s.RetryAfter(now, 10, 2), c.RetryAfter(now, 10, 2); a != b {
			t.Errorf("RetryAfter at %v: %v and %v", now, a, b)
		}
		if a, b := s.Used(now), c.Used(now); a != b {
			t.Errorf("Used at %v: %d and %d", now, a, b)
		}
	}
	// An early stop of All, as a codec that fails partway may do.
	for range s.All() {
		break
	}
}
