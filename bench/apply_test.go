package bench

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratestore/ratestore/strategies"
)

// applyStep is how far the synthetic clock of BenchmarkApply advances per
// call: about the spacing of calls in BenchmarkHot.
const applyStep = 100 * time.Nanosecond

// BenchmarkApply isolates the algorithm from the engine, to attribute the
// cost of a BenchmarkHot decision: the same configurations, decided by
// their Deciders as the engine does, states held in a
// plain slice (no map, no lock, no commit), and a synthetic clock instead of
// time.Now. strategy=xrate is x/time/rate's AllowN(t, 1) on one Limiter per
// key, the algorithm part of the baseline. Hot minus Apply, for the same
// strategy and key count, is what the engine and the clock add.
func BenchmarkApply(b *testing.B) {
	start := time.Now()
	for _, n := range hotKeyCounts {
		b.Run(fmt.Sprintf("strategy=xrate/keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			lims := make([]*rate.Limiter, n)
			for i := range lims {
				lims[i] = rate.NewLimiter(hotRate, hotBurst)
			}
			var allowed int64
			t := start
			i := 0
			for b.Loop() {
				t = t.Add(applyStep)
				if lims[i].AllowN(t, 1) {
					allowed++
				}
				if i++; i == n {
					i = 0
				}
			}
			reportThroughput(b, allowed)
		})
		for _, st := range hotStrategies() {
			b.Run(fmt.Sprintf("strategy=%s/keys=%d", st.name, n), func(b *testing.B) {
				b.ReportAllocs()
				p := st.s.Prepare() // as the engine decides
				states := make([]strategies.State, n)
				for i := range states {
					states[i] = p.NewState()
				}
				var allowed int64
				c := strategies.Call{Now: start.UnixNano(), N: 1}
				i := 0
				for b.Loop() {
					c.Now += int64(applyStep)
					res, err := p.Decide(states[i], c)
					if err != nil {
						b.Fatal(err)
					}
					if res.Allowed {
						allowed++
					}
					if i++; i == n {
						i = 0
					}
				}
				reportThroughput(b, allowed)
			})
		}
	}
}

// nopStrategy is a strategies.Strategy that decides nothing: every call is
// allowed, takes its n, and leaves the key in use for a second, so the engine
// marks it dirty and keeps it stored exactly as for a real strategy. In
// BenchmarkHot, strategy=nop minus BenchmarkClock is what the engine alone
// costs per decision (validation, shard lock, table lookup, dirty marking,
// the calls through the Decider interface); the gap between a real strategy
// and nop is that strategy's own cost.
type nopStrategy struct{}

type nopState struct{ n int64 }

func (nopStrategy) Validate() error                    { return nil }
func (nopStrategy) Prepare() strategies.Decider        { return nopStrategy{} }
func (nopStrategy) NewState() strategies.State         { return &nopState{} }
func (nopStrategy) Horizon() time.Duration             { return time.Second }
func (nopStrategy) Clamp(strategies.State, int64) bool { return false }

func (nopStrategy) Decode(b []byte) (strategies.State, error) {
	if len(b) != 1 || b[0] != 'n' {
		return nil, strategies.ErrCorrupt
	}
	return &nopState{}, nil
}

func (nopStrategy) Decide(st strategies.State, c strategies.Call) (strategies.Result, error) {
	s, ok := st.(*nopState)
	if !ok {
		return strategies.Result{}, strategies.ErrMismatch
	}
	if !c.DryRun {
		s.n += c.N
	}
	return strategies.Result{Allowed: true, Limit: hotBurst, Remaining: hotBurst, ResetAfter: time.Second}, nil
}

func (s *nopState) AppendEncode(dst []byte) []byte { return append(dst, 'n') }

// sink keeps BenchmarkClock's reads alive.
var sink int64

// BenchmarkClock is the cost of one time.Now().UnixNano(), which both sides
// of BenchmarkHot pay once per decision.
func BenchmarkClock(b *testing.B) {
	b.ReportAllocs()
	var s int64
	for b.Loop() {
		s += time.Now().UnixNano()
	}
	sink = s
}
