package ratestore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/strategies"
)

// peakPerShard returns the most entries any shard has held, and the sum
// of every shard's peak: a bound on the most the table ever held.
func (db *DB) peakPerShard() (most, sum int) {
	for i := range db.shards {
		sh := &db.shards[i]
		sh.mu.Lock()
		most, sum = max(most, sh.peak), sum+sh.peak
		sh.mu.Unlock()
	}
	return most, sum
}

// TestCacheBoundAsync: in Async mode, with an interval far longer than the
// test, 100k distinct keys written as fast as four goroutines can never
// take the table past MaxCachedKeys: a shard full of uncommitted changes
// starts a commit and waits for it instead of growing (DB.makeRoom). The
// documented slack is keys inserted by Batches or after maxRoomWaits
// commits (roomMisses), none here. Every write is durable after Close.
func TestCacheBoundAsync(t *testing.T) {
	const maxKeys, keys, writers = 1024, 100_000, 4
	db, h, path := openHooked(t, Options{Durability: Async, FlushInterval: time.Hour, MaxCachedKeys: maxKeys})
	l := mustLimiter(t, db, "l")
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := w; i < keys; i += writers {
				if _, err := l.AllowN(bg, fmt.Sprint("k", i), 3); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	most, sum := db.peakPerShard()
	require.LessOrEqual(t, most, db.shardCap, "no shard past its share of the bound")
	require.LessOrEqual(t, sum, maxKeys, "the table never past MaxCachedKeys")
	require.Zero(t, db.roomMisses.Load())
	require.Greater(t, h.commits.Load(), int64(keys/maxKeys/2), "commits started early")
	t.Logf("peak %d entries (bound %d), %d commits for %d keys", sum, maxKeys, h.commits.Load(), keys)

	require.NoError(t, db.Close())
	db = reopen(t, path)
	l = mustLimiter(t, db, "l")
	for i := range keys {
		r, err := l.Peek(bg, fmt.Sprint("k", i))
		require.NoError(t, err)
		require.Equal(t, bucket.Burst-3, r.Remaining, "key %d", i)
	}
}

// TestCacheBoundBatch: a Batch cannot wait for room (it holds the
// committer off), so it inserts over the bound, counted in roomMisses,
// and wakes the committer; the calls after it make room again.
func TestCacheBoundBatch(t *testing.T) {
	db, _, _ := openHooked(t, Options{Durability: Async, FlushInterval: time.Hour, MaxCachedKeys: 128})
	l := mustLimiter(t, db, "l")
	require.NoError(t, db.Update(bg, nil, func(b backend.Batch) error {
		for i := range 1000 {
			if _, err := b.AllowN(l, fmt.Sprint("k", i), 1); err != nil {
				return err
			}
		}
		return nil
	}))
	require.Positive(t, db.roomMisses.Load())
	for i := range 1000 {
		_, err := l.AllowN(bg, fmt.Sprint("j", i), 1)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, db.CachedKeys(), 128+1000, "the batch's keys, until they are committed")
	require.NoError(t, db.Flush(bg))
	misses := db.roomMisses.Load()
	for i := range 1000 {
		_, err := l.AllowN(bg, fmt.Sprint("x", i), 1)
		require.NoError(t, err)
	}
	require.Equal(t, misses, db.roomMisses.Load(), "calls outside a Batch always find room")
	require.LessOrEqual(t, db.CachedKeys(), 128, "back within the bound")
	most, _ := db.peakPerShard()
	t.Logf("cached %d, peak per shard %d", db.CachedKeys(), most)
}

// TestCacheBoundBatchPeek: a Batch's PeekN and Inspect of a new key in a
// shard full of the batch's uncommitted changes insert over the bound, as
// its changes do, rather than wait for a commit that the batch holds off
// (they waited for ever: a keystore Admit, which peeks inside an Update,
// hung with MaxCachedKeys 1024 on an Async store).
func TestCacheBoundBatchPeek(t *testing.T) {
	db, _, _ := openHooked(t, Options{Durability: Async, FlushInterval: time.Hour, MaxCachedKeys: 128})
	l := mustLimiter(t, db, "l")
	done := make(chan error, 1)
	go func() {
		done <- db.Update(bg, nil, func(b backend.Batch) error {
			for i := range 1000 {
				if _, err := b.AllowN(l, fmt.Sprint("k", i), 1); err != nil {
					return err
				}
			}
			for i := range 1000 {
				if _, err := b.PeekN(l, fmt.Sprint("p", i), 1); err != nil {
					return err
				}
				if err := b.Inspect(l, fmt.Sprint("q", i), func(strategies.State, int64) error { return nil }); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		// Not t.Fatal: closing the database would wait for the Update.
		panic("a Batch's PeekN or Inspect waited for room for 30s")
	}
}
