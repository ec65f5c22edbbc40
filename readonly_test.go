package ratestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/storage/storagetest"
	"github.com/ratestore/ratestore/strategies"
)

// TestReadOnlyRefusesWrites opens a database read-only on each backend:
// every call that would change a state or a record fails with ErrReadOnly
// (not ErrInvalid, not ErrUncertain) and changes nothing, the reads answer
// what the writer left, a state time has made idle is dropped in memory
// only, and the files keep their bytes and times.
func TestReadOnlyRefusesWrites(t *testing.T) {
	for _, kind := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		t.Run(kind.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "db")
			clock := newClock()
			tb := strategies.TokenBucket{Rate: 2, Burst: 10}
			db, err := ratestore.Open(path, ratestore.Options{Backend: kind, Now: clock.Now})
			require.NoError(t, err)
			l, err := db.Limiter("api", tb)
			require.NoError(t, err)
			_, err = l.AllowN(ctx, "busy", 7)
			require.NoError(t, err)
			_, err = l.AllowN(ctx, "idle", 1)
			require.NoError(t, err)
			require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error { return b.Put([]byte("r/1"), []byte("one")) }))
			require.NoError(t, db.Close())
			before := storagetest.Snapshot(t, dir)

			clock.Advance(500 * time.Millisecond) // "idle" is full again, "busy" not
			db, err = ratestore.Open(path, ratestore.Options{Backend: kind, Now: clock.Now, ReadOnly: true, Durability: ratestore.Async})
			require.NoError(t, err)
			require.True(t, db.ReadOnly())
			l, err = db.Limiter("api", tb)
			require.NoError(t, err)
			reads := func() {
				t.Helper()
				r, err := l.Peek(ctx, "busy")
				require.NoError(t, err)
				require.Equal(t, int64(4), r.Remaining)
				r, err = l.PeekN(ctx, "idle", 10)
				require.NoError(t, err)
				require.True(t, r.Allowed)
				v, err := db.Get(ctx, []byte("r/1"))
				require.NoError(t, err)
				require.Equal(t, "one", string(v))
				var states int
				require.NoError(t, db.Export(ctx, func(ratestore.Entry) error { states++; return nil }))
				require.Equal(t, 3, states, "two states and a record")
			}
			reads()
			requireWritesRefused(t, db, l)
			reads()
			require.NoError(t, db.Flush(ctx))
			require.NoError(t, db.Close())
			require.Equal(t, before, storagetest.Snapshot(t, dir))
		})
	}
}

// requireWritesRefused tries every call that changes a state or a record
// on db, a DB opened read-only, and l, one of its limiters.
func requireWritesRefused(t *testing.T, db *ratestore.DB, l *ratestore.Limiter) {
	t.Helper()
	refused := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, ratestore.ErrReadOnly, what)
		require.NotErrorIs(t, err, ratestore.ErrInvalid, what)
		require.NotErrorIs(t, err, ratestore.ErrUncertain, what)
	}
	_, err := l.Allow(ctx, "busy")
	refused("Allow", err)
	_, err = l.AllowN(ctx, "busy", 1)
	refused("AllowN", err)
	_, err = l.AllowN(ctx, "busy", 0)
	refused("AllowN 0", err)
	_, err = l.Record(ctx, "busy", 1)
	refused("Record", err)
	refused("Reset", l.Reset(ctx, "busy"))
	_, err = l.Reserve(ctx, "busy", 1)
	refused("Reserve", err)
	refused("Wait", l.Wait(ctx, "busy", 1))
	c, err := db.Concurrency("slots", 2, time.Minute)
	require.NoError(t, err)
	_, _, err = c.Acquire(ctx, "busy")
	refused("Acquire", err)
	batch := map[string]func(backend.Batch) error{
		"AllowN": func(b backend.Batch) error { _, err := b.AllowN(l, "busy", 1); return err },
		"Record": func(b backend.Batch) error { _, err := b.Record(l, "busy", 1); return err },
		"Reset":  func(b backend.Batch) error { return b.Reset(l, "busy") },
		"Modify": func(b backend.Batch) error {
			_, err := b.Modify(l, "busy", func(st strategies.State, _ int64) (strategies.State, error) { return st, nil })
			return err
		},
		"Put":    func(b backend.Batch) error { return b.Put([]byte("r/1"), []byte("two")) },
		"Delete": func(b backend.Batch) error { return b.Delete([]byte("r/1")) },
	}
	for what, write := range batch {
		refused("Batch."+what, db.Update(ctx, nil, write))
	}
	refused("Restore", db.Restore(ctx, []ratestore.Entry{{Key: []byte("r/2"), Value: []byte("x")}}))
}
