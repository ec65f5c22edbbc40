package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/strategies"
)

// The Sync benchmarks measure decisions that are on disk (fsynced) before
// the call returns. Both sides apply the same GCRA: syncRate per second per
// key with a burst of syncBurst, so every call is allowed and changes its
// key's state: every decision is a write that must reach the disk. At 1 call
// per second per key the state stays in use for a second after each call, so
// what preloading stores is still there when the timed loop starts.
const (
	syncRate  = 1
	syncBurst = 1_000_000_000
	syncKeys  = 10_000
)

// syncCallers are the numbers of concurrent callers: exactly this many
// goroutines, each making one call at a time.
var syncCallers = []int{1, 8, 64, 256}

var syncStrategy = strategies.GCRA{Rate: syncRate, Burst: syncBurst}

// runCallers makes b.N decisions with exactly callers goroutines, each
// making one call at a time and taking the next decision number from a
// shared counter. Goroutine g walks its own stripe of the keys, starting at
// g*len(keys)/callers, so concurrent callers rarely touch the same key.
// decide reports whether the call was allowed. Every call's duration goes
// into a slice allocated before the timer starts, indexed by the decision
// number, so recording it allocates nothing and takes no lock; the p50 and
// p99 of those durations are reported next to the throughput.
func runCallers(b *testing.B, callers int, keys []string, decide func(key int) (bool, error)) {
	lat := make([]time.Duration, b.N)
	var next, allowed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := range callers {
		wg.Go(func() {
			var call int64
			more := func() bool { call = next.Add(1); return call <= int64(b.N) }
			allowed.Add(walk(b, len(keys), g*len(keys)/callers, more, func(i int) (bool, error) {
				start := time.Now()
				a, err := decide(i)
				lat[call-1] = time.Since(start)
				return a, err
			}))
		})
	}
	wg.Wait()
	b.StopTimer()
	reportThroughput(b, allowed.Load())
	slices.Sort(lat)
	b.ReportMetric(percentile(lat, 50).Seconds()*1e6, "p50-us")
	b.ReportMetric(percentile(lat, 99).Seconds()*1e6, "p99-us")
}

// percentile is the nearest-rank p-th percentile of sorted durations: the
// smallest one that at least p% of them do not exceed.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100 // ceil(n*p/100), the 1-based rank
	return sorted[max(i, 1)-1]
}

// boltBaseline is the baseline: no engine, one bbolt Update per decision.
// Each Update reads the key's 8-byte GCRA state (its TAT), decides, writes
// the new TAT and commits, which fsyncs. Its state encoding is the cheapest
// possible, and it uses the bbolt options of ratestore's own bolt backend,
// so the baseline is if anything flattered.
type boltBaseline struct {
	db   *bolt.DB
	keys [][]byte
}

var baselineBucket = []byte("bench")

func openBoltBaseline(dir string, keys []string) (*boltBaseline, func() error, error) {
	db, err := bolt.Open(filepath.Join(dir, "baseline.db"), 0o600, &bolt.Options{
		Timeout:      time.Second,
		FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		return nil, nil, err
	}
	bb := &boltBaseline{db: db, keys: make([][]byte, len(keys))}
	for i, k := range keys {
		bb.keys[i] = []byte("s/bench\x00" + k)
	}
	// Preload: every key gets a state, in one transaction.
	now := time.Now().UnixNano()
	err = db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(baselineBucket)
		if err != nil {
			return err
		}
		for _, k := range bb.keys {
			if _, err := bb.decide(bk, k, now); err != nil {
				return err
			}
		}
		return nil
	})
	return bb, db.Close, err
}

// emission is the GCRA emission interval of syncStrategy.
const emission = int64(time.Second) / syncRate

// decide applies GCRA to key inside an open read-write transaction.
func (bb *boltBaseline) decide(bk *bolt.Bucket, key []byte, now int64) (bool, error) {
	var tat int64
	if v := bk.Get(key); len(v) == 8 {
		tat = int64(binary.BigEndian.Uint64(v))
	}
	newTAT := max(tat, now) + emission
	if newTAT-now > syncBurst*emission {
		return false, nil
	}
	val := make([]byte, 8) // bbolt keeps it until the transaction ends
	binary.BigEndian.PutUint64(val, uint64(newTAT))
	return true, bk.Put(key, val)
}

func (bb *boltBaseline) allow(i int) (allowed bool, err error) {
	err = bb.db.Update(func(tx *bolt.Tx) error {
		allowed, err = bb.decide(tx.Bucket(baselineBucket), bb.keys[i], time.Now().UnixNano())
		return err
	})
	return allowed, err
}

// openSyncDB opens a Sync-mode ratestore database applying s, with every key
// already stored and loaded into memory, like the baseline's. The states are
// written by an Async pass closed before the Sync open (writing them in Sync
// mode one call at a time would cost one fsync each), then read back by one
// Peek per key, which loads a key without writing anything.
func openSyncDB(dir string, backend ratestore.Backend, s strategies.Strategy, keys []string) (*ratestore.Limiter, func() error, error) {
	ctx := context.Background()
	name := "sync-" + backend.String()
	db, l, err := openLimiter(dir, name, ratestore.Options{Backend: backend, Durability: ratestore.Async, MaxCachedKeys: cacheFor(len(keys))}, s)
	if err != nil {
		return nil, nil, err
	}
	err = preload(ctx, db, l, keys)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	db, l, err = openLimiter(dir, name, ratestore.Options{Backend: backend, Durability: ratestore.Sync, MaxCachedKeys: cacheFor(len(keys))}, s)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range keys {
		if _, err := l.Peek(ctx, k); err != nil {
			return nil, db.Close, err
		}
	}
	return l, db.Close, nil
}

// BenchmarkSync: fsynced decisions by 1, 8, 64 and 256 concurrent callers
// over 10k keys, with the p50 and p99 latency of a call. impl=bbolt-update, the baseline, is one bbolt Update per
// decision; impl=ratestore-bolt and impl=ratestore-badger are ratestore in
// Sync mode, where concurrent calls share one commit. For each caller count
// the baseline runs first and ratestore right after it, so that
// x-vs-bbolt-update compares runs made seconds apart on the same disk, and
// `benchstat -col /impl` shows ratestore against the baseline.
func BenchmarkSync(b *testing.B) {
	keys := makeKeys(syncKeys)
	for _, callers := range syncCallers {
		var base float64 // the baseline's ns/op at this caller count, this round
		bf := newFixture(func() (*boltBaseline, func() error, error) { return openBoltBaseline(b.TempDir(), keys) })
		b.Run(fmt.Sprintf("impl=bbolt-update/callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			bb := bf.get(b)
			runCallers(b, callers, keys, bb.allow)
			base = nsPerOp(b)
		})
		bf.release(b)
		for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
			f := newFixture(func() (*ratestore.Limiter, func() error, error) {
				return openSyncDB(b.TempDir(), backend, syncStrategy, keys)
			})
			b.Run(fmt.Sprintf("impl=ratestore-%s/callers=%d", backend, callers), func(b *testing.B) {
				b.ReportAllocs()
				l := f.get(b)
				ctx := context.Background()
				runCallers(b, callers, keys, func(i int) (bool, error) {
					r, err := l.Allow(ctx, keys[i])
					return r.Allowed, err
				})
				// Throughput ratio: the baseline's time per decision over ours.
				if ns := nsPerOp(b); ns > 0 && base > 0 {
					b.ReportMetric(base/ns, "x-vs-bbolt-update")
				}
			})
			f.release(b)
		}
	}
}
