package ratestore

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
)

// Faults a faultStore injects.
const (
	noFault        = iota
	failBefore     // Commit fails before writing anything: storage.ErrNotApplied
	failAfter      // Commit writes, then fails (bbolt failing after its writes)
	failSync       // Sync fails: the log record is written, its fdatasync fails
	failPartial    // Commit applies half of the ops, then fails
	failEveryOther // every second Commit fails as failBefore does
)

var errInjected = errors.New("injected fault")

// faultStore wraps a real bolt store and fails its Commit or Sync as told.
type faultStore struct {
	storage.Store
	fault   atomic.Int32
	commits atomic.Int64  // Commit calls under failEveryOther
	entered chan struct{} // if non-nil, Commit sends on it, then waits on hold
	hold    chan struct{}
}

func (f *faultStore) Commit(ops []storage.Op) error {
	if f.entered != nil {
		f.entered <- struct{}{}
		<-f.hold
	}
	switch f.fault.Load() {
	case failEveryOther:
		if f.commits.Add(1)%2 == 0 {
			break
		}
		fallthrough
	case failBefore:
		return fmt.Errorf("%w: disk full: %w", errInjected, storage.ErrNotApplied)
	case failAfter:
		if err := f.Store.Commit(ops); err != nil {
			return err
		}
		return fmt.Errorf("%w: commit failed after writing", errInjected)
	case failPartial:
		if err := f.Store.Commit(ops[:len(ops)/2]); err != nil {
			return err
		}
		return fmt.Errorf("%w: half applied", errInjected)
	}
	return f.Store.Commit(ops)
}

func (f *faultStore) Sync() error {
	if f.fault.Load() == failSync {
		return fmt.Errorf("%w: fdatasync: input/output error", errInjected)
	}
	return f.Store.Sync()
}

// openFaulty opens a Sync DB at a fresh path over a faultStore.
func openFaulty(t *testing.T) (*DB, *faultStore, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	bs, err := boltstore.Open(path)
	require.NoError(t, err)
	f := &faultStore{Store: bs}
	db := newDB(f, Bolt, path, Options{Now: fixedNow})
	t.Cleanup(func() { db.Close() })
	return db, f, path
}

// remaining is what Peek says of key under l.
func remaining(t *testing.T, l *Limiter, key string) int64 {
	t.Helper()
	r, err := l.Peek(bg, key)
	require.NoError(t, err)
	return r.Remaining
}

// TestFailedCommitChangesNothing: a commit that fails before writing
// anything (storage.ErrNotApplied) fails its calls with a plain error, and
// undoes their changes in memory: memory and disk agree that nothing
// changed, and a retry counts once.
func TestFailedCommitChangesNothing(t *testing.T) {
	db, f, path := openFaulty(t)
	l := mustLimiter(t, db, "l")
	_, err := l.AllowN(bg, "k", 2)
	require.NoError(t, err)

	f.fault.Store(failBefore)
	_, err = l.AllowN(bg, "k", 5)
	require.ErrorIs(t, err, errInjected)
	require.NotErrorIs(t, err, ErrUncertain)
	_, err = l.AllowN(bg, "new", 5) // a key with nothing stored
	require.NotErrorIs(t, err, ErrUncertain)
	require.Error(t, db.Update(bg, nil, func(b backend.Batch) error { return b.Put([]byte("rec"), []byte("v")) }))
	require.Equal(t, bucket.Burst-2, remaining(t, l, "k"), "undone in memory")
	require.Equal(t, bucket.Burst, remaining(t, l, "new"))
	v, err := db.Get(bg, []byte("rec"))
	require.NoError(t, err)
	require.Nil(t, v, "the record was undone too")

	f.fault.Store(noFault)
	_, err = l.AllowN(bg, "k", 5) // the caller's retry counts once
	require.NoError(t, err)
	require.NoError(t, db.Close())
	l = mustLimiter(t, reopen(t, path), "l")
	require.Equal(t, bucket.Burst-7, remaining(t, l, "k"))
	require.Equal(t, bucket.Burst, remaining(t, l, "new"))
}

