package migrate

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
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
	db := openDB(t, ratestore.Bolt, clk)
	srv := redistest.Start(t)
	openRedis := func() *keystore.Store {
		rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: clk.Now, Timeout: 10 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { rdb.Close() })
		ks, err := keystore.OpenRedis(rdb, keystore.Options{})
		require.NoError(t, err)
		return ks
	}
	importer, other := openRedis(), openRedis()
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
