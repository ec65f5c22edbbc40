package ratestore_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
)

// TestConcurrencyLeases: on every backend and durability, at most max
// leases of a key are held; a release frees a slot; a lease that is not
// released ends after its TTL, also across a restart (a crash never holds
// a slot forever); releasing twice is once.
func TestConcurrencyLeases(t *testing.T) {
	for _, e := range backendtest.Embedded() {
		t.Run(e.String(), func(t *testing.T) {
			s := open(t, e)
			c, err := s.Concurrency("jobs", 2, time.Minute)
			require.NoError(t, err)
			a, r, err := c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.True(t, r.Allowed)
			require.Equal(t, s.clock.Now().Add(time.Minute), a.Expires())
			s.clock.Advance(time.Second)
			b, _, err := c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.NotNil(t, b)
			none, r, err := c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.Nil(t, none)
			require.False(t, r.Allowed)
			require.Equal(t, 59*time.Second, r.RetryAfter, "until the oldest lease ends")

			require.NoError(t, a.Release(ctx))
			require.NoError(t, a.Release(ctx), "twice is once")
			d, _, err := c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.NotNil(t, d, "a's slot is free")
			_, r, err = c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.False(t, r.Allowed)

			// The holders of b and d crash: after the restart their
			// leases still count, until they end.
			s.reopen()
			c, err = s.Concurrency("jobs", 2, time.Minute)
			require.NoError(t, err)
			_, r, err = c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.False(t, r.Allowed, "the leases survived the restart")
			s.clock.Advance(time.Minute)
			e1, r, err := c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.True(t, r.Allowed, "they ended after their TTL")
			s.clock.Advance(30 * time.Second)
			e2, _, err := c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.NotNil(t, e2)
			s.clock.Advance(30 * time.Second)
			// e1 has ended: releasing it frees nothing, not e2's slot.
			require.NoError(t, e1.Release(ctx), "an ended lease releases nothing")
			e3, _, err := c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.NotNil(t, e3)
			_, r, err = c.Acquire(ctx, "k")
			require.NoError(t, err)
			require.False(t, r.Allowed, "e2 and e3 hold the two slots")
			_ = b // its holder crashed
		})
	}
}

// TestConcurrencyExact: many goroutines acquiring at once get exactly max
// leases, and as many again once those are released.
func TestConcurrencyExact(t *testing.T) {
	s := open(t, backendtest.BoltSync)
	c, err := s.Concurrency("jobs", 5, time.Hour)
	require.NoError(t, err)
	for round := range 2 {
		var held sync.Map
		var n atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				ls, _, err := c.Acquire(ctx, "k")
				if err != nil {
					t.Error(err)
				}
				if ls != nil {
					held.Store(ls, true)
					n.Add(1)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 5, n.Load(), "round %d", round)
		held.Range(func(k, _ any) bool {
			require.NoError(t, k.(*ratestore.Lease).Release(ctx))
			return true
		})
	}
}
