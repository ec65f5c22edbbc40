package ratestore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/strategies"
)

// The crash test runs this test binary again as a child that makes Sync
// calls until it is killed. These name its database and backend.
const (
	crashPathEnv    = "RATESTORE_CRASH_CHILD_PATH"
	crashBackendEnv = "RATESTORE_CRASH_CHILD_BACKEND"
	crashWorkers    = 8
)

var crashBucket = strategies.TokenBucket{Rate: 1e-6, Burst: 1 << 40}

func TestMain(m *testing.M) {
	if path := os.Getenv(crashPathEnv); path != "" {
		crashChild(path, backendNamed(os.Getenv(crashBackendEnv)))
		return
	}
	if path := os.Getenv(leaseCrashPathEnv); path != "" {
		leaseCrashChild(path, backendNamed(os.Getenv(crashBackendEnv)))
		return
	}
	if path := os.Getenv(keysCrashPathEnv); path != "" {
		keysCrashChild(path, os.Getenv(crashBackendEnv), os.Getenv(keysCrashSecretEnv))
		return
	}
	os.Exit(m.Run())
}

// backendNamed is the backend a child is told to open by name.
func backendNamed(name string) ratestore.Backend {
	if name == badger.Backend.String() {
		return badger.Backend
	}
	return ratestore.Bolt
}

// crashChild takes from one key per worker in Sync mode and prints
// "worker count" after each call has returned, that is, once it is on disk.
func crashChild(path string, backend ratestore.Backend) {
	db, err := ratestore.Open(path, ratestore.Options{Backend: backend, Now: newClock().Now})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	l, err := db.Limiter("crash", crashBucket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	crashLoop(func(w int, i int64) (int64, error) {
		_, err := l.Allow(context.Background(), fmt.Sprint("k", w))
		return i, err
	})
}

// crashLoop runs step(w, i) for i = 1, 2, ... in each of crashWorkers
// workers w, and prints "w value" once each step has returned, value being
// what the step says its worker has on disk, until the parent kills the
// process. A step's error ends the process with status 2.
func crashLoop(step func(w int, i int64) (int64, error)) {
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Go(func() {
			for i := int64(1); ; i++ {
				v, err := step(w, i)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintln(out, w, v)
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait() // never: the parent kills the process
}

// killCrashChild runs this test binary as a child with env, reads 400 of
// its "w value" lines, kills it (SIGKILL: no Close, no deferred code), and
// returns each worker's last value acknowledged, those printed before the
// kill landed included.
func killCrashChild(t *testing.T, env ...string) [crashWorkers]int64 {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var acked [crashWorkers]int64
	lines := bufio.NewScanner(stdout)
	for n := 0; n < 400 && lines.Scan(); n++ {
		var w, v int64
		_, err := fmt.Sscan(lines.Text(), &w, &v)
		require.NoError(t, err)
		acked[w] = v
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	for lines.Scan() {
		var w, v int64
		if _, err := fmt.Sscan(lines.Text(), &w, &v); err == nil {
			acked[w] = v
		}
	}
	return acked
}

// TestCrashKeepsAcknowledgedChanges kills a process in the middle of Sync
// calls (SIGKILL: no Close, no deferred code) and checks that every call
// that had returned is in the store, and nothing more than the calls then
// in flight. It shows that the group commit acknowledges only what it has
// committed and that a commit cut short leaves the last committed state
// readable. A killed process leaves the OS page cache behind, so this does
// not exercise the fsync itself (a power cut would); that every commit is
// synced before its callers are told is what commit.go guarantees.
func TestCrashKeepsAcknowledgedChanges(t *testing.T) {
	for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		t.Run(backend.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			acked := killCrashChild(t, crashPathEnv+"="+path, crashBackendEnv+"="+backend.String())

			db, err := ratestore.Open(path, ratestore.Options{Backend: backend, Now: newClock().Now})
			require.NoError(t, err)
			defer db.Close()
			l, err := db.Limiter("crash", crashBucket)
			require.NoError(t, err)
			for w := range crashWorkers {
				r, err := l.Peek(ctx, fmt.Sprint("k", w))
				require.NoError(t, err)
				taken := crashBucket.Burst - r.Remaining
				require.GreaterOrEqual(t, taken, acked[w], "worker %d: an acknowledged call was lost", w)
				require.LessOrEqual(t, taken, acked[w]+1, "worker %d: more than its one call in flight", w)
			}
		})
	}
}

// leaseCrashPathEnv names the database of the lease crash test's child.
const leaseCrashPathEnv = "RATESTORE_LEASE_CRASH_CHILD_PATH"

// leaseMax and leaseTTL are the crash test's Concurrency: more slots than
// the child takes, so that every Acquire succeeds.
const (
	leaseMax = 1 << 20
	leaseTTL = time.Hour
)

// leaseCrashChild acquires leases on one key per worker in Sync mode,
// releasing every other one, and prints "worker held" after each call has
// returned: the leases held by the worker then.
func leaseCrashChild(path string, backend ratestore.Backend) {
	db, err := ratestore.Open(path, ratestore.Options{Backend: backend, Now: newClock().Now})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := db.Concurrency("leases", leaseMax, leaseTTL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	held := make([]int64, crashWorkers) // each written by its worker only
	crashLoop(func(w int, i int64) (int64, error) {
		ls, _, err := c.Acquire(context.Background(), fmt.Sprint("k", w))
		if err == nil && ls == nil {
			err = fmt.Errorf("no slot")
		}
		if err == nil && i%2 == 0 {
			err = ls.Release(context.Background())
			held[w]--
		}
		held[w]++
		return held[w], err
	})
}

// TestCrashKeepsLeases kills a process that acquires and releases leases
// in Sync mode: after it, every key holds the leases its worker had been
// told it held (give or take the one call in flight), and once their TTL
// has passed, none. A crash never holds a slot forever.
func TestCrashKeepsLeases(t *testing.T) {
	for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		t.Run(backend.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			acked := killCrashChild(t, leaseCrashPathEnv+"="+path, crashBackendEnv+"="+backend.String())

			clock := newClock()
			db, err := ratestore.Open(path, ratestore.Options{Backend: backend, Now: clock.Now})
			require.NoError(t, err)
			defer db.Close()
			l, err := db.Limiter("leases", strategies.SlidingLog{Limit: leaseMax, Window: leaseTTL})
			require.NoError(t, err)
			for w := range crashWorkers {
				r, err := l.Peek(ctx, fmt.Sprint("k", w))
				require.NoError(t, err)
				held := leaseMax - r.Remaining
				require.GreaterOrEqual(t, held, acked[w], "worker %d: an acknowledged change was lost", w)
				require.LessOrEqual(t, held, acked[w]+1, "worker %d: more than its one call in flight", w)
			}
			clock.Advance(leaseTTL)
			for w := range crashWorkers {
				r, err := l.Peek(ctx, fmt.Sprint("k", w))
				require.NoError(t, err)
				require.EqualValues(t, leaseMax, r.Remaining, "worker %d: the leases ended with their TTL", w)
			}
		})
	}
}
