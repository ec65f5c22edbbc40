package badgerstore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
	"github.com/ratestore/ratestore/internal/storage/storagetest"
)

// TestReadOnlyNotClosedCleanly: badger cannot open read-only a directory
// left by a crash without changing it (it cuts its memtable log, and
// deletes a table its MANIFEST does not name), so a read-only open
// refuses both with ErrReadOnly, naming the file, and leaves every file as
// it was; the same database closed cleanly opens, and reads every key.
func TestReadOnlyNotClosedCleanly(t *testing.T) {
	dir := t.TempDir()
	crashed := filepath.Join(dir, "crashed")
	makeTemplate(t, crashed) // a memtable log with the second half's commits
	clean := filepath.Join(dir, "clean")
	storagetest.CopyDir(t, crashed, clean)
	s, err := badgerstore.Open(clean, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	orphan := filepath.Join(dir, "orphan")
	storagetest.CopyDir(t, clean, orphan)
	tables := matching(t, orphan, ".sst")
	require.NotEmpty(t, tables)
	b, err := os.ReadFile(filepath.Join(orphan, tables[0]))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(orphan, "009999.sst"), b, 0o600))
	before := storagetest.Snapshot(t, dir)

	for path, file := range map[string]string{crashed: ".mem", orphan: "009999.sst"} {
		_, err := badgerstore.OpenWith(path, storage.Options{ReadOnly: true})
		require.ErrorIs(t, err, storage.ErrReadOnly, path)
		require.ErrorContains(t, err, file)
	}
	ro, err := badgerstore.OpenWith(clean, storage.Options{ReadOnly: true})
	require.NoError(t, err)
	n := 0
	require.NoError(t, ro.Scan(nil, nil, func(k, v []byte) error {
		require.Equal(t, value(n), v, "key %s", k)
		n++
		return nil
	}))
	require.Equal(t, damageKeys, n)
	require.NoError(t, ro.Close())
	require.Equal(t, before, storagetest.Snapshot(t, dir))
}
