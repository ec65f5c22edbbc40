package rollingwindow

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string // a part of the error; "" for none
	}{
		{legacy, ""},
		{Config{Window: 1, Bucket: 1}, ""},
		{Config{Window: time.Hour, Bucket: time.Hour}, ""},
		{Config{Window: MaxBuckets * time.Second, Bucket: time.Second}, ""},
		{Config{Window: math.MaxInt64, Bucket: math.MaxInt64}, ""},
		{Config{Window: time.Hour, Bucket: 0}, "Bucket must be positive"},
		{Config{Window: time.Hour, Bucket: -time.Minute}, "Bucket must be positive"},
		{Config{Window: 0, Bucket: time.Minute}, "Window must be positive"},
		{Config{Window: -time.Hour, Bucket: time.Minute}, "Window must be positive"},
		{Config{}, "Bucket must be positive"},
		{Config{Window: time.Hour, Bucket: 7 * time.Minute}, "Window 1h0m0s is not a multiple of Bucket 7m0s"},
		{Config{Window: time.Minute, Bucket: time.Hour}, "is not a multiple of Bucket"},
		{Config{Window: (MaxBuckets + 1) * time.Second, Bucket: time.Second}, "more than MaxBuckets (65536)"},
		{Config{Window: 5 * time.Hour, Bucket: time.Millisecond}, "holds 18000000 buckets"},
	} {
		err := tc.c.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.c, err)
			}
			if _, err := New(tc.c); err != nil {
				t.Errorf("New(%+v): %v", tc.c, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want an ErrInvalid containing %q", tc.c, err, tc.want)
		}
		if s, err2 := New(tc.c); s != nil || !errors.Is(err2, ErrInvalid) {
			t.Errorf("New(%+v) = %v, %v", tc.c, s, err2)
		}
	}
}

func TestBuckets(t *testing.T) {
	for c, want := range map[Config]int{
		legacy:                                 60,
		{Window: time.Hour, Bucket: time.Hour}: 1,
		{Window: MaxBuckets * time.Second, Bucket: time.Second}: MaxBuckets,
		{}: 0,
	} {
		if got := c.Buckets(); got != want {
			t.Errorf("%+v.Buckets() = %d, want %d", c, got, want)
		}
	}
}

func TestBucketStart(t *testing.T) {
	m5 := int64(5 * time.Minute)
	for _, tc := range []struct {
		c       Config
		t, want int64
	}{
		{legacy, t0, t0},
		{legacy, t0 + 1, t0},
		{legacy, t0 + m5 - 1, t0},
		{legacy, t0 + m5, t0 + m5},
		{legacy, 0, 0},
		{legacy, 1, 0},
		{legacy, -1, -m5}, // floor, not truncation
		{legacy, -m5, -m5},
		{legacy, -m5 - 1, -2 * m5},
		{legacy, -m5 + 1, -m5},
		{Config{Window: 9, Bucket: 3}, -7, -9},
		{Config{Window: 9, Bucket: 3}, 7, 6},
		{Config{Window: 1, Bucket: 1}, math.MinInt64, math.MinInt64},
		{Config{Window: 1, Bucket: 1}, math.MaxInt64, math.MaxInt64},
		{Config{Window: 4, Bucket: 4}, math.MinInt64, math.MinInt64}, // 2^63 is a multiple of 4
		{Config{Window: 4, Bucket: 4}, math.MaxInt64, math.MaxInt64 - 3},
		// -2^63 = -3074457345618258602*3 - 2: the bucket floor would be
		// -2^63 - 1, which does not fit; the first whole bucket is next.
		{Config{Window: 3, Bucket: 3}, math.MinInt64, math.MinInt64 + 2},
		{Config{Window: 3, Bucket: 3}, math.MinInt64 + 1, math.MinInt64 + 2},
		{Config{Window: 3, Bucket: 3}, math.MinInt64 + 2, math.MinInt64 + 2},
		{Config{Window: 3, Bucket: 3}, math.MinInt64 + 5, math.MinInt64 + 5},
		{legacy, math.MinInt64, math.MinInt64 - math.MinInt64%m5}, // MinInt64 % m5 < 0
		{Config{}, 42, 42}, // no Bucket: no panic
	} {
		got := tc.c.BucketStart(tc.t)
		if got != tc.want {
			t.Errorf("%+v.BucketStart(%d) = %d, want %d", tc.c, tc.t, got, tc.want)
		}
		if b := int64(tc.c.Bucket); b > 0 && (got%b != 0 || got-tc.t >= b || tc.t-got >= b) {
			t.Errorf("%+v.BucketStart(%d) = %d: not an aligned start within a bucket of t", tc.c, tc.t, got)
		}
	}
}
