package ratestore_test

import (
	"bufio"
	"bytes"
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
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/redisstore"
)

// The key-store crash test runs this test binary again as a child (see
// TestMain) that admits and finishes requests on one key in Sync mode (or
// on Redis) until it is killed. These name its database (or Redis URL) and
// the key's secret; the backend is crashBackendEnv's.
const (
	keysCrashPathEnv   = "RATESTORE_KEYS_CRASH_CHILD_PATH"
	keysCrashSecretEnv = "RATESTORE_KEYS_CRASH_CHILD_SECRET"
	keysCrashWorkers   = 8
	keysCrashReserve   = 100 // R: held by every Admit
	keysCrashTokens    = 37  // T: charged by every Finish, in place of R
	keysCrashRounds    = 5
)

// keysCrashPolicy is the key's policy: one 5-hour window that nothing
// fills, no request rate, no concurrency cap.
var keysCrashPolicy = keystore.Policy{Windows: []keystore.Window{{Limit: 1 << 40, Window: 5 * time.Hour}}}

// keysCrashLockTTL is how long the locks of a killed child keep the key
// from the next one, on Redis: real time, in Redis.
const keysCrashLockTTL = 300 * time.Millisecond

// keysCrashOpen opens the key store at where with a clock that never moves
// (no usage ever expires, no lease ever ends): a database of backend (bolt
// or badger) at that path in Sync mode, or, for backend "redis", the key
// store in the Redis at that URL. close closes what it opened.
func keysCrashOpen(where, backend string) (ks *keystore.Store, close func() error, err error) {
	now := newClock().Now
	if backend == "redis" {
		rdb, err := redisstore.Open(context.Background(), where, redisstore.Options{Now: now, Timeout: 10 * time.Second, LockTTL: keysCrashLockTTL})
		if err != nil {
			return nil, nil, err
		}
		if ks, err = keystore.Open(rdb, keystore.Options{}); err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return ks, rdb.Close, nil
	}
	db, err := ratestore.Open(where, ratestore.Options{Backend: backendNamed(backend), Durability: ratestore.Sync, Now: now})
	if err != nil {
		return nil, nil, err
	}
	if ks, err = keystore.Open(db, keystore.Options{}); err != nil {
		db.Close()
		return nil, nil, err
	}
	return ks, db.Close, nil
}

// keysCrashChild reopens the key store at where and, in keysCrashWorkers
// goroutines, admits requests reserving R and finishes them charging T.
// Worker w prints "a w n" once its n-th Admit has returned and "f w n"
// once that admission's Finish has returned: in Sync mode, once each is on
// disk. Any error ends the process with status 2, which the parent
// reports: only SIGKILL may end it.
func keysCrashChild(where, backend, secret string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "keystore crash child:", err)
		os.Exit(2)
	}
	ks, _, err := keysCrashOpen(where, backend)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	ack := func(op byte, w, n int) {
		mu.Lock()
		fmt.Fprintf(out, "%c %d %d\n", op, w, n)
		out.Flush()
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := range keysCrashWorkers {
		wg.Go(func() {
			for n := 1; ; n++ {
				a, err := ks.Admit(ctx, secret, keystore.Request{Reserve: keysCrashReserve})
				if err != nil {
					fail(err)
				}
				ack('a', w, n)
				if _, err := a.Finish(ctx, keysCrashTokens); err != nil {
					fail(err)
				}
				ack('f', w, n)
			}
		})
	}
	wg.Wait() // never: the parent kills the process
}

// keysCrashAcks is what the child acknowledged in one round: per worker,
// the last admission and the last finish it printed.
type keysCrashAcks struct {
	admitted, finished [keysCrashWorkers]int64
	lines              int
}

func (a *keysCrashAcks) add(t *testing.T, line string) {
	var op string
	var w, n int64
	_, err := fmt.Sscan(line, &op, &w, &n)
	require.NoError(t, err, "child printed %q", line)
	require.True(t, w >= 0 && w < keysCrashWorkers && (op == "a" || op == "f"), "child printed %q", line)
	if op == "a" {
		a.admitted[w] = max(a.admitted[w], n)
	} else {
		a.finished[w] = max(a.finished[w], n)
	}
	a.lines++
}

