package boltstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/wal"
	"github.com/ratestore/ratestore/strategies"
)

// abandon closes the store's files the way a crash would leave them: no
// sync, no checkpoint, no log reset. (bbolt's Close writes nothing: its
// committed transactions are on disk already.)
func (s *Store) abandon() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.closed = true
	s.log.Close()
	s.db.Close()
}

func dbPath(t *testing.T) string { return filepath.Join(t.TempDir(), "db") }

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func put(k, v string) storage.Op { return storage.Op{Key: []byte(k), Value: []byte(v)} }
func del(k string) storage.Op    { return storage.Op{Key: []byte(k)} }

func commitSync(t *testing.T, s *Store, ops ...storage.Op) {
	t.Helper()
	require.NoError(t, s.Commit(ops))
	require.NoError(t, s.Sync())
}

// requireState checks Get for every key of want (a missing value: "") and
// that Scan over everything returns exactly want.
func requireState(t *testing.T, s *Store, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, err := s.Get([]byte(k))
		require.NoError(t, err)
		require.Equal(t, v, string(got), "Get(%q)", k)
		require.NotNil(t, got, "Get(%q)", k)
	}
	require.Equal(t, want, scanAll(t, s, "", ""))
}

func scanAll(t *testing.T, s *Store, prefix, start string) map[string]string {
	t.Helper()
	got := map[string]string{}
	var last []byte
	require.NoError(t, s.Scan([]byte(prefix), []byte(start), func(k, v []byte) error {
		require.Positive(t, bytes.Compare(k, last), "keys in order")
		last = bytes.Clone(k)
		got[string(k)] = string(v)
		return nil
	}))
	return got
}

func requireMissing(t *testing.T, s *Store, keys ...string) {
	t.Helper()
	for _, k := range keys {
		v, err := s.Get([]byte(k))
		require.NoError(t, err)
		require.Nil(t, v, "Get(%q)", k)
	}
}

// noCheckpoints makes checkpoints run only when asked (Close, Compact,
// Open): the overlay holds every write.
func noCheckpoints(s *Store) {
	s.ckptKeys, s.ckptBytes = 1<<30, 1<<50
}

func TestReplayAfterAbandon(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	noCheckpoints(s)
	commitSync(t, s, put("a", "1"), put("b", "2"), put("empty", ""))
	commitSync(t, s, put("a", "3"), del("b"))
	s.abandon()

	raw, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	require.Greater(t, len(raw), wal.HeaderSize+16, "the records are in the log")

	s = open(t, path)
	require.Zero(t, s.ov.len(), "replay checkpoints into bbolt")
	require.Zero(t, s.log.Size(), "and resets the log")
	requireState(t, s, map[string]string{"a": "3", "empty": ""})
	requireMissing(t, s, "b")
	require.Equal(t, uint64(2), s.ckptSeq)
}

// TestUnsyncedCommitsReplay: a crash of the process (not the machine)
// keeps what was written to the log even without Sync; nothing requires
// it, but nothing partial appears either.
func TestUnsyncedCommitsReplay(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	commitSync(t, s, put("a", "1"))
	require.NoError(t, s.Commit([]storage.Op{put("a", "2"), put("b", "2")}))
	s.abandon()
	s = open(t, path)
	requireState(t, s, map[string]string{"a": "2", "b": "2"})
}

func TestTombstonesOverBolt(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	commitSync(t, s, put("a", "1"), put("b", "2"), put("c", "3"))
	require.NoError(t, s.Close())

	s = open(t, path)
	noCheckpoints(s)
	commitSync(t, s, del("a"), put("b", "20"), del("never"))
	require.Equal(t, 3, s.ov.len())
	requireMissing(t, s, "a", "never")
	requireState(t, s, map[string]string{"b": "20", "c": "3"})
	s.abandon()

	s = open(t, path)
	requireMissing(t, s, "a", "never")
	requireState(t, s, map[string]string{"b": "20", "c": "3"})
	require.NoError(t, s.Close())
	s = open(t, path)
	requireState(t, s, map[string]string{"b": "20", "c": "3"})
}

