package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/redisstore"
)

// The end-user benchmarks measure keystore's sub-limits (Policy.EndUsers,
// Policy.ModelLimits) against the same key without them, in the same run
// (DESIGN.md, "End users"): Admit+Finish at 1M end users, on a never-seen
// end user and in the steady state (BenchmarkKeysEndUsers), the heap a
// cached end user costs (BenchmarkKeysEndUsersMemory), and the round trips
// to Redis (BenchmarkKeysEndUsersRedis).

// endUsersN is how many end users the benchmarks name: bigKeys(), 1M
// with RATESTORE_BENCH_FULL=1 (the targets' size), else 20k, so that the
// CI's smoke run (-benchtime 1x) takes seconds.
var endUsersN = bigKeys()

// endUsersModel is the model every request names; the model limit's glob
// (gpt-4o*) matches it.
const endUsersModel = "gpt-4o"

// endUserAt is the name of end user i: user-000000 ... user-999999.
func endUserAt(i int) string { return fmt.Sprintf("user-%06d", i) }

// endUserNames returns the endUsersN names, built before any timed loop.
func endUserNames() []string {
	names := make([]string, endUsersN)
	for i := range names {
		names[i] = endUserAt(i)
	}
	return names
}

// endUserPerm is a random permutation of the end users, from a fixed seed:
// the first-touch side names each end user once, in this order.
func endUserPerm() []int32 {
	r := rand.New(rand.NewPCG(2, uint64(endUsersN)))
	p := make([]int32, endUsersN)
	for i, j := range r.Perm(endUsersN) {
		p[i] = int32(j)
	}
	return p
}

// endUsersPlain is the key's own policy on every side: two token windows
// that no benchmark reaches (keysLimit, as BenchmarkKeysAdmitFinish's).
func endUsersPlain() keystore.Policy {
	return keystore.Policy{Windows: []keystore.Window{
		{Limit: keysLimit, Window: 5 * time.Hour},
		{Limit: 2 * keysLimit, Window: 7 * 24 * time.Hour},
	}}
}

// endUsersPolicy is endUsersPlain with the sub-limits: each end user
// 20,000 tokens a day (each is named a few times at most: never reached),
// and one model limit on gpt-4o* of a day (at keysLimit: the key's
// requests would reach the 100k of DESIGN.md's example within the run).
func endUsersPolicy() keystore.Policy { return endUsersPolicyOf(20_000) }

// endUsersPolicyOf is endUsersPolicy with perUser tokens a day for each
// end user.
func endUsersPolicyOf(perUser int64) keystore.Policy {
	p := endUsersPlain()
	p.EndUsers = keystore.EndUsers{Windows: []keystore.Window{{Limit: perUser, Window: 24 * time.Hour}}}
	p.ModelLimits = []keystore.ModelLimit{{Models: []string{"gpt-4o*"}, Windows: []keystore.Window{{Limit: keysLimit, Window: 24 * time.Hour}}}}
	return p
}

// openEndUsersStore opens an Async bbolt database at dir with a cache of
// maxCached states (0: the default) and its key store, and creates one key
// with policy p; it returns the key's secret.
func openEndUsersStore(b *testing.B, dir string, maxCached int, p keystore.Policy) (*ratestore.DB, *keystore.Store, string) {
	ctx := context.Background()
	db, err := ratestore.Open(filepath.Join(dir, "keys"), ratestore.Options{Durability: ratestore.Async, MaxCachedKeys: maxCached})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	_, secret, err := ks.Create(ctx, keystore.Spec{Name: "bench", Policy: p})
	if err != nil {
		b.Fatal(err)
	}
	return db, ks, secret
}

// endUserRequest is one request's life for end user name: Admit with a
// reservation, Finish charging keysTokens.
func endUserRequest(ctx context.Context, ks *keystore.Store, secret, name string) error {
	a, err := ks.Admit(ctx, secret, keystore.Request{Model: endUsersModel, Reserve: keysReserve, EndUser: name})
	if err != nil {
		return err
	}
	_, err = a.Finish(ctx, keysTokens)
	return err
}

