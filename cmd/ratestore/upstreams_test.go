package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/internal/upstreamtest"
	"github.com/ratestore/ratestore/keystore"
)

// upstreamsGateway is an admin.Gateway with upstreams and a configuration
// file to reload, for the commands that only a running gateway answers.
// It is called from the server's goroutines.
type upstreamsGateway struct {
	mu        sync.Mutex
	upstreams []admin.Upstream
	models    int   // what a reload prices
	err       error // what a reload fails with
}

func (g *upstreamsGateway) Traffic() (float64, float64, int64) { return 0, 0, 0 }
func (g *upstreamsGateway) ReloadPrices() (int, error)         { return 0, nil }
func (g *upstreamsGateway) Upstreams(context.Context) []admin.Upstream {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.upstreams
}

// reload is the gateway command's admin.Options.Reload.
func (g *upstreamsGateway) reload(context.Context) (admin.Reloaded, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return admin.Reloaded{Upstreams: len(g.upstreams), Models: g.models}, g.err
}

func (g *upstreamsGateway) set(upstreams []admin.Upstream, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.upstreams, g.err = upstreams, err
}

// startUpstreamsGateway serves g's admin API behind the console, with the
// tests' admin token and an audit log, on a new database; reload false
// serves a gateway started without --config. It returns the URL and the
// audit log.
func (e *env) startUpstreamsGateway(g *upstreamsGateway, reload bool) (string, *audit.Log) {
	e.t.Helper()
	db, err := ratestore.Open(filepath.Join(e.t.TempDir(), "upstreams.db"), ratestore.Options{Now: func() time.Time { return now }})
	require.NoError(e.t, err)
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(e.t, err)
	alog, err := audit.Open(db, audit.Options{SweepInterval: -1})
	require.NoError(e.t, err)
	opts := admin.Options{Keys: ks, Audit: alog, Gateway: g}
	if reload {
		opts.Reload = g.reload
	}
	api, err := admin.New(opts)
	require.NoError(e.t, err)
	c, err := console.New(console.Options{Token: testAdminToken, API: api})
	require.NoError(e.t, err)
	srv := httptest.NewServer(c)
	e.t.Cleanup(func() {
		srv.Close()
		closeAudit(alog)
		require.NoError(e.t, db.Close())
	})
	return srv.URL, alog
}

// testUpstreams are the upstreams of upstreamtest.Three, the route's name
// holding an escape sequence.
func testUpstreams() []admin.Upstream {
	return upstreamtest.Three(now.Add(42*time.Second), "claude\x1b[31m")
}

// TestUpstreamsCommand: upstreams --admin prints a running gateway's
// upstreams as a table, each limit's use as USED/LIMIT, and with --json
// what GET /admin/upstreams answers; without --admin it says it needs it.
func TestUpstreamsCommand(t *testing.T) {
	e := newEnv(t)
	g := &upstreamsGateway{upstreams: testUpstreams()}
	base, _ := e.startUpstreamsGateway(g, true)
	t.Setenv(adminTokenEnv, testAdminToken)

	r := e.ok("upstreams", "--admin", base)
	require.Empty(t, r.stderr)
	require.Equal(t, strings.Join([]string{
		`NAME              API               URL                                    MODELS            RPM        TPM            IN-FLIGHT  WEIGHT  COOLING-DOWN          REQUESTS  ERRORS`,
		`openai-a          openai            https://api.openai.com                 gpt-4o*,gpt-4.1*  2500/5000  400000/800000  100/200    2       -                     91234     3`,
		`azure-east        azure-openai      https://east.example.openai.azure.com  all               -          12000/450000   1/-        1       2026-01-18T12:00:42Z  812       57`,
		`"claude\x1b[31m"  route /anthropic  https://api.anthropic.com              all               -          -              -          1       -                     7         0`,
	}, "\n")+"\n", r.stdout)

	resp, body := send(t, "GET", base+"/admin/upstreams", "", testAdminToken)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, body, e.ok("upstreams", "--admin", base, "--json").stdout)
	require.Equal(t, testUpstreams(), jsonOf[admin.Upstreams](e, "upstreams", "--admin", base).Upstreams)

	g.set(nil, nil)
	require.Equal(t, "no upstreams\n", e.ok("upstreams", "--admin", base).stdout)
	require.JSONEq(t, `{"upstreams":[]}`, e.ok("upstreams", "--admin", base, "--json").stdout)

	r = e.run("upstreams")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "upstreams: --admin URL is required")
	e.requireNoDB()
}

// TestConfigReloadCommand: config reload --admin has the gateway reload
// its configuration file, recorded in its audit log as the admin token's;
// a file refused fails the command (exit 1) naming its line; a gateway
// started without --config says so.
func TestConfigReloadCommand(t *testing.T) {
	e := newEnv(t)
	g := &upstreamsGateway{upstreams: testUpstreams(), models: 214}
	base, alog := e.startUpstreamsGateway(g, true)
	t.Setenv(adminTokenEnv, testAdminToken)

	r := e.ok("config", "reload", "--admin", base)
	require.Equal(t, "reloaded the configuration: 3 upstreams, 214 models priced\n", r.stdout)
	require.Equal(t, admin.Reloaded{Upstreams: 3, Models: 214}, jsonOf[admin.Reloaded](e, "config", "reload", "--admin", base))
	p, err := alog.Events(t.Context(), audit.Query{Target: admin.ConfigTarget})
	require.NoError(t, err)
	require.Len(t, p.Events, 2)
	require.Equal(t, []string{admin.ActorToken, admin.ActionConfigReload}, []string{p.Events[0].Actor, p.Events[0].Action})

	g.set(testUpstreams(), errors.New(`ratestore.yaml: line 9: upstreams[1].api: "grpc": want openai, azure-openai, anthropic or gemini`))
	r = e.run("config", "reload", "--admin", base)
	require.Equal(t, exitError, r.code, r.stderr)
	require.Empty(t, r.stdout)
	require.Equal(t, `ratestore: config reload: the gateway refused its configuration file and keeps the one it runs: `+
		`ratestore.yaml: line 9: upstreams[1].api: "grpc": want openai, azure-openai, anthropic or gemini`+"\n", r.stderr)

	noConfig, _ := newEnv(t).startUpstreamsGateway(g, false)
	r = e.run("config", "reload", "--admin", noConfig)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "404 Not Found: this gateway was started without --config")

	for args, msg := range map[string]string{"config": "config: want a subcommand: reload", "config reload": "config reload: --admin URL is required"} {
		r = e.run(strings.Fields(args)...)
		require.Equal(t, exitUsage, r.code, args)
		require.Contains(t, r.stderr, msg, args)
	}
}
