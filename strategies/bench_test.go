package strategies

import (
	"testing"
	"time"
)

// workload is a call pattern that keeps a state busy: about 140 calls a
// second, with a jitter, that take, get denied, peek and record, so that
// every path of Apply runs.
func workload(i int) Call {
	now := t0 + int64(i)*int64(7*time.Millisecond) + int64(i*7919%100000)
	switch i % 8 {
	case 3:
		return Call{Now: now}
	case 5:
		return Call{Now: now, N: 1, Record: true}
	case 6:
		return Call{Now: now, N: 2, DryRun: true}
	}
	return Call{Now: now, N: 1}
}

// benchConfigs are configurations that the workload keeps near their
// limit: about half of its calls are allowed.
var benchConfigs = []struct {
	name string
	s    Strategy
}{
	{"TokenBucket", TokenBucket{Rate: 70, Burst: 10}},
	{"GCRA", GCRA{Rate: 70, Burst: 10}},
	{"LeakyBucket", LeakyBucket{Rate: 70, Capacity: 10}},
	{"FixedWindow", FixedWindow{Quotas: []Quota{{"second", 70, time.Second}, {"minute", 4000, time.Minute}}}},
	{"SlidingWindow", SlidingWindow{Limit: 70, Window: time.Second}},
	{"Composite", Composite{Primary: TokenBucket{Rate: 70, Burst: 10}, Secondary: FixedWindow{Quotas: []Quota{{"minute", 4000, time.Minute}}}}},
}

// TestApplyAllocs checks that Apply allocates nothing for a state of its
// own kind under an unchanged configuration.
func TestApplyAllocs(t *testing.T) {
	for _, c := range append(configs, benchConfigs...) {
		st := c.s.NewState()
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := c.s.Apply(st, workload(i)); err != nil {
				t.Fatal(err)
			}
			i++
		})
		if allocs != 0 {
			t.Errorf("%s: Apply allocates %v times per call", c.name, allocs)
		}
	}
}

func BenchmarkApply(b *testing.B) {
	for _, c := range benchConfigs {
		b.Run(c.name, func(b *testing.B) {
			st := c.s.NewState()
			b.ReportAllocs()
			i, allowed := 0, 0
			for b.Loop() {
				r, err := c.s.Apply(st, workload(i))
				if err != nil {
					b.Fatal(err)
				}
				if r.Allowed {
					allowed++
				}
				i++
			}
			b.ReportMetric(float64(allowed)/float64(i), "allowed/op")
		})
	}
}

func BenchmarkAppendEncode(b *testing.B) {
	for _, c := range configs {
		b.Run(c.name, func(b *testing.B) {
			st := c.s.NewState()
			c.s.Apply(st, Call{Now: t0, N: 1})
			buf := make([]byte, 0, 128)
			b.ReportAllocs()
			for b.Loop() {
				buf = st.AppendEncode(buf[:0])
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, c := range configs {
		b.Run(c.name, func(b *testing.B) {
			st := c.s.NewState()
			c.s.Apply(st, Call{Now: t0, N: 1})
			raw := st.AppendEncode(nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.s.Decode(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
