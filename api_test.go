package ratestore_test

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/strategies"
)

// TestInvalidInputChangesNothing: every bad argument of API.md gives an error
// matching ErrInvalid, and leaves the key's state as it was.
func TestInvalidInputChangesNothing(t *testing.T) {
	for _, e := range backendtest.Embedded() {
		t.Run(e.String(), func(t *testing.T) {
			s := open(t, e)
			good := strategies.GCRA{Rate: 1, Burst: 10}
			l, err := s.Limiter("l", good)
			require.NoError(t, err)
			_, err = l.AllowN(ctx, "k", 3)
			require.NoError(t, err)
			before := s.raw("l", "k")

			calls := map[string]error{}
			_, calls["empty key"] = l.Allow(ctx, "")
			_, calls["key over 1024 bytes"] = l.Allow(ctx, strings.Repeat("k", 1025))
			_, calls["negative n"] = l.AllowN(ctx, "k", -1)
			_, calls["negative record"] = l.Record(ctx, "k", -5)
			_, calls["min int n"] = l.AllowN(ctx, "k", math.MinInt64)
			_, calls["peek empty key"] = l.Peek(ctx, "")
			calls["reset empty key"] = l.Reset(ctx, "")
			for name, err := range calls {
				require.ErrorIs(t, err, ratestore.ErrInvalid, name)
			}
			_, err = l.Allow(ctx, strings.Repeat("k", 1024)) // the longest key is fine
			require.NoError(t, err)

			for _, name := range []string{"", "a b", "a/b", "a\x00b", "é", strings.Repeat("n", 65)} {
				_, err := s.Limiter(name, good)
				require.ErrorIs(t, err, ratestore.ErrInvalid, "name %q", name)
			}
			_, err = s.Limiter(strings.Repeat("n", 64), good)
			require.NoError(t, err)
			_, err = s.Limiter("A-z_0.9:@+", good)
			require.NoError(t, err)

			nan, inf := math.NaN(), math.Inf(1)
			q := func(name string, limit int64, w time.Duration) strategies.Quota {
				return strategies.Quota{Name: name, Limit: limit, Window: w}
			}
			bad := map[string]strategies.Strategy{
				"nil":                     nil,
				"token bucket NaN rate":   strategies.TokenBucket{Rate: nan, Burst: 1},
				"token bucket +Inf rate":  strategies.TokenBucket{Rate: inf, Burst: 1},
				"token bucket zero rate":  strategies.TokenBucket{Rate: 0, Burst: 1},
				"token bucket zero burst": strategies.TokenBucket{Rate: 1, Burst: 0},
				"gcra negative rate":      strategies.GCRA{Rate: -1, Burst: 1},
				"gcra -Inf rate":          strategies.GCRA{Rate: math.Inf(-1), Burst: 1},
				"gcra zero burst":         strategies.GCRA{Rate: 1},
				"leaky NaN":               strategies.LeakyBucket{Rate: nan, Capacity: 1},
				"leaky zero capacity":     strategies.LeakyBucket{Rate: 1},
				"fixed no quotas":         strategies.FixedWindow{},
				"fixed zero limit":        strategies.FixedWindow{Quotas: []strategies.Quota{q("a", 0, time.Second)}},
				"fixed zero window":       strategies.FixedWindow{Quotas: []strategies.Quota{q("a", 1, 0)}},
				"fixed negative window":   strategies.FixedWindow{Quotas: []strategies.Quota{q("a", 1, -time.Second)}},
				"fixed empty name":        strategies.FixedWindow{Quotas: []strategies.Quota{q("", 1, time.Second)}},
				"fixed bad name":          strategies.FixedWindow{Quotas: []strategies.Quota{q("a|b", 1, time.Second)}},
				"fixed long name":         strategies.FixedWindow{Quotas: []strategies.Quota{q(strings.Repeat("a", 33), 1, time.Second)}},
				"fixed duplicate names":   strategies.FixedWindow{Quotas: []strategies.Quota{q("a", 1, time.Second), q("a", 2, time.Minute)}},
				"sliding zero limit":      strategies.SlidingWindow{Window: time.Second},
				"sliding zero window":     strategies.SlidingWindow{Limit: 1},
				"composite nil part":      strategies.Composite{Primary: good},
				"composite bad part":      strategies.Composite{Primary: good, Secondary: strategies.GCRA{Rate: nan, Burst: 1}},
			}
			for name, st := range bad {
				_, err := s.Limiter("l", st)
				require.ErrorIs(t, err, ratestore.ErrInvalid, name)
			}

			require.Equal(t, before, s.raw("l", "k"))
			r, err := l.Peek(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, int64(7), r.Remaining)
		})
	}
}

