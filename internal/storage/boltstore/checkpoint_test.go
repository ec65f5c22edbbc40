package boltstore

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/storage"
)

// waitBackground waits for the background checkpoint, if one runs, and
// takes its outcome in.
func waitBackground(s *Store) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.settleBackground(true)
}

// pauseBackground makes the next background checkpoint stop once bbolt
// holds it: reached is closed then, and it goes on when release is closed.
func pauseBackground(s *Store) (reached, release chan struct{}) {
	reached, release = make(chan struct{}), make(chan struct{})
	s.afterBolt = func() {
		close(reached)
		<-release
	}
	return reached, release
}

// TestBackgroundCheckpoint: commits, Syncs, Gets and Scans go on while a
// checkpoint writes bbolt; once it ends, the overlay and the log keep
// exactly what was written meanwhile, and a crash at any of those points
// reopens to the last state.
func TestBackgroundCheckpoint(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	s.ckptKeys, s.ckptPerPage = 3, 0
	reached, release := pauseBackground(s)

	commitSync(t, s, put("a", "1"), put("b", "2"), del("c"), put("d", "4"))
	<-reached
	require.NotNil(t, s.bg, "the Sync started a background checkpoint")
	commitSync(t, s, put("a", "1x"), put("e", "5"), put("d", "4"))
	want := map[string]string{"a": "1x", "b": "2", "d": "4", "e": "5"}
	requireState(t, s, want)
	requireState(t, reopenCopy(t, path), want) // a crash with bbolt ahead of the log

	close(release)
	waitBackground(s)
	require.NoError(t, s.bgErr)
	require.Equal(t, []string{"a", "d", "e"}, s.ov.keys(), "what was written meanwhile")
	require.Nil(t, s.ov.frozen)
	require.Positive(t, s.log.Size(), "the second commit's record is kept")
	requireState(t, s, want)
	requireState(t, reopenCopy(t, path), want) // a crash after the log was rewritten

	s.afterBolt = nil
	commitSync(t, s, del("a"))
	s.abandon()
	delete(want, "a")
	requireState(t, open(t, path), want)
}

// TestForegroundAfterBackgroundFailed: a Sync after a failed background
// checkpoint checkpoints in the foreground.
func TestForegroundAfterBackgroundFailed(t *testing.T) {
	s := open(t, dbPath(t))
	noCheckpoints(s)
	require.NoError(t, s.Commit([]storage.Op{put("a", "1")}))
	s.wmu.Lock()
	s.bgErr = os.ErrDeadlineExceeded
	s.wmu.Unlock()
	require.NoError(t, s.Sync())
	require.NoError(t, s.bgErr)
	require.Zero(t, s.ov.len())
	require.Zero(t, s.log.Size())
}

// reopenCopy opens a copy of the database's two files as they are on
// disk now, the state a crash would leave.
func reopenCopy(t *testing.T, path string) *Store {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "db")
	for _, suffix := range []string{"", "-wal"} {
		copyFile(t, path+suffix, dst+suffix)
	}
	return open(t, dst)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// TestOverlayGenerations: a frozen generation is read under the new one,
// walked with it in order, and, if its checkpoint failed, moves back under
// the keys written since.
func TestOverlayGenerations(t *testing.T) {
	var o overlay
	o.set([]byte("a"), []byte("1"))
	o.set([]byte("b"), nil)
	o.set([]byte("c"), []byte("3"))
	frozen, sorted, added := o.freeze()
	keys := merge(sorted, added)
	values := valuesOf(frozen, keys)
	require.Equal(t, []string{"a", "b", "c"}, keys)
	require.Equal(t, [][]byte{[]byte("1"), nil, []byte("3")}, values)
	o.set([]byte("c"), []byte("3x"))
	o.set([]byte("d"), []byte(""))

	for k, want := range map[string]string{"a": "1", "c": "3x", "d": ""} {
		v, ok := o.get(k)
		require.True(t, ok)
		require.Equal(t, want, string(v), k)
		require.NotNil(t, v, k)
	}
	v, ok := o.get("b")
	require.True(t, ok, "a delete is held")
	require.Nil(t, v)
	require.Equal(t, 5, o.len())
	require.Equal(t, [][]byte{[]byte("1"), nil, []byte("3")}, values, "the frozen values stay as they were")

	w := o.from("b", keys)
	var walked []string
	for k, ok := w.peek(); ok; k, ok = w.peek() {
		walked = append(walked, k)
		w.next(k)
	}
	require.Equal(t, []string{"b", "c", "d"}, walked)

	o.thaw(false)
	require.Nil(t, o.frozen)
	require.Equal(t, []string{"a", "b", "c", "d"}, o.keys())
	v, _ = o.get("c")
	require.Equal(t, "3x", string(v), "the newer value stays")

	o.freeze()
	o.thaw(true)
	require.Zero(t, o.len())
}
