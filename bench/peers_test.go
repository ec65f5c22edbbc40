package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
// At the largest key count (1M with RATESTORE_BENCH_FULL=1) the sides are
// measured in their steady state, not while they warm up: after every key
// is created, each side makes an untimed pass over the key sequence
// (warmDecisions; coldWarm for the cold sides) before its first timed loop
// on each key choice, and the report times a fixed 5M decisions per
// sub-benchmark, so that almost no timed decision is a key's first. ratestore-async checks that the preload
// left every key in memory (openAllCached). The report's 1M stage runs
// only xrate and golimiter (the two fastest peers), ratestore-async and,
// in a stage of its own at 200k decisions, ratestore-cold: at 5M decisions
// throttled and ulule would add minutes, and the cold sides, each decision
// a read from disk, most of ten (the benchmark itself still has them all).
//
// ratio-vs-xrate is this run's ns/op over xrate's at the same key count,
// key choice and GOMAXPROCS; the generator in ./report pairs every impl
// with every other one the same way (and, at the largest count, ratestore
// with the fastest peer of the invocation).
func BenchmarkPeers(b *testing.B) {
	big := largestKeys()
	for _, n := range slices.Compact([]int{1, 10_000, big}) {
		w := newWorkload(n, orderLen, 0)
		if n == big {
			w.warm = warmDecisions(n)
		}
		base := map[string]float64{} // xrate's ns/op by key choice and GOMAXPROCS
		// One side at a time, so that only its structures are in memory:
		// with every side's 1M keys alive at once, the runtime.GC the
		// testing package runs before every round takes seconds.
		for _, im := range peerImpls(n) {
			name := func(dist string) string { return fmt.Sprintf("keys=%d/dist=%s/impl=%s", n, dist, im.name) }
			w.run(b, im, name, func(b *testing.B, dist string) {
				reportVsXrate(b, base, im.name, dist)
			})
		}
	}
}

// reportVsXrate records xrate's ns/op for the key choice dist at this
// GOMAXPROCS in base, or, for another side, reports its ratio to it.
func reportVsXrate(b *testing.B, base map[string]float64, impl, dist string) {
	cell := fmt.Sprint(dist, runtime.GOMAXPROCS(0))
	if impl == "xrate" {
		base[cell] = nsPerOp(b)
	} else {
		reportRatio(b, base[cell], "ratio-vs-xrate")
	}
}

// largestKeysEnv overrides the largest key count of BenchmarkPeers and
// BenchmarkMiss (bigKeys: 1M with RATESTORE_BENCH_FULL=1, else 20k), so
// that a smoke run of their full-size stages takes seconds:
// RATESTORE_BENCH_KEYS=100000.
const largestKeysEnv = "RATESTORE_BENCH_KEYS"

// largestKeys is the largest key count of BenchmarkPeers and BenchmarkMiss.
func largestKeys() int { return envKeys(largestKeysEnv, bigKeys()) }

// envKeys is the key count the environment variable name sets, or def
// where it is unset. A value that is not a positive count panics rather
// than silently running the full size.
func envKeys(name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		panic(fmt.Sprintf("%s=%q: want a positive key count", name, s))
	}
	return n
}

// warmPerKey bounds the warm-up pass at small key counts: orderLen
// decisions over 20k keys would warm nothing more than 4 per key does.
const warmPerKey = 4

// warmDecisions is the length of the untimed warm-up pass at n keys: one
// pass over the key sequence (orderLen decisions), at most warmPerKey per
// key.
func warmDecisions(n int) int { return min(orderLen, warmPerKey*n) }

// coldWarm bounds the warm-up of the cold sides, whose decisions are reads
// from disk (~10-30 µs at 1M keys): 64k of them fill a cache of coldCache
// keys many times over and start the committer's cycle.
const coldWarm = 1 << 16

// workload is the keys of BenchmarkPeers or BenchmarkScale at one key
// count, with the precomputed key sequence of each key choice.
type workload struct {
	keys   []string
	dists  []string
	orders map[string][]int32
	warm   int // untimed decisions per side and key choice before its first timed loop
}

// newWorkload builds n keys and, for each key choice (uniform only for one
// key), a sequence of length indexes into them.
func newWorkload(n, length, warm int) *workload {
	w := &workload{keys: makeKeys(n), dists: []string{"uniform", "zipf"}, orders: map[string][]int32{}, warm: warm}
	if n == 1 {
		w.dists = w.dists[:1]
	}
	for _, dist := range w.dists {
		w.orders[dist] = keyOrder(n, length, dist)
	}
	return w
}

