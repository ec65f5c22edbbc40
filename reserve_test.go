package ratestore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/strategies"
)

// TestReserveThenCancelLeavesNoTrace: on every backend, durability and
// strategy, a reservation cancelled before its time, with nothing else on
// the key meanwhile, leaves the stored state byte for byte as it was, used
// or fresh.
func TestReserveThenCancelLeavesNoTrace(t *testing.T) {
	forEach(t, func(t *testing.T, s *store, c strategyCase, l *ratestore.Limiter) {
		for _, used := range []int64{0, 1} {
			key := fmt.Sprintf("k%d", used)
			if used > 0 {
				_, err := l.AllowN(ctx, key, used)
				require.NoError(t, err)
			}
			before := s.raw(c.name, key)
			r, err := l.Reserve(ctx, key, c.limit) // past the limit once used: a delay
			require.NoError(t, err)
			require.NotEqual(t, before, s.raw(c.name, key), "the reservation is in the state")
			if used > 0 {
				require.Positive(t, r.Delay())
			} else {
				require.Zero(t, r.Delay(), "a fresh key holds the limit at once")
				// Still cancellable before its time: it came at once, so
				// its time is now. Nothing to give back.
				require.NoError(t, r.Cancel(ctx))
				continue
			}
			require.NoError(t, r.Cancel(ctx))
			require.Equal(t, before, s.raw(c.name, key))
			require.NoError(t, r.Cancel(ctx), "twice is once")
			require.Equal(t, before, s.raw(c.name, key))
		}
	})
}

// TestReserveOverLimit: more than the limit can never be reserved, and
// asking changes nothing.
func TestReserveOverLimit(t *testing.T) {
	forEach(t, func(t *testing.T, s *store, c strategyCase, l *ratestore.Limiter) {
		_, err := l.Reserve(ctx, "k", c.limit+1)
		require.ErrorIs(t, err, ratestore.ErrInvalid)
		require.Nil(t, s.raw(c.name, "k"))
		_, err = l.Reserve(ctx, "k", -1)
		require.ErrorIs(t, err, ratestore.ErrInvalid)
	})
}

// TestReserveGCRA: reservations come at the rate, in the order they were
// made; a later AllowN waits behind them (no starvation); after a
// restart, whose waiters are gone, a GCRA keeps one burst of them (see
// Reservation); cancelling one after another was made gives back nothing;
// one whose time has come is not cancelled.
func TestReserveGCRA(t *testing.T) {
	for _, e := range backendtest.Embedded() {
		t.Run(e.String(), func(t *testing.T) {
			s := open(t, e)
			g := strategies.GCRA{Rate: 10, Burst: 2}
			l, err := s.Limiter("g", g)
			require.NoError(t, err)
			var delays []time.Duration
			for range 5 {
				r, err := l.Reserve(ctx, "k", 1)
				require.NoError(t, err)
				delays = append(delays, r.Delay())
			}
			ms := time.Millisecond
			require.Equal(t, []time.Duration{0, 0, 100 * ms, 200 * ms, 300 * ms}, delays)
			r, err := l.Allow(ctx, "k")
			require.NoError(t, err)
			require.False(t, r.Allowed, "a later caller does not jump the queue")
			require.Equal(t, 400*ms, r.RetryAfter)

			s.reopen()
			l, err = s.Limiter("g", g)
			require.NoError(t, err)
			res, err := l.Reserve(ctx, "k", 1)
			require.NoError(t, err)
			require.Equal(t, 100*ms, res.Delay(), "one burst of reservations outlives the restart")

			last, err := l.Reserve(ctx, "k", 1)
			require.NoError(t, err)
			before := s.raw("g", "k")
			require.NoError(t, res.Cancel(ctx))
			require.Equal(t, before, s.raw("g", "k"), "another reservation came after: nothing given back")
			s.clock.Advance(600 * ms)
			require.NoError(t, last.Cancel(ctx))
			require.Equal(t, before, s.raw("g", "k"), "its time has come: it was used")
		})
	}
}

// TestWaitFIFO: 1000 goroutines wait on one key at 100 per second, each
// arriving after the one before has its place: they are served in arrival
// order (no reordering), one every 10ms, none early and none late; one
// that gives up leaves the key as if it had never waited when it was the
// last.
func TestWaitFIFO(t *testing.T) {
	s := open(t, backendtest.BoltAsync) // bolt, async: the order is the engine's, whatever the durability
	l, err := s.Limiter("w", strategies.GCRA{Rate: 100, Burst: 1})
	require.NoError(t, err)
	const waiters = 1000
	var served atomic.Int64
	order := make([]int64, waiters) // order[i]: when waiter i was served (its rank)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Wait(ctx, "k", 1); err != nil {
				t.Error(err)
				return
			}
			order[i] = served.Add(1)
		}()
		// Arrival: waiter i has its place once the key is booked i calls
		// past its burst (the first is served at once).
		for want := time.Duration(i) * 10 * time.Millisecond; ; {
			r, err := l.Peek(ctx, "k")
			require.NoError(t, err)
			if i == 0 && served.Load() == 1 || i > 0 && r.RetryAfter == want {
				break
			}
		}
	}
	require.Eventually(t, func() bool { return served.Load() == 1 }, 10*time.Second, time.Millisecond)
	for k := int64(2); k <= waiters; k++ {
		require.Less(t, served.Load(), k, "none early")
		s.clock.Advance(10 * time.Millisecond)
		require.Eventually(t, func() bool { return served.Load() == k }, 10*time.Second, 50*time.Microsecond, "waiter %d", k)
	}
	wg.Wait()
	for i, rank := range order {
		require.EqualValues(t, i+1, rank, "waiter %d was served out of its arrival order", i)
	}

	// A waiter that gives up, the last in line, leaves no trace.
	r, err := l.Reserve(ctx, "k", 1) // one in line ahead of it
	require.NoError(t, err)
	require.Positive(t, r.Delay())
	before := s.raw("w", "k")
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- l.Wait(wctx, "k", 1) }()
	require.Eventually(t, func() bool { return s.clock.Timers() == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, before, s.raw("w", "k"))

	// A deadline before its time: cancelled at once.
	dctx, dcancel := context.WithDeadline(ctx, s.clock.Now().Add(time.Millisecond))
	defer dcancel()
	require.ErrorIs(t, l.Wait(dctx, "k", 1), context.DeadlineExceeded)
	require.Equal(t, before, s.raw("w", "k"))
}
