//go:build linux

package ratestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/childtest"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
	"github.com/ratestore/ratestore/strategies"
)

// The full-disk test runs each backend in a child process (this test
// binary again, running TestFullDiskChild) on a small tmpfs, so that a
// SIGBUS or a panic is a failed test rather than a lost run.
const (
	fullDiskDirEnv     = "RATESTORE_FULLDISK_DIR"
	fullDiskBackendEnv = "RATESTORE_FULLDISK_BACKEND"
	fullDiskLeaveEnv   = "RATESTORE_FULLDISK_LEAVE"
	fullDiskWorkers    = 8
	// fullDiskMaxWrites bounds the filling: a store that never reports the
	// disk full fails the test instead of running forever.
	fullDiskMaxWrites = 400_000
)

// fullDiskBucket never refills in the test's time, so every key taken once
// keeps a stored state: Remaining is Burst-1 exactly when the write is on
// disk.
var fullDiskBucket = strategies.TokenBucket{Rate: 1e-6, Burst: 1 << 40}

// fullDiskSize is the tmpfs of each backend: bolt preallocates its log in
// 4 MiB chunks; badger refuses writes while fewer bytes are free than its
// memory-mapped files may still touch (tens of MiB, see badgerstore).
var fullDiskSize = map[ratestore.Backend]string{ratestore.Bolt: "32m", badger.Backend: "128m"}

// fullDiskFileLimit is the file size limit (RLIMIT_FSIZE) of the rootless
// variant: above bolt's first log chunk, below what its checkpoint of the
// writes needs.
const fullDiskFileLimit = 5 << 20

// TestFullDisk fills a small file system with acknowledged Sync writes
// until they fail, and checks that the process survives (no SIGBUS, no
// panic), that writes succeed again in the same process once space is
// freed, and that every acknowledged write is there after a reopen. It
// needs to mount a tmpfs (root, or CAP_SYS_ADMIN) and skips otherwise;
// bolt/rlimit, which any user can run, stands for a full disk with a file
// size limit (writes fail with EFBIG instead of ENOSPC; "freeing space"
// raises the limit). badger has no rootless variant: its files are sized
// when created, so a size limit fails its Open rather than its writes.
//
// Which bolt write fails first (the log's growth, or a checkpoint into the
// bbolt file) depends on timing; either must recover.
func TestFullDisk(t *testing.T) {
	for _, c := range []struct {
		name    string
		backend ratestore.Backend
		leave   int64 // free bytes the filler leaves, beyond badger's reserve; -1: RLIMIT_FSIZE, no tmpfs
	}{
		{"bolt/rlimit", ratestore.Bolt, -1},
		{"bolt", ratestore.Bolt, 0},
		{"badger", badger.Backend, 256 << 10},
	} {
		backend := c.backend
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.leave >= 0 {
				mount(t, dir, fullDiskSize[backend])
			}
			childtest.Run(t, "TestFullDiskChild", fullDiskDirEnv+"="+dir, fullDiskBackendEnv+"="+backend.String(),
				fullDiskLeaveEnv+"="+strconv.FormatInt(c.leave, 10))
		})
	}
}

