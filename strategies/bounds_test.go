package strategies

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestExtremeConfigurations: every finite positive rate and every limit from
// 1 to math.MaxInt64 is accepted, and decides without an error, a panic or
// a result out of range, over calls of every size, records and clock jumps.
// A limit is honoured while it can be (the first call takes from a burst of
// 2 and leaves 1; a burst of 1 at a rate of one a century is spent by one
// call), and a huge one means "effectively unlimited": no call of 1 is
// denied.
func TestExtremeConfigurations(t *testing.T) {
	rates := []float64{math.SmallestNonzeroFloat64, 1e-300, 1e-12, 1.0 / (200 * 365 * 86400), 1, 1e9, 1.5e14, 1e300, math.MaxFloat64}
	limits := []int64{1, 2, math.MaxInt64 / 1000, math.MaxInt64 - 1, math.MaxInt64}
	var configs []Strategy
	for _, r := range rates {
		for _, b := range limits {
			configs = append(configs, GCRA{Rate: r, Burst: b}, TokenBucket{Rate: r, Burst: b}, LeakyBucket{Rate: r, Capacity: b})
		}
	}
	for _, l := range limits {
		configs = append(configs,
			FixedWindow{Quotas: []Quota{{Name: "q", Limit: l, Window: MaxWindow}}},
			SlidingWindow{Limit: l, Window: time.Nanosecond},
			RollingWindow{Limit: l, Window: time.Hour, Bucket: time.Minute},
			Calendar{Limit: l, Period: Month, Location: paris},
			Composite{Primary: GCRA{Rate: 1.5e14, Burst: l}, Secondary: TokenBucket{Rate: math.MaxFloat64, Burst: l}})
	}
	steps := []struct {
		op op
		n  int64
		at int64
	}{
		{allow, 1, t0}, {allow, 1, t0}, {peek, 0, t0}, {allow, math.MaxInt64, t0},
		{record, math.MaxInt64, t0}, {allow, 1, t0 + 1}, {dry, 3, math.MaxInt64},
		{allow, 1, math.MaxInt64}, {allow, 1, 0}, {record, 1, math.MinInt64 + 1}, {peek, 0, t0},
	}
	for _, s := range configs {
		name := fmt.Sprintf("%T%+v", s, s)
		if err := s.Validate(); err != nil {
			t.Errorf("%s: refused: %v", name, err)
			continue
		}
		d := s.Prepare()
		st := d.NewState()
		for i, step := range steps {
			res, err := d.Decide(st, step.op.call(step.at, step.n))
			if err != nil {
				t.Fatalf("%s: step %d (%v %d at %d): %v", name, i, step.op, step.n, step.at, err)
			}
			if res.Remaining < 0 || res.Remaining > res.Limit || res.ResetAfter < 0 || res.RetryAfter < -1 ||
				res.Allowed && res.RetryAfter != 0 {
				t.Fatalf("%s: step %d (%v %d at %d): %+v", name, i, step.op, step.n, step.at, res)
			}
			if i == 0 && !res.Allowed {
				t.Fatalf("%s: the first call was denied: %+v", name, res)
			}
			if i == 0 && res.Limit >= 2 && res.Limit <= 1<<53 && res.Remaining != res.Limit-1 {
				t.Fatalf("%s: the first call of 1 left %d of %d", name, res.Remaining, res.Limit)
			}
			if i == 1 && res.Limit >= math.MaxInt64/1000 && !res.Allowed {
				t.Fatalf("%s: effectively unlimited, yet the second call was denied: %+v", name, res)
			}
			if i == 1 && res.Limit == 1 && rateOf(s) < 1e-6 && res.Allowed {
				t.Fatalf("%s: a burst of 1 at a rate of one every few days let a second call in: %+v", name, res)
			}
		}
	}
}

// rateOf is the rate of a strategy that has one, or +Inf.
func rateOf(s Strategy) float64 {
	switch v := s.(type) {
	case GCRA:
		return v.Rate
	case TokenBucket:
		return v.Rate
	case LeakyBucket:
		return v.Rate
	}
	return math.Inf(1)
}
