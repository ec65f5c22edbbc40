package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	ajiwo "github.com/ajiwo/ratelimit"
	ajiwomem "github.com/ajiwo/ratelimit/backends/memory"
	ajiwogcra "github.com/ajiwo/ratelimit/strategies/gcra"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/strategies"
)

// BenchmarkPeers puts ratestore next to the in-memory rate limiters people
// use instead of it, on one workload: every key has the allowance of
// BenchmarkHot (1e8 per second, a burst of 1e6, so every call is allowed and
// takes a token), every key is created before timing starts, and
// GOMAXPROCS goroutines (run with -cpu 1,2) draw keys from a precomputed
// sequence, uniform or Zipf-skewed.
//
// Peers, each configured for that allowance with its own algorithm:
//
//   - xrate: golang.org/x/time/rate, one Limiter per key in a mutex-guarded
//     map (a token bucket; the DESIGN.md baseline, see xrateMap);
//   - throttled: github.com/throttled/throttled/v2, GCRARateLimiterCtx over
//     memstore (unbounded map, per-key CAS);
//   - golimiter: github.com/sethvargo/go-limiter memorystore, a bucket
//     refilled per interval tick. It cannot take a burst of 1e6 at this rate:
//     after the first interval it refills min(Interval in ns / Tokens,
//     Tokens) per tick (sethvargo/go-limiter#29), so 1e6 tokens per 10 ms
//     would refill 10 per 10 ms and deny. It gets 10 tokens per 100 ns:
//     the same 1e8 per second, with a burst of 10, which every key here
//     stays far below;
//   - ulule: github.com/ulule/limiter/v3 with its memory store (a fixed
//     window: 1e8 per second);
//   - ajiwo: github.com/ajiwo/ratelimit, GCRA over its memory backend
//     (up to 100k keys: at 1M its setup and the GCs of its heap alone take
//     most of a minute, and at 10k it is already the slowest side by far).
//
// ratestore applies GCRA with the same rate and burst:
//
//   - ratestore-async-B: Async mode, every key in memory (BenchmarkHot's
//     setting) on backend B;
//   - ratestore-sync-B: Sync mode, every allowed call fsynced before it
//     returns, with the key counts up to 10k;
//   - ratestore-cold-B: only at the largest key count: MaxCachedKeys
//     coldCache, states stored on disk before the run and nothing in
//     memory at its start, so a key not used within the last flush interval
//     is read from disk. Its strategy keeps states stored (coldStrategy);
//     every call is still allowed and written.
//
// ratio-vs-xrate is this run's ns/op over xrate's at the same key count,
// key choice and GOMAXPROCS; the generator in ./report pairs every impl
// with every other one the same way.
func BenchmarkPeers(b *testing.B) {
	for _, n := range []int{1, 10_000, bigKeys()} {
		keys := makeKeys(n)
		dists := []string{"uniform", "zipf"}
		if n == 1 {
			dists = dists[:1]
		}
		orders := map[string][]int32{}
		for _, dist := range dists {
			orders[dist] = keyOrder(n, dist)
		}
		base := map[string]float64{} // xrate's ns/op by key choice and GOMAXPROCS
		// One side at a time, so that only its structures are in memory:
		// with every side's 1M keys alive at once, the runtime.GC the
		// testing package runs before every round takes seconds.
		for _, im := range peerImpls(n) {
			f := newFixture(func() (decider, func() error, error) { return im.open(b.TempDir(), keys) })
			for _, dist := range dists {
				b.Run(fmt.Sprintf("keys=%d/dist=%s/impl=%s", n, dist, im.name), func(b *testing.B) {
					b.ReportAllocs()
					decide := f.get(b)
					runParallel(b, keys, orders[dist], decide)
					cell := fmt.Sprint(dist, runtime.GOMAXPROCS(0))
					if im.name == "xrate" {
						base[cell] = nsPerOp(b)
					} else {
						reportRatio(b, base[cell], "ratio-vs-xrate")
					}
				})
			}
			f.release(b)
		}
	}
}

// decider makes one decision on key and reports whether it was allowed.
type decider = func(key string) (bool, error)

// peerImpl is one side of BenchmarkPeers: open builds it in dir with every
// key already created.
type peerImpl struct {
	name string
	open func(dir string, keys []string) (decider, func() error, error)
}

// ajiwoMaxKeys is the largest key count ajiwo runs at (see BenchmarkPeers).
const ajiwoMaxKeys = 100_000

// golimiterTokens is go-limiter's bucket size (see BenchmarkPeers).
const golimiterTokens = 10

// coldCache is ratestore-cold's MaxCachedKeys: far below the key count.
const coldCache = 1024

// coldStrategy keeps every state stored for a while after each call (1 per
// second, the burst of BenchmarkSync), so that a cold key is really read
// from disk; the hot allowance of the other sides leaves states idle again
// 10 ns after a call, and idle states are deleted, not stored.
var coldStrategy = syncStrategy

