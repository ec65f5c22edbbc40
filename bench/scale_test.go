package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/strategies"
)

// The scale benchmarks ask whether a decision costs the same at 10 million
// keys as at 10 thousand: in the steady state at 10M keys (BenchmarkScale;
// BenchmarkPeers covers 1M), on a key seen for the first time
// (BenchmarkFirstTouch) and on a stored key that is not in memory
// (BenchmarkMiss), each beside the baseline its target is stated against.

// scaleEnv turns BenchmarkScale on: its 10M keys need several GiB of
// memory and minutes per side.
const scaleEnv = "RATESTORE_BENCH_10M"

// scaleKeysEnv overrides BenchmarkScale's key count, so that a smoke run
// takes seconds: RATESTORE_BENCH_10M=1 RATESTORE_BENCH_10M_KEYS=200000.
const scaleKeysEnv = "RATESTORE_BENCH_10M_KEYS"

// scaleImpls are BenchmarkScale's sides, in the order they run: the two
// fastest in-memory peers of BenchmarkPeers, then ratestore.
var scaleImpls = []string{"xrate", "golimiter", "ratestore-async-bolt"}

// BenchmarkScale is BenchmarkPeers' steady state at 10M keys
// (RATESTORE_BENCH_10M=1; skipped without it):
// BenchmarkScale/keys=10000000/dist=D/impl=I, D uniform or zipf, I xrate,
// golimiter (the two fastest in-memory peers at 1M keys) and
// ratestore-async-bolt (Async, every key in memory), each configured as in
// BenchmarkPeers. Every side creates every key (one decision each), makes
// an untimed warm-up pass of 2^20 decisions on each key choice, then
// GOMAXPROCS goroutines make the timed decisions (the report: 5M per
// sub-benchmark) drawing from a sequence of one index per key, so that a
// uniform choice reaches the whole key space.
//
// Memory: heap-B/key is the Go heap in use (runtime.MemStats.HeapInuse,
// after a GC) that building the side added, over the key count; rss-B/key
// the same of the process's resident set (VmRSS, after returning freed
// memory to the OS), and rss-file-B/key its file-backed part (RssFile):
// ratestore's pages of the mapped bbolt file, which the kernel may drop;
// key-B/key the length of a key, whose bytes the caller already holds.
// ratio-vs-xrate is as in BenchmarkPeers. Targets: ratestore within 1.3×
// the fastest peer of the same invocation, and at most 160 B of heap per
// key plus the key's bytes.
func BenchmarkScale(b *testing.B) {
	if os.Getenv(scaleEnv) != "1" {
		b.Skip("10M keys need several GiB and minutes: set " + scaleEnv + "=1")
	}
	n := envKeys(scaleKeysEnv, 10_000_000)
	w := newWorkload(n, max(orderLen, n), warmDecisions(n))
	keyBytes := 0
	for _, k := range w.keys {
		keyBytes += len(k)
	}
	base := map[string]float64{}
	for _, im := range peerImpls(n) {
		if !slices.Contains(scaleImpls, im.name) {
			continue
		}
		var added footprint
		open := im.open
		im.open = func(dir string, keys []string) (decider, func() error, error) {
			before := measureFootprint()
			decide, closeFn, err := open(dir, keys)
			added = measureFootprint().minus(before)
			return decide, closeFn, err
		}
		name := func(dist string) string { return fmt.Sprintf("keys=%d/dist=%s/impl=%s", n, dist, im.name) }
		w.run(b, im, name, func(b *testing.B, dist string) {
			reportVsXrate(b, base, im.name, dist)
			b.ReportMetric(added.heap/float64(n), "heap-B/key")
			b.ReportMetric(added.rss/float64(n), "rss-B/key")
			b.ReportMetric(added.file/float64(n), "rss-file-B/key")
			b.ReportMetric(float64(keyBytes)/float64(n), "key-B/key")
		})
	}
}

// footprint is what the process holds, in bytes: the Go heap in use, the
// resident set, and the file-backed part of that.
type footprint struct{ heap, rss, file float64 }

// measureFootprint collects garbage, returns freed memory to the OS (so
// that the resident set does not keep what an earlier side freed), and
// reads the heap in use, VmRSS and RssFile.
func measureFootprint() footprint {
	debug.FreeOSMemory()
	m := liveHeap()
	return footprint{heap: float64(m.HeapInuse), rss: procStatusMB("VmRSS") * (1 << 20), file: procStatusMB("RssFile") * (1 << 20)}
}

