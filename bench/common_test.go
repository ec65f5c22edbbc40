package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/strategies"
)

// fullEnv names the environment variable that turns on the large sizes:
// 1M keys in BenchmarkPeers and BenchmarkDisk. Without it those benchmarks
// run at a size that keeps the CI smoke run (-benchtime 1x) to seconds.
const fullEnv = "RATESTORE_BENCH_FULL"

// bigKeys is the largest key count of BenchmarkPeers and BenchmarkDisk:
// 1M with RATESTORE_BENCH_FULL=1, else 20k (enough to exercise every code
// path, cold keys included).
func bigKeys() int {
	if os.Getenv(fullEnv) == "1" {
		return 1_000_000
	}
	return 20_000
}

// keyAt is the i-th key of every benchmark: user:000000, user:000001, ...
func keyAt(i int) string { return fmt.Sprintf("user:%06d", i) }

// makeKeys returns n distinct key strings, built once before any timed loop
// so that the loops themselves allocate nothing.
func makeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = keyAt(i)
	}
	return keys
}

// fixture is an expensive benchmark setup (a database with 10k keys) that is
// built at most once per sub-benchmark and released as soon as that
// sub-benchmark is over.
//
// The testing package calls the body of a benchmark that uses b.N (rather
// than b.Loop) several times while it sizes b.N, each time with a fresh
// cleanup scope, so setup cannot live in the body, nor be registered with the
// body's b.Cleanup. Instead the body calls get, which builds the fixture on
// the first call and hands back the same value afterwards, and the parent
// calls release right after its b.Run: databases are closed (and their
// background goroutines stopped) before the next sub-benchmark starts. A
// sub-benchmark filtered out by -bench never calls get and costs nothing.
type fixture[T any] struct {
	setup   func() (T, func() error, error)
	v       T
	close   func() error
	built   bool
	errored bool
}

func newFixture[T any](setup func() (v T, close func() error, err error)) *fixture[T] {
	return &fixture[T]{setup: setup}
}

func (f *fixture[T]) get(b *testing.B) T {
	b.Helper()
	if f.errored {
		b.Fatal("fixture setup failed earlier")
	}
	if !f.built {
		v, closeFn, err := f.setup()
		if err != nil {
			f.errored = true
			if closeFn != nil {
				closeFn()
			}
			b.Fatal(err)
		}
		f.v, f.close, f.built = v, closeFn, true
	}
	return f.v
}

// release closes what get built, if anything, reporting failures on parent.
func (f *fixture[T]) release(parent *testing.B) {
	if f.built && f.close != nil {
		if err := f.close(); err != nil {
			parent.Error(err)
		}
	}
	var zero T
	f.v, f.close, f.built = zero, nil, false
}

// openLimiter opens a ratestore database at dir/name with opts and returns a
// limiter named "bench" applying s, and the database.
func openLimiter(dir, name string, opts ratestore.Options, s strategies.Strategy) (*ratestore.DB, *ratestore.Limiter, error) {
	db, err := ratestore.Open(filepath.Join(dir, name), opts)
	if err != nil {
		return nil, nil, err
	}
	l, err := db.Limiter("bench", s)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, l, nil
}

// openPreloaded opens a database with openLimiter and preloads keys: the
// fixture of every benchmark that wants keys hot from the first call.
func openPreloaded(dir, name string, opts ratestore.Options, s strategies.Strategy, keys []string) (*ratestore.Limiter, func() error, error) {
	db, l, err := openLimiter(dir, name, opts, s)
	if err != nil {
		return nil, nil, err
	}
	return l, db.Close, preload(context.Background(), db, l, keys)
}

// preload makes every key hot: one Allow each (which loads the key into the
// in-memory table and gives it a state), then one Flush so that the timed
// loop starts with nothing pending.
func preload(ctx context.Context, db *ratestore.DB, l *ratestore.Limiter, keys []string) error {
	for _, k := range keys {
		if _, err := l.Allow(ctx, k); err != nil {
			return err
		}
	}
	return db.Flush(ctx)
}

// reportThroughput reports decisions per second over the timed part of the
// run, and the share of decisions that were allowed (1 means every call
// took from its key, the path that marks a state dirty).
func reportThroughput(b *testing.B, allowed int64) {
	if b.N == 0 {
		return
	}
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "decisions/s")
	}
	b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
}

// nsPerOp is the ns/op of the run that just ended.
func nsPerOp(b *testing.B) float64 {
	if b.N == 0 {
		return 0
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// walk is the loop every benchmark runs, baseline or ratestore alike, so
// that their difference is the decision alone: while more says so, it calls
// decide on the next of n keys, from index start and cycling, and returns
// how many calls were allowed. It stops at the first error.
func walk(b *testing.B, n, start int, more func() bool, decide func(i int) (bool, error)) (allowed int64) {
	for i := start; more(); {
		a, err := decide(i)
		if err != nil {
			b.Error(err)
			return allowed
		}
		if a {
			allowed++
		}
		if i++; i == n {
			i = 0
		}
	}
	return allowed
}

// runParallel makes b.N decisions under b.RunParallel, each goroutine
// walking the keys from its own offset, and reports the throughput. With
// order nil the goroutines cycle through keys; otherwise they cycle through
// order, a precomputed sequence of key indexes (see keyOrder), so that the
// loop draws no random numbers and allocates nothing.
func runParallel(b *testing.B, keys []string, order []int32, decide func(key string) (bool, error)) {
	n, key := len(keys), func(i int) string { return keys[i] }
	if order != nil {
		n, key = len(order), func(i int) string { return keys[order[i]] }
	}
	var seq, allowed atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		allowed.Add(walk(b, n, startOffset(&seq, n), pb.Next, func(i int) (bool, error) {
			return decide(key(i))
		}))
	})
	b.StopTimer()
	reportThroughput(b, allowed.Load())
}

// allowFunc adapts a limiter to runParallel.
func allowFunc(l *ratestore.Limiter) func(key string) (bool, error) {
	ctx := context.Background()
	return func(key string) (bool, error) {
		r, err := l.Allow(ctx, key)
		return r.Allowed, err
	}
}

// cacheFor is the MaxCachedKeys that keeps n keys in memory: the default
// (0) up to DefaultMaxCachedKeys, twice n beyond, so that no hot benchmark
// evicts.
func cacheFor(n int) int {
	if n <= ratestore.DefaultMaxCachedKeys/2 {
		return 0
	}
	return 2 * n
}
