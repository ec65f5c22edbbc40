package keystore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/storage/storagetest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// TestReadOnly opens a key store on a database opened read-only, holding
// version 1 records (one with legacy usage pending) and an imported key
// with legacy usage pending: Get, Usage and Check report what a writable
// store reports once it has upgraded and merged them, while nothing is
// written (the keys stay pending, the files keep their bytes and times),
// and every change fails with ErrReadOnly.
func TestReadOnly(t *testing.T) {
	// Redis has no read-only open, and what a database writes does not
	// depend on its durability mode.
	backendtest.Run(t, []backendtest.Backend{backendtest.BoltSync, backendtest.BadgerSync}, func(t *testing.T, b backendtest.Backend) {
		e := newEnv(t, b, keystore.Options{})
		full := v1Key{id: "key_00000000000000b1", secret: "pk_live_read_only_v1", limit: 1000,
			window: rollingState(t, 1000, []time.Time{t0.Add(-time.Hour)}, []int64{300})}
		legacy := v1Key{id: "key_00000000000000b2", secret: "pk_live_read_only_legacy", flags: flagLegacy, limit: 500,
			window:        rollingState(t, 500, []time.Time{t0.Add(-20 * time.Minute)}, []int64{100}),
			legacyWindows: [][2]int64{{t0.Add(-30 * time.Minute).UnixNano(), 40}}}
		for _, k := range []v1Key{full, legacy} {
			e.rawPut("k/"+k.id, k.encodeV1())
			e.rawPut(hashKey(k.secret), []byte(k.id))
		}
		e.rawPut("l/"+legacy.id, encodeLegacy(legacy.legacyWindows))
		res, err := e.ks.Import(ctx, []keystore.Imported{{Secret: "pk_live_imported", TokenLimit: 100,
			Windows: []keystore.LegacyWindow{{Start: t0.Add(-time.Hour), Tokens: 30}}}})
		require.NoError(t, err)
		secrets := map[string]string{full.id: full.secret, legacy.id: legacy.secret, res.IDs[0]: "pk_live_imported"}
		e.close()
		before := storagetest.Snapshot(t, e.st.Path, e.st.Path+"-wal")

		db, err := ratestore.Open(e.st.Path, ratestore.Options{Backend: b.Engine(), Now: e.clock.Now, ReadOnly: true})
		require.NoError(t, err)
		ks, err := keystore.Open(db, keystore.Options{})
		require.NoError(t, err)
		got := readKeys(t, ks, secrets)
		n, err := ks.PendingLegacy(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n, "nothing merged")
		_, _, err = ks.Create(ctx, keystore.Spec{TokenLimit: 1})
		require.ErrorIs(t, err, keystore.ErrReadOnly)
		_, err = ks.RecordUsage(ctx, full.id, 1)
		require.ErrorIs(t, err, keystore.ErrReadOnly)
		pending, err := ks.MigrateLegacy(ctx, legacy.id)
		require.True(t, pending)
		require.ErrorIs(t, err, keystore.ErrReadOnly)
		require.Equal(t, got, readKeys(t, ks, secrets), "nothing changed")
		require.NoError(t, db.Close())
		require.Equal(t, before, storagetest.Snapshot(t, e.st.Path, e.st.Path+"-wal"))

		e.openDB()
		e.openStore()
		require.Equal(t, readKeys(t, e.ks, secrets), got, "what a writable store reports, having written it")
		require.Equal(t, int64(140), got[legacy.id].usage.Used, "its version 1 window and its legacy usage")
		require.Equal(t, 0, e.pending())
	})
}

// keyView is what readKeys reads of one key.
type keyView struct {
	key   keystore.Key
	usage keystore.Usage
	check strategies.Result
}

// readKeys reads the key of every secret with Get, Usage and Check, and
// checks that a page of every key (Keys) reports each as Get and Usage do.
func readKeys(t *testing.T, ks *keystore.Store, secrets map[string]string) map[string]keyView {
	t.Helper()
	out := map[string]keyView{}
	for id, secret := range secrets {
		var v keyView
		var err error
		v.key, err = ks.Get(ctx, id)
		require.NoError(t, err)
		v.usage, err = ks.Usage(ctx, id)
		require.NoError(t, err)
		_, v.check, err = ks.Check(ctx, secret)
		require.NoError(t, err)
		out[id] = v
	}
	page, err := ks.Keys(ctx, keystore.KeyQuery{Sort: "-spend"})
	require.NoError(t, err)
	require.Len(t, page.Keys, len(secrets))
	for _, k := range page.Keys {
		require.Equal(t, out[k.Key.ID].key, k.Key, "the page's key")
		require.Equal(t, out[k.Key.ID].usage, k.Usage, "the page's usage of %s", k.Key.ID)
	}
	return out
}
