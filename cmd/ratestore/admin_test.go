package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/gateway"
	"github.com/stretchr/testify/require"
)

// testAdminToken is the admin token of the tests' gateways.
const testAdminToken = "cli-test-admin-token-0123456789abcdef"

// adminGateway is a gateway with its admin API open, served over loopback
// on the env's database (which it holds, as the gateway command does), in
// front of an upstream that reports 42 tokens per request.
type adminGateway struct {
	url string
	db  *ratestore.DB
}

// startAdminGateway starts an adminGateway on e's database (created if
// need be) with the tests' clock; token "" leaves the admin API closed.
// It stops when the test ends.
func (e *env) startAdminGateway(token string) *adminGateway {
	e.t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`)
	}))
	e.t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	require.NoError(e.t, err)
	db, err := ratestore.Open(e.db, ratestore.Options{Backend: backendOf(e.backend), Now: func() time.Time { return now }})
	require.NoError(e.t, err)
	g, err := gateway.New(db, gateway.Options{Upstream: u})
	require.NoError(e.t, err)
	var h http.Handler = g
	if token != "" {
		h, err = operatorSurface(consoleConfig{token: token}, g.Keys(), g.Ledger(), g)
		require.NoError(e.t, err)
	}
	srv := httptest.NewServer(h)
	e.t.Cleanup(func() {
		srv.Close()
		require.NoError(e.t, db.Close())
	})
	return &adminGateway{url: srv.URL, db: db}
}

// proxy sends a chat completion through the gateway with secret and
// returns its status.
func (g *adminGateway) proxy(t *testing.T, secret string) int {
	t.Helper()
	resp, _ := send(t, "POST", g.url+"/v1/chat/completions", `{"model":"gpt-4o","max_tokens":10}`, secret)
	return resp.StatusCode
}

// TestKeysThroughAdminSameOutput: every key command that reads prints,
// given --admin, what it prints opening the database, text and JSON; and
// while the gateway holds the database, a command without --admin says to
// use it.
func TestKeysThroughAdminSameOutput(t *testing.T) {
	e := newEnv(t)
	e.ok("import", validFile)
	e.ok("migrate") // legacy usage merged: reads change nothing from here on
	id := jsonOf[admin.Created](e, "keys", "create", "--name", "policy", "--window", "5h=1000", "--window", "168h=10000/1h",
		"--rpm", "10", "--max-concurrent", "2", "--models", "gpt-*,claude-*", "--model", "gpt-4o", "--expires", "720h").Key.ID
	ids := byName(t, jsonOf[admin.Keys](e, "keys", "list").Keys)
	commands := [][]string{{"keys", "list"}}
	for _, id := range append([]string{id}, ids["gateway-prod"], ids["staging"], ids["batch-jobs"]) {
		commands = append(commands, []string{"keys", "show", id}, []string{"usage", id})
	}
	var runs [][]string // each command, in text and in JSON
	for _, args := range commands {
		runs = append(runs, args, append(args[:len(args):len(args)], "--json"))
	}
	local := map[string]string{}
	for _, args := range runs {
		local[strings.Join(args, " ")] = e.ok(args...).stdout
	}

	g := e.startAdminGateway(testAdminToken)
	t.Setenv(adminTokenEnv, testAdminToken)
	for _, args := range runs {
		r := e.ok(append(args[:len(args):len(args)], "--admin", g.url)...)
		require.Equal(t, local[strings.Join(args, " ")], r.stdout, "%v", args)
		require.Empty(t, r.stderr)
	}
	// The JSON of a key is the admin API's: keys show --json prints what
	// GET /admin/keys/{id} answers, keys list --json what GET /admin/keys
	// does.
	for path, args := range map[string][]string{"/admin/keys/" + id: {"keys", "show", id}, "/admin/keys": {"keys", "list"}} {
		resp, body := send(t, "GET", g.url+path, "", testAdminToken)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.JSONEq(t, body, local[strings.Join(append(args, "--json"), " ")], path)
	}

	// Without --admin, the database is the gateway's.
	for _, args := range [][]string{{"keys", "list"}, {"keys", "show", id}, {"usage", id}, {"keys", "disable", id}} {
		r := e.run(args...)
		require.Equal(t, exitError, r.code, "%v", args)
		require.Empty(t, r.stdout)
		require.Equal(t, "ratestore: "+e.db+": the database is held by another process (a running gateway?); use --admin http://127.0.0.1:8080 with $RATESTORE_ADMIN_TOKEN\n", r.stderr)
	}
}

// TestKeysThroughAdmin: every command that changes keys, through the
// admin API of a gateway that created its database itself; the key
// created works through the same gateway, and what the commands print is
// the gateway's key as changed.
func TestKeysThroughAdmin(t *testing.T) {
	e := newEnv(t)
	g := e.startAdminGateway(testAdminToken)
	tokenFile := filepath.Join(e.dir, "admin-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(testAdminToken+"\n"), 0o600))
	viaAdmin := func(args ...string) []string {
		return append(args, "--admin", g.url+"/", "--admin-token-file", tokenFile)
	}

	r := e.ok(viaAdmin("keys", "list")...)
	require.Equal(t, "no keys\n", r.stdout)
	created := jsonOf[admin.Created](e, viaAdmin("keys", "create", "--name", "ci", "--window", "5h=1000", "--window", "168h=10000/1h",
		"--rpm", "10", "--models", "gpt-*", "--expires", "720h")...)
	id, secret := created.Key.ID, created.Secret
	require.True(t, strings.HasPrefix(secret, "rsk_"), secret)
	require.Equal(t, admin.Key{ID: id, Name: "ci", Budgets: []admin.Budget{}, Windows: []admin.Window{
		{Limit: 1000, Window: "5h0m0s", Bucket: "5m0s", Remaining: 1000},
		{Limit: 10000, Window: "168h0m0s", Bucket: "1h0m0s", Remaining: 10000}},
		RequestsPerMinute: 10, Models: []string{"gpt-*"},
		ExpiresAt: timePtr(now.Add(720 * time.Hour)), CreatedAt: timePtr(now)}, created.Key)
	r = e.ok(viaAdmin("keys", "create", "--name", "plain", "--limit", "500")...)
	require.Contains(t, r.stdout, "secret: rsk_")
	require.Contains(t, r.stderr, "is shown only this once")

	// The key works through the gateway, and its usage shows.
	require.Equal(t, http.StatusOK, g.proxy(t, secret))
	u := jsonOf[admin.Key](e, viaAdmin("usage", id)...)
	require.Equal(t, []int64{42, 42}, []int64{u.Windows[0].Used, u.Windows[1].Used})
	require.Equal(t, []int64{0, 958, 42}, []int64{int64(u.Binding), u.Windows[u.Binding].Remaining, u.LifetimeTokens}, "binding: the 5h window")
	require.Equal(t, u, jsonOf[admin.Key](e, viaAdmin("keys", "show", id)...))
	r = e.ok(viaAdmin("keys", "show", id)...)
	require.NotContains(t, r.stdout, "rsk_")
	require.Contains(t, r.stdout, "request rate:    10 per minute")

	// set-limit: TOKENS, then windows added, changed and dropped; the 5h
	// window keeps its usage.
	k := jsonOf[admin.Key](e, viaAdmin("keys", "set-limit", id, "2000")...)
	require.Equal(t, []int64{2000, 42}, []int64{k.Windows[0].Limit, k.Windows[0].Used})
	r = e.ok(viaAdmin("keys", "set-limit", id, "--drop-window", "168h", "--window", "1h=50", "--max-concurrent", "3", "--models", "")...)
	require.Contains(t, r.stdout, "changed "+id+": dropped its 168h window; added a 1h window of 50 tokens; set its max concurrent requests to 3; set its models to any")
	k = jsonOf[admin.Key](e, viaAdmin("keys", "show", id)...)
	require.Equal(t, []admin.Window{
		{Limit: 2000, Window: "5h0m0s", Bucket: "5m0s", Used: 42, Remaining: 1958, ResetAfterSeconds: 5 * 3600, WindowEnd: timePtr(now.Add(5 * time.Hour))},
		{Limit: 50, Window: "1h0m0s", Bucket: "1m0s", Remaining: 50}}, k.Windows)
	require.Equal(t, []int{1, 3}, []int{k.Binding, k.MaxConcurrent}, "binding: the new 1h window, with the least left")
	require.EqualValues(t, 10, k.RequestsPerMinute, "a field not named stays")
	require.Equal(t, []string{}, k.Models)
	r = e.run(viaAdmin("keys", "set-limit", id, "--drop-window", "168h")...)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "key "+id+" has no 168h window (it has 5h, 1h)")

	// set-expiry, disable, enable: the gateway acts on them at once.
	k = jsonOf[admin.Key](e, viaAdmin("keys", "set-expiry", id, "never")...)
	require.Nil(t, k.ExpiresAt)
	k = jsonOf[admin.Key](e, viaAdmin("keys", "set-expiry", id, "2030-05-01T10:00:00+02:00")...)
	require.Equal(t, time.Date(2030, 5, 1, 8, 0, 0, 0, time.UTC), *k.ExpiresAt)
	r = e.ok(viaAdmin("keys", "disable", id)...)
	require.Contains(t, r.stdout, "disabled "+id)
	require.Contains(t, r.stdout, "status:          disabled")
	require.Equal(t, http.StatusForbidden, g.proxy(t, secret))
	k = jsonOf[admin.Key](e, viaAdmin("keys", "enable", id)...)
	require.False(t, k.Disabled)
	require.Equal(t, http.StatusOK, g.proxy(t, secret))

	// delete: gone from the gateway.
	d := jsonOf[deleteOut](e, viaAdmin("keys", "delete", id)...)
	require.Equal(t, deleteOut{id, true}, d)
	require.Equal(t, http.StatusUnauthorized, g.proxy(t, secret))
	r = e.run(viaAdmin("keys", "show", id)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "404 Not Found: no key has the id "+id)
	keys := jsonOf[admin.Keys](e, viaAdmin("keys", "list")...).Keys
	require.Len(t, keys, 1)
	require.Equal(t, "plain", keys[0].Name)
}

// TestKeysAdminErrors: what goes wrong talking to the admin API is named:
// the HTTP status and the gateway's message, or what is missing.
func TestKeysAdminErrors(t *testing.T) {
	e := newEnv(t)
	g := e.startAdminGateway(testAdminToken)
	closed := newEnv(t)
	closed.db = filepath.Join(closed.dir, "closed.db")
	noAdmin := closed.startAdminGateway("")
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	empty := filepath.Join(e.dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))

	t.Setenv(adminTokenEnv, "")
	r := e.run("keys", "list", "--admin", g.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "no admin token: set $RATESTORE_ADMIN_TOKEN or give --admin-token-file")
	r = e.run("keys", "list", "--admin", g.url, "--admin-token-file", empty)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "--admin-token-file "+empty+": the file is empty")
	r = e.run("keys", "list", "--admin", g.url, "--admin-token-file", filepath.Join(e.dir, "nope"))
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "--admin-token-file: open ")

	t.Setenv(adminTokenEnv, "not-the-token")
	r = e.run("keys", "list", "--admin", g.url)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "admin API: GET "+g.url+"/admin/keys: 401 Unauthorized: the admin token is wrong")
	require.NotContains(t, r.stderr, "not-the-token")

	t.Setenv(adminTokenEnv, " "+testAdminToken+"\n")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"keys", "show", "key_0123456789abcdef", "--admin", g.url}, exitError, "404 Not Found: no key has the id key_0123456789abcdef"},
		{[]string{"usage", "key_0123456789abcdef", "--admin", g.url}, exitError, "404 Not Found: no key has the id key_0123456789abcdef"},
		{[]string{"keys", "delete", "../keys", "--admin", g.url}, exitError, "404 Not Found"},
		{[]string{"keys", "create", "--name", "x\x01", "--limit", "5", "--admin", g.url}, exitUsage, "400 Bad Request: name: holds the control character U+0001"},
		{[]string{"keys", "list", "--admin", noAdmin.url}, exitError, "404 Not Found: no such path (is the gateway running with an admin token?)"},
		{[]string{"keys", "list", "--admin", dead.URL}, exitError, "admin API: GET " + dead.URL + "/admin/keys: "},
		{[]string{"keys", "list", "--admin", "ftp://example.com"}, exitUsage, `--admin "ftp://example.com": want the gateway's http or https URL`},
		{[]string{"keys", "list", "--admin-token-file", empty}, exitUsage, "--admin-token-file without --admin"},
		{[]string{"list", "--admin", g.url}, exitUsage, "unknown command"},
		{[]string{"import", validFile, "--admin", g.url}, exitUsage, "flag provided but not defined: -admin"},
	} {
		r := e.run(c.args...)
		require.Equal(t, c.code, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
		require.NotContains(t, r.stderr, testAdminToken, c.args)
	}

	// Plain http beyond loopback: a warning (the request itself fails:
	// nothing listens there).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"keys", "list", "--admin", "http://192.0.2.1:8080"}, nil, &stdout, &stderr, config{})
	require.Equal(t, exitError, code)
	require.Contains(t, stderr.String(), "the admin token goes over plain http to a host that is not loopback")
}

// TestAdminToken: the file wins over the environment, both are trimmed,
// and a file named must hold a token.
func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(file, []byte("  from-file\n"), 0o600))

	t.Setenv(adminTokenEnv, "")
	tok, err := adminToken("")
	require.NoError(t, err)
	require.Empty(t, tok, "no token is no error: the gateway runs without its admin API")
	t.Setenv(adminTokenEnv, "from-env\n")
	tok, err = adminToken("")
	require.NoError(t, err)
	require.Equal(t, "from-env", tok)
	tok, err = adminToken(file)
	require.NoError(t, err)
	require.Equal(t, "from-file", tok)

	require.NoError(t, os.WriteFile(file, []byte(" \n\t"), 0o600))
	_, err = adminToken(file)
	require.ErrorContains(t, err, "the file is empty")
	_, err = adminToken(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
