package strategies

import (
	"fmt"
	"math/rand/v2"
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
	{"RollingWindow", RollingWindow{Limit: 70, Window: time.Second, Bucket: 100 * time.Millisecond}},
	{"Composite", Composite{Primary: TokenBucket{Rate: 70, Burst: 10}, Secondary: FixedWindow{Quotas: []Quota{{"minute", 4000, time.Minute}}}}},
}

// The hot workload is the engine's hot benchmark (bench/hot_test.go): an
// allowance of hotRate per second with a burst of hotBurst, far above what
// calls hotStep apart ask for, so that every call is allowed and takes 1.
const (
	hotRate  = 1e8
	hotBurst = 1_000_000
	hotStep  = 200 * time.Nanosecond
)

// hotConfigs are the configurations of the engine's hot benchmark.
var hotConfigs = []struct {
	name string
	s    Strategy
}{
	{"TokenBucket", TokenBucket{Rate: hotRate, Burst: hotBurst}},
	{"GCRA", GCRA{Rate: hotRate, Burst: hotBurst}},
	{"LeakyBucket", LeakyBucket{Rate: hotRate, Capacity: hotBurst}},
	{"FixedWindow", FixedWindow{Quotas: []Quota{{"second", hotRate, time.Second}, {"minute", 60 * hotRate, time.Minute}}}},
	{"SlidingWindow", SlidingWindow{Limit: hotRate, Window: time.Second}},
	{"RollingWindow", RollingWindow{Limit: hotRate, Window: time.Second, Bucket: 10 * time.Millisecond}},
	{"Composite", Composite{Primary: GCRA{Rate: hotRate, Burst: hotBurst}, Secondary: FixedWindow{Quotas: []Quota{{"minute", 60 * hotRate, time.Minute}}}}},
}

// forms are the two ways a configuration is applied: as the value the
// caller wrote, and prepared, as the engine holds it.
var forms = []struct {
	name string
	of   func(Strategy) Strategy
}{
	{"value", func(s Strategy) Strategy { return s }},
	{"prepared", Prepare},
}

// TestApplyAllocs checks that Apply allocates nothing for a state of its
// own kind under an unchanged configuration, in either form.
func TestApplyAllocs(t *testing.T) {
	for _, c := range append(append(configs, benchConfigs...), hotConfigs...) {
		for _, f := range forms {
			s := f.of(c.s)
			st := s.NewState()
			i := 0
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := s.Apply(st, workload(i)); err != nil {
					t.Fatal(err)
				}
				i++
			})
			if allocs != 0 {
				t.Errorf("%s (%s): Apply allocates %v times per call", c.name, f.name, allocs)
			}
		}
	}
}

// BenchmarkApply runs the mixed workload, with about half of the calls
// allowed, on each configuration in each form.
func BenchmarkApply(b *testing.B) {
	for _, c := range benchConfigs {
		for _, f := range forms {
			b.Run("kind="+c.name+"/form="+f.name, func(b *testing.B) {
				benchApply(b, f.of(c.s), workload)
			})
		}
	}
}

// BenchmarkApplyAllowed is the engine's hot path alone: every call is
// allowed and takes 1, now advancing by hotStep per call.
func BenchmarkApplyAllowed(b *testing.B) {
	for _, c := range hotConfigs {
		for _, f := range forms {
			b.Run("kind="+c.name+"/form="+f.name, func(b *testing.B) {
				benchApply(b, f.of(c.s), func(i int) Call {
					return Call{Now: t0 + int64(i)*int64(hotStep), N: 1}
				})
			})
		}
	}
}

// BenchmarkDecide is the engine's hot path as the engine takes it: the
// hot configurations prepared, called through Decide with the Result
// written in place, every call allowed and taking 1, on one key or on 10k
// keys (package ratestore's target is stated at 10k keys), round robin or
// in a random order (order=random), as an engine's hash table visits
// them: there the hardware prefetcher cannot guess the next state, and a
// decision pays for each cache line its state spans. The composites of a
// bucket and of two fixed windows add parts that the hot Composite lacks.
func BenchmarkDecide(b *testing.B) {
	minute := FixedWindow{Quotas: []Quota{{"minute", 60 * hotRate, time.Minute}}}
	both := FixedWindow{Quotas: []Quota{{"second", hotRate, time.Second}, {"minute", 60 * hotRate, time.Minute}}}
	configs := append(hotConfigs[:len(hotConfigs):len(hotConfigs)], []struct {
		name string
		s    Strategy
	}{
		{"CompositeTokenBucket", Composite{Primary: TokenBucket{Rate: hotRate, Burst: hotBurst}, Secondary: minute}},
		{"CompositeFixedWindows", Composite{Primary: both, Secondary: minute}},
	}...)
	for _, c := range configs {
		for _, o := range []struct {
			keys   int
			random bool
		}{{1, false}, {10_000, false}, {10_000, true}} {
			name := fmt.Sprintf("kind=%s/keys=%d", c.name, o.keys)
			if o.random {
				name += "/order=random"
			}
			keys := o.keys
			b.Run(name, func(b *testing.B) {
				s := Prepare(c.s)
				states := make([]State, keys)
				for i := range states {
					states[i] = s.NewState()
				}
				if o.random {
					r := rand.New(rand.NewPCG(1, 2))
					r.Shuffle(keys, func(i, j int) { states[i], states[j] = states[j], states[i] })
				}
				b.ReportAllocs()
				call := Call{Now: t0, N: 1}
				var res Result
				i, allowed := 0, 0
				for b.Loop() {
					call.Now += int64(hotStep)
					if err := Decide(s, states[i], call, &res); err != nil {
						b.Fatal(err)
					}
					if res.Allowed {
						allowed++
					}
					if i++; i == keys {
						i = 0
					}
				}
				if allowed != b.N {
					b.Fatalf("%d of %d calls allowed", allowed, b.N)
				}
			})
		}
	}
}

// benchApply applies the calls of workload, one per iteration, to one
// state, and reports the share of them allowed.
func benchApply(b *testing.B, s Strategy, workload func(int) Call) {
	st := s.NewState()
	b.ReportAllocs()
	i, allowed := 0, 0
	for b.Loop() {
		r, err := s.Apply(st, workload(i))
		if err != nil {
			b.Fatal(err)
		}
		if r.Allowed {
			allowed++
		}
		i++
	}
	b.ReportMetric(float64(allowed)/float64(i), "allowed/op")
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
