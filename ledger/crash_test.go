package ledger_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/redisstore"
)

const (
	crashWhereEnv   = "RATESTORE_LEDGER_CRASH_WHERE"
	crashBackendEnv = "RATESTORE_LEDGER_CRASH_BACKEND"
	crashSecretEnv  = "RATESTORE_LEDGER_CRASH_SECRET"
	crashRoundEnv   = "RATESTORE_LEDGER_CRASH_ROUND"
	crashWorkers    = 8
	crashTokens     = 37 // charged by every request
	crashCost       = pricing.USD(1234)
	crashRounds     = 4
)

func TestMain(m *testing.M) {
	if where := os.Getenv(crashWhereEnv); where != "" {
		round, _ := strconv.Atoi(os.Getenv(crashRoundEnv))
		crashChild(where, os.Getenv(crashBackendEnv), os.Getenv(crashSecretEnv), round)
		return
	}
	os.Exit(m.Run())
}

// crashOpen opens the key store and ledger at where: a database path in
// Sync mode, or a Redis URL. The clock is fixed: nothing expires.
func crashOpen(where, backend string) (*keystore.Store, *ledger.Ledger, func() error, error) {
	now := fakeclock.New(t0).Now
	if backend == "redis" {
		rdb, err := redisstore.Open(ctx, where, redisstore.Options{Now: now, Timeout: 10 * time.Second, LockTTL: 300 * time.Millisecond})
		if err != nil {
			return nil, nil, nil, err
		}
		return crashStores(rdb)
	}
	var be ratestore.Backend = ratestore.Bolt
	if backend == "badger" {
		be = badger.Backend
	}
	db, err := ratestore.Open(where, ratestore.Options{Backend: be, Durability: ratestore.Sync, Now: now})
	if err != nil {
		return nil, nil, nil, err
	}
	return crashStores(db)
}

func crashStores(db backend.Store) (*keystore.Store, *ledger.Ledger, func() error, error) {
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	led, err := ledger.Open(db, ledger.Options{})
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return ks, led, func() error {
		if err := led.Close(ctx); err != nil {
			return err
		}
		return db.Close()
	}, nil
}

