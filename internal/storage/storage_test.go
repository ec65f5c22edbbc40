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
	"github.com/ratestore/ratestore/internal/storage/storagetest"
)

type backend struct {
	name   string
	open   func(path string) (storage.Store, error)
	openRO func(path string) (storage.Store, error) // read-only
}

var backends = []backend{
	{"bolt",
		func(p string) (storage.Store, error) { return boltstore.Open(p) },
		func(p string) (storage.Store, error) { return boltstore.OpenWith(p, storage.Options{ReadOnly: true}) }},
	{"badger",
		func(p string) (storage.Store, error) { return badgerstore.Open(p, nil) },
		func(p string) (storage.Store, error) { return badgerstore.OpenWith(p, storage.Options{ReadOnly: true}) }},
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

// TestReadOnly opens a closed database read-only, twice at once: both read
// what was committed, refuse a Commit with ErrReadOnly (nothing applied),
// and leave every file's bytes and modification time as they were. A
// writer is refused while they hold it, and they while a writer does, with
// ErrLocked; a path with no database is not created.
func TestReadOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, path string) {
		s, err := b.open(path)
		require.NoError(t, err)
		want := map[string]string{}
		for i := range 300 {
			k, v := fmt.Sprintf("k%03d", i), fmt.Sprint("value ", i)
			want[k] = v
			require.NoError(t, s.Commit([]storage.Op{{Key: []byte(k), Value: []byte(v)}}))
		}
		require.NoError(t, s.Close())
		files := filepath.Dir(path)
		before := storagetest.Snapshot(t, files)

		ro1, err := b.openRO(path)
		require.NoError(t, err)
		ro2, err := b.openRO(path)
		require.NoError(t, err, "a second read-only open")
		for _, ro := range []storage.Store{ro1, ro2} {
			got := map[string]string{}
			require.NoError(t, ro.Scan(nil, nil, func(k, v []byte) error {
				got[string(k)] = string(v)
				return nil
			}))
			require.Equal(t, want, got)
			v, err := ro.Get([]byte("k007"))
			require.NoError(t, err)
			require.Equal(t, "value 7", string(v))
			err = ro.Commit([]storage.Op{{Key: []byte("k007"), Value: []byte("changed")}})
			require.ErrorIs(t, err, storage.ErrReadOnly)
			require.ErrorIs(t, err, storage.ErrNotApplied)
			require.NoError(t, ro.Sync(), "nothing to sync")
		}
		_, err = b.open(path)
		require.ErrorIs(t, err, storage.ErrLocked, "a writer, while read-only opens hold it")
		require.NoError(t, ro1.Close())
		require.NoError(t, ro2.Close())
		require.Equal(t, before, storagetest.Snapshot(t, files))

		w, err := b.open(path)
		require.NoError(t, err)
		_, err = b.openRO(path)
		require.ErrorIs(t, err, storage.ErrLocked, "read-only, while a writer holds it")
		require.NoError(t, w.Close())

		missing := filepath.Join(t.TempDir(), "none")
		_, err = b.openRO(missing)
		require.ErrorIs(t, err, os.ErrNotExist)
		_, err = os.Stat(missing)
		require.ErrorIs(t, err, os.ErrNotExist, "nothing created")
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
