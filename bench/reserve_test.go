package bench

import (
	"context"
	"math"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratestore/ratestore"
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

// waitFIFO is BenchmarkWaitFIFO's load: waiters on one key at rate per
// second, as the target states it.
const (
	waitFIFOWaiters = 1000
	waitFIFORate    = 100
)

// BenchmarkWaitFIFO is Limiter.Wait on the system clock: waitFIFOWaiters
// goroutines wait on one key of a GCRA at waitFIFORate per second (burst
// 1, Async on bbolt), each arriving once the one before has its place (its
// reservation is in the key's state). An iteration is the whole line,
// about waitFIFOWaiters/waitFIFORate seconds: run it with -benchtime 1x.
//
//   - reordered is the largest distance between a waiter's place in the
//     arrival order and in the order they were served (the target is 0);
//   - rate-err-% is how far the rate at which they were served, from the
//     first to the last, is from waitFIFORate (the target is within 1%).
func BenchmarkWaitFIFO(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		db, err := ratestore.Open(filepath.Join(b.TempDir(), "wait.db"), hotOptions)
		if err != nil {
			b.Fatal(err)
		}
		l, err := db.Limiter("wait", strategies.GCRA{Rate: waitFIFORate, Burst: 1})
		if err != nil {
			b.Fatal(err)
		}
		state := func() string {
			var enc []byte
			if err := l.Inspect(ctx, "k", func(st strategies.State, _ int64) error {
				enc = st.AppendEncode(nil)
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			return string(enc)
		}
		b.StartTimer()
		var (
			mu     sync.Mutex
			served []int // arrival ranks, in the order served
			at     []time.Time
			wg     sync.WaitGroup
		)
		for i := range waitFIFOWaiters {
			before := state()
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Wait(ctx, "k", 1); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				served, at = append(served, i), append(at, time.Now())
				mu.Unlock()
			}()
			for state() == before { // each reservation moves the GCRA's TAT
				runtime.Gosched()
			}
		}
		wg.Wait()
		b.StopTimer()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		if len(served) != waitFIFOWaiters {
			b.Fatalf("%d of %d waiters served", len(served), waitFIFOWaiters)
		}
		reordered := 0
		for rank, i := range served {
			reordered = max(reordered, abs(rank-i))
		}
		rate := float64(waitFIFOWaiters-1) / at[len(at)-1].Sub(at[0]).Seconds()
		b.ReportMetric(float64(reordered), "reordered")
		b.ReportMetric(100*math.Abs(rate-waitFIFORate)/waitFIFORate, "rate-err-%")
		b.StartTimer()
	}
}

func abs(x int) int { return max(x, -x) }