// crashChild admits and finishes requests on several goroutines, each
// with a ledger entry, printing "w n" once request n of worker w is
// acknowledged, until the parent kills it.
func crashChild(where, backend, secret string, round int) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "ledger crash child:", err)
		os.Exit(2)
	}
	ks, led, _, err := crashOpen(where, backend)
	if err != nil {
		fail(err)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Go(func() {
			for n := 1; ; n++ {
				a, err := ks.Admit(context.Background(), secret, keystore.Request{Reserve: 100})
				if err != nil {
					fail(err)
				}
				// A refusal before each request: counted in memory, written
				// with the next entry (on a DB) or a second later.
				if err := led.Refused(context.Background(), ledger.Refusal{Key: a.Key().ID, Model: "m", Reason: "window"}); err != nil {
					fail(err)
				}
				note, err := led.Note(ledger.Entry{RequestID: crashID(round, w, n), Key: a.Key().ID, Model: "m", Tokens: ledger.Tokens{Input: crashTokens}, Cost: crashCost, Status: 200})
				if err != nil {
					fail(err)
				}
				_, err = a.FinishWith(context.Background(), crashTokens, crashCost, note)
				note.Done(err)
				if err != nil {
					fail(err)
				}
				mu.Lock()
				fmt.Fprintf(out, "%d %d\n", w, n)
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait() // never: the parent kills the process
}

// crashID is the request id of request n of worker w in a round.
func crashID(round, w, n int) string { return fmt.Sprintf("req_%02x%02x%012x", round, w, n) }

// TestCrashKeepsAcknowledgedEntries kills a process (SIGKILL: no Close,
// no compaction) while it finishes requests with ledger entries in Sync
// mode, several times over one database, and checks after each kill:
//   - every acknowledged request has its entry, once;
//   - at most one unacknowledged entry per worker (in flight at the kill);
//   - the rollups equal the sum of the entries, and the key's lifetime
//     tokens count exactly the entries: an entry, its rollups and the
//     usage it charged were committed together;
//   - the refusals counted (one before each request) are never more than
//     were made; on a DB, where an entry's batch writes the counts waiting,
//     none made before an acknowledged request is lost. On Redis a crash
//     loses the counts of the last second.
func TestCrashKeepsAcknowledgedEntries(t *testing.T) {
	for _, backend := range []string{"bolt", "badger", "redis"} {
		t.Run(backend, func(t *testing.T) {
			where := filepath.Join(t.TempDir(), "db")
			if backend == "redis" {
				where = redistest.Start(t).URL()
			}
			ks, _, closeAll, err := crashOpen(where, backend)
			require.NoError(t, err)
			k, secret, err := ks.Create(ctx, keystore.Spec{Name: "crash", Policy: keystore.Policy{Windows: []keystore.Window{{Limit: 1 << 40, Window: 5 * time.Hour}}}})
			require.NoError(t, err)
			require.NoError(t, closeAll())
			seen := map[string]bool{}
			var ackedAll int
			for round := range crashRounds {
				acked := crashRun(t, where, backend, secret, round, 200+round*400)
				ks, led, closeAll, err := crashOpen(where, backend)
				require.NoError(t, err)
				entries := crashEntries(t, led)
				got, err := ks.Get(ctx, k.ID)
				require.NoError(t, err)
				spend, err := led.Spend(ctx, ledger.SpendQuery{})
				require.NoError(t, err)
				require.NoError(t, closeAll())

				fresh := map[string]bool{}
				for _, e := range entries {
					if !seen[e.RequestID] {
						fresh[e.RequestID] = true
					}
				}
				for id := range acked {
					require.True(t, fresh[id], "acknowledged request %s has no entry", id)
				}
				require.LessOrEqual(t, len(fresh), len(acked)+crashWorkers, "more entries than requests that could have run")
				n := int64(len(entries))
				require.Equal(t, n, spend.Total.Requests, "rollups count other requests than the entries")
				require.Equal(t, n*crashTokens, spend.Total.Tokens.Input)
				require.Equal(t, crashCost*pricing.USD(n), spend.Total.Cost)
				require.Equal(t, n*crashTokens, got.LifetimeTokens, "usage charged and entries differ")
				ackedAll += len(acked)
				require.LessOrEqual(t, spend.Total.Refused, n+int64(crashWorkers*(round+1)), "more refusals than were made")
				if backend != "redis" {
					require.GreaterOrEqual(t, spend.Total.Refused, int64(ackedAll), "a refusal made before an acknowledged entry is lost")
				}
				t.Logf("round %d: %d acknowledged, %d entries this round, %d in all, %d refusals counted", round, len(acked), len(fresh), n, spend.Total.Refused)
				for id := range fresh {
					seen[id] = true
				}
			}
		})
	}
}

// crashEntries reads every entry, checking that none is there twice.
func crashEntries(t *testing.T, led *ledger.Ledger) []ledger.Entry {
	var all []ledger.Entry
	ids := map[string]bool{}
	q := ledger.RequestQuery{Limit: ledger.MaxLimit}
	for {
		p, err := led.Requests(ctx, q)
		require.NoError(t, err)
		for _, e := range p.Entries {
			require.False(t, ids[e.RequestID], "entry %s twice", e.RequestID)
			ids[e.RequestID] = true
		}
		all = append(all, p.Entries...)
		if p.Next == "" {
			return all
		}
		q.Cursor = p.Next
	}
}

// crashRun runs one child, kills it after kill acknowledgements, and
// returns the request ids it acknowledged.
func crashRun(t *testing.T, where, backend, secret string, round, kill int) map[string]bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashWhereEnv+"="+where, crashBackendEnv+"="+backend, crashSecretEnv+"="+secret, crashRoundEnv+"="+strconv.Itoa(round))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	acked := map[string]bool{}
	lines := bufio.NewScanner(stdout)
	read := func() {
		var w, n int
		_, err := fmt.Sscan(lines.Text(), &w, &n)
		require.NoError(t, err, "child printed %q", lines.Text())
		acked[crashID(round, w, n)] = true
	}
	for len(acked) < kill && lines.Scan() {
		read()
	}
	killed := len(acked) >= kill
	if killed {
		require.NoError(t, cmd.Process.Kill())
	}
	for lines.Scan() {
		read()
	}
	werr := cmd.Wait()
	require.True(t, killed, "the child ended on its own after %d acknowledgements (%v): %s", len(acked), werr, stderr.String())
	return acked
}
