package ratestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
	"github.com/ratestore/ratestore/strategies"
)

var bg = context.Background()

var t0 = time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return t0 }

// hookStore wraps a real store to count commits, fail them on demand, or
// hold them until released.
type hookStore struct {
	storage.Store
	commits atomic.Int64
	syncs   atomic.Int64
	fail    atomic.Pointer[error]
	hold    chan struct{} // if non-nil, each Commit waits until the test sends on it
}

func (h *hookStore) Commit(ops []storage.Op) error {
	if h.hold != nil {
		<-h.hold
	}
	if p := h.fail.Load(); p != nil {
		return *p
	}
	h.commits.Add(1)
	return h.Store.Commit(ops)
}

func (h *hookStore) Sync() error {
	h.syncs.Add(1)
	return h.Store.Sync()
}

func openHooked(t *testing.T, opts Options) (*DB, *hookStore, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	bs, err := boltstore.Open(path)
	require.NoError(t, err)
	h := &hookStore{Store: bs}
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	db := newDB(h, Bolt, path, opts)
	t.Cleanup(func() { db.Close() })
	return db, h, path
}

func reopen(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path, Options{Now: fixedNow})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

var bucket = strategies.TokenBucket{Rate: 1e-3, Burst: 1_000_000}

// TestEvictionBoundsMemory: the table stays near MaxCachedKeys however many
// keys pass through it, and evicted keys reload their committed state.
func TestEvictionBoundsMemory(t *testing.T) {
	const maxKeys, keys = 256, 5000
	db, _, _ := openHooked(t, Options{Durability: Async, FlushInterval: time.Hour, MaxCachedKeys: maxKeys})
	l, err := db.Limiter("l", bucket)
	require.NoError(t, err)
	for i := range keys {
		_, err := l.AllowN(bg, fmt.Sprint("k", i), 3)
		require.NoError(t, err)
		if i%100 == 99 {
			require.NoError(t, db.Flush(bg))
		}
	}
	require.NoError(t, db.Flush(bg))
	for i := range keys {
		r, err := l.Peek(bg, fmt.Sprint("k", i))
		require.NoError(t, err)
		require.Equal(t, bucket.Burst-3, r.Remaining, "key %d", i)
	}
	require.LessOrEqual(t, db.CachedKeys(), 2*maxKeys)
}

// TestDirtyStatesAreNotEvicted: states not yet committed are never
// evicted, so nothing is lost or read back stale: a table full of them
// starts a commit early instead, and stays within its bound (see
// TestCacheBoundAsync).
func TestDirtyStatesAreNotEvicted(t *testing.T) {
	db, h, _ := openHooked(t, Options{Durability: Async, FlushInterval: time.Hour, MaxCachedKeys: 128})
	l, err := db.Limiter("l", bucket)
	require.NoError(t, err)
	for i := range 1000 {
		_, err := l.Allow(bg, fmt.Sprint("k", i))
		require.NoError(t, err)
	}
	require.LessOrEqual(t, db.CachedKeys(), 128)
	require.NotZero(t, h.commits.Load(), "commits started early, long before FlushInterval")
	for i := range 1000 {
		r, err := l.Peek(bg, fmt.Sprint("k", i))
		require.NoError(t, err)
		require.Equal(t, bucket.Burst-1, r.Remaining, "key %d", i)
	}
}

// TestCommitFailureIsReportedAndRetried: a failed commit fails the calls
// waiting on it, keeps the changes in memory, and the next commit writes them.
func TestCommitFailureIsReportedAndRetried(t *testing.T) {
	db, h, path := openHooked(t, Options{})
	l, err := db.Limiter("l", bucket)
	require.NoError(t, err)
	diskFull := errors.New("disk full")
	h.fail.Store(&diskFull)
	r, err := l.AllowN(bg, "k", 5)
	require.ErrorIs(t, err, diskFull)
	require.True(t, r.Allowed, "the decision stands; only its durability failed")

	h.fail.Store(nil)
	require.NoError(t, db.Flush(bg))
	require.NoError(t, db.Close())
	r, err = mustLimiter(t, reopen(t, path), "l").Peek(bg, "k")
	require.NoError(t, err)
	require.Equal(t, bucket.Burst-5, r.Remaining)
}