// TestFailedCommitUncertain: a commit that failed after it may have
// written (bbolt failing after its writes, a failed fdatasync, a commit
// applied in part) fails its calls with ErrUncertain. The change stands in
// memory and is retried: on disk after the next commit or Close, never
// counted twice, and whole.
func TestFailedCommitUncertain(t *testing.T) {
	for name, fault := range map[string]int32{"after-write": failAfter, "sync": failSync, "partial": failPartial} {
		t.Run(name, func(t *testing.T) {
			db, f, path := openFaulty(t)
			l := mustLimiter(t, db, "l")
			_, err := l.AllowN(bg, "k", 2)
			require.NoError(t, err)

			f.fault.Store(fault)
			_, err = l.AllowN(bg, "k", 5)
			require.ErrorIs(t, err, ErrUncertain)
			require.ErrorIs(t, err, errInjected)
			err = db.Update(bg, nil, func(b backend.Batch) error {
				_, err := b.AllowN(l, "k2", 1)
				return err
			})
			require.ErrorIs(t, err, ErrUncertain, "the next commit fails too, and cannot be undone")
			require.Equal(t, bucket.Burst-7, remaining(t, l, "k"), "the change stands in memory")

			f.fault.Store(noFault)
			require.NoError(t, db.Close(), "Close retries it")
			l = mustLimiter(t, reopen(t, path), "l")
			require.Equal(t, bucket.Burst-7, remaining(t, l, "k"), "on disk once, memory and disk agree")
			require.Equal(t, bucket.Burst-1, remaining(t, l, "k2"))
		})
	}
}

// TestFailedCommitNotUndoneWhenChangedSince: a commit that applied nothing
// is not undone when a call changed one of its states meanwhile (undoing
// it would undo that call too): it is uncertain, and both changes stand.
func TestFailedCommitNotUndoneWhenChangedSince(t *testing.T) {
	db, f, path := openFaulty(t)
	l := mustLimiter(t, db, "l")
	f.entered, f.hold = make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := l.AllowN(bg, "k", 1)
		first <- err
	}()
	<-f.entered // the first change is swept, its commit under way
	second := make(chan error, 1)
	go func() {
		_, err := l.AllowN(bg, "k", 1)
		second <- err
	}()
	sh := &db.shards[db.locate(l.nameHash, "k").idx]
	waitFor(t, func() bool { // until the second change is made
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return len(sh.dirty) > 0
	})
	f.fault.Store(failBefore)
	f.hold <- struct{}{}
	require.ErrorIs(t, <-first, ErrUncertain)
	f.fault.Store(noFault)
	<-f.entered
	f.hold <- struct{}{}
	require.NoError(t, <-second)
	f.entered = nil
	require.NoError(t, db.Close())
	l = mustLimiter(t, reopen(t, path), "l")
	require.Equal(t, bucket.Burst-2, remaining(t, l, "k"), "both changes, once each")
}

// TestFailedCommitRacingCalls: under calls that keep coming while commits
// alternately fail before writing and succeed, every call that failed
// without ErrUncertain changed nothing and every call that succeeded is on
// disk. A call that comes between a commit's swap of the generation and
// the sweep of its key's shard has its change written by that commit while
// it waits for the next one, so neither of the two may be undone.
func TestFailedCommitRacingCalls(t *testing.T) {
	db, f, path := openFaulty(t)
	l := mustLimiter(t, db, "l")
	f.fault.Store(failEveryOther)
	const workers, calls = 8, 4000
	var (
		mu      sync.Mutex
		acked   []string
		undone  []string
		unknown int
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > calls {
					return
				}
				key := fmt.Sprint("k", n)
				_, err := l.Allow(bg, key)
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, key)
				case errors.Is(err, ErrUncertain):
					unknown++
				default:
					undone = append(undone, key)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NotEmpty(t, undone, "no commit failed")
	for _, key := range undone {
		require.Equal(t, bucket.Burst, remaining(t, l, key), "key %s: failed without ErrUncertain, but changed", key)
	}
	f.fault.Store(noFault)
	require.NoError(t, db.Close())
	l = mustLimiter(t, reopen(t, path), "l")
	for _, key := range acked {
		require.Equal(t, bucket.Burst-1, remaining(t, l, key), "key %s: acknowledged, but lost", key)
	}
	for _, key := range undone {
		require.Equal(t, bucket.Burst, remaining(t, l, key), "key %s: failed without ErrUncertain, but on disk", key)
	}
	t.Logf("%d calls: %d acknowledged, %d undone, %d uncertain", calls, len(acked), len(undone), unknown)
}
