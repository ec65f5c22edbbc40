package bench

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratestore/ratestore/strategies"
)

// BenchmarkReserve is a reservation made and then cancelled, on keys
// cycled from 10k, each key booked ahead (a burst of 1 at one per second,
// so that a reservation waits and Cancel gives it back, but for those of a
// key whose booking the clock has passed):
// ratestore's Limiter.Reserve and Reservation.Cancel (GCRA, Async on
// bbolt, every key in memory) against x/time/rate's ReserveN and
// CancelAt on one Limiter per key in a mutex-guarded map, in the same run.
// Reserve+Cancel leaves a ratestore key as it was, so every iteration
// finds the same state.
func BenchmarkReserve(b *testing.B) {
	keys := makeKeys(10_000)
	b.Run("impl=xrate", func(b *testing.B) {
		m := map[string]*rate.Limiter{}
		for _, k := range keys {
			l := rate.NewLimiter(1, 1)
			l.Allow() // booked: the next reservation waits
			m[k] = l
		}
		x := &xrateMap{m: m}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x.mu.Lock()
			l := x.m[keys[i%len(keys)]]
			x.mu.Unlock()
			now := time.Now()
			l.ReserveN(now, 1).CancelAt(now)
			i++
		}
	})
	b.Run("impl=ratestore", func(b *testing.B) {
		l, closeFn, err := openPreloaded(b.TempDir(), "reserve.db", hotOptions, strategies.GCRA{Rate: 1, Burst: 1}, keys)
		if err != nil {
			b.Fatal(err)
		}
		defer closeFn()
		ctx := context.Background()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r, err := l.Reserve(ctx, keys[i%len(keys)], 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := r.Cancel(ctx); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
