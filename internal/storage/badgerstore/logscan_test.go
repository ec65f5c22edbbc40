package badgerstore_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
	"github.com/ratestore/ratestore/internal/storage/storagetest"
	"github.com/ratestore/ratestore/strategies"
)

const logKeys = 40

// crashImage commits logKeys transactions of one key each, synced, and
// copies the directory while badger has it open, as a crash leaves it: the
// commits are in the memtable log only. It returns the copy and the path of
// its memtable log there.
func crashImage(t *testing.T) (dir, mem string) {
	build := filepath.Join(t.TempDir(), "build")
	s, err := badgerstore.Open(build, nil)
	require.NoError(t, err)
	for i := range logKeys {
		require.NoError(t, s.Commit([]storage.Op{{Key: logKey(i), Value: fmt.Appendf(nil, "v%d", i)}}))
	}
	require.NoError(t, s.Sync())
	dir = filepath.Join(t.TempDir(), "db")
	storagetest.CopyDir(t, build, dir) // while open
	require.NoError(t, s.Close())
	mems, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	require.NoError(t, err)
	require.Len(t, mems, 1)
	return dir, mems[0]
}

func logKey(i int) []byte { return fmt.Appendf(nil, "key%05d", i) }

// keyAt is the offset of key i's bytes in the memtable log b.
func keyAt(t *testing.T, b []byte, i int) int {
	at := bytes.Index(b, logKey(i))
	require.Positive(t, at)
	return at
}

// present reports which keys the store at dir holds.
func present(t *testing.T, s storage.Store) (have []bool) {
	for i := range logKeys {
		v, err := s.Get(logKey(i))
		require.NoError(t, err)
		have = append(have, v != nil)
	}
	return have
}

func TestMemtableLogDamage(t *testing.T) {
	t.Run("a crash image opens whole", func(t *testing.T) {
		dir, _ := crashImage(t)
		s, err := badgerstore.Open(dir, nil)
		require.NoError(t, err)
		defer s.Close()
		require.Nil(t, s.Recovery())
		for i, ok := range present(t, s) {
			require.True(t, ok, "key %d", i)
		}
	})
	t.Run("damage before later commits is refused", func(t *testing.T) {
		// badger would replay up to the damage and cut the file there,
		// dropping the 20 acknowledged commits after it.
		dir, mem := crashImage(t)
		b, err := os.ReadFile(mem)
		require.NoError(t, err)
		at := keyAt(t, b, 20)
		b[at+1] ^= 0x04
		storagetest.WriteSparse(t, mem, b)

		_, err = badgerstore.Open(dir, nil)
		require.ErrorIs(t, err, strategies.ErrCorrupt)
		require.ErrorContains(t, err, mem)
		require.ErrorContains(t, err, "damaged entry at offset")

		s, err := badgerstore.OpenWith(dir, storage.Options{Recover: true})
		require.NoError(t, err)
		defer s.Close()
		r := s.Recovery()
		require.NotNil(t, r)
		require.Equal(t, mem, r.File)
		require.Less(t, r.Offset, int64(at))
		require.Equal(t, uint64(logKeys-20), r.Records, "the damaged commit and those after it")
		for i, ok := range present(t, s) {
			require.Equal(t, i < 20, ok, "key %d", i)
		}
	})
	t.Run("a torn last commit opens, reported", func(t *testing.T) {
		dir, mem := crashImage(t)
		b, err := os.ReadFile(mem)
		require.NoError(t, err)
		cut := keyAt(t, b, logKeys-1) + 3
		clear(b[cut:]) // a write cut short: the rest of the page never made it
		storagetest.WriteSparse(t, mem, b)

		s, err := badgerstore.Open(dir, nil)
		require.NoError(t, err)
		defer s.Close()
		r := s.Recovery()
		require.NotNil(t, r)
		require.True(t, r.Tail, "%+v", r)
		for i, ok := range present(t, s) {
			require.Equal(t, i < logKeys-1, ok, "key %d", i)
		}
	})
	t.Run("a file cut at an entry's end opens, reported", func(t *testing.T) {
		// The newest memtable log, shorter than badger preallocates it
		// and without the zero entry that ends a log: something else cut
		// it, and the 10 commits after the cut are gone. What is left is
		// whole, so Open goes on, and says so.
		dir, mem := crashImage(t)
		b, err := os.ReadFile(mem)
		require.NoError(t, err)
		cut := keyAt(t, b, 30) - 5 // the start of key 30's entry: meta, user meta, three one-byte varints
		storagetest.WriteSparse(t, mem, b[:cut])

		s, err := badgerstore.Open(dir, nil)
		require.NoError(t, err)
		defer s.Close()
		r := s.Recovery()
		require.NotNil(t, r)
		require.Equal(t, storage.Recovery{File: mem, Offset: int64(cut), Truncated: true}, *r)
		for i, ok := range present(t, s) {
			require.Equal(t, i < 30, ok, "key %d", i)
		}
	})
	t.Run("a file cut short is refused", func(t *testing.T) {
		// A crash never shortens a preallocated log: 10 acknowledged
		// commits went with the cut.
		dir, mem := crashImage(t)
		b, err := os.ReadFile(mem)
		require.NoError(t, err)
		cut := keyAt(t, b, 30) + 2
		storagetest.WriteSparse(t, mem, b[:cut])

		_, err = badgerstore.Open(dir, nil)
		require.ErrorIs(t, err, strategies.ErrCorrupt)
		require.ErrorContains(t, err, fmt.Sprintf("%s: corrupt state: the file ends at %d", mem, cut))

		s, err := badgerstore.OpenWith(dir, storage.Options{Recover: true})
		require.NoError(t, err)
		defer s.Close()
		r := s.Recovery()
		require.NotNil(t, r)
		require.True(t, r.Truncated, "%+v", r)
		for i, ok := range present(t, s) {
			require.Equal(t, i < 30, ok, "key %d", i)
		}
	})
}