// BenchmarkKeysEndUsers: Admit (Model gpt-4o, a reservation, an end user)
// and Finish on one key, Async bbolt, the system clock, one goroutine, a
// cache that holds every state (2·endUsersN), every request naming one of
// endUsersN end users (names user-000000 ..., built before timing): 1M
// with RATESTORE_BENCH_FULL=1, the targets' size, else 20k. In this order:
//
//   - side=plain, the baseline: a key with two token windows and no
//     sub-limits (the request names an end user and a model all the same:
//     the key's policy has no use for them). Users in endUserPerm's order.
//   - side=endusers-same: the policy of the sides below (the end user's
//     window at keysLimit, which it would reach otherwise), every request
//     naming the same end user: the sub-limits' checks and takes alone,
//     their states hot and written once a commit, as the key's are.
//   - side=endusers: the same key with EndUsers (one 24h window) and one
//     ModelLimit (gpt-4o*, one 24h window): each request names an end user
//     never seen before (endUserPerm's order; at 1M, b.N stays below
//     it at -benchtime 1s, where at 20k it cycles): its state is
//     made, and not looked for on disk (loads/op: the requests that read
//     the store; evictions/op those that dropped a state).
//   - side=endusers-hot: the same policy after a request of each of the
//     end users (untimed, then a Flush, then quiesce: the store's
//     checkpoints of them done): the steady state, end users drawn
//     uniformly (keyOrder), each in memory.
//
// ratio-vs-plain is the side's ns/op over plain's, same invocation
// (target <= 1.3 at 1M end users), cpu-ratio-vs-plain the same of
// cpu-ns/op; cached-keys is the engine's states in memory at the end.
func BenchmarkKeysEndUsers(b *testing.B) {
	ctx := context.Background()
	names, perm := endUserNames(), endUserPerm()
	cache := 2 * endUsersN
	var baseNs, baseCPU float64
	// run times b.N requests of the end users of order, cycling, and
	// reports the store's loads and the process's CPU time per request
	// (cpu-ns/op: every goroutine's, the committer's until a Flush after
	// the loop included), which the other processes of this shared
	// machine do not inflate as they do ns/op.
	run := func(b *testing.B, db *ratestore.DB, ks *keystore.Store, secret string, order []int32) float64 {
		quiesce()
		before, cpu := db.Stats(), cpuTime()
		i := 0
		for b.Loop() {
			if err := endUserRequest(ctx, ks, secret, names[order[i]]); err != nil {
				b.Fatal(err)
			}
			if i++; i == len(order) {
				i = 0
			}
		}
		if err := db.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		cpuNs := float64(cpuTime()-cpu) / float64(b.N)
		after := db.Stats()
		reportStats(b, before, after)
		b.ReportMetric(float64(after.CachedKeys), "cached-keys")
		b.ReportMetric(cpuNs, "cpu-ns/op")
		if baseCPU > 0 {
			b.ReportMetric(cpuNs/baseCPU, "cpu-ratio-vs-plain")
		}
		return cpuNs
	}
	b.Run("side=plain", func(b *testing.B) {
		b.ReportAllocs()
		db, ks, secret := openEndUsersStore(b, b.TempDir(), cache, endUsersPlain())
		// One request of the last end user before timing: the key's
		// windows have a state.
		if err := endUserRequest(ctx, ks, secret, names[perm[len(perm)-1]]); err != nil {
			b.Fatal(err)
		}
		baseCPU = 0
		baseCPU = run(b, db, ks, secret, perm)
		baseNs = nsPerOp(b)
	})
	b.Run("side=endusers-same", func(b *testing.B) {
		b.ReportAllocs()
		db, ks, secret := openEndUsersStore(b, b.TempDir(), cache, endUsersPolicyOf(keysLimit))
		one := perm[len(perm)-1:]
		if err := endUserRequest(ctx, ks, secret, names[one[0]]); err != nil {
			b.Fatal(err)
		}
		run(b, db, ks, secret, one)
		reportRatio(b, baseNs, "ratio-vs-plain")
	})
	b.Run("side=endusers", func(b *testing.B) {
		b.ReportAllocs()
		db, ks, secret := openEndUsersStore(b, b.TempDir(), cache, endUsersPolicy())
		// The last end user of the permutation before timing: the key's
		// windows and its model limit's have a state; the b.N timed
		// requests each name an end user first, while b.N < endUsersN.
		if err := endUserRequest(ctx, ks, secret, names[perm[len(perm)-1]]); err != nil {
			b.Fatal(err)
		}
		run(b, db, ks, secret, perm)
		reportRatio(b, baseNs, "ratio-vs-plain")
	})
	b.Run("side=endusers-hot", func(b *testing.B) {
		b.ReportAllocs()
		db, ks, secret := openEndUsersStore(b, b.TempDir(), cache, endUsersPolicy())
		for _, name := range names {
			if err := endUserRequest(ctx, ks, secret, name); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		quiesce()
		run(b, db, ks, secret, keyOrder(endUsersN, orderLen, "uniform"))
		reportRatio(b, baseNs, "ratio-vs-plain")
	})
}

// quiesce waits, up to 30 s, until the process uses less than a tenth of
// a CPU over a quarter of a second: until the store's background work
// (the checkpoints of what a setup wrote, a rebuild of its filter) is
// over, so that a side's cpu-ns/op counts the work of its own requests.
func quiesce() {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		cpu := cpuTime()
		time.Sleep(250 * time.Millisecond)
		if cpuTime()-cpu < int64(25*time.Millisecond) {
			return
		}
	}
}

