package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
)

type backend struct {
	name string
	open func(path string) (storage.Store, error)
}

var backends = []backend{
	{"bolt", func(p string) (storage.Store, error) { return boltstore.Open(p) }},
	{"badger", func(p string) (storage.Store, error) { return badgerstore.Open(p, nil) }},
}

func forEachBackend(t *testing.T, f func(t *testing.T, b backend, path string)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			f(t, b, filepath.Join(t.TempDir(), "db"))
		})
	}
}

func TestGetCommitDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, path string) {
		s, err := b.open(path)
		require.NoError(t, err)
		defer s.Close()

		v, err := s.Get([]byte("missing"))
		require.NoError(t, err)
		require.Nil(t, v)

		require.NoError(t, s.Commit([]storage.Op{
			{Key: []byte("a"), Value: []byte("1")},
			{Key: []byte("b"), Value: []byte{}}, // empty is a value, not a delete
		}))
		require.NoError(t, s.Sync())
		v, err = s.Get([]byte("a"))
		require.NoError(t, err)
		require.Equal(t, []byte("1"), v)
		v, err = s.Get([]byte("b"))
		require.NoError(t, err)
		require.NotNil(t, v)
		require.Empty(t, v)

		require.NoError(t, s.Commit([]storage.Op{{Key: []byte("a")}, {Key: []byte("never-there")}}))
		v, err = s.Get([]byte("a"))
		require.NoError(t, err)
		require.Nil(t, v)
		require.NoError(t, s.Commit(nil))
	})
}

func TestReopenKeepsCommits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, path string) {
		s, err := b.open(path)
		require.NoError(t, err)
		require.NoError(t, s.Commit([]storage.Op{{Key: []byte("k"), Value: []byte("v")}}))
		require.NoError(t, s.Sync())
		require.NoError(t, s.Close())

		s, err = b.open(path)
		require.NoError(t, err)
		defer s.Close()
		v, err := s.Get([]byte("k"))
		require.NoError(t, err)
		require.Equal(t, []byte("v"), v)
	})
}

// TestScanPages crosses several page boundaries and checks prefix bounds,
// the start key, and that fn may write while scanning.
func TestScanPages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, path string) {
		s, err := b.open(path)
		require.NoError(t, err)
		defer s.Close()

		const n = storage.PageSize*3 + 17
		var ops []storage.Op
		for i := range n {
			ops = append(ops, storage.Op{Key: fmt.Appendf(nil, "p/%05d", i), Value: fmt.Appendf(nil, "v%d", i)})
		}
		ops = append(ops,
			storage.Op{Key: []byte("o/before"), Value: []byte("x")},
			storage.Op{Key: []byte("q/after"), Value: []byte("x")})
		require.NoError(t, s.Commit(ops))

		var got []string
		err = s.Scan([]byte("p/"), nil, func(k, v []byte) error {
			require.Equal(t, fmt.Sprintf("v%d", len(got)), string(v))
			got = append(got, string(k))
			// Writing from inside the callback must not deadlock.
			return s.Commit([]storage.Op{{Key: append([]byte("w/"), k...), Value: v}})
		})
		require.NoError(t, err)
		require.Len(t, got, n)
		require.Equal(t, "p/00000", got[0])
		require.Equal(t, fmt.Sprintf("p/%05d", n-1), got[n-1])

		got = got[:0]
		require.NoError(t, s.Scan([]byte("p/"), []byte("p/00700"), func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		}))
		require.Len(t, got, n-700)

		stop := errors.New("stop")
		count := 0
		err = s.Scan([]byte("p/"), nil, func(_, _ []byte) error {
			if count++; count == 3 {
				return stop
			}
			return nil
		})
		require.ErrorIs(t, err, stop)
		require.Equal(t, 3, count)
	})
}

func TestSecondOpenIsLocked(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, path string) {
		s, err := b.open(path)
		require.NoError(t, err)
		defer s.Close()
		_, err = b.open(path)
		require.ErrorIs(t, err, storage.ErrLocked)
		require.Contains(t, err.Error(), "in use by another process")
	})
}

func TestBoltFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, err := boltstore.Open(path)
	require.NoError(t, err)
	defer s.Close()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestBadgerMemoryBudget pins the options that decide badger's resident
// memory, so that an empty store stays far from the ~100 MB its defaults
// allocate (five 64 MiB memtables, a 256 MiB block cache).
func TestBadgerMemoryBudget(t *testing.T) {
	o := badgerstore.Options(t.TempDir(), nil)
	budget := o.MemTableSize*int64(o.NumMemtables) + o.BlockCacheSize + o.IndexCacheSize
	require.LessOrEqual(t, budget, int64(32<<20), "memtables+caches")
	require.False(t, o.SyncWrites, "the engine syncs once per group")
}

// TestBadgerCloseLeavesNoGoroutines opens and closes badger and checks that
// every goroutine it started has returned. goleak retries with backoff, as
// goroutines told to stop may still be on their way out on a loaded machine.
func TestBadgerCloseLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := badgerstore.Open(filepath.Join(t.TempDir(), "db"), nil)
	require.NoError(t, err)
	require.NoError(t, s.Commit([]storage.Op{{Key: []byte("k"), Value: []byte("v")}}))
	require.NoError(t, s.Close())
}
