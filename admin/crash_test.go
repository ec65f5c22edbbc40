package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/keystore"
)

const (
	crashDBEnv      = "RATESTORE_AUDIT_CRASH_DB"
	crashBackendEnv = "RATESTORE_AUDIT_CRASH_BACKEND"
	crashWorkers    = 4
)

func TestMain(m *testing.M) {
	if path := os.Getenv(crashDBEnv); path != "" {
		crashChild(path, os.Getenv(crashBackendEnv))
		return
	}
	os.Exit(m.Run())
}

// crashOpen opens the key store and audit log of the database at path,
// in Sync mode, and an API on them.
func crashOpen(path, backend string) (*admin.API, *keystore.Store, *audit.Log, func() error, error) {
	var be ratestore.Backend = ratestore.Bolt
	if backend == "badger" {
		be = badger.Backend
	}
	db, err := ratestore.Open(path, ratestore.Options{Backend: be, Durability: ratestore.Sync})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ks, err := keystore.Open(db, keystore.Options{})
	if err == nil {
		var l *audit.Log
		if l, err = audit.Open(db, audit.Options{SweepInterval: -1}); err == nil {
			var api *admin.API
			api, err = admin.New(admin.Options{Keys: ks, Audit: l})
			return api, ks, l, db.Close, err
		}
	}
	db.Close()
	return nil, nil, nil, nil, err
}

// crashChild creates teams and renames each, on several goroutines,
// through the API, printing "create ID" and "rename ID" once each change
// is acknowledged, until the parent kills it.
func crashChild(path, backend string) {
	api, _, _, _, err := crashOpen(path, backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, "audit crash child:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	ack := func(what, id string) {
		mu.Lock()
		fmt.Fprintln(out, what, id)
		out.Flush()
		mu.Unlock()
	}
	call := func(method, path, body string, want int) []byte {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r.WithContext(admin.WithActor(r.Context(), admin.ActorCLI)))
		if w.Code != want {
			fmt.Fprintln(os.Stderr, "audit crash child:", method, path, w.Code, w.Body.String())
			os.Exit(2)
		}
		return w.Body.Bytes()
	}
	var wg sync.WaitGroup
	for range crashWorkers {
		wg.Go(func() {
			for {
				var t admin.Team
				json.Unmarshal(call("POST", "/admin/teams", `{"name":"a","windows":[{"limit":1,"window":"1h"}]}`, http.StatusCreated), &t)
				ack("create", t.ID)
				call("PATCH", "/admin/teams/"+t.ID, `{"name":"b"}`, http.StatusOK)
				ack("rename", t.ID)
			}
		})
	}
	wg.Wait() // never: the parent kills the process
}

// TestCrashKeepsAcknowledgedEvents kills a process (SIGKILL) while it
// makes changes through the API in Sync mode, and checks that every
// acknowledged change has its event, and every event its change: a
// team.create's team exists, a team.update's team has the name it set;
// a change in flight at the kill may have no event, and is the only kind
// that may.
func TestCrashKeepsAcknowledgedEvents(t *testing.T) {
	for _, backend := range []string{"bolt", "badger"} {
		t.Run(backend, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			acked := crashRun(t, path, backend, 300)
			_, ks, l, closeDB, err := crashOpen(path, backend)
			require.NoError(t, err)
			defer closeDB()
			events := map[string]bool{}
			q := audit.Query{Limit: audit.MaxLimit}
			for {
				p, err := l.Events(context.Background(), q)
				require.NoError(t, err)
				for _, e := range p.Events {
					what := map[string]string{admin.ActionTeamCreate: "create", admin.ActionTeamUpdate: "rename"}[e.Action]
					require.NotEmpty(t, what, e.Action)
					require.False(t, events[what+" "+e.Target], "an event twice")
					events[what+" "+e.Target] = true
					tm, err := ks.GetTeam(context.Background(), e.Target)
					require.NoError(t, err, "%s %s: an event without its change", e.Action, e.Target)
					if what == "rename" {
						require.Equal(t, "b", tm.Name, "%s %s: an event without its change", e.Action, e.Target)
					}
				}
				if p.Next == "" {
					break
				}
				q.Cursor = p.Next
			}
			for change := range acked {
				require.True(t, events[change], "acknowledged %s has no event", change)
			}
			require.LessOrEqual(t, len(events), len(acked)+crashWorkers, "more events than changes that could have been made")
			unrecorded := 0
			require.NoError(t, ks.ListTeams(context.Background(), func(tm keystore.Team) error {
				if !events["create "+tm.ID] {
					unrecorded++
				}
				return nil
			}))
			require.LessOrEqual(t, unrecorded, crashWorkers, "teams made without an event: at most those in flight at the kill")
			t.Logf("%d acknowledged, %d events", len(acked), len(events))
		})
	}
}

// crashRun runs one child on the database at path, kills it after kill
// acknowledgements, and returns the changes it acknowledged.
func crashRun(t *testing.T, path, backend string, kill int) map[string]bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDBEnv+"="+path, crashBackendEnv+"="+backend)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	acked := map[string]bool{}
	lines := bufio.NewScanner(stdout)
	for len(acked) < kill && lines.Scan() {
		acked[lines.Text()] = true
	}
	killed := len(acked) >= kill
	if killed {
		require.NoError(t, cmd.Process.Kill())
	}
	for lines.Scan() {
		acked[lines.Text()] = true
	}
	werr := cmd.Wait()
	require.True(t, killed, "the child ended on its own after %d acknowledgements (%v): %s", len(acked), werr, stderr.String())
	return acked
}