// endUsersMemoryStep is how many end users BenchmarkKeysEndUsersMemory
// touches between two readings of the heap.
const endUsersMemoryStep = 100_000

// BenchmarkKeysEndUsersMemory: the heap an end user costs once cached. A
// key whose policy is endUsersPlain's two windows and EndUsers (one 24h
// window), Async bbolt; endUsersN end users (1M with
// RATESTORE_BENCH_FULL=1) each make one request (Admit+Finish, Model "":
// the key's windows and the end user's), in order, then a Flush. Each
// iteration does this on a new database (run it with -benchtime 1x; ns/op
// is endUsersN requests).
//
//   - cache=all: MaxCachedKeys 2·endUsersN, every end user stays in memory.
//     B/enduser is the heap in use (runtime.MemStats.HeapInuse after two
//     GCs) that the end users added, over their number; live-B/enduser the
//     same of HeapAlloc; name-B/enduser the length of a name (user-000000), whose
//     bytes the caller holds. The target is <= 200 B per cached end user
//     beyond its name: B/enduser - name-B/enduser.
//   - cache=default: DefaultMaxCachedKeys (262,144): idle end users are
//     evicted. peak-cached-keys is the most states in memory at any reading
//     (every 100k end users, and at the end), peak-heap-MiB the most heap
//     in use the end users added at those readings (after GCs), and
//     B/enduser here is that peak over the cached states.
func BenchmarkKeysEndUsersMemory(b *testing.B) {
	ctx := context.Background()
	names := endUserNames()
	nameBytes := 0
	for _, n := range names {
		nameBytes += len(n)
	}
	p := keystore.Policy{Windows: endUsersPlain().Windows,
		EndUsers: keystore.EndUsers{Windows: []keystore.Window{{Limit: 20_000, Window: 24 * time.Hour}}}}
	for _, side := range []struct {
		name  string
		cache int
	}{{"all", 2 * endUsersN}, {"default", 0}} {
		b.Run("cache="+side.name, func(b *testing.B) {
			var inuse, alloc, peakInuse float64
			var peakCached int
			for b.Loop() {
				b.StopTimer()
				db, ks, secret := openEndUsersStore(b, b.TempDir(), side.cache, p)
				if err := endUserRequest(ctx, ks, secret, ""); err != nil {
					b.Fatal(err)
				}
				if err := db.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				before := liveHeap()
				peakInuse, peakCached = 0, 0
				reading := func() runtime.MemStats {
					m := liveHeap()
					peakInuse = max(peakInuse, float64(int64(m.HeapInuse)-int64(before.HeapInuse)))
					peakCached = max(peakCached, db.Stats().CachedKeys)
					return m
				}
				b.StartTimer()
				for i, name := range names {
					if err := endUserRequest(ctx, ks, secret, name); err != nil {
						b.Fatal(err)
					}
					if (i+1)%endUsersMemoryStep == 0 && i+1 < len(names) {
						b.StopTimer()
						reading()
						b.StartTimer()
					}
				}
				if err := db.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				after := reading()
				inuse = float64(int64(after.HeapInuse) - int64(before.HeapInuse))
				alloc = float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
				runtime.KeepAlive(ks)
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(nameBytes)/float64(endUsersN), "name-B/enduser")
			b.ReportMetric(float64(peakCached), "peak-cached-keys")
			b.ReportMetric(peakInuse/(1<<20), "peak-heap-MiB")
			if side.cache != 0 {
				b.ReportMetric(inuse/float64(endUsersN), "B/enduser")
				b.ReportMetric(alloc/float64(endUsersN), "live-B/enduser")
			} else if peakCached > 0 {
				b.ReportMetric(peakInuse/float64(peakCached), "B/enduser")
			}
		})
	}
}

