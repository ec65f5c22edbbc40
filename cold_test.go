package ratestore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
)

// slowStore wraps a real store: a Get of the key it holds blocks until
// released, and every Get is counted.
type slowStore struct {
	storage.Store
	gets    atomic.Int64
	key     []byte        // the key whose Get blocks
	entered chan struct{} // a Get of key has begun
	release chan struct{} // closed to let it go on
}

func (s *slowStore) Get(key []byte) ([]byte, error) {
	s.gets.Add(1)
	if bytes.Equal(key, s.key) {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Store.Get(key)
}

// coldDB is a DB on a slowStore whose limiter "l" has state stored for
// "cold" (taken 3, committed and evicted by a reopen), and a key of the
// same shard as "cold".
func coldDB(t *testing.T) (*DB, *slowStore, *Limiter, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	db := reopen(t, path)
	_, err := mustLimiter(t, db, "l").AllowN(bg, "cold", 3)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	bs, err := boltstore.Open(path)
	require.NoError(t, err)
	s := &slowStore{Store: bs, key: appendStoreKey(nil, joinKey("l", "cold")), entered: make(chan struct{}, 64), release: make(chan struct{})}
	db = newDB(s, Bolt, path, Options{Now: fixedNow})
	t.Cleanup(func() { db.Close() })
	l := mustLimiter(t, db, "l")
	idx := db.locate(l.nameHash, "cold").idx
	for i := 0; ; i++ {
		if k := fmt.Sprint("warm", i); db.locate(l.nameHash, k).idx == idx {
			return db, s, l, k
		}
	}
}

// TestColdLoadOutsideShardLock: while a cold key's state is read from the
// store, calls on another key of its shard go on.
func TestColdLoadOutsideShardLock(t *testing.T) {
	_, s, l, warm := coldDB(t)
	cold := make(chan int64, 1)
	go func() {
		r, err := l.Peek(bg, "cold")
		require.NoError(t, err)
		cold <- r.Remaining
	}()
	<-s.entered // the cold read is under way, and blocked
	r, err := l.AllowN(bg, warm, 1)
	require.NoError(t, err, "a call on another key of the shard during the read")
	require.True(t, r.Allowed)
	close(s.release)
	require.Equal(t, bucket.Burst-3, <-cold, "the cold key's stored state")
}

// TestColdLoadOnce: concurrent calls on one cold key read it from the
// store once, and all see its stored state; a Reset that comes during the
// read waits for it, and wins.
func TestColdLoadOnce(t *testing.T) {
	_, s, l, _ := coldDB(t)
	const callers = 16
	var wg sync.WaitGroup
	results := make(chan int64, callers)
	for range callers {
		wg.Go(func() {
			r, err := l.Peek(bg, "cold")
			require.NoError(t, err)
			results <- r.Remaining
		})
	}
	<-s.entered
	gets := s.gets.Load()
	close(s.release)
	wg.Wait()
	close(results)
	for r := range results {
		require.Equal(t, bucket.Burst-3, r)
	}
	require.Equal(t, gets, s.gets.Load(), "one read of the cold key for all the calls")
	require.Len(t, s.entered, 0, "no second read of the cold key")
}

// TestResetDuringColdLoad: a Reset of a key being loaded waits for the
// load and then forgets the state: the loaded state never comes back over
// the Reset.
func TestResetDuringColdLoad(t *testing.T) {
	_, s, l, _ := coldDB(t)
	loaded := make(chan struct{})
	go func() {
		_, err := l.Peek(bg, "cold")
		require.NoError(t, err)
		close(loaded)
	}()
	<-s.entered
	reset := make(chan error, 1)
	go func() { reset <- l.Reset(bg, "cold") }()
	close(s.release)
	require.NoError(t, <-reset)
	<-loaded
	require.Equal(t, bucket.Burst, remaining(t, l, "cold"), "reset, not the loaded state")
}
