package ratestore_test

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/strategies"
)

// jump is how far the clock of TestClockJump runs ahead before it comes
// back: far longer than any strategy's period.
const jump = 100 * 365 * 24 * time.Hour

// useUp takes everything key allows at the clock's instant, and a Record
// of one more for the strategies that allow more than they take at once.
func useUp(t *testing.T, l *ratestore.Limiter, key string) {
	t.Helper()
	for range 1000 {
		r, err := l.Allow(ctx, key)
		require.NoError(t, err)
		if !r.Allowed {
			return
		}
	}
	t.Fatal("never denied")
}

// usableWithin checks that key, used up while the clock was ahead, is
// usable again within its strategy's own period (Decider.Horizon) of
// the first call after the clock came back: that call sees the state
// ahead, and clamps it. It may be denied, but with a RetryAfter within the
// period, never 100 years.
func usableWithin(t *testing.T, s *store, l *ratestore.Limiter, key string) {
	t.Helper()
	h := l.Strategy().Prepare().Horizon()
	require.Less(t, h, time.Hour, "a period of the test cases")
	r, err := l.Allow(ctx, key)
	require.NoError(t, err)
	require.LessOrEqual(t, r.RetryAfter, h, "denied for no longer than one period")
	require.LessOrEqual(t, r.ResetAfter, h, "nothing booked further ahead than one period")
	s.clock.Advance(h)
	r, err = l.Allow(ctx, key)
	require.NoError(t, err)
	require.True(t, r.Allowed, "usable one period (%v) after the clock came back", h)
}

// TestClockJump: a clock that runs 100 years ahead and comes back never
// locks a key out for longer than its strategy's period, whether the key
// stayed in memory (DB.rewind), or was stored and read back (the clamp on
// load), in every mode and for every strategy.
func TestClockJump(t *testing.T) {
	t.Run("in-memory", func(t *testing.T) {
		forEach(t, func(t *testing.T, s *store, c strategyCase, l *ratestore.Limiter) {
			s.clock.Advance(jump)
			useUp(t, l, "k")
			s.clock.Advance(-jump)
			usableWithin(t, s, l, "k")
		})
	})
	t.Run("reopened", func(t *testing.T) {
		forEach(t, func(t *testing.T, s *store, c strategyCase, l *ratestore.Limiter) {
			s.clock.Advance(jump)
			useUp(t, l, "k")
			s.clock.Advance(-jump)
			s.reopen() // the states written during the jump are on disk
			l, err := s.Limiter(c.name, c.s)
			require.NoError(t, err)
			usableWithin(t, s, l, "k")
			// The clamped state was stored: it is clamped once, and a
			// restart now does not find it ahead again.
			s.reopen()
			l, err = s.Limiter(c.name, c.s)
			require.NoError(t, err)
			r, err := l.Peek(ctx, "k")
			require.NoError(t, err)
			require.LessOrEqual(t, r.ResetAfter, c.s.Prepare().Horizon())
		})
	})
	t.Run("recorded", func(t *testing.T) {
		// A Record of the whole limit during the jump, read back after a
		// restart: the key is usable again once it has drained, never 100
		// years. (A Record past the limit keeps its excess in buckets and
		// windows, which is usage; a GCRA caps it at one burst.)
		forEach(t, func(t *testing.T, s *store, c strategyCase, l *ratestore.Limiter) {
			s.clock.Advance(jump)
			_, err := l.Record(ctx, "k", c.limit)
			require.NoError(t, err)
			s.clock.Advance(-jump)
			s.reopen()
			l, err = s.Limiter(c.name, c.s)
			require.NoError(t, err)
			usableWithin(t, s, l, "k")
		})
	})
}

// TestClockStepBackKeepsState: a step back within the period is not a
// jump: the state is neither clamped nor rewritten, and the key answers as
// it did (no refill, no penalty).
func TestClockStepBackKeepsState(t *testing.T) {
	forEach(t, func(t *testing.T, s *store, c strategyCase, l *ratestore.Limiter) {
		_, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		before := s.raw(c.name, "k")
		s.clock.Advance(-c.s.Prepare().Horizon() / 2)
		r, err := l.Peek(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, c.limit-1, r.Remaining)
		require.Equal(t, before, s.raw(c.name, "k"))
	})
}

// TestClockJumpLoggedOnce: the first clamped state is logged at Warn, and
// no other is.
func TestClockJumpLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	path := filepath.Join(t.TempDir(), "db")
	open := func() *ratestore.DB {
		db, err := ratestore.Open(path, ratestore.Options{
			Now:    c.Now,
			Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		require.NoError(t, err)
		return db
	}
	db := open()
	l, err := db.Limiter("gcra", strategies.GCRA{Rate: 1, Burst: 2})
	require.NoError(t, err)
	c.Advance(jump)
	for _, k := range []string{"a", "b", "c"} {
		_, err = l.Allow(ctx, k)
		require.NoError(t, err)
	}
	c.Advance(-jump)
	_, err = l.Allow(ctx, "a") // in memory
	require.NoError(t, err)
	require.NoError(t, db.Close())
	db = open()
	defer db.Close()
	l, err = db.Limiter("gcra", strategies.GCRA{Rate: 1, Burst: 2})
	require.NoError(t, err)
	for _, k := range []string{"b", "c"} { // from disk, in a new DB: logged once more
		_, err = l.Allow(ctx, k)
		require.NoError(t, err)
	}
	require.Equal(t, 2, strings.Count(buf.String(), "level=WARN"), buf.String())
	require.Contains(t, buf.String(), "clamped")
}