func (f footprint) minus(g footprint) footprint {
	return footprint{f.heap - g.heap, f.rss - g.rss, f.file - g.file}
}

// firstTouchOffset is the index of BenchmarkFirstTouch's first key
// (user:10000000): beyond every key count of the other benchmarks.
const firstTouchOffset = 10_000_000

// BenchmarkFirstTouch is a decision on a key never seen before, one
// goroutine, GCRA with BenchmarkHot's allowance (allowed, taking a token):
//
//   - impl=xrate, the baseline: xrateMap's path for a new key, a map
//     insert (the map growing as a program's does), rate.NewLimiter and
//     Allow;
//   - impl=ratestore-async-bolt: Allow on a database opened on an empty
//     file, Async, with a cache that holds all b.N keys (cacheFor): the key
//     looked up on disk, or not (loads/op: the share of decisions that read
//     the store), inserted, decided, and written by the committer running
//     beside the loop.
//
// The b.N keys (user:10000000 on) are built before the timer; ratestore's
// database is opened before it and closed after it. ratio-vs-xrate is
// ratestore's ns/op over xrate's, same invocation; target <= 1.5.
// heap-B/key is the Go heap a side holds after its b.N first touches
// (ratestore's flushed), over b.N, the keys' own bytes (key-B) left out:
// the caller holds them.
//
// impl=ratestore-uncommitted is the ratestore side with a FlushInterval
// of an hour: no commit runs until Close, after the timer. Its ns/op is
// the caller's path alone, without the committer's CPU beside it on the
// machine's cores, and its heap-B/key what the cache holds per key (entry,
// key and state), without the store's overlay of the keys written since
// its last checkpoint.
//
// BenchmarkHot's allowance refills a token in 10 ns, so a GCRA state is
// back at its initial value long before the committer sees it, and is not
// written: this is the first touch of a key that costs memory only.
// BenchmarkFirstTouchRolling is one whose state must be stored.
func BenchmarkFirstTouch(b *testing.B) {
	firstTouch(b, func(i int) string { return keyAt(firstTouchOffset + i) }, strategies.GCRA{Rate: hotRate, Burst: hotBurst})
}

// endUserKey is the i-th key of BenchmarkFirstTouchRolling: an end user of
// one API key, as a gateway names it, 38 bytes.
func endUserKey(i int) string { return fmt.Sprintf("q/key_0123456789abcdef/u:user-%08d", i) }

// BenchmarkFirstTouchRolling is BenchmarkFirstTouch for an API key's end
// users, millions, most seen once: keys of endUserKey's shape, and a
// RollingWindow of 20000 a day in 24-minute buckets, the first call
// AllowN(key, 1). Its state counts for a day, so the committer stores every
// key. The baseline is the same x/time/rate path on the same keys; target
// <= 1.5 (DESIGN.md: a first touch of a never-seen end user), and at most
// 200 B of heap per cached end user beyond its name (heap-B/key at 1M keys:
// -benchtime 1000000x).
func BenchmarkFirstTouchRolling(b *testing.B) {
	firstTouch(b, endUserKey, strategies.RollingWindow{Limit: 20000, Window: 24 * time.Hour, Bucket: 24 * time.Minute})
}

