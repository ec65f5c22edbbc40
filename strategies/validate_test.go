package strategies

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore/rollingwindow"
)

func TestValidateRejects(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	q := func(name string, limit int64, w time.Duration) Quota { return Quota{name, limit, w} }
	ok := TokenBucket{Rate: 1, Burst: 1}
	for _, c := range []struct {
		s    Strategy
		want string // in the message
	}{
		{TokenBucket{Rate: nan, Burst: 1}, "token bucket: rate must be a positive finite number, got NaN"},
		{TokenBucket{Rate: inf, Burst: 1}, "rate"},
		{TokenBucket{Rate: -inf, Burst: 1}, "rate"},
		{TokenBucket{Rate: 0, Burst: 1}, "rate"},
		{TokenBucket{Rate: -1, Burst: 1}, "rate"},
		{TokenBucket{Rate: 1, Burst: 0}, "burst must be at least 1, got 0"},
		{TokenBucket{Rate: 1, Burst: -5}, "burst"},
		{TokenBucket{}, "rate"},
		{LeakyBucket{Rate: nan, Capacity: 1}, "leaky bucket: rate"},
		{LeakyBucket{Rate: inf, Capacity: 1}, "rate"},
		{LeakyBucket{Rate: 0, Capacity: 1}, "rate"},
		{LeakyBucket{Rate: 1, Capacity: 0}, "capacity"},
		{LeakyBucket{Rate: 1, Capacity: math.MinInt64}, "capacity"},
		{GCRA{Rate: nan, Burst: 1}, "gcra: rate"},
		{GCRA{Rate: inf, Burst: 1}, "rate"},
		{GCRA{Rate: -1, Burst: 1}, "rate"},
		{GCRA{Rate: 0, Burst: 1}, "rate"},
		{GCRA{Rate: 1, Burst: 0}, "burst"},
		{FixedWindow{}, "at least one quota"},
		{FixedWindow{Quotas: []Quota{}}, "at least one quota"},
		{FixedWindow{Quotas: []Quota{q("", 1, time.Second)}}, `quota 1: name must be 1-32 of [A-Za-z0-9_.:@+-], got ""`},
		{FixedWindow{Quotas: []Quota{q(strings.Repeat("a", 33), 1, time.Second)}}, "name"},
		{FixedWindow{Quotas: []Quota{q("a|b", 1, time.Second)}}, "name"},
		{FixedWindow{Quotas: []Quota{q("a$b", 1, time.Second)}}, "name"},
		{FixedWindow{Quotas: []Quota{q("a b", 1, time.Second)}}, "name"},
		{FixedWindow{Quotas: []Quota{q("é", 1, time.Second)}}, "name"},
		{FixedWindow{Quotas: []Quota{q("a", 1, time.Second), q("a", 2, time.Minute)}}, `quota 2: duplicate name "a"`},
		{FixedWindow{Quotas: []Quota{q("a", 0, time.Second)}}, `quota "a": limit must be at least 1`},
		{FixedWindow{Quotas: []Quota{q("a", -1, time.Second)}}, "limit"},
		{FixedWindow{Quotas: []Quota{q("a", 1, 0)}}, `quota "a": window must be in`},
		{FixedWindow{Quotas: []Quota{q("a", 1, -time.Second)}}, "window"},
		{FixedWindow{Quotas: []Quota{q("a", 1, MaxWindow+1)}}, "window"},
		{FixedWindow{Quotas: []Quota{q("a", 1, math.MaxInt64)}}, "window"},
		{SlidingWindow{Limit: 0, Window: time.Second}, "sliding window: limit"},
		{SlidingWindow{Limit: 1, Window: 0}, "window"},
		{SlidingWindow{Limit: 1, Window: -1}, "window"},
		{SlidingWindow{Limit: 1, Window: math.MaxInt64}, "window"},
		{RollingWindow{Limit: 0, Window: time.Second, Bucket: time.Second}, "rolling window: limit must be at least 1, got 0"},
		{RollingWindow{Limit: -1, Window: time.Second, Bucket: time.Second}, "limit"},
		{RollingWindow{Limit: 1, Window: 0, Bucket: time.Second}, "rolling window: window must be in"},
		{RollingWindow{Limit: 1, Window: -time.Second, Bucket: time.Second}, "window"},
		{RollingWindow{Limit: 1, Window: MaxWindow + 1, Bucket: 1}, "window"},
		{RollingWindow{Limit: 1, Window: time.Second}, "rolling window: rollingwindow: Bucket must be positive, got 0"},
		{RollingWindow{Limit: 1, Window: time.Second, Bucket: -time.Second}, "Bucket must be positive"},
		{RollingWindow{Limit: 1, Window: time.Second, Bucket: 300 * time.Millisecond}, "Window 1s is not a multiple of Bucket 300ms"},
		{RollingWindow{Limit: 1, Window: time.Second, Bucket: 2 * time.Second}, "not a multiple of Bucket"},
		{RollingWindow{Limit: 1, Window: time.Second, Bucket: time.Microsecond}, "holds 1000000 buckets"},
		{RollingWindow{Limit: 1, Window: rollingwindow.MaxBuckets + 1, Bucket: 1}, "more than MaxBuckets"},
		{RollingWindow{}, "limit"},
		{Composite{Primary: ok, Secondary: RollingWindow{Limit: 1, Window: 3, Bucket: 2}}, "composite: secondary: strategies: rolling window"},
		{Composite{}, "composite: primary must not be nil"},
		{Composite{Primary: ok}, "secondary must not be nil"},
		{Composite{Secondary: ok}, "primary must not be nil"},
		{Composite{Primary: Composite{Primary: ok, Secondary: ok}, Secondary: ok}, "primary must not be a Composite"},
		{Composite{Primary: ok, Secondary: &Composite{Primary: ok, Secondary: ok}}, "secondary must not be a Composite"},
		{Composite{Primary: ok, Secondary: TokenBucket{Rate: nan, Burst: 1}}, "composite: secondary: strategies: token bucket: rate"},
		{Composite{Primary: FixedWindow{}, Secondary: ok}, "composite: primary: strategies: fixed window"},
		{Calendar{Limit: 0, Period: Day}, "calendar: limit must be at least 1, got 0"},
		{Calendar{Limit: -1, Period: Month}, "limit"},
		{Calendar{Limit: 1}, "calendar: period must be Day, Week or Month, got Period(0)"},
		{Calendar{Limit: 1, Period: Month + 1}, "got Period(4)"},
		{Calendar{}, "limit"},
		{Composite{Primary: ok, Secondary: Calendar{Limit: 1}}, "composite: secondary: strategies: calendar: period"},
	} {
		err := c.s.Validate()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%#v: Validate() = %v, want ErrInvalid", c.s, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "strategies: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%#v: Validate() = %q, want it to mention %q", c.s, err, c.want)
		}
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, s := range []Strategy{
		TokenBucket{Rate: 1, Burst: 1},
		TokenBucket{Rate: 1e300, Burst: math.MaxInt64},
		TokenBucket{Rate: 5e-324, Burst: 1},
		&TokenBucket{Rate: 1, Burst: 1},
		LeakyBucket{Rate: 0.001, Capacity: 1},
		GCRA{Rate: 1e9, Burst: 1},
		GCRA{Rate: 2e9, Burst: 1},                       // acts as 1e9
		GCRA{Rate: 1e-12, Burst: 1},                     // one per MaxWindow
		GCRA{Rate: 1, Burst: math.MaxInt64},             // effectively unlimited
		GCRA{Rate: 1.5e14, Burst: math.MaxInt64 / 1000}, // throttlecrab's "unlimited"
		GCRA{Rate: 1e-9, Burst: 3},
		GCRA{Rate: 1e9, Burst: int64(MaxWindow)},
		FixedWindow{Quotas: []Quota{{"a", 1, 1}, {strings.Repeat("Z", 32), math.MaxInt64, MaxWindow}, {"x_.:@+-9", 3, time.Hour}}},
		SlidingWindow{Limit: math.MaxInt64, Window: MaxWindow},
		SlidingWindow{Limit: 1, Window: 1},
		Composite{Primary: GCRA{Rate: 1, Burst: 1}, Secondary: &SlidingWindow{Limit: 1, Window: 1}},
		RollingWindow{Limit: 1, Window: 1, Bucket: 1},
		RollingWindow{Limit: math.MaxInt64, Window: 5 * time.Hour, Bucket: 5 * time.Minute},
		RollingWindow{Limit: 1, Window: rollingwindow.MaxBuckets, Bucket: 1},
		RollingWindow{Limit: 1, Window: MaxWindow, Bucket: MaxWindow},
		&RollingWindow{Limit: 1, Window: time.Second, Bucket: time.Millisecond},
		Composite{Primary: RollingWindow{Limit: 1, Window: 2, Bucket: 1}, Secondary: RollingWindow{Limit: 1, Window: 2, Bucket: 2}},
		Calendar{Limit: 1, Period: Day},
		Calendar{Limit: math.MaxInt64, Period: Week, Location: time.UTC},
		&Calendar{Limit: 1e18, Period: Month, Location: time.FixedZone("x", 3600)},
		Composite{Primary: GCRA{Rate: 1, Burst: 1}, Secondary: Calendar{Limit: 500e9, Period: Month, Location: time.Local}},
	} {
		if err := s.Validate(); err != nil {
			t.Errorf("%#v: Validate() = %v", s, err)
		}
	}
}

func TestErrMismatchIsInvalid(t *testing.T) {
	if !errors.Is(ErrMismatch, ErrInvalid) {
		t.Fatal("ErrMismatch does not match ErrInvalid")
	}
}
