package ratestore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/strategies"
)

// TestStats: on every backend and durability, the gauges count the keys
// in memory and those not yet written, the counters the commits, their
// writes, the loads of keys not in memory and the evictions, and the
// files on disk grow with what was written.
func TestStats(t *testing.T) {
	g := strategies.GCRA{Rate: 1, Burst: 5}
	for _, e := range backendtest.Embedded() {
		t.Run(e.String(), func(t *testing.T) {
			s := open(t, e)
			s.WaitFilter()
			l, err := s.Limiter("stats", g)
			require.NoError(t, err)
			st := s.Stats()
			require.Zero(t, st.CachedKeys)
			require.Zero(t, st.Commits)
			require.Positive(t, st.DiskBytes, "a new database has files")

			for i := range 10 {
				_, err := l.Allow(ctx, fmt.Sprintf("k%d", i))
				require.NoError(t, err)
			}
			st = s.Stats()
			require.Equal(t, 10, st.CachedKeys)
			require.Zero(t, st.Loads, "a key never stored is not looked up in the store (the filter of stored keys)")
			if e.Durability() == ratestore.Async {
				require.Equal(t, 10, st.DirtyKeys, "nothing flushed yet")
			} else {
				require.Zero(t, st.DirtyKeys, "Sync: each call waited for its commit")
			}
			require.NoError(t, s.Flush(ctx))
			st = s.Stats()
			require.Zero(t, st.DirtyKeys)
			require.Positive(t, st.Commits)
			require.Zero(t, st.CommitErrors)
			require.EqualValues(t, 10, st.CommittedOps, "one write per key")
			require.Positive(t, st.CommitTime)
			require.Positive(t, st.LastCommitTime)
			require.LessOrEqual(t, st.LastCommitTime, st.CommitTime)

			// Peeks change nothing: no commit.
			commits := st.Commits
			_, err = l.Peek(ctx, "k0")
			require.NoError(t, err)
			require.NoError(t, s.Flush(ctx))
			require.Equal(t, commits, s.Stats().Commits)

			// A restart empties memory; a key used again is loaded.
			s.reopen()
			s.WaitFilter()
			st = s.Stats()
			require.Zero(t, st.CachedKeys)
			require.Zero(t, st.Loads)
			require.Positive(t, st.DiskBytes)
			l, err = s.Limiter("stats", g)
			require.NoError(t, err)
			r, err := l.Allow(ctx, "k0")
			require.NoError(t, err)
			require.EqualValues(t, 3, r.Remaining, "the state was loaded, not made fresh")
			require.EqualValues(t, 1, s.Stats().Loads)
			_, err = l.Allow(ctx, "new")
			require.NoError(t, err)
			require.EqualValues(t, 1, s.Stats().Loads, "a new key: not read")

			require.NoError(t, s.Close())
			require.Zero(t, s.Stats().CachedKeys, "after Close")
		})
	}
}

// TestStatsEvictions: a DB bounded to fewer keys than it sees evicts, and
// says how many.
func TestStatsEvictions(t *testing.T) {
	db, err := ratestore.Open(t.TempDir()+"/db", ratestore.Options{MaxCachedKeys: 256, Now: newClock().Now})
	require.NoError(t, err)
	defer db.Close()
	db.WaitFilter()
	l, err := db.Limiter("stats", strategies.GCRA{Rate: 1, Burst: 5})
	require.NoError(t, err)
	for i := range 4096 {
		_, err := l.Allow(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
	}
	st := db.Stats()
	require.Positive(t, st.Evictions)
	require.LessOrEqual(t, st.CachedKeys, 2*256, "about the bound")
	// Every key was new: none was read (once the filter of stored keys was
	// filled, at once on a new file). Used again after it was evicted, a
	// key is.
	require.Zero(t, st.Loads)
	require.NoError(t, db.Flush(ctx))
	for i := range 4096 {
		r, err := l.Allow(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		require.EqualValues(t, 3, r.Remaining, "k%d: its state, loaded", i)
	}
	require.Greater(t, db.Stats().Loads, uint64(4096-2*256))
}