// firstTouch runs the sides of BenchmarkFirstTouch: one decision, AllowN
// of 1, on each of b.N keys key(0), key(1), ... never seen before, the
// ratestore side applying s.
func firstTouch(b *testing.B, key func(int) string, s strategies.Strategy) {
	var base float64
	b.Run("impl=xrate", func(b *testing.B) {
		b.ReportAllocs()
		keys := firstTouchKeys(b.N, key)
		before := liveHeap().HeapAlloc
		x := newXRateMap(nil)
		decideEach(b, keys, func(k string) (bool, error) { return x.allow(k), nil })
		base = nsPerOp(b)
		reportHeap(b, before, keys)
		runtime.KeepAlive(x)
	})
	b.Run("impl=ratestore-async-bolt", func(b *testing.B) {
		b.ReportAllocs()
		keys := firstTouchKeys(b.N, key)
		before := liveHeap().HeapAlloc
		opts := ratestore.Options{Backend: ratestore.Bolt, Durability: ratestore.Async, MaxCachedKeys: cacheFor(b.N)}
		db, l, err := openLimiter(b.TempDir(), "first", opts, s)
		if err != nil {
			b.Fatal(err)
		}
		stats := db.Stats()
		ctx := context.Background()
		decideEach(b, keys, func(k string) (bool, error) {
			r, err := l.AllowN(ctx, k, 1)
			return r.Allowed, err
		})
		reportStats(b, stats, db.Stats())
		reportRatio(b, base, "ratio-vs-xrate")
		err = db.Flush(ctx)
		reportHeap(b, before, keys)
		if err = errors.Join(err, db.Close()); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("impl=ratestore-uncommitted", func(b *testing.B) {
		b.ReportAllocs()
		keys := firstTouchKeys(b.N, key)
		before := liveHeap().HeapAlloc
		opts := ratestore.Options{Backend: ratestore.Bolt, Durability: ratestore.Async, MaxCachedKeys: cacheFor(b.N), FlushInterval: time.Hour}
		db, l, err := openLimiter(b.TempDir(), "first", opts, s)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		decideEach(b, keys, func(k string) (bool, error) {
			r, err := l.AllowN(ctx, k, 1)
			return r.Allowed, err
		})
		reportRatio(b, base, "ratio-vs-xrate")
		reportHeap(b, before, keys)
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	})
}

// reportHeap reports the live heap added since before over the number of
// keys (heap-B/key; the keys, built before, are not in it, but a side's
// own copy of a key is), and a key's mean length (key-B).
func reportHeap(b *testing.B, before uint64, keys []string) {
	n, keyBytes := len(keys), 0
	for _, k := range keys {
		keyBytes += len(k)
	}
	if n == 0 {
		return
	}
	added := float64(int64(liveHeap().HeapAlloc)-int64(before)) / float64(n)
	b.ReportMetric(added, "heap-B/key")
	b.ReportMetric(float64(keyBytes)/float64(n), "key-B")
}

// firstTouchKeys is the n keys key(0) to key(n-1).
func firstTouchKeys(n int, key func(int) string) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = key(i)
	}
	return keys
}

// decideEach makes one timed decision on each key, in order, on one
// goroutine, and reports the throughput.
func decideEach(b *testing.B, keys []string, decide decider) {
	var allowed int64
	b.ResetTimer()
	for _, k := range keys {
		a, err := decide(k)
		if err != nil {
			b.Fatal(err)
		}
		if a {
			allowed++
		}
	}
	b.StopTimer()
	reportThroughput(b, allowed)
}

// reportStats reports what ratestore's DB did per decision between two
// readings of its Stats: loads/op, the decisions that read the store, and
// evictions/op, the states it dropped from memory to make room.
func reportStats(b *testing.B, before, after ratestore.Stats) {
	if b.N == 0 {
		return
	}
	b.ReportMetric(float64(after.Loads-before.Loads)/float64(b.N), "loads/op")
	b.ReportMetric(float64(after.Evictions-before.Evictions)/float64(b.N), "evictions/op")
}

// The layout of a ratestore bbolt file, mirrored for BenchmarkMiss'
// baseline: the bucket of internal/storage/boltstore (ValueBucket) and the
// store key of a state (cache.go: statePrefix + limiter name + 0x00 + key).
// openBoltGet checks them against the file, so a change of layout fails
// the benchmark instead of timing reads of absent keys.
const (
	boltBucket  = "ratestore-v2"
	statePrefix = "s/"
	benchLimit  = "bench" // openLimiter's limiter name
)

// missWarm is the untimed decisions (reads) each side of BenchmarkMiss
// makes before timing: they fill ratestore's cache, start its committer
// and give its background scan of the stored keys time to end, and fault
// the file's pages in for both sides alike.
const missWarm = 1 << 16