func peerImpls(n int) []peerImpl {
	ctx := context.Background()
	gcra := strategies.GCRA{Rate: hotRate, Burst: hotBurst}
	impls := []peerImpl{
		{"xrate", func(_ string, keys []string) (decider, func() error, error) {
			x := newXRateMap(keys)
			return func(k string) (bool, error) { return x.allow(k), nil }, nil, nil
		}},
		{"throttled", func(_ string, keys []string) (decider, func() error, error) {
			st, err := memstore.NewCtx(0)
			if err != nil {
				return nil, nil, err
			}
			rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerSec(hotRate), MaxBurst: hotBurst})
			if err != nil {
				return nil, nil, err
			}
			// Its default, 10 compare-and-swap attempts, fails calls on one
			// key shared by two goroutines; a program under that load raises it.
			rl.SetMaxCASAttemptsLimit(1 << 20)
			return touched(keys, func(k string) (bool, error) {
				limited, _, err := rl.RateLimitCtx(ctx, k, 1)
				return !limited, err
			}), nil, nil
		}},
		{"golimiter", func(_ string, keys []string) (decider, func() error, error) {
			st, err := memorystore.New(&memorystore.Config{Tokens: golimiterTokens, Interval: golimiterTokens * time.Second / hotRate})
			if err != nil {
				return nil, nil, err
			}
			return touched(keys, func(k string) (bool, error) {
				_, _, _, ok, err := st.Take(ctx, k)
				return ok, err
			}), func() error { return st.Close(ctx) }, nil
		}},
		{"ulule", func(_ string, keys []string) (decider, func() error, error) {
			l := ulule.New(ululemem.NewStore(), ulule.Rate{Period: time.Second, Limit: hotRate})
			return touched(keys, func(k string) (bool, error) {
				c, err := l.Get(ctx, k)
				return !c.Reached, err
			}), nil, nil
		}},
	}
	if n <= ajiwoMaxKeys {
		impls = append(impls, peerImpl{"ajiwo", func(_ string, keys []string) (decider, func() error, error) {
			rl, err := ajiwo.New(ajiwo.WithBackend(ajiwomem.New()), ajiwo.WithBaseKey("bench"),
				ajiwo.WithPrimaryStrategy(&ajiwogcra.Config{Rate: hotRate, Burst: hotBurst}))
			if err != nil {
				return nil, nil, err
			}
			return touched(keys, func(k string) (bool, error) {
				return rl.Allow(ctx, ajiwo.AccessOptions{Key: k})
			}), rl.Close, nil
		}})
	}
	for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		impls = append(impls, peerImpl{"ratestore-async-" + backend.String(), func(dir string, keys []string) (decider, func() error, error) {
			opts := ratestore.Options{Backend: backend, Durability: ratestore.Async, MaxCachedKeys: cacheFor(len(keys))}
			l, closeFn, err := openPreloaded(dir, "peers", opts, gcra, keys)
			return allowFunc(l), closeFn, err
		}})
	}
	for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		if n < bigKeys() {
			impls = append(impls, peerImpl{"ratestore-sync-" + backend.String(), func(dir string, keys []string) (decider, func() error, error) {
				l, closeFn, err := openSyncDB(dir, backend, gcra, keys)
				return allowFunc(l), closeFn, err
			}})
		} else {
			impls = append(impls, peerImpl{"ratestore-cold-" + backend.String(), func(dir string, keys []string) (decider, func() error, error) {
				l, closeFn, err := openColdDB(dir, backend, len(keys))
				return allowFunc(l), closeFn, err
			}})
		}
	}
	return impls
}

// touched makes one decision on every key, so that every peer starts, like
// ratestore after preload, with every key created, and returns decide.
func touched(keys []string, decide decider) decider {
	for _, k := range keys {
		decide(k)
	}
	return decide
}

// openColdDB stores a state for keys 0..n-1 (fill) and reopens the database
// in Async mode with MaxCachedKeys coldCache and nothing in memory.
func openColdDB(dir string, backend ratestore.Backend, n int) (*ratestore.Limiter, func() error, error) {
	opts := ratestore.Options{Backend: backend, Durability: ratestore.Async, MaxCachedKeys: coldCache}
	db, l, err := openLimiter(dir, "cold", opts, coldStrategy)
	if err != nil {
		return nil, nil, err
	}
	err = fill(context.Background(), db, l, n)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	db, l, err = openLimiter(dir, "cold", opts, coldStrategy)
	if err != nil {
		return nil, nil, err
	}
	return l, db.Close, nil
}

// fillBatch is how many keys fill gives a state between two Flushes.
const fillBatch = 1 << 16

// fillTake is what fill takes from each key: an hour of a 1-per-second
// GCRA, so that the state stays stored (not idle) for an hour.
const fillTake = 3600

// fill gives keys 0..n-1 a stored state through l, a limiter of db in
// Async mode applying coldStrategy, flushing every fillBatch keys so that
// no more than one batch of changes waits in memory: the quickest way to a
// database of 1M keys.
func fill(ctx context.Context, db *ratestore.DB, l *ratestore.Limiter, n int) error {
	for i := range n {
		if _, err := l.AllowN(ctx, keyAt(i), fillTake); err != nil {
			return err
		}
		if (i+1)%fillBatch == 0 || i == n-1 {
			if err := db.Flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// orderLen is the length of a key sequence: long enough that its
// repetition does not matter, small enough to sit in cache next to 10k keys
// (4 MiB).
const orderLen = 1 << 20

// keyOrder is the sequence of key indexes BenchmarkPeers draws from, built
// before timing: uniform over n keys, or Zipf-skewed (s = 1.1, v = 1: key 0
// the most frequent), from a fixed seed so that every side of one key count
// gets the same sequence.
func keyOrder(n int, dist string) []int32 {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	next := func() uint64 { return r.Uint64N(uint64(n)) }
	if dist == "zipf" {
		next = rand.NewZipf(r, 1.1, 1, uint64(n-1)).Uint64
	}
	order := make([]int32, orderLen)
	for i := range order {
		order[i] = int32(next())
	}
	return order
}
