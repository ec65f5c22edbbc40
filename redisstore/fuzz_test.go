package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/strategies"
)

// FuzzDecide feeds arbitrary stored values to a decision of every kind of
// strategy: none panics, a value that is not a state is an error matching
// ErrCorrupt (or, for another strategy's state, ErrInvalid), and a value
// that decodes is stored again as one that decodes to the same.
func FuzzDecide(f *testing.F) {
	for _, seed := range []string{"", ";", "1;", "x;42|1", "1768726800000000000;42|1768726800100000000",
		"1768726800000000000;23|2|1768726800000000000|1|1768726800000000000|1",
		"1768726800000000000;81|1768726800000000000|2|1000000000|1", "-1;12|3|0", "99999999999999999999;42|1"} {
		f.Add(seed, int64(1))
	}
	ss := []strategies.Strategy{
		strategies.GCRA{Rate: 10, Burst: 5},
		strategies.TokenBucket{Rate: 10, Burst: 5},
		strategies.LeakyBucket{Rate: 10, Capacity: 5},
		strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "s", Limit: 5, Window: time.Second}}},
		strategies.SlidingWindow{Limit: 5, Window: time.Second},
		strategies.RollingWindow{Limit: 5, Window: time.Second, Bucket: 100 * time.Millisecond},
		strategies.SlidingLog{Limit: 5, Window: time.Second},
		strategies.Composite{Primary: strategies.GCRA{Rate: 10, Burst: 5}, Secondary: strategies.SlidingLog{Limit: 3, Window: time.Minute}},
	}
	now := time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC).UnixNano()
	f.Fuzz(func(t *testing.T, v string, n int64) {
		n &= 7
		for _, s := range ss {
			l := &Limiter{name: "f", s: s, d: s.Prepare()}
			o, err := l.decide(v, strategies.Call{N: n}, now)
			if err != nil {
				if !errors.Is(err, ratestore.ErrCorrupt) && !errors.Is(err, ratestore.ErrInvalid) {
					t.Fatalf("%T: %q: %v", s, v, err)
				}
				continue
			}
			if o.next == "" || o.next == v {
				continue
			}
			if _, err := l.decide(o.next, strategies.Call{DryRun: true}, now); err != nil {
				t.Fatalf("%T: %q stored %q, which does not decode: %v", s, v, o.next, err)
			}
		}
	})
}
