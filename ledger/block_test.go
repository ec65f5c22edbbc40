package ledger

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratestore/ratestore/pricing"
)

// benchItems are n entries at the scale of the query benchmarks: 10k
// keys in 100 teams, 50 models, a request every second or so.
func benchItems(n int) []item {
	r := rand.New(rand.NewPCG(1, 2))
	items := make([]item, n)
	t := time.UnixMilli(1_700_000_000_000).UTC()
	for i := range items {
		k := r.IntN(10_000)
		t = t.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
		items[i] = item{uint32(i), Entry{Time: t, RequestID: fmt.Sprintf("req_%016x", r.Uint64()),
			Key: fmt.Sprintf("key_%016x", k), Team: fmt.Sprintf("team_%016x", k%100), Model: fmt.Sprintf("model-%02d", (k*7+r.IntN(3))%50),
			Route: "chat completions", Status: 200, Latency: time.Duration(200+r.IntN(3000)) * time.Millisecond,
			Tokens: Tokens{Input: r.Int64N(4000), Output: r.Int64N(800), CacheRead: r.Int64N(2) * r.Int64N(2000)},
			Cost:   pricing.USD(r.Int64N(20_000_000))}}
	}
	return items
}

// BenchmarkEncodeBlock encodes a block of blockSize entries, and one
// entry alone as a chunk holds it, and reports the bytes an entry costs
// in each.
func BenchmarkEncodeBlock(b *testing.B) {
	items := benchItems(blockSize)
	b.Run("block", func(b *testing.B) {
		var n int
		for b.Loop() {
			n = len(encodeBlock(0, items))
		}
		b.ReportMetric(float64(n)/float64(len(items)), "B/entry")
	})
	b.Run("single", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = appendSingle(buf[:0], &items[0].e)
		}
		b.ReportMetric(float64(len(buf)), "B/entry")
	})
}
