package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

// TestReserveSameAsTheEngine drives Reserve, Cancel and AllowN on a
// ratestore.DB and on two redisstore.DBs with the same random calls at the
// same instants, every strategy: the same times to act, the same Results,
// and after each call the same answer to a Peek.
func TestReserveSameAsTheEngine(t *testing.T) {
	srv := redistest.Start(t)
	clock := newClock()
	a := open(t, srv.URL(), clock, redisstore.Options{})
	b := open(t, srv.URL(), clock, redisstore.Options{})
	engine, err := ratestore.Open(filepath.Join(t.TempDir(), "db"), ratestore.Options{Durability: ratestore.Async, Now: clock.Now})
	require.NoError(t, err)
	defer engine.Close()

	r := rand.New(rand.NewPCG(testSeed(t), 2))
	trace := os.Getenv("RATESTORE_SEED") != "" // a replay: log every call
	type pair struct {
		want *ratestore.Reservation
		got  *redisstore.Reservation
	}
	for i := range 16 {
		s := randomStrategy(r, i)
		name := fmt.Sprintf("r%d", i)
		want, err := engine.Limiter(name, s)
		require.NoError(t, err)
		la, err := a.Limiter(name, s)
		require.NoError(t, err)
		lb, err := b.Limiter(name, s)
		require.NoError(t, err)
		limit, err := want.Peek(ctx, "k")
		require.NoError(t, err)
		var held []pair
		for step := range 200 {
			if r.IntN(3) == 0 {
				clock.Advance(time.Duration(r.Int64N(int64(300 * time.Millisecond))))
			}
			got := la
			if r.IntN(2) == 1 {
				got = lb
			}
			what := fmt.Sprintf("config %d (%#v), step %d", i, s, step)
			switch op := r.IntN(6); {
			case op < 3:
				n := r.Int64N(limit.Limit + 1)
				wr, werr := want.Reserve(ctx, "k", n)
				gr, gerr := got.Reserve(ctx, "k", n)
				require.NoError(t, werr, what)
				require.NoError(t, gerr, what)
				require.Equal(t, wr.TimeToAct(), gr.TimeToAct(), "Reserve %d: %s", n, what)
				if trace {
					t.Logf("%s: reserve %d (#%d) at %v: act %v", what, n, len(held), clock.Now(), wr.TimeToAct())
				}
				held = append(held, pair{wr, gr})
			case op < 5 && len(held) > 0:
				j := r.IntN(len(held))
				require.NoError(t, held[j].want.Cancel(ctx), what)
				require.NoError(t, held[j].got.Cancel(ctx), what)
				if trace {
					t.Logf("%s: cancel #%d at %v", what, j, clock.Now())
				}
			default:
				n := r.Int64N(3)
				wres, werr := want.AllowN(ctx, "k", n)
				gres, gerr := got.AllowN(ctx, "k", n)
				require.NoError(t, werr, what)
				require.NoError(t, gerr, what)
				require.Equal(t, wres, gres, "AllowN %d: %s", n, what)
				if trace {
					t.Logf("%s: allow %d at %v: %v", what, n, clock.Now(), wres.Allowed)
				}
			}
			wp, err := want.Peek(ctx, "k")
			require.NoError(t, err)
			gp, err := got.Peek(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, wp, gp, "Peek after: %s", what)
		}
	}
}

// TestWaitFIFOAcrossInstances: waiters on one key from two instances are
// served in the order they reserved, one per emission interval; one that
// gives up, the last in line, leaves the key as it was.
func TestWaitFIFOAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	clock := newClock()
	opts := redisstore.Options{After: clock.After}
	dbs := []*redisstore.DB{open(t, srv.URL(), clock, opts), open(t, srv.URL(), clock, opts)}
	const waiters = 20
	var mu sync.Mutex
	var served []int
	var wg sync.WaitGroup
	for i := range waiters {
		l, err := dbs[i%2].Limiter("w", strategies.GCRA{Rate: 100, Burst: 1})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Wait(ctx, "k", 1); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			served = append(served, i)
			mu.Unlock()
		}()
		// Waiter i has its place once the key is booked i calls past its
		// burst (the first is served at once).
		require.Eventually(t, func() bool {
			if i == 0 {
				mu.Lock()
				defer mu.Unlock()
				return len(served) == 1
			}
			p, err := l.Peek(ctx, "k")
			return err == nil && p.RetryAfter == time.Duration(i)*10*time.Millisecond
		}, 10*time.Second, time.Millisecond)
	}
	for k := 2; k <= waiters; k++ {
		clock.Advance(10 * time.Millisecond)
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(served) == k }, 10*time.Second, time.Millisecond)
	}
	wg.Wait()
	for rank, i := range served {
		require.Equal(t, rank, i, "served out of arrival order: %v", served)
	}

	l, err := dbs[1].Limiter("w", strategies.GCRA{Rate: 100, Burst: 1})
	require.NoError(t, err)
	before, err := l.Peek(ctx, "k")
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- l.Wait(wctx, "k", 1) }()
	require.Eventually(t, func() bool { return clock.Timers() == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	after, err := dbs[0].Limiter("w", strategies.GCRA{Rate: 100, Burst: 1})
	require.NoError(t, err)
	p, err := after.Peek(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, before, p, "the cancelled waiter left no trace")
}

// TestLeasesAcrossInstances: two instances share a key's slots exactly;
// a release frees one for the other; a lease ends by itself after its TTL,
// and releasing it then frees nothing of a later lease.
func TestLeasesAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	clock := newClock()
	a := open(t, srv.URL(), clock, redisstore.Options{})
	b := open(t, srv.URL(), clock, redisstore.Options{})
	ca, err := a.Concurrency("jobs", 2, time.Minute)
	require.NoError(t, err)
	cb, err := b.Concurrency("jobs", 2, time.Minute)
	require.NoError(t, err)
	l1, r, err := ca.Acquire(ctx, "k")
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Equal(t, clock.Now().Add(time.Minute), l1.Expires())
	clock.Advance(30 * time.Second)
	l2, _, err := cb.Acquire(ctx, "k")
	require.NoError(t, err)
	require.NotNil(t, l2)
	none, r, err := ca.Acquire(ctx, "k")
	require.NoError(t, err)
	require.Nil(t, none)
	require.Equal(t, 30*time.Second, r.RetryAfter, "until l1 ends")

	require.NoError(t, l2.Release(ctx))
	require.NoError(t, l2.Release(ctx), "twice is once")
	l3, _, err := ca.Acquire(ctx, "k")
	require.NoError(t, err)
	require.NotNil(t, l3, "l2's slot, released on b, is free on a")

	clock.Advance(30 * time.Second) // l1 ends
	l4, _, err := cb.Acquire(ctx, "k")
	require.NoError(t, err)
	require.NotNil(t, l4)
	require.NoError(t, l1.Release(ctx), "an ended lease releases nothing")
	_, r, err = cb.Acquire(ctx, "k")
	require.NoError(t, err)
	require.False(t, r.Allowed, "l3 and l4 hold the two slots")
	require.NoError(t, (*redisstore.Lease)(nil).Release(ctx))
}
