package migrate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// manyKeys is a legacy file of n keys, key i with a live window of 100+i
// tokens and an expired one of 1000 tokens, and its secrets.
func manyKeys(n int) (string, []string) {
	var entries, secrets []string
	for i := range n {
		s := fmt.Sprintf("pk_live_many%028d", i)
		secrets = append(secrets, s)
		entries = append(entries, fmt.Sprintf(`{"key":%q,"name":"k%d","token_limit_per_5h":100000,"total_lifetime_tokens":%d,`+
			`"usage_windows":[{"window_start":"2026-01-18T05:00:00Z","tokens_used":1000},{"window_start":"2026-01-18T10:%02d:00Z","tokens_used":%d}]}`,
			s, i, 5000+i, i%60, 100+i))
	}
	return fileJSON(entries...), secrets
}

// TestMigrateAllCancel: cancelled half way, every key is either migrated
// (its legacy record gone, its window holding the usage) or still pending
// (its record as the import wrote it); MigrateAll again finishes the rest,
// and every total is exact.
func TestMigrateAllCancel(t *testing.T) {
	const n = 40
	forEachBackend(t, func(t *testing.T, b backendtest.Backend) {
		db := openDB(t, b, fakeclock.New(importNow))
		file, secrets := manyKeys(n)
		rep, err := ImportLegacy(ctx, db, strings.NewReader(file))
		require.NoError(t, err)
		require.Equal(t, n, rep.Keys)
		imported := records(t, db)
		ids := make([]string, n)
		for i, s := range secrets {
			ids[i] = keyID(t, db, s)
		}

		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var calls [][2]int
		err = MigrateAll(cctx, db, func(done, total int) {
			calls = append(calls, [2]int{done, total})
			if done == n/2 {
				cancel()
			}
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Len(t, calls, n/2+1)
		for i, c := range calls {
			require.Equal(t, [2]int{i, n}, c)
		}
		pending, err := Pending(ctx, db)
		require.NoError(t, err)
		require.Equal(t, n/2, pending)

		now := records(t, db)
		migrated := 0
		for i, id := range ids {
			_, legacy := now["l/"+id]
			_, window := now[windowState+id]
			if legacy {
				assert.Equal(t, imported["k/"+id], now["k/"+id], "key %d pending: its record as imported", i)
				assert.Equal(t, imported["l/"+id], now["l/"+id])
				assert.False(t, window, "key %d pending: no token window yet", i)
				continue
			}
			migrated++
			assert.NotEqual(t, imported["k/"+id], now["k/"+id], "key %d migrated: its record no longer says pending", i)
			assert.True(t, window, "key %d migrated: its token window holds the usage", i)
			u, err := keys(t, db).Usage(ctx, id) // reads only: nothing pending
			require.NoError(t, err)
			assert.Equal(t, int64(100+i), u.Used)
		}
		assert.Equal(t, n/2, migrated)
		assert.Equal(t, now, records(t, db), "Usage of migrated keys wrote nothing")

		calls = nil
		require.NoError(t, MigrateAll(ctx, db, func(done, total int) { calls = append(calls, [2]int{done, total}) }))
		require.Len(t, calls, n/2+1)
		assert.Equal(t, [2]int{n / 2, n / 2}, calls[n/2])
		pending, err = Pending(ctx, db)
		require.NoError(t, err)
		require.Zero(t, pending)
		var sum int64
		for i, id := range ids {
			u, err := keys(t, db).Usage(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, int64(100+i), u.Used, "key %d", i)
			sum += u.Used
			k, err := keys(t, db).Get(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, int64(5000+i), k.LifetimeTokens)
		}
		assert.Equal(t, int64(n*100+n*(n-1)/2), sum)
		for id := range records(t, db) {
			assert.False(t, strings.HasPrefix(id, "l/"), "a legacy record is left: %s", id)
		}

		// Nothing left: one progress call, nothing written.
		before := dump(t, db)
		calls = nil
		require.NoError(t, MigrateAll(ctx, db, func(done, total int) { calls = append(calls, [2]int{done, total}) }))
		assert.Equal(t, [][2]int{{0, 0}}, calls)
		assert.Equal(t, before, dump(t, db))
	})
}

// TestMigrateAllCancelledBefore: a ctx cancelled before the call migrates
// nothing.
func TestMigrateAllCancelledBefore(t *testing.T) {
	db := openDB(t, backendtest.BoltSync, fakeclock.New(importNow))
	importFixtures(t, db)
	before := dump(t, db)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, MigrateAll(cctx, db, nil), context.Canceled)
	assert.Equal(t, before, dump(t, db))
	pending, err := Pending(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, 5, pending)
}

// TestMigrateAllSkipsDeleted: a key deleted while MigrateAll runs counts as
// done.
func TestMigrateAllSkipsDeleted(t *testing.T) {
	db := openDB(t, backendtest.BoltSync, fakeclock.New(importNow))
	file, secrets := manyKeys(3)
	_, err := ImportLegacy(ctx, db, strings.NewReader(file))
	require.NoError(t, err)
	var deleted bool
	require.NoError(t, MigrateAll(ctx, db, func(done, total int) {
		if done == 0 {
			for _, s := range secrets {
				require.NoError(t, keys(t, db).Delete(ctx, keyID(t, db, s)))
				deleted = true
				break
			}
		}
	}))
	assert.True(t, deleted)
	pending, err := Pending(ctx, db)
	require.NoError(t, err)
	assert.Zero(t, pending)
}

// windowState is the stored key of the state of a key's 5-hour token
// window, less the key's id: an engine state under the key store's
// limiter name of the window.
const windowState = "s/keys:w:5h0m0s\x00"

// records is every record of db by key (as a string).
func records(t *testing.T, db *ratestore.DB) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, r := range dump(t, db) {
		m[string(r.Key)] = r.Value
	}
	return m
}
