package boltstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/storagetest"
	"github.com/ratestore/ratestore/strategies"
)

// openRO opens path read-only, with Recover if asked.
func openRO(t *testing.T, path string, recover bool) (*Store, error) {
	t.Helper()
	s, err := OpenWith(path, Options{ReadOnly: true, Recover: recover})
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// TestReadOnlyReplaysInMemory: a read-only open of a database that a
// crash left with records in its log (above bbolt's checkpoint) reads
// them, from memory, and neither checkpoints them nor resets the log:
// both files keep their bytes and times. A writable open then finds the
// same state, and changes the files.
func TestReadOnlyReplaysInMemory(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	commitSync(t, s, put("a", "1"), put("b", "2"), put("c", "3"))
	require.NoError(t, s.Close()) // a, b and c in bbolt
	s = open(t, path)
	noCheckpoints(s)
	commitSync(t, s, put("a", "4"), del("b"))
	commitSync(t, s, put("d", "5"))
	s.abandon() // those two records in the log alone
	want := map[string]string{"a": "4", "c": "3", "d": "5"}
	before := storagetest.Snapshot(t, filepath.Dir(path))

	ro, err := openRO(t, path, false)
	require.NoError(t, err)
	requireState(t, ro, want)
	requireMissing(t, ro, "b")
	require.ErrorIs(t, ro.Compact(filepath.Join(t.TempDir(), "copy")), storage.ErrReadOnly,
		"a copy would miss the log's records")
	require.NoError(t, ro.Close())
	require.Equal(t, before, storagetest.Snapshot(t, filepath.Dir(path)))

	s = open(t, path)
	requireState(t, s, want)
	require.NoError(t, s.Close())
	require.NotEqual(t, before, storagetest.Snapshot(t, filepath.Dir(path)), "a writable open checkpoints")
}

// TestReadOnlyRecover: Recover with ReadOnly drops a damaged record in
// memory only, and reports it; without Recover the log is refused, as by
// a writable open. Neither changes the files.
func TestReadOnlyRecover(t *testing.T) {
	path, starts := damagedLog(t)
	flip(t, path+"-wal", starts[3]+12)
	before := storagetest.Snapshot(t, filepath.Dir(path))

	_, err := openRO(t, path, false)
	require.ErrorIs(t, err, strategies.ErrCorrupt)
	s, err := openRO(t, path, true)
	require.NoError(t, err)
	require.Equal(t, &storage.Recovery{File: path + "-wal", Offset: starts[3], Records: 1, Bytes: starts[4] - starts[3]}, s.Recovery())
	requireMissing(t, s, "k3")
	for _, i := range []int{0, 2, 4, 9} {
		v, err := s.Get(fmt.Append(nil, "k", i))
		require.NoError(t, err)
		require.Equal(t, "v", string(v))
	}
	require.NoError(t, s.Close())
	require.Equal(t, before, storagetest.Snapshot(t, filepath.Dir(path)))
}

// TestReadOnlyRefusesChanges: a file that only a writable open can read
// (values from before checksums, which it migrates) or make a database
// (an empty file) is refused with ErrReadOnly and left as it was; a bbolt
// file never checkpointed (no buckets, no log) reads as empty, and no log
// is created next to it.
func TestReadOnlyRefusesChanges(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "legacy")
	db, err := bolt.Open(legacy, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte(LegacyBucket))
		if err == nil {
			err = b.Put([]byte("k"), []byte("v"))
		}
		return err
	}))
	require.NoError(t, db.Close())
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	bare := filepath.Join(dir, "bare")
	db, err = bolt.Open(bare, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before := storagetest.Snapshot(t, dir)

	for _, path := range []string{legacy, empty} {
		_, err := openRO(t, path, false)
		require.ErrorIs(t, err, storage.ErrReadOnly, path)
		require.ErrorContains(t, err, path)
	}
	s, err := openRO(t, bare, false)
	require.NoError(t, err)
	requireState(t, s, map[string]string{})
	require.NoError(t, s.Close())
	require.Equal(t, before, storagetest.Snapshot(t, dir))
}