// TestKeystoreCrashKeepsAcknowledgedUsage kills a process in the middle of
// Admit and Finish calls on one key in Sync mode (SIGKILL: no Close, no
// deferred code), several times over the same database, and checks after
// each kill that the key's usage is exactly what some prefix of each
// worker's calls, containing every acknowledged one, adds up to:
//
//   - LifetimeTokens counts every acknowledged Finish, and at most one more
//     per worker; it is a multiple of T (Finish's record and its window
//     change are in one commit), which tells how many Finishes committed;
//   - the window's usage is T per committed Finish plus R per committed
//     Admit not finished: a reservation acknowledged and not finished stays
//     charged (never under-charged), and nothing beyond the one call per
//     worker that can have been in flight is charged (never over-charged);
//   - the slots held are exactly those of the Admits committed and not
//     finished.
//
// Each round starts from the usage the previous one left, read the same
// way. The clock is fixed, so no usage expires between rounds. On Redis
// (Open on a redisstore.DB), where each change is acknowledged once its commit script
// has run, the same must hold; a killed child's locks keep the key from
// the next child until they expire (keysCrashLockTTL). Like
// TestCrashKeepsAcknowledgedChanges, this checks what a process crash
// leaves (the OS keeps what was written), not a power cut.
func TestKeystoreCrashKeepsAcknowledgedUsage(t *testing.T) {
	for _, backend := range []string{ratestore.Bolt.String(), badger.Backend.String(), "redis"} {
		t.Run(backend, func(t *testing.T) {
			where := filepath.Join(t.TempDir(), "db")
			if backend == "redis" {
				where = redistest.Start(t).URL()
			}
			ks, closeStore, err := keysCrashOpen(where, backend)
			require.NoError(t, err)
			k, secret, err := ks.Create(ctx, keystore.Spec{Name: "crash", Policy: keysCrashPolicy})
			require.NoError(t, err)
			require.NoError(t, closeStore())

			var used, lifetime, inflight int64 // what the previous rounds left
			for round := range keysCrashRounds {
				// Kill after a different number of acknowledgements each
				// round, so the kill lands at different points.
				kill := 100 + round*300
				acks := keysCrashRun(t, where, backend, secret, kill)

				ks, closeStore, err := keysCrashOpen(where, backend)
				require.NoError(t, err)
				got, err := ks.Get(ctx, k.ID)
				require.NoError(t, err)
				u, err := ks.Usage(ctx, k.ID)
				require.NoError(t, err)
				require.NoError(t, closeStore())
				require.Len(t, u.Windows, 1)

				var finAcked, admAcked, pending int64 // pending: acknowledged admissions not finished
				for w := range keysCrashWorkers {
					a, f := acks.admitted[w], acks.finished[w]
					require.True(t, a == f || a == f+1, "worker %d: admission %d acknowledged, finish %d", w, a, f)
					finAcked += f
					admAcked += a
					pending += a - f
				}
				const R, T, W = keysCrashReserve, keysCrashTokens, keysCrashWorkers
				dLife, dUsed := got.LifetimeTokens-lifetime, u.Windows[0].Used-used
				t.Logf("round %d: %d lines, %d admits and %d finishes acknowledged; lifetime +%d, window +%d",
					round, acks.lines, admAcked, finAcked, dLife, dUsed)

				// The brief's bounds, with min(R, T) for an acknowledged
				// admission whose Finish may have committed unacknowledged.
				require.GreaterOrEqual(t, dLife, finAcked*T, "an acknowledged Finish was lost")
				require.LessOrEqual(t, dLife, (finAcked+W)*T, "more Finishes than could have run")
				require.GreaterOrEqual(t, dUsed, finAcked*T+pending*min(R, T), "usage under-charged")
				require.LessOrEqual(t, dUsed, (admAcked+W)*max(R, T), "usage over-charged")

				// Exactly: the Finishes that committed, then the
				// admissions that committed and were not finished.
				require.Zero(t, dLife%T, "LifetimeTokens +%d is not a multiple of %d", dLife, T)
				finished := dLife / T
				require.Zero(t, (dUsed-finished*T)%R, "window +%d is not %d finishes of %d plus reservations of %d: "+
					"a Finish's window change and its record (LifetimeTokens) were not committed together", dUsed, finished, T, R)
				reserved := (dUsed - finished*T) / R
				require.GreaterOrEqual(t, reserved, int64(0), "window +%d is under the %d finishes committed", dUsed, finished)
				require.GreaterOrEqual(t, finished+reserved, admAcked, "an acknowledged admission is charged neither R nor T")
				// Per worker: one Admit past its last acknowledgement if
				// it was not in flight, and one Finish past it.
				require.LessOrEqual(t, finished+reserved, admAcked+(W-pending), "more admissions than could have run")
				require.LessOrEqual(t, reserved, int64(W), "more reservations held than workers")
				// The admissions of the dead process hold their slots until
				// their leases end (never here: the clock is fixed), each
				// committed with its reservation and freed with its Finish.
				require.EqualValues(t, inflight+reserved, u.InFlight, "slots held: not those of the committed, unfinished admissions")

				used, lifetime, inflight = u.Windows[0].Used, got.LifetimeTokens, int64(u.InFlight)
			}
		})
	}
}

// keysCrashRun runs one child on the key store at where, kills it once it
// has acknowledged kill operations, and returns every acknowledgement it
// printed. A child that exits on its own fails the test.
func keysCrashRun(t *testing.T, where, backend, secret string, kill int) *keysCrashAcks {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), keysCrashPathEnv+"="+where, crashBackendEnv+"="+backend,
		keysCrashSecretEnv+"="+secret)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	acks := &keysCrashAcks{}
	lines := bufio.NewScanner(stdout)
	for acks.lines < kill && lines.Scan() {
		acks.add(t, lines.Text())
	}
	killed := acks.lines >= kill
	if killed {
		require.NoError(t, cmd.Process.Kill())
	}
	for lines.Scan() { // acknowledgements printed before the kill landed
		acks.add(t, lines.Text())
	}
	werr := cmd.Wait()
	require.True(t, killed, "the child ended on its own after %d acknowledgements (%v): %s", acks.lines, werr, stderr.String())
	// Killed by the signal, not exited in the meantime (an error of its own).
	require.Equal(t, -1, cmd.ProcessState.ExitCode(), "the child exited before the kill (%v): %s", cmd.ProcessState, stderr.String())
	return acks
}
