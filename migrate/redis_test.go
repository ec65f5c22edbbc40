package migrate

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/redisstore"
)

// TestImportIntoRedis: the fixtures imported into a key store in Redis
// give the report, and then every key the Check, Usage and record, that
// they give imported into a database, on the same clock, as another
// process of the Redis sees them; importing again skips every key, and a
// refused file writes nothing.
func TestImportIntoRedis(t *testing.T) {
	clk := fakeclock.New(importNow)
	db := openDB(t, backendtest.BoltSync, clk)
	srv := redistest.Start(t)
	importer, other := redisKeys(t, srv, clk), redisKeys(t, srv, clk)
	importFile := func(name string) Report {
		f, err := os.Open(fixture(name))
		require.NoError(t, err)
		defer f.Close()
		rep, err := ImportLegacyInto(ctx, importer, f)
		require.NoError(t, err)
		return rep
	}
	for _, name := range []string{"apikeys.sample.json", "apikeys.valid.json"} {
		want, err := ImportLegacyFile(ctx, db, fixture(name))
		require.NoError(t, err)
		require.Equal(t, want, importFile(name), name)
	}
	for name, secret := range fixtureSecrets {
		wk, wr, werr := keys(t, db).Check(ctx, secret)
		k, r, err := other.Check(ctx, secret)
		require.Equal(t, werr, err, name)
		require.Equal(t, wr, r, name)
		wu, err := keys(t, db).Usage(ctx, wk.ID)
		require.NoError(t, err)
		u, err := other.Usage(ctx, k.ID)
		require.NoError(t, err)
		require.Equal(t, wu, u, name)
		wk.ID = k.ID // ids are drawn at random
		require.Equal(t, wk, k, name)
	}

	again := importFile("apikeys.valid.json")
	require.Zero(t, again.Keys)
	require.Len(t, again.Skips, 3)

	f, err := os.Open(fixture("apikeys.malformed.json"))
	require.NoError(t, err)
	defer f.Close()
	var n int
	require.NoError(t, other.List(ctx, func(keystore.Key) error { n++; return nil }))
	_, err = ImportLegacyInto(ctx, importer, f)
	require.ErrorIs(t, err, ErrRefused)
	var after int
	require.NoError(t, other.List(ctx, func(keystore.Key) error { after++; return nil }))
	require.Equal(t, n, after, "a refused file writes nothing")
	_, err = ImportLegacyInto(ctx, nil, nil)
	require.ErrorIs(t, err, ratestore.ErrInvalid)
}

// redisKeys opens a key store in srv, on clk, as one process of it would.
func redisKeys(t *testing.T, srv *redistest.Server, clk *fakeclock.Clock) *keystore.Store {
	t.Helper()
	rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: clk.Now, Timeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { rdb.Close() })
	ks, err := keystore.Open(rdb, keystore.Options{})
	require.NoError(t, err)
	return ks
}

// TestMigrateAllInRedis: MigrateAllIn migrates the legacy usage of a key
// store in Redis as MigrateAll does a database's: the same progress, the
// same usage afterwards, nothing left pending. A key another process of
// the Redis migrated meanwhile, at its first touch, counts as done and is
// merged once.
func TestMigrateAllInRedis(t *testing.T) {
	clk := fakeclock.New(importNow)
	db := openDB(t, backendtest.BoltSync, clk)
	srv := redistest.Start(t)
	importer, gateway := redisKeys(t, srv, clk), redisKeys(t, srv, clk)
	_, err := ImportLegacyFile(ctx, db, fixture("apikeys.valid.json"))
	require.NoError(t, err)
	f, err := os.Open(fixture("apikeys.valid.json"))
	require.NoError(t, err)
	defer f.Close()
	_, err = ImportLegacyInto(ctx, importer, f)
	require.NoError(t, err)
	migrator := redisKeys(t, srv, clk) // a new process: it sees every key pending
	pending, err := migrator.PendingLegacy(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, pending)

	_, _, err = gateway.Check(ctx, fixtureSecrets["staging"]) // migrated by its first touch
	require.NoError(t, err)
	var calls [][2]int
	require.NoError(t, MigrateAllIn(ctx, migrator, func(done, total int) { calls = append(calls, [2]int{done, total}) }))
	require.Equal(t, [][2]int{{0, 3}, {1, 3}, {2, 3}, {3, 3}}, calls)
	require.NoError(t, MigrateAll(ctx, db, nil))
	for _, ks := range []*keystore.Store{migrator, gateway} {
		pending, err = ks.PendingLegacy(ctx)
		require.NoError(t, err)
		require.Zero(t, pending)
	}
	for _, name := range []string{"gateway-prod", "batch-jobs", "staging"} { // apikeys.valid.json's
		secret := fixtureSecrets[name]
		wk, _, err := keys(t, db).Check(ctx, secret)
		require.NoError(t, err, name)
		k, _, err := gateway.Check(ctx, secret)
		require.NoError(t, err, name)
		want, err := keys(t, db).Usage(ctx, wk.ID)
		require.NoError(t, err)
		got, err := gateway.Usage(ctx, k.ID)
		require.NoError(t, err)
		require.Equal(t, want, got, name)
		if name == "gateway-prod" {
			require.Equal(t, int64(41250), got.Used, "its legacy windows, merged once")
		}
	}

	require.ErrorIs(t, MigrateAllIn(ctx, nil, nil), ratestore.ErrInvalid)
}