// BenchmarkMiss is a decision on a stored key that is not in memory:
// BenchmarkMiss/keys=N/impl=I, N = largestKeys() (1M with
// RATESTORE_BENCH_FULL=1) keys given a coldStrategy state (fill) in one
// bbolt file, built once; one goroutine, keys in a uniform random order
// (keyOrder), each side first making missWarm untimed decisions.
//
//   - impl=bolt-view-get, the baseline: on the file opened with bbolt
//     directly (read-only, after ratestore closed it), one DB.View per
//     decision that builds the key's store key and Gets it: a raw read, no
//     copy, no decoding, no write, which flatters it.
//   - impl=ratestore-async-bolt: Allow on the file reopened in Async mode
//     with MaxCachedKeys coldCache (1024), so that nearly every decision
//     loads the key (loads/op) and, the cache being full, evicts one
//     (evictions/op), on the caller's path; every decision also changes the
//     state, which the committer writes.
//
// ratio-vs-bolt-view-get is ratestore's ns/op over the baseline's, same
// invocation; target <= 1.5.
func BenchmarkMiss(b *testing.B) {
	n := largestKeys()
	keys := makeKeys(n)
	order := keyOrder(n, orderLen, "uniform")
	dir := b.TempDir()
	path := filepath.Join(dir, coldName)
	stored := newFixture(func() (struct{}, func() error, error) {
		return struct{}{}, nil, storeStates(dir, ratestore.Bolt, n)
	})
	sides := []struct {
		name string
		open func(path string) (decider, func() ratestore.Stats, func() error, error)
	}{
		{"bolt-view-get", openBoltGet},
		{"ratestore-async-bolt", openMissDB},
	}
	var base float64
	for _, side := range sides {
		type opened struct {
			decide decider
			stats  func() ratestore.Stats
		}
		f := newFixture(func() (opened, func() error, error) {
			decide, stats, closeFn, err := side.open(path)
			if err == nil {
				err = warmUp(keys, order, missWarm, decide)
			}
			return opened{decide, stats}, closeFn, err
		})
		b.Run(fmt.Sprintf("keys=%d/impl=%s", n, side.name), func(b *testing.B) {
			b.ReportAllocs()
			stored.get(b)
			o := f.get(b)
			var before ratestore.Stats
			if o.stats != nil {
				before = o.stats()
			}
			walkOrder(b, keys, order, missWarm, o.decide)
			if o.stats != nil {
				reportStats(b, before, o.stats())
				reportRatio(b, base, "ratio-vs-bolt-view-get")
			} else {
				base = nsPerOp(b)
			}
		})
		f.release(b)
	}
	stored.release(b)
}

// walkOrder makes b.N timed decisions on one goroutine on the keys of
// order, from index start and cycling, and reports the throughput.
func walkOrder(b *testing.B, keys []string, order []int32, start int, decide decider) {
	made := 0
	more := func() bool { made++; return made <= b.N }
	b.ResetTimer()
	allowed := walk(b, len(order), start%len(order), more, func(i int) (bool, error) { return decide(keys[order[i]]) })
	b.StopTimer()
	reportThroughput(b, allowed)
}

// openBoltGet opens the bbolt file at path read-only and returns
// BenchmarkMiss' baseline: one View and Get of the key's store key, an
// error if it is not stored. It checks the layout first on keyAt(0).
func openBoltGet(path string) (decider, func() ratestore.Stats, func() error, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, nil, nil, err
	}
	var sk []byte
	get := func(key string) (bool, error) {
		sk = append(append(append(sk[:0], statePrefix+benchLimit...), 0), key...)
		found := false
		err := db.View(func(tx *bolt.Tx) error {
			bk := tx.Bucket([]byte(boltBucket))
			if bk == nil {
				return fmt.Errorf("%s: no bucket %q: has ratestore's bbolt layout changed?", path, boltBucket)
			}
			found = bk.Get(sk) != nil
			return nil
		})
		if err == nil && !found {
			err = fmt.Errorf("%s: key %q not stored: has ratestore's bbolt layout changed?", path, sk)
		}
		return found, err
	}
	if _, err := get(keyAt(0)); err != nil {
		return nil, nil, db.Close, err
	}
	return get, nil, db.Close, nil
}

// openMissDB reopens the database at path (built by storeStates) with
// coldOptions: BenchmarkMiss' ratestore side.
func openMissDB(path string) (decider, func() ratestore.Stats, func() error, error) {
	db, l, err := openLimiter(filepath.Dir(path), filepath.Base(path), coldOptions(ratestore.Bolt), coldStrategy)
	if err != nil {
		return nil, nil, nil, err
	}
	return allowFunc(l), db.Stats, db.Close, nil
}