func mustLimiter(t *testing.T, db *DB, name string) *Limiter {
	l, err := db.Limiter(name, bucket)
	require.NoError(t, err)
	return l
}

// TestGroupCommit: while one commit is on disk, every change that arrives
// joins the next one; 64 callers cost two commits, not 64.
func TestGroupCommit(t *testing.T) {
	db, h, _ := openHooked(t, Options{})
	h.hold = make(chan struct{})
	l := mustLimiter(t, db, "l")

	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := l.Allow(bg, "first")
		require.NoError(t, err)
	})
	waitFor(t, func() bool { return db.pendingStates() == 0 && db.gen.Load().seq == 2 }) // first commit started
	for i := range 63 {
		wg.Go(func() {
			_, err := l.Allow(bg, fmt.Sprint("k", i))
			require.NoError(t, err)
		})
	}
	waitFor(t, func() bool { return db.pendingStates() == 63 })
	h.hold <- struct{}{} // first commit proceeds
	h.hold <- struct{}{} // the second holds all 63
	wg.Wait()
	require.Equal(t, int64(2), h.commits.Load())
}

// pendingStates counts dirty entries.
func (db *DB) pendingStates() int {
	return db.sumShards(func(sh *shard) int { return len(sh.dirty) })
}

// waitFor yields until cond holds. The outcome never depends on speed: the
// deadline only turns a hang (a bug) into a failure.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		runtime.Gosched()
	}
}

// TestCloseRacingCalls: calls racing with Close either fail with ErrClosed
// or are in the final commit; none is lost, none hangs.
func TestCloseRacingCalls(t *testing.T) {
	for _, d := range []Durability{Sync, Async} {
		t.Run(d.String(), func(t *testing.T) {
			db, _, path := openHooked(t, Options{Durability: d, FlushInterval: time.Hour})
			l := mustLimiter(t, db, "l")
			var taken [8]atomic.Int64
			var wg, started sync.WaitGroup
			started.Add(len(taken))
			for g := range taken {
				wg.Go(func() {
					defer func() {
						if taken[g].Load() == 0 {
							started.Done()
						}
					}()
					for {
						r, err := l.Allow(bg, fmt.Sprint("k", g))
						if errors.Is(err, ErrClosed) {
							return
						}
						require.NoError(t, err)
						require.True(t, r.Allowed)
						if taken[g].Add(1) == 1 {
							started.Done()
						}
					}
				})
			}
			started.Wait() // every goroutine is calling when Close comes
			require.NoError(t, db.Close())
			wg.Wait()
			require.ErrorIs(t, db.Flush(bg), ErrClosed)

			l = mustLimiter(t, reopen(t, path), "l")
			for g := range taken {
				r, err := l.Peek(bg, fmt.Sprint("k", g))
				require.NoError(t, err)
				require.Equal(t, bucket.Burst-taken[g].Load(), r.Remaining, "goroutine %d", g)
			}
		})
	}
}

// TestFlushWaitingAcrossClose: a Flush caught by Close returns, not hangs.
func TestFlushWaitingAcrossClose(t *testing.T) {
	db, h, _ := openHooked(t, Options{Durability: Async, FlushInterval: time.Hour})
	h.hold = make(chan struct{})
	l := mustLimiter(t, db, "l")
	_, err := l.Allow(bg, "k")
	require.NoError(t, err)
	flushed, closed := make(chan error), make(chan error)
	go func() { flushed <- db.Flush(bg) }()
	waitFor(t, func() bool { return db.gen.Load().seq == 2 }) // the flush's commit is held
	go func() { closed <- db.Close() }()
	waitFor(t, db.closed.Load)
	close(h.hold) // release every commit
	require.NoError(t, <-flushed)
	require.NoError(t, <-closed)
}