// endUsersRedisN is how many end users BenchmarkKeysEndUsersRedis names:
// each request a new one, up to that many.
const endUsersRedisN = 200_000

// BenchmarkKeysEndUsersRedis is BenchmarkKeysEndUsers' plain and endusers
// sides on Redis (keystore.Open on a redisstore.DB, one redis-server
// started for the benchmark, no persistence, the system clock, a 10 s
// timeout for this shared machine's stalls), one
// goroutine, each request naming an end user never seen before
// (user-000000, user-000001, ... up to 200k). round-trips/op is the
// commands and pipelines the client sent per Admit+Finish
// (redistest.CountTrips); the target is keystore Admit+Finish <= 3.
// ratio-vs-plain is as in BenchmarkKeysEndUsers.
func BenchmarkKeysEndUsersRedis(b *testing.B) {
	ctx := context.Background()
	names := make([]string, endUsersRedisN)
	for i := range names {
		names[i] = endUserAt(i)
	}
	var baseNs float64
	for _, side := range []struct {
		name string
		p    keystore.Policy
	}{{"plain", endUsersPlain()}, {"endusers", endUsersPolicy()}} {
		b.Run("side="+side.name, func(b *testing.B) {
			b.ReportAllocs()
			srv := redistest.Start(b)
			rdb, err := redisstore.Open(ctx, srv.URL()+"?pool_size="+strconv.Itoa(4), redisstore.Options{Timeout: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { rdb.Close() })
			trips := redistest.CountTrips(rdb.Client())
			ks, err := keystore.Open(rdb, keystore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			_, secret, err := ks.Create(ctx, keystore.Spec{Name: "bench", Policy: side.p})
			if err != nil {
				b.Fatal(err)
			}
			if err := endUserRequest(ctx, ks, secret, "warm-up"); err != nil {
				b.Fatal(err)
			}
			before, i := trips(), 0
			for b.Loop() {
				if err := endUserRequest(ctx, ks, secret, names[i]); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(names) {
					i = 0
				}
			}
			b.ReportMetric(float64(trips()-before)/float64(b.N), "round-trips/op")
			if side.name == "plain" {
				baseNs = nsPerOp(b)
			} else {
				reportRatio(b, baseNs, "ratio-vs-plain")
			}
		})
	}
}
