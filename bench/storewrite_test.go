package bench

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
)

// storeWriteBatch is BenchmarkStoreWrite's commit: as many keys as a
// commit of the engine's holds under a steady load of new keys.
const storeWriteBatch = 1024

// BenchmarkStoreWrite is the store's share of the committer's work for one
// dirty key, as the file grows: BenchmarkStoreWrite/keys=N, on bbolt files
// of N keys (10k, 200k and largestKeys(): 1M with RATESTORE_BENCH_FULL=1)
// written by internal/storage/boltstore, the store of ratestore.Bolt. One
// op is a commit of storeWriteBatch states of random keys (ratestore's
// store keys, 16-byte values, sorted as the committer sorts them, each key
// once: the per-key metrics count the keys written) and a
// Sync, as the committer makes them, with the checkpoints they start; the
// store is closed inside the timing, so the last checkpoint counts too.
// ns/key is wall time a key; cpu-ns/key the process' CPU time a key, every
// goroutine counted (the caller, the background checkpoints, the GC): what
// a dirty key costs the machine, which should not grow with the file.
// p99-ns/commit and max-ns/commit are the 99th percentile and the longest
// of the commits (Commit and Sync): what a Sync-mode caller waits at worst,
// a checkpoint in the foreground included. The
// file is built and reopened before the timer, once per round: run it
// with a fixed count (-benchtime 1000x).
func BenchmarkStoreWrite(b *testing.B) {
	sizes := []int{10_000, 200_000, largestKeys()}
	slices.Sort(sizes)
	for _, n := range slices.Compact(sizes) {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "db")
			keys := storeKeys(n)
			if err := fillStore(path, keys); err != nil {
				b.Fatal(err)
			}
			s, err := boltstore.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			ops := make([]storage.Op, storeWriteBatch)
			value := make([]byte, 16)
			cpu := cpuTime()
			took := make([]time.Duration, 0, b.N)
			written := 0
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				for i := range ops {
					value[0]++
					ops[i] = storage.Op{Key: keys[rng.IntN(n)], Value: value}
				}
				slices.SortFunc(ops, func(x, y storage.Op) int { return slices.Compare(x.Key, y.Key) })
				ops = slices.CompactFunc(ops, func(x, y storage.Op) bool { return slices.Equal(x.Key, y.Key) })
				if err := s.Commit(ops); err != nil {
					b.Fatal(err)
				}
				written += len(ops)
				if err := s.Sync(); err != nil {
					b.Fatal(err)
				}
				ops = ops[:storeWriteBatch]
				took = append(took, time.Since(start))
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(written), "ns/key")
			b.ReportMetric(float64(cpuTime()-cpu)/float64(written), "cpu-ns/key")
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns/commit")
			b.ReportMetric(float64(took[len(took)-1].Nanoseconds()), "max-ns/commit")
		})
	}
}

// storeKeys is the store keys of n states of openLimiter's limiter.
func storeKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "%s%s\x00%s", statePrefix, benchLimit, keyAt(i))
	}
	return keys
}

// fillStore writes a state for every key into a new store at path and
// closes it, checkpointed.
func fillStore(path string, keys [][]byte) error {
	s, err := boltstore.Open(path)
	if err != nil {
		return err
	}
	ops := make([]storage.Op, 0, 4096)
	for i, k := range keys {
		ops = append(ops, storage.Op{Key: k, Value: make([]byte, 16)})
		if len(ops) == cap(ops) || i == len(keys)-1 {
			if err := s.Commit(ops); err != nil {
				s.Close()
				return err
			}
			ops = ops[:0]
		}
	}
	return s.Close()
}
