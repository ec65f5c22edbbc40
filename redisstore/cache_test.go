package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/strategies"
)

// TestCacheExpiry: the cache takes a state Redis has expired for gone, so
// a key idle past its TTL is decided in one round trip, not two; a state
// the cache wrongly takes for gone costs a second round trip and changes
// no Result; and a state found written by another instance expires with
// the TTL Redis reported.
func TestCacheExpiry(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	clock := fakeclock.New(time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC))
	open := func() *DB {
		db, err := Open(ctx, srv.URL(), Options{Now: clock.Now})
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db
	}
	db, other := open(), open()
	trips := redistest.CountTrips(db.client)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()

	s := strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "m", Limit: 2, Window: time.Minute}}}
	l, err := db.Limiter("api", s)
	require.NoError(t, err)
	lo, err := other.Limiter("api", s)
	require.NoError(t, err)
	// idle passes the TTL of a state written now: the window's minute,
	// plus ttlSlack, rounded up.
	const idle = 2 * time.Minute
	// allow calls l on key, and returns the Result and the round trips.
	allow := func(key string) (Result, int64) {
		t.Helper()
		before := trips()
		r, err := l.Allow(ctx, key)
		require.NoError(t, err)
		return r, trips() - before
	}
	allow("warm") // loads the script (EVALSHA, NOSCRIPT, EVAL)

	r, n := allow("alice")
	require.True(t, r.Allowed)
	require.EqualValues(t, 1, n)
	// Redis expires the state; the cache's clock passes its TTL too.
	require.EqualValues(t, 1, raw.Del(ctx, "ratestore:{alice}api").Val())
	clock.Advance(idle)
	db.cache.epoch = db.cache.epoch.Add(-idle)
	r, n = allow("alice")
	require.Equal(t, int64(1), r.Remaining, "a new window")
	require.EqualValues(t, 1, n, "the expired state is not decided on")

	// The cache's clock passes the TTL, but Redis still holds the state:
	// it is found, and decided on.
	db.cache.epoch = db.cache.epoch.Add(-idle)
	r, n = allow("alice")
	require.True(t, r.Allowed)
	require.Equal(t, int64(0), r.Remaining, "the second call of the window")
	require.EqualValues(t, 2, n)

	// Another instance changes bob's state: l finds it, with its TTL.
	allow("bob")
	_, err = lo.Allow(ctx, "bob")
	require.NoError(t, err)
	r, n = allow("bob")
	require.False(t, r.Allowed, "the third call of the window")
	require.EqualValues(t, 2, n)
	require.EqualValues(t, 1, raw.Del(ctx, "ratestore:{bob}api").Val())
	clock.Advance(idle)
	db.cache.epoch = db.cache.epoch.Add(-idle)
	r, n = allow("bob")
	require.Equal(t, int64(1), r.Remaining)
	require.EqualValues(t, 1, n, "the state found expires with the TTL Redis reported")
}
