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

// BenchmarkApply runs the mixed workload, with about half of the calls
// allowed, on each configuration.
func BenchmarkApply(b *testing.B) {
	for _, c := range benchConfigs {
		b.Run("kind="+c.name, func(b *testing.B) { benchApply(b, c.s, workload) })
	}
}

// BenchmarkApplyAllowed is the engine's hot path alone: every call is
// allowed and takes 1, now advancing by hotStep per call.
func BenchmarkApplyAllowed(b *testing.B) {
	for _, c := range hotConfigs {
		b.Run("kind="+c.name, func(b *testing.B) {
			benchApply(b, c.s, func(i int) Call {
				return Call{Now: t0 + int64(i)*int64(hotStep), N: 1}
			})
		})
	}
}

// BenchmarkDecide is the engine's hot path as the engine takes it: the
// hot configurations' Deciders, with the Result written in place, every call allowed and taking 1, on one key or on 10k
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
				d := c.s.Prepare()
				states := make([]State, keys)
				for i := range states {
					states[i] = d.NewState()
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
					var err error
					if res, err = d.Decide(states[i], call); err != nil {
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
	d := s.Prepare()
	st := d.NewState()
	b.ReportAllocs()
	i, allowed := 0, 0
	var r Result
	for b.Loop() {
		var err error
		if r, err = d.Decide(st, workload(i)); err != nil {
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
			st := newState(c.s)
			apply(c.s, st, Call{Now: t0, N: 1})
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
			st := newState(c.s)
			apply(c.s, st, Call{Now: t0, N: 1})
			raw := st.AppendEncode(nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decode(c.s, raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
