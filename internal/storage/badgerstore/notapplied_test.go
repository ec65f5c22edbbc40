package badgerstore_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
)

// TestCommitNotApplied: a Commit that fails before badger's own commit
// says so (storage.ErrNotApplied, with what was wrong) and leaves every
// key as it was, the ops before the bad one included.
func TestCommitNotApplied(t *testing.T) {
	s, err := badgerstore.Open(filepath.Join(t.TempDir(), "db"), nil)
	require.NoError(t, err)
	require.NoError(t, s.Commit([]storage.Op{{Key: []byte("a"), Value: []byte("1")}}))

	for name, bad := range map[string]storage.Op{
		"empty key":    {Value: []byte("x")},
		"key too long": {Key: bytes.Repeat([]byte("k"), 1<<16), Value: []byte("x")},
	} {
		err := s.Commit([]storage.Op{{Key: []byte("a"), Value: []byte("2")}, {Key: []byte("b"), Value: []byte("2")}, bad})
		require.ErrorIs(t, err, storage.ErrNotApplied, name)
		v, err := s.Get([]byte("a"))
		require.NoError(t, err)
		require.Equal(t, "1", string(v), name)
		v, err = s.Get([]byte("b"))
		require.NoError(t, err)
		require.Nil(t, v, name)
	}

	require.NoError(t, s.Close())
	err = s.Commit([]storage.Op{{Key: []byte("a"), Value: []byte("3")}})
	require.ErrorIs(t, err, storage.ErrNotApplied)
	require.ErrorIs(t, err, badger.ErrDBClosed)
	require.NoError(t, s.Close(), "a second Close is a no-op")
}