// TestHotDecisionDoesNotAllocate: a key in memory costs no allocation.
func TestHotDecisionDoesNotAllocate(t *testing.T) {
	db, _, _ := openHooked(t, Options{Durability: Async, FlushInterval: time.Hour})
	l := mustLimiter(t, db, "l")
	_, err := l.Allow(bg, "k")
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := l.Allow(bg, "k"); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// TestTableKeysThatCollide forces keys onto one hash, so they share a home
// slot and are told apart by their bytes alone: each keeps its own entry
// and state, a removal leaves the others reachable past its tombstone, and
// an insertion reuses the tombstone.
func TestTableKeysThatCollide(t *testing.T) {
	db, _, _ := openHooked(t, Options{})
	sh, at := &db.shards[0], slot{h: 42, idx: 0}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	keys := [][2]string{{"a", "x"}, {"a", "y"}, {"a", "\x00x"}, {"ab", "x"}} // few enough that one more does not rehash
	state := map[[2]string]strategies.State{}
	for _, k := range keys {
		i, err := db.lookup(sh, at, k[0], k[1], bucket.Prepare(), 0, false)
		require.NoError(t, err)
		require.Nil(t, sh.slots[i].st)
		state[k] = bucket.Prepare().NewState()
		sh.slots[i].st = state[k]
	}
	require.Equal(t, len(keys), sh.live)
	found := func(k [2]string) bool {
		i := sh.find(at.h, k[0], k[1])
		if i >= 0 {
			require.Same(t, state[k], sh.slots[i].st, "state of %q", k)
		}
		return i >= 0
	}
	for _, k := range keys {
		require.True(t, found(k), "%q", k)
	}
	require.False(t, found([2]string{"a", "z"}))
	require.False(t, found([2]string{"", "a\x00x"}))

	mid := sh.find(at.h, keys[1][0], keys[1][1])
	sh.remove(mid)
	require.Equal(t, slotGone, sh.slots[mid].ctl, "a slot followed by live ones leaves a tombstone")
	require.False(t, found(keys[1]))
	for _, k := range append(keys[:1:1], keys[2:]...) {
		require.True(t, found(k), "%q, past the tombstone", k)
	}
	used := sh.used
	i, err := db.lookup(sh, at, "c", "new", bucket.Prepare(), 0, false)
	require.NoError(t, err)
	require.Equal(t, mid, i, "the tombstone is reused")
	require.Equal(t, used, sh.used)

	last := sh.find(at.h, keys[len(keys)-1][0], keys[len(keys)-1][1])
	sh.remove(last)
	require.Equal(t, slotFree, sh.slots[last].ctl, "the end of a run is freed, not a tombstone")
	require.Equal(t, used-1, sh.used)
}

// TestTableMatchesAMap drives one shard with random inserts, removals and
// dirty marks, through rehashes, on hashes drawn from a small range so
// that probe runs collide, and checks it against a map after every step:
// every key is found with its state, no removed key is, and the dirty list
// names exactly the dirty entries.
func TestTableMatchesAMap(t *testing.T) {
	db, _, _ := openHooked(t, Options{MaxCachedKeys: 1 << 20})
	sh := &db.shards[0]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rng := rand.New(rand.NewPCG(1, 2))
	type model struct {
		st    strategies.State
		dirty bool
	}
	want := map[string]*model{}
	hashOf := func(key string) uint64 { return db.locateKey(joinKey("l", key)).h }
	check := func() {
		require.Equal(t, len(want), sh.live)
		dirty := map[uint32]bool{}
		for _, i := range sh.dirty {
			require.False(t, dirty[i], "slot %d listed twice", i)
			dirty[i] = true
		}
		n := 0
		for key, m := range want {
			i := sh.find(hashOf(key), "l", key)
			require.GreaterOrEqual(t, i, 0, "key %q lost", key)
			require.Same(t, m.st, sh.slots[i].st)
			require.Equal(t, m.dirty, sh.slots[i].dirty)
			require.Equal(t, m.dirty, dirty[uint32(i)], "key %q in the dirty list", key)
			if m.dirty {
				n++
			}
		}
		require.Len(t, dirty, n)
		require.Less(t, 4*sh.used, 3*len(sh.slots)+4, "load factor")
	}
	for step := range 5000 {
		key := fmt.Sprint(rng.IntN(300))
		h := hashOf(key)
		switch i, m := sh.find(h, "l", key), want[key]; {
		case m == nil:
			require.Equal(t, -1, i)
			i, err := db.lookup(sh, slot{h: h}, "l", key, bucket.Prepare(), 0, false)
			require.NoError(t, err)
			m = &model{st: bucket.Prepare().NewState()}
			sh.slots[i].st = m.st
			want[key] = m
		case !m.dirty && rng.IntN(2) == 0:
			sh.remove(i)
			delete(want, key)
		case !m.dirty:
			sh.markDirty(i, 1)
			m.dirty = true
		default: // as a commit does
			for _, i := range sh.dirty {
				sh.slots[i].dirty = false
			}
			sh.dirty = sh.dirty[:0]
			for _, m := range want {
				m.dirty = false
			}
		}
		if step%50 == 0 {
			check()
		}
	}
	check()
}

// TestEntryIsOneCacheLine keeps an entry at 64 bytes: the table's
// performance rests on a lookup reading one cache line (see cache.go).
func TestEntryIsOneCacheLine(t *testing.T) {
	require.Equal(t, uintptr(64), unsafe.Sizeof(entry{}))
}

// BenchmarkDecide is the engine's own cost per decision: a fixed clock (no
// time.Now), GCRA, one key in memory, Async.
func BenchmarkDecide(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "db"), Options{Durability: Async, Now: fixedNow})
	require.NoError(b, err)
	defer db.Close()
	l, err := db.Limiter("l", strategies.GCRA{Rate: 1e9, Burst: 1e9})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Allow(bg, "k"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCancelledWaitKeepsTheChange: a Sync call whose context ends while its
// commit is held returns the context's error, and the change still reaches
// disk with its group.
func TestCancelledWaitKeepsTheChange(t *testing.T) {
	db, h, path := openHooked(t, Options{})
	h.hold = make(chan struct{})
	l := mustLimiter(t, db, "l")
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error)
	go func() {
		r, err := l.AllowN(ctx, "k", 7)
		require.True(t, r.Allowed)
		done <- err
	}()
	waitFor(t, func() bool { return db.gen.Load().seq == 2 }) // its commit is held
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	close(h.hold)
	require.NoError(t, db.Close())
	r, err := mustLimiter(t, reopen(t, path), "l").Peek(bg, "k")
	require.NoError(t, err)
	require.Equal(t, bucket.Burst-7, r.Remaining)
}

// TestBatchSharesCommits: an Update's changes, states and records, are
// synced before it returns in Sync mode, in one commit; in Async mode it
// returns at once and the next flush syncs them.
func TestBatchSharesCommits(t *testing.T) {
	for _, d := range []Durability{Sync, Async} {
		t.Run(d.String(), func(t *testing.T) {
			db, h, _ := openHooked(t, Options{Durability: d, FlushInterval: time.Hour})
			l := mustLimiter(t, db, "l")
			before := h.syncs.Load()
			err := db.Update(bg, nil, func(b backend.Batch) error {
				if _, err := b.AllowN(l, "a", 1); err != nil {
					return err
				}
				if _, err := b.Record(l, "b", 2); err != nil {
					return err
				}
				return b.Put([]byte("k/1"), []byte("v"))
			})
			require.NoError(t, err)
			if d == Sync {
				require.Equal(t, before+1, h.syncs.Load(), "one sync for the whole batch, before Update returned")
				return
			}
			require.Equal(t, before, h.syncs.Load(), "Async: no sync on the caller's path")
			require.NoError(t, db.Flush(bg))
			require.Equal(t, before+1, h.syncs.Load(), "the flush synced the batch")
		})
	}
}