func TestClosed(t *testing.T) {
	for _, e := range backendtest.Embedded() {
		t.Run(e.String(), func(t *testing.T) {
			s := open(t, e)
			l, err := s.Limiter("l", strategies.GCRA{Rate: 1, Burst: 1})
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.NoError(t, s.Close(), "Close is idempotent")

			_, err = l.Allow(ctx, "k")
			require.ErrorIs(t, err, ratestore.ErrClosed)
			_, err = l.Peek(ctx, "k")
			require.ErrorIs(t, err, ratestore.ErrClosed)
			_, err = l.Record(ctx, "k", 1)
			require.ErrorIs(t, err, ratestore.ErrClosed)
			require.ErrorIs(t, l.Reset(ctx, "k"), ratestore.ErrClosed)
			require.ErrorIs(t, s.Flush(ctx), ratestore.ErrClosed)
			_, err = s.Limiter("l", strategies.GCRA{Rate: 1, Burst: 1})
			require.ErrorIs(t, err, ratestore.ErrClosed)
		})
	}
}

func TestOpenLockedByAnotherHandle(t *testing.T) {
	for _, b := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		t.Run(b.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			db, err := ratestore.Open(path, ratestore.Options{Backend: b})
			require.NoError(t, err)
			defer db.Close()
			_, err = ratestore.Open(path, ratestore.Options{Backend: b})
			require.ErrorIs(t, err, ratestore.ErrLocked)
			require.Contains(t, err.Error(), "in use by another process")
		})
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]ratestore.Options{
		"durability":     {Durability: 7},
		"flush interval": {FlushInterval: -time.Second},
		"cache bound":    {MaxCachedKeys: -1},
	} {
		_, err := ratestore.Open(filepath.Join(dir, "db"), o)
		require.ErrorIs(t, err, ratestore.ErrInvalid, name)
	}
	_, err := ratestore.Open("", ratestore.Options{})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	require.NoFileExists(t, filepath.Join(dir, "db"), "nothing created on a refused Open")
}

// TestMismatchedStrategyUnderOneName: reusing a name for another kind of
// strategy is a configuration error for keys that have state, not a silent
// reset.
func TestMismatchedStrategyUnderOneName(t *testing.T) {
	s := open(t, backendtest.BoltSync)
	gcra, err := s.Limiter("l", strategies.GCRA{Rate: 1, Burst: 5})
	require.NoError(t, err)
	_, err = gcra.Allow(ctx, "k")
	require.NoError(t, err)
	s.reopen()
	tb, err := s.Limiter("l", strategies.TokenBucket{Rate: 1, Burst: 5})
	require.NoError(t, err)
	_, err = tb.Allow(ctx, "k")
	require.ErrorIs(t, err, strategies.ErrMismatch)
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	require.True(t, errors.Is(err, ratestore.ErrInvalid) && strings.Contains(err.Error(), `"k"`))
}

// TestChangedConfiguration: a lower burst clamps what is stored; a quota added
// is enforced from the next call; a removed one is dropped.
func TestChangedConfiguration(t *testing.T) {
	s := open(t, backendtest.BoltSync)
	big, err := s.Limiter("tb", strategies.TokenBucket{Rate: 1, Burst: 100})
	require.NoError(t, err)
	_, err = big.AllowN(ctx, "k", 10) // 90 left
	require.NoError(t, err)
	small, err := s.Limiter("tb", strategies.TokenBucket{Rate: 1, Burst: 20})
	require.NoError(t, err)
	r, err := small.Peek(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(20), r.Remaining)
	require.Equal(t, int64(20), r.Limit)

	minute := strategies.Quota{Name: "minute", Limit: 10, Window: time.Minute}
	hour := strategies.Quota{Name: "hour", Limit: 12, Window: time.Hour}
	one, err := s.Limiter("fw", strategies.FixedWindow{Quotas: []strategies.Quota{minute}})
	require.NoError(t, err)
	_, err = one.AllowN(ctx, "k", 4)
	require.NoError(t, err)
	two, err := s.Limiter("fw", strategies.FixedWindow{Quotas: []strategies.Quota{minute, hour}})
	require.NoError(t, err)
	r, err = two.AllowN(ctx, "k", 5) // minute 9/10, hour 5/12 (fresh from this call)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Equal(t, int64(1), r.Remaining)
	onlyHour, err := s.Limiter("fw", strategies.FixedWindow{Quotas: []strategies.Quota{hour}})
	require.NoError(t, err)
	r, err = onlyHour.AllowN(ctx, "k", 7) // minute dropped: hour 12/12
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Equal(t, int64(0), r.Remaining)
	raw := string(s.raw("fw", "k"))
	require.NotContains(t, raw, "minute")
	require.Contains(t, raw, "hour")
}

// TestSystemClock: the default clock starts at the wall clock and never goes
// backwards.
func TestSystemClock(t *testing.T) {
	now := backend.SystemClock()
	first := now()
	require.WithinDuration(t, time.Now(), first, time.Minute)
	prev := first
	for range 10_000 {
		next := now()
		require.False(t, next.Before(prev))
		prev = next
	}
}