// TestOverwrites: a key written many times between checkpoints, with a
// checkpoint in the middle and a delete and a put again at the end.
func TestOverwrites(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	noCheckpoints(s)
	for i := range 50 {
		commitSync(t, s, put("k", fmt.Sprint(i)), put(fmt.Sprint("other", i%3), fmt.Sprint(i)))
		if i == 25 {
			s.wmu.Lock()
			require.NoError(t, s.checkpoint())
			s.wmu.Unlock()
		}
	}
	want := map[string]string{"k": "49", "other0": "48", "other1": "49", "other2": "47"}
	requireState(t, s, want)
	commitSync(t, s, del("k"))
	commitSync(t, s, put("k", "again"))
	want["k"] = "again"
	requireState(t, s, want)
	s.abandon()
	s = open(t, path)
	requireState(t, s, want)
}

// logWith commits three records, abandons the store and returns the log's
// path and where each record ends.
func logWith(t *testing.T) (path string, ends []int64) {
	t.Helper()
	path = dbPath(t)
	s := open(t, path)
	commitSync(t, s, put("base", "0")) // checkpointed by Close
	require.NoError(t, s.Close())
	s = open(t, path)
	for _, op := range []storage.Op{put("a", "1"), put("b", "2"), put("c", "3")} {
		commitSync(t, s, op)
		ends = append(ends, wal.HeaderSize+s.log.Size())
	}
	s.abandon()
	return path, ends
}

func TestTornLastRecord(t *testing.T) {
	t.Run("truncated", func(t *testing.T) {
		// A crash never shortens the log: a file cut short is refused,
		// and Recover keeps what is whole and says so.
		path, ends := logWith(t)
		cut := (ends[1] + ends[2]) / 2
		require.NoError(t, os.Truncate(path+"-wal", cut))
		_, err := Open(path)
		require.ErrorIs(t, err, strategies.ErrCorrupt)
		require.ErrorContains(t, err, path+"-wal")
		s, err := OpenWith(path, Options{Recover: true})
		require.NoError(t, err)
		defer s.Close()
		require.Equal(t, &storage.Recovery{File: path + "-wal", Offset: ends[1], Bytes: cut - ends[1], Truncated: true}, s.Recovery())
		requireState(t, s, map[string]string{"base": "0", "a": "1", "b": "2"})
		requireMissing(t, s, "c")
	})
	t.Run("flipped byte", func(t *testing.T) {
		path, ends := logWith(t)
		flip(t, path+"-wal", ends[2]-1)
		s := open(t, path)
		requireState(t, s, map[string]string{"base": "0", "a": "1", "b": "2"})
		require.Equal(t, &storage.Recovery{File: path + "-wal", Offset: ends[1], Bytes: ends[2] - ends[1], Tail: true}, s.Recovery())
	})
	t.Run("garbage after the last record", func(t *testing.T) {
		path, ends := logWith(t)
		writeAt(t, path+"-wal", ends[2], []byte("\x20\x00\x00\x00 this is not a record at all, just bytes"))
		s := open(t, path)
		want := map[string]string{"base": "0", "a": "1", "b": "2", "c": "3"}
		requireState(t, s, want)
		require.True(t, s.Recovery().Tail, "garbage over the end marker looks like a torn record")
		// The store carries on past the garbage.
		commitSync(t, s, put("d", "4"))
		s.abandon()
		s = open(t, path)
		want["d"] = "4"
		requireState(t, s, want)
	})
}

func flip(t *testing.T, path string, off int64) { flipBits(t, path, off, 1) }