// mount mounts a tmpfs of size at dir, unmounted when t ends, or skips t
// if this process may not mount.
func mount(t *testing.T, dir, size string) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v): the full-disk test needs root or CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// TestFullDiskChild is the child of TestFullDisk; run on its own it skips.
func TestFullDiskChild(t *testing.T) {
	dir, backend := os.Getenv(fullDiskDirEnv), backendNamed(os.Getenv(fullDiskBackendEnv))
	if dir == "" {
		t.Skip("the child process of TestFullDisk")
	}
	path := filepath.Join(dir, "db")
	opts := ratestore.Options{Backend: backend, Now: newClock().Now}
	db, err := ratestore.Open(path, opts)
	require.NoError(t, err)
	l, err := db.Limiter("disk", fullDiskBucket)
	require.NoError(t, err)

	// Leave little room: bolt fills its preallocated log and then cannot
	// grow its files; badger starts refusing writes close to its reserve.
	leave, err := strconv.ParseInt(os.Getenv(fullDiskLeaveEnv), 10, 64)
	require.NoError(t, err)
	if backend == badger.Backend {
		mt := badgerstore.Options(path, nil).MemTableSize
		leave += 6 * mt
	}
	// free makes room again.
	var free func()
	wantErr := syscall.ENOSPC
	if leave < 0 {
		var old syscall.Rlimit
		require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old))
		limit := old
		limit.Cur = min(old.Cur, fullDiskFileLimit)
		require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit))
		free = func() { require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)) }
		wantErr = syscall.EFBIG
	} else {
		filler := filepath.Join(dir, "filler")
		fill(t, filler, freeBytes(t, dir)-leave)
		free = func() { require.NoError(t, os.Remove(filler)) }
	}

	// Fill the rest with Sync writes, one new key each, until they fail.
	var (
		mu     sync.Mutex
		acked  []string
		failed = map[string]error{}

		lastErr error
		next    int
		wg      sync.WaitGroup
	)
	for range fullDiskWorkers {
		wg.Go(func() {
			for {
				mu.Lock()
				if lastErr != nil || next >= fullDiskMaxWrites {
					mu.Unlock()
					return
				}
				key := fmt.Sprint("a", next)
				next++
				mu.Unlock()
				_, err := l.Allow(ctx, key)
				mu.Lock()
				if err != nil {
					failed[key] = err
					lastErr = err
				} else {
					acked = append(acked, key)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Error(t, lastErr, "%d writes on a nearly full disk, none failed", len(acked))
	fmt.Printf("SUMMARY %s: %d acknowledged writes, then: %v\n", backend, len(acked), lastErr)
	// bbolt reports a failed growth of its file with the cause's text only
	// (%s), so the cause is matched by text where errors.Is cannot.
	require.True(t, errors.Is(lastErr, wantErr) || strings.Contains(lastErr.Error(), wantErr.Error()),
		"%v: not %v", lastErr, wantErr)

	// Still full: writes keep failing, and nothing crashes.
	for i := range 20 {
		key := fmt.Sprint("b", i)
		if _, err := l.Allow(ctx, key); err != nil {
			failed[key] = err
		}
	}
	// A call that failed without ErrUncertain changed nothing, in memory
	// as on disk (checked again after the reopen).
	for key, failure := range failed {
		if r, err := l.Peek(ctx, key); err == nil && !errors.Is(failure, ratestore.ErrUncertain) {
			require.Equal(t, fullDiskBucket.Burst, r.Remaining, "key %s: a write that failed without ErrUncertain changed the state: %v", key, failure)
		}
	}

	// Space freed: writes succeed again without a restart (a commit after
	// a failed one also retries what failed).
	free()
	for i := range 100 {
		key := fmt.Sprint("c", i)
		_, err := l.Allow(ctx, key)
		require.NoError(t, err, "write %d after space was freed", i)
		acked = append(acked, key)
	}
	require.NoError(t, db.Close())

	db, err = ratestore.Open(path, opts)
	require.NoError(t, err)
	defer db.Close()
	l, err = db.Limiter("disk", fullDiskBucket)
	require.NoError(t, err)
	for _, key := range acked {
		r, err := l.Peek(ctx, key)
		require.NoError(t, err)
		require.Equal(t, fullDiskBucket.Burst-1, r.Remaining, "key %s: an acknowledged write was lost", key)
	}
	unchanged := 0
	for key, failure := range failed {
		r, err := l.Peek(ctx, key)
		require.NoError(t, err)
		require.GreaterOrEqual(t, r.Remaining, fullDiskBucket.Burst-1, "key %s: a failed write was applied twice", key)
		if !errors.Is(failure, ratestore.ErrUncertain) {
			require.Equal(t, fullDiskBucket.Burst, r.Remaining, "key %s: a write that failed without ErrUncertain is on disk", key)
			unchanged++
		}
	}
	fmt.Printf("SUMMARY %s: %d acknowledged writes read back after reopen; %d failed writes checked: %d said nothing changed (and nothing had), %d ErrUncertain\n",
		backend, len(acked), len(failed), unchanged, len(failed)-unchanged)
}

// freeBytes is the free space of the file system holding dir.
func freeBytes(t *testing.T, dir string) int64 {
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	return int64(st.Bavail) * st.Bsize
}

// fill writes a file of size bytes (as much as fits if that is more).
func fill(t *testing.T, path string, size int64) {
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	buf := bytes.Repeat([]byte{0xA5}, 64<<10)
	for size > 0 {
		n, err := f.Write(buf[:min(int64(len(buf)), size)])
		size -= int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		require.NoError(t, err)
	}
}
