package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/strategies"
)

// asyncKeys is the key count of DESIGN.md's Async target.
const asyncKeys = 10_000

// asyncFlushIntervals brackets the flush intervals DESIGN.md quotes: every
// interval, the committer writes every key changed since the last one (here
// all 10k) in one transaction, on the same cores as the callers.
var asyncFlushIntervals = []time.Duration{10 * time.Millisecond, 100 * time.Millisecond}

// BenchmarkAsync: decision throughput in Async mode with 10k hot keys, one
// GCRA limiter, b.RunParallel over GOMAXPROCS goroutines (run it with -cpu to
// vary that). Unlike BenchmarkHotParallel it runs on both backends and at two
// flush intervals, since the cost of the periodic commits is part of what it
// measures. Target (DESIGN.md): >= 5M decisions/s on 2 cores.
func BenchmarkAsync(b *testing.B) {
	keys := makeKeys(asyncKeys)
	gcra := strategies.GCRA{Rate: hotRate, Burst: hotBurst} // as in BenchmarkHot
	for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		for _, flush := range asyncFlushIntervals {
			f := newFixture(func() (*ratestore.Limiter, func() error, error) {
				opts := ratestore.Options{Backend: backend, Durability: ratestore.Async, FlushInterval: flush}
				return openPreloaded(b.TempDir(), "async-"+backend.String(), opts, gcra, keys)
			})
			b.Run(fmt.Sprintf("backend=%s/flush=%v/keys=%d", backend, flush, asyncKeys), func(b *testing.B) {
				b.ReportAllocs()
				l := f.get(b)
				runParallel(b, keys, nil, allowFunc(l))
			})
			f.release(b)
		}
	}
}