// flipBits xors the byte at off of the file at path with x.
func flipBits(t *testing.T, path string, off int64, x byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[off] ^= x
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestCheckpointedLogDoesNotRollBack: a log whose reset did not reach the
// disk still holds records bbolt already has; replaying them must not undo
// later writes.
func TestCheckpointedLogDoesNotRollBack(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	noCheckpoints(s)
	commitSync(t, s, put("k", "old"), put("x", "1"))
	commitSync(t, s, del("x"))
	stale, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	s.wmu.Lock()
	require.NoError(t, s.checkpoint())
	s.wmu.Unlock()
	commitSync(t, s, put("k", "new"))
	require.NoError(t, s.Close()) // checkpoints "new"

	require.NoError(t, os.WriteFile(path+"-wal", stale, 0o600))
	s = open(t, path)
	requireState(t, s, map[string]string{"k": "new"})
	requireMissing(t, s, "x")
	// And the store numbers on from the checkpoint, not from the stale log.
	commitSync(t, s, put("after", "1"))
	s.abandon()
	s = open(t, path)
	requireState(t, s, map[string]string{"k": "new", "after": "1"})
}

func TestUnknownLogRefused(t *testing.T) {
	for name, header := range map[string][]byte{
		"not ours":  []byte("SOMEFILE\x01\x00\x00\x00\x00\x00\x00\x00"),
		"version 9": []byte("RSTORWAL\x09\x00\x00\x00\x00\x00\x00\x00"),
	} {
		t.Run(name, func(t *testing.T) {
			path, _ := logWith(t)
			orig, err := os.ReadFile(path + "-wal")
			require.NoError(t, err)
			orig = orig[:len(header)]
			writeAt(t, path+"-wal", 0, header)
			dbBefore, err := os.ReadFile(path)
			require.NoError(t, err)
			logBefore, err := os.ReadFile(path + "-wal")
			require.NoError(t, err)

			_, err = Open(path)
			require.Error(t, err)
			require.Contains(t, err.Error(), path+"-wal")
			if name == "not ours" {
				require.ErrorIs(t, err, wal.ErrNotLog)
			} else {
				require.ErrorIs(t, err, wal.ErrVersion)
			}

			dbAfter, err := os.ReadFile(path)
			require.NoError(t, err)
			logAfter, err := os.ReadFile(path + "-wal")
			require.NoError(t, err)
			require.True(t, bytes.Equal(dbBefore, dbAfter), "bbolt file unchanged")
			require.True(t, bytes.Equal(logBefore, logAfter), "log unchanged")

			// The lock was released: with the header put back, every
			// record is still there.
			writeAt(t, path+"-wal", 0, orig)
			s := open(t, path)
			requireState(t, s, map[string]string{"base": "0", "a": "1", "b": "2", "c": "3"})
		})
	}
}

func TestCloseLeavesHeaderOnly(t *testing.T) {
	path := dbPath(t)
	s, err := Open(path)
	require.NoError(t, err)
	commitSync(t, s, put("a", "1"))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second Close is a no-op")
	require.ErrorIs(t, s.Commit([]storage.Op{put("b", "2")}), errClosed)
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	require.Equal(t, int64(wal.HeaderSize+8), fi.Size(), "the header and an end marker")
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestGetReturnsCopies: a value handed out by Get, from the overlay or from
// bbolt, is the caller's to change.
func TestGetReturnsCopies(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	commitSync(t, s, put("bolt", "b"))
	require.NoError(t, s.Close())
	s = open(t, path)
	noCheckpoints(s)
	commitSync(t, s, put("overlay", "o"))
	for _, k := range []string{"bolt", "overlay"} {
		v, err := s.Get([]byte(k))
		require.NoError(t, err)
		v[0] = 'X'
		again, err := s.Get([]byte(k))
		require.NoError(t, err)
		require.Equal(t, k[:1], string(again))
	}
}

func TestCommitRefusesWhatBoltWould(t *testing.T) {
	s := open(t, dbPath(t))
	require.Error(t, s.Commit([]storage.Op{put("ok", "1"), put("", "x")}))
	require.Error(t, s.Commit([]storage.Op{put(string(make([]byte, 40000)), "x")}))
	require.Zero(t, s.log.Size(), "nothing logged")
	requireMissing(t, s, "ok")
}

// TestCheckpointThresholds drives the checkpoint policy with a fake clock.
func TestCheckpointThresholds(t *testing.T) {
	s := open(t, dbPath(t))
	s.ckptKeys, s.ckptPerPage, s.ckptBytes = 10, 0, 1<<30

	for i := range 9 {
		commitSync(t, s, put(fmt.Sprint("k", i), "v"))
	}
	require.Equal(t, 9, s.ov.len(), "below the key threshold")
	commitSync(t, s, put("k9", "v"))
	waitBackground(s)
	require.Zero(t, s.ov.len(), "checkpointed in the background")
	require.Zero(t, s.log.Size())

	// The hard limit applies in Commit, in the foreground.
	for i := range 4*10 - 1 {
		require.NoError(t, s.Commit([]storage.Op{put(fmt.Sprint("h", i), "v")}))
	}
	require.Equal(t, 39, s.ov.len())
	require.NoError(t, s.Commit([]storage.Op{put("h39", "v")}))
	require.Zero(t, s.ov.len(), "checkpointed by Commit at 4x")

	// The log size threshold.
	s.ckptKeys, s.ckptBytes = 1<<30, 100
	commitSync(t, s, put("big", string(make([]byte, 100))))
	waitBackground(s)
	require.Zero(t, s.ov.len())
	require.Len(t, scanAll(t, s, "", ""), 10+40+1)

	// The key threshold grows with the file: checkpointPerPage keys a page.
	s.ckptKeys, s.ckptPerPage, s.ckptBytes = 10, 4, 1<<30
	require.Positive(t, s.pages)
	require.Equal(t, max(10, 4*s.pages), s.keyLimit())
	s.pages = 1 << 20
	require.Equal(t, checkpointMaxKeys, s.keyLimit(), "up to the ceiling")
}

// TestSyncAfterLogFailureCheckpoints: once a log write or sync failed, Sync
// makes the changes durable through bbolt instead.
func TestSyncAfterLogFailureCheckpoints(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	noCheckpoints(s)
	require.NoError(t, s.Commit([]storage.Op{put("a", "1")}))
	s.logBad = true
	require.NoError(t, s.Sync())
	require.False(t, s.logBad)
	require.Zero(t, s.ov.len())
	s.abandon()
	s = open(t, path)
	requireState(t, s, map[string]string{"a": "1"})
}

// TestScanMergesOverlay: entries in bbolt, in the overlay and deleted by
// the overlay, across several pages, with fn writing ahead of the scan.
func TestScanMergesOverlay(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	const n = storage.PageSize*3 + 10
	var bolt []storage.Op
	for i := 0; i < n; i += 2 { // even keys in bbolt
		bolt = append(bolt, put(fmt.Sprintf("p/%04d", i), "bolt"))
	}
	commitSync(t, s, bolt...)
	require.NoError(t, s.Close())

	s = open(t, path)
	noCheckpoints(s)
	var ops []storage.Op
	for i := 1; i < n; i += 2 { // odd keys in the overlay
		ops = append(ops, put(fmt.Sprintf("p/%04d", i), "overlay"))
	}
	for i := 0; i < n; i += 10 { // every 10th key deleted, wherever it is
		ops = append(ops, del(fmt.Sprintf("p/%04d", i)), del(fmt.Sprintf("p/%04d", i+5)))
	}
	// Overwrites of bbolt keys, at and around page boundaries.
	for _, i := range []int{storage.PageSize - 2, storage.PageSize, storage.PageSize + 2, 2 * storage.PageSize} {
		ops = append(ops, put(fmt.Sprintf("p/%04d", i), "both"))
	}
	ops = append(ops, put("o/before", "x"), put("q/after", "x"))
	commitSync(t, s, ops...)

	want := map[string]string{}
	for _, batch := range [][]storage.Op{bolt, ops} {
		applyModel(want, batch)
	}
	delete(want, "o/before")
	delete(want, "q/after")
	require.Equal(t, want, scanAll(t, s, "p/", ""))
	require.Equal(t, len(want)-len(scanAll(t, s, "p/", "p/0500")), countBelow(want, "p/0500"))

	// fn writes ahead of the scan: a new key, a delete of a later key and
	// an overwrite of a later key are all seen (or not seen) by later pages.
	var seen []string
	require.NoError(t, s.Scan([]byte("p/"), nil, func(k, v []byte) error {
		seen = append(seen, string(k)+"="+string(v))
		if string(k) == "p/0001" {
			return s.Commit([]storage.Op{
				put("p/0600x", "written by fn"),
				del("p/0702"),
				put("p/0703", "rewritten by fn"),
			})
		}
		return nil
	}))
	require.Contains(t, seen, "p/0600x=written by fn")
	require.Equal(t, "bolt", want["p/0702"])
	require.NotContains(t, seen, "p/0702=bolt")
	require.Equal(t, "overlay", want["p/0703"])
	require.Contains(t, seen, "p/0703=rewritten by fn")
	require.Len(t, seen, len(want)+1-1, "one key added, one deleted")
}

// applyModel applies ops to a map standing for the store.
func applyModel(m map[string]string, ops []storage.Op) {
	for _, op := range ops {
		if op.Value == nil {
			delete(m, string(op.Key))
		} else {
			m[string(op.Key)] = string(op.Value)
		}
	}
}

func countBelow(m map[string]string, bound string) int {
	n := 0
	for k := range m {
		if k < bound {
			n++
		}
	}
	return n
}

// TestScanMatchesModel runs random writes, checkpoints and reopenings
// against a map and compares random scans with it.
func TestScanMatchesModel(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	noCheckpoints(s)
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]string{}
	key := func() string { return fmt.Sprintf("%c/%03d", 'a'+rng.IntN(3), rng.IntN(700)) }
	for round := range 30 {
		var ops []storage.Op
		for range rng.IntN(300) {
			k := key()
			if rng.IntN(4) == 0 {
				ops = append(ops, del(k))
			} else {
				ops = append(ops, put(k, fmt.Sprint(round, rng.IntN(1000))))
			}
		}
		applyModel(model, ops)
		commitSync(t, s, ops...)
		switch rng.IntN(5) {
		case 0:
			s.wmu.Lock()
			require.NoError(t, s.checkpoint())
			s.wmu.Unlock()
		case 1:
			s.abandon()
			s = open(t, path)
			noCheckpoints(s)
		}
		prefix := string(rune('a' + rng.IntN(3)))
		start := key()
		want := map[string]string{}
		for k, v := range model {
			if k[:1] == prefix && k >= start {
				want[k] = v
			}
		}
		require.Equal(t, want, scanAll(t, s, prefix, start), "round %d", round)
	}
	requireState(t, s, model)
}

// TestConcurrentGets reads while another goroutine commits, syncs and
// checkpoints (run with -race); every value read is one that was written.
func TestConcurrentGets(t *testing.T) {
	s := open(t, dbPath(t))
	s.ckptKeys, s.ckptPerPage = 8, 0
	keys := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				for _, k := range keys {
					v, err := s.Get([]byte(k))
					require.NoError(t, err)
					if v != nil {
						require.True(t, bytes.HasPrefix(v, []byte(k+"-")), "%q", v)
					}
				}
				require.NoError(t, s.Scan(nil, nil, func(k, v []byte) error {
					require.True(t, bytes.HasPrefix(v, append(bytes.Clone(k), '-')))
					return nil
				}))
			}
		})
	}
	for i := range 300 {
		var ops []storage.Op
		for j, k := range keys {
			if (i+j)%7 == 0 {
				ops = append(ops, del(k))
			} else {
				ops = append(ops, put(k, fmt.Sprintf("%s-%d", k, i)))
			}
		}
		ops = append(ops, put(fmt.Sprint("n", i%20), fmt.Sprint("n", i%20, "-")))
		commitSync(t, s, ops...)
	}
	close(done)
	wg.Wait()
}

