package ledger_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/storage/storagetest"
	"github.com/ratestore/ratestore/ledger"
)

// TestReadOnlyDatabase: a ledger opened on a database opened read-only is
// read-only whatever its Options say: no day past the retention is
// dropped, no chunk compacted, every write fails with ErrReadOnly (which
// matches ratestore.ErrReadOnly), and queries read the entries as stored.
// The files keep their bytes and times.
func TestReadOnlyDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	clock := fakeclock.New(t0.Add(-100 * 24 * time.Hour))
	db, err := ratestore.Open(path, ratestore.Options{Now: clock.Now})
	require.NoError(t, err)
	l, err := ledger.Open(db, ledger.Options{})
	require.NoError(t, err)
	for i := range 40 {
		require.NoError(t, l.Add(ctx, ledger.Entry{Key: "key_a", Model: "m", Tokens: ledger.Tokens{Input: int64(i)}, Status: 200}))
	}
	require.NoError(t, db.Close()) // the ledger is not closed: its Close compacts
	before := storagetest.Snapshot(t, path, path+"-wal")

	clock.Set(t0) // the entries' day is past the retention (90 days)
	db, err = ratestore.Open(path, ratestore.Options{Now: clock.Now, ReadOnly: true})
	require.NoError(t, err)
	l, err = ledger.Open(db, ledger.Options{})
	require.NoError(t, err)
	// The entries are past the retention, which a query of them refuses;
	// their rollups and records are still there, not dropped.
	_, err = l.Requests(ctx, ledger.RequestQuery{From: t0.Add(-120 * 24 * time.Hour), Limit: 100})
	require.ErrorIs(t, err, ledger.ErrInvalid)
	sp, err := l.Spend(ctx, ledger.SpendQuery{From: t0.Add(-120 * 24 * time.Hour), To: t0})
	require.NoError(t, err)
	require.EqualValues(t, 40, sp.Total.Requests, "not dropped")
	entries := 0
	require.NoError(t, db.Scan(ctx, []byte("L/e/"), func(k, v []byte) error { entries++; return nil }))
	require.Positive(t, entries, "the entries' records are still there")
	_, err = l.Note(ledger.Entry{Key: "key_a"})
	require.ErrorIs(t, err, ledger.ErrReadOnly)
	require.ErrorIs(t, err, ratestore.ErrReadOnly)
	require.ErrorIs(t, l.Add(ctx, ledger.Entry{Key: "key_a"}), ledger.ErrReadOnly)
	require.ErrorIs(t, l.Refused(ctx, ledger.Refusal{Key: "key_a", Reason: "limited"}), ledger.ErrReadOnly)
	require.ErrorIs(t, l.DropExpired(ctx), ledger.ErrReadOnly)
	require.ErrorIs(t, l.Compact(ctx), ledger.ErrReadOnly)
	require.NoError(t, l.Close(ctx))
	require.NoError(t, db.Close())
	require.Equal(t, before, storagetest.Snapshot(t, path, path+"-wal"))
}