// run runs im's sub-benchmarks, one per key choice, named by name. im is
// built (every key created) by the first of them that runs and closed when
// the last is over; before a key choice's first timed loop, it makes w.warm
// untimed decisions on that choice's sequence (coldWarm at most for a cold
// side). after adds the sub-benchmark's own metrics once runParallel is
// done.
func (w *workload) run(b *testing.B, im peerImpl, name func(dist string) string, after func(b *testing.B, dist string)) {
	f := newFixture(func() (decider, func() error, error) { return im.open(b.TempDir(), w.keys) })
	warm := w.warm
	if strings.HasPrefix(im.name, "ratestore-cold-") {
		warm = min(warm, coldWarm)
	}
	warmed := map[string]bool{}
	for _, dist := range w.dists {
		b.Run(name(dist), func(b *testing.B) {
			b.ReportAllocs()
			decide := f.get(b)
			if !warmed[dist] {
				if err := warmUp(w.keys, w.orders[dist], warm, decide); err != nil {
					b.Fatal(err)
				}
				warmed[dist] = true
			}
			runParallel(b, w.keys, w.orders[dist], decide)
			after(b, dist)
		})
	}
	f.release(b)
}

// warmUp makes count decisions on the keys of order, from its start and
// cycling, on one goroutine. It runs before runParallel resets the timer,
// so it is not measured.
func warmUp(keys []string, order []int32, count int, decide decider) error {
	for i := range count {
		if _, err := decide(keys[order[i%len(order)]]); err != nil {
			return err
		}
	}
	return nil
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

// peerImpls are the sides of BenchmarkPeers at n keys, in the order they
// run: the peers, xrate first, then ratestore's.
func peerImpls(n int) []peerImpl {
	ctx := context.Background()
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
	return append(impls, ratestoreImpls(n)...)
}

// ratestoreImpls are ratestore's sides of BenchmarkPeers at n keys: Async
// on each backend, then Sync below the largest key count and cold at it.
func ratestoreImpls(n int) []peerImpl {
	gcra := strategies.GCRA{Rate: hotRate, Burst: hotBurst}
	var impls []peerImpl
	for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		impls = append(impls, peerImpl{"ratestore-async-" + backend.String(), func(dir string, keys []string) (decider, func() error, error) {
			l, closeFn, err := openAllCached(dir, backend, gcra, keys)
			return allowFunc(l), closeFn, err
		}})
	}
	for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		if n < largestKeys() {
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

// openColdDB stores a state for keys 0..n-1 (storeStates) and reopens the
// database in Async mode with MaxCachedKeys coldCache and nothing in
// memory.
func openColdDB(dir string, backend ratestore.Backend, n int) (*ratestore.Limiter, func() error, error) {
	if err := storeStates(dir, backend, n); err != nil {
		return nil, nil, err
	}
	db, l, err := openLimiter(dir, coldName, coldOptions(backend), coldStrategy)
	if err != nil {
		return nil, nil, err
	}
	return l, db.Close, nil
}

// coldName is the database of openColdDB and BenchmarkMiss in its
// directory.
const coldName = "cold"

// coldOptions opens a cold database: Async, MaxCachedKeys coldCache.
func coldOptions(backend ratestore.Backend) ratestore.Options {
	return ratestore.Options{Backend: backend, Durability: ratestore.Async, MaxCachedKeys: coldCache}
}

// storeStates creates the database coldName in dir with a stored
// coldStrategy state for keys 0..n-1 (fill), and closes it.
func storeStates(dir string, backend ratestore.Backend, n int) error {
	db, l, err := openLimiter(dir, coldName, coldOptions(backend), coldStrategy)
	if err != nil {
		return err
	}
	err = fill(context.Background(), db, l, n)
	return errors.Join(err, db.Close())
}

// openAllCached opens a limiter applying s in Async mode on backend with a
// cache that holds every key (cacheFor), preloads keys, and fails unless
// every key is then in memory: the premise of the in-memory sides' steady
// state, which an engine that evicted early would break silently.
func openAllCached(dir string, backend ratestore.Backend, s strategies.Strategy, keys []string) (*ratestore.Limiter, func() error, error) {
	opts := ratestore.Options{Backend: backend, Durability: ratestore.Async, MaxCachedKeys: cacheFor(len(keys))}
	db, l, err := openLimiter(dir, "peers", opts, s)
	if err != nil {
		return nil, nil, err
	}
	if err := preload(context.Background(), db, l, keys); err != nil {
		return nil, db.Close, err
	}
	if cached := db.Stats().CachedKeys; cached < len(keys) {
		return nil, db.Close, fmt.Errorf("preload left %d of %d keys in memory", cached, len(keys))
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
// repetition does not matter up to 1M keys, small enough to sit in cache
// next to 10k keys (4 MiB). BenchmarkScale's 10M keys get one index per key.
const orderLen = 1 << 20

// keyOrder is a sequence of length key indexes for BenchmarkPeers and
// BenchmarkScale to draw from, built before timing: uniform over n keys,
// or Zipf-skewed (s = 1.1, v = 1: key 0 the most frequent), from a fixed
// seed so that every side of one key count gets the same sequence.
func keyOrder(n, length int, dist string) []int32 {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	next := func() uint64 { return r.Uint64N(uint64(n)) }
	if dist == "zipf" {
		next = rand.NewZipf(r, 1.1, 1, uint64(n-1)).Uint64
	}
	order := make([]int32, length)
	for i := range order {
		order[i] = int32(next())
	}
	return order
}