func TestCompactIncludesOverlay(t *testing.T) {
	s := open(t, dbPath(t))
	noCheckpoints(s)
	commitSync(t, s, put("a", "1"), put("b", "2"))
	commitSync(t, s, del("a"))
	dst := filepath.Join(t.TempDir(), "compact")
	require.NoError(t, s.Compact(dst))
	c := open(t, dst)
	requireState(t, c, map[string]string{"b": "2"})
	requireMissing(t, c, "a")
}

func TestOverlayKeysSorted(t *testing.T) {
	var o overlay
	rng := rand.New(rand.NewPCG(3, 4))
	var all []string
	for range 20 {
		for range rng.IntN(50) {
			k := fmt.Sprint(rng.IntN(500))
			o.set([]byte(k), []byte("v"))
			all = append(all, k)
		}
		want := slices.Compact(slices.Sorted(slices.Values(all)))
		start := fmt.Sprint(rng.IntN(500))
		w := o.from(start, nil)
		walked := []string{}
		for k, ok := w.peek(); ok; k, ok = w.peek() {
			walked = append(walked, k)
			w.next(k)
		}
		i, _ := slices.BinarySearch(want, start)
		require.Equal(t, want[i:], walked, "from %q", start)
		if rng.IntN(3) == 0 {
			require.Equal(t, want, o.keys())
		}
	}
}

// TestLogOfAnotherDatabaseRefused: a log left behind by a database whose
// bbolt file is gone is not replayed into a new file at the same path.
func TestLogOfAnotherDatabaseRefused(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	noCheckpoints(s)
	commitSync(t, s, put("old", "state"))
	s.abandon()
	require.NoError(t, os.Remove(path))

	_, err := Open(path)
	require.ErrorContains(t, err, "belongs to another database")
	require.ErrorContains(t, err, path+"-wal")

	require.NoError(t, os.Remove(path+"-wal"))
	s = open(t, path)
	requireMissing(t, s, "old")
}
