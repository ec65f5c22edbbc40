package bench

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkMemory is the heap each key costs once it is in memory, for
// ratestore (Async, every key cached: BenchmarkPeers' ratestore-async side)
// and the in-memory peers of BenchmarkPeers, at bigKeys() keys (1M with
// RATESTORE_BENCH_FULL=1). Each side is built with every key used once,
// after a GC; B/key is the live heap it added (runtime.MemStats.HeapAlloc
// after two GCs) over the key count, everything it holds included: its
// table, its states and its own copy of each key, if it makes one.
// key-B is the length of one key (user:000000), whose bytes the caller
// already holds. The timed loop then decides on the keys in order, so
// ns/op is a decision at that size.
func BenchmarkMemory(b *testing.B) {
	n := bigKeys()
	keys := makeKeys(n)
	for _, impl := range peerImpls(n) {
		if strings.HasPrefix(impl.name, "ratestore-sync") || strings.HasPrefix(impl.name, "ratestore-cold") {
			continue
		}
		b.Run(fmt.Sprintf("impl=%s/keys=%d", impl.name, n), func(b *testing.B) {
			before := liveHeap().HeapAlloc
			decide, closeFn, err := impl.open(b.TempDir(), keys)
			if err != nil {
				b.Fatal(err)
			}
			if closeFn != nil {
				defer closeFn()
			}
			perKey := float64(int64(liveHeap().HeapAlloc)-int64(before)) / float64(n)
			i := 0
			for b.Loop() {
				if _, err := decide(keys[i]); err != nil {
					b.Fatal(err)
				}
				if i++; i == n {
					i = 0
				}
			}
			b.ReportMetric(perKey, "B/key")
			b.ReportMetric(float64(len(keys[0])), "key-B")
			runtime.KeepAlive(decide)
		})
	}
}
