package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/internal/redistest"
)

// TestAdminTokenLength: the gateway and console commands refuse an admin
// token shorter than 32 bytes at start, saying where it came from and how
// to make one, before they open anything; 32 bytes start.
func TestAdminTokenLength(t *testing.T) {
	e := newEnv(t)
	t.Setenv(adminTokenEnv, strings.Repeat("t", 31))
	r := e.run("gateway", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "gateway: $RATESTORE_ADMIN_TOKEN: the admin token is 31 bytes: want at least 32 random bytes; make one with: openssl rand -hex 32")
	_, err := os.Stat(e.db)
	require.ErrorIs(t, err, os.ErrNotExist, "no database made")

	e.ok("keys", "create", "--name", "k", "--limit", "10")
	file := filepath.Join(e.dir, "token")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("t", 31)+"\n"), 0o600))
	r = e.run("console", "--listen", "127.0.0.1:0", "--admin-token-file", file)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "console: --admin-token-file "+file+": the admin token is 31 bytes")

	t.Setenv(adminTokenEnv, strings.Repeat("t", 32))
	g := e.startGateway("--upstream", "http://127.0.0.1:1")
	require.True(t, g.out.Admin)
	require.Equal(t, exitOK, g.stop())
	c := e.startCommand("console", "--listen", "127.0.0.1:0")
	require.Equal(t, exitOK, c.stop())
}

// TestGatewaySessionsKept: the gateway keeps its console's sessions in
// its database: a session outlives a restart, and the console command
// on the same database keeps its own in memory, writing none.
func TestGatewaySessionsKept(t *testing.T) {
	e := newEnv(t)
	t.Setenv(adminTokenEnv, consoleToken)
	g := e.startGateway("--upstream", "http://127.0.0.1:1")
	base := "http://" + g.out.Listen
	ck, s := consoleSignIn(t, http.DefaultClient, base, consoleToken)
	require.Equal(t, exitOK, g.stop())

	g = e.startGateway("--upstream", "http://127.0.0.1:1")
	base = "http://" + g.out.Listen
	resp, body := consoleCall(t, http.DefaultClient, "GET", base+"/admin/session", "", ck.Value, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, s.CSRF)
	resp, body = consoleCall(t, http.DefaultClient, "DELETE", base+"/admin/session", "", ck.Value, s.CSRF)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	require.Equal(t, exitOK, g.stop())
	require.Equal(t, []string{"console/n/sessions"}, e.consoleRecords(), "the session's records are gone with it")

	c := e.startCommand("console", "--listen", "127.0.0.1:0")
	var out consoleOut
	require.NoError(t, json.Unmarshal([]byte(c.stdout.String()), &out))
	consoleSignIn(t, http.DefaultClient, "http://"+out.Listen, consoleToken)
	require.Equal(t, exitOK, c.stop())
	require.Equal(t, []string{"console/n/sessions"}, e.consoleRecords(), "the console command wrote no session")
}

// consoleRecords returns the names of the records under console/ in the
// env's closed database.
func (e *env) consoleRecords() []string {
	e.t.Helper()
	db, err := ratestore.Open(e.db, ratestore.Options{})
	require.NoError(e.t, err)
	defer db.Close()
	var names []string
	require.NoError(e.t, db.Scan(context.Background(), []byte("console/"), func(k, _ []byte) error {
		names = append(names, string(k))
		return nil
	}))
	return names
}

// TestGatewayTrustedProxy: with --trusted-proxy, the wrong tokens of a
// client behind the proxy are counted by the address the proxy forwarded
// for, which the log names, so another client of the proxy is not slowed
// down; without it, they are the proxy's. A --trusted-proxy that is not
// a range or an address is refused.
func TestGatewayTrustedProxy(t *testing.T) {
	e := newEnv(t)
	t.Setenv(adminTokenEnv, consoleToken)
	guess := func(base, tok, xff string) int {
		req, err := http.NewRequest("GET", base+"/admin/keys", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	g := e.startGateway("--upstream", "http://127.0.0.1:1", "--trusted-proxy", "127.0.0.1", "--trusted-proxy", "10.0.0.0/8")
	base := "http://" + g.out.Listen
	for range console.MaxFailures {
		require.Equal(t, http.StatusUnauthorized, guess(base, "wrong", "203.0.113.7, 198.51.100.1"))
	}
	require.Equal(t, http.StatusTooManyRequests, guess(base, consoleToken, "198.51.100.1"))
	require.Equal(t, http.StatusOK, guess(base, consoleToken, "198.51.100.2, 10.0.0.1"))
	line := g.stderr.await(t, "console: wrong admin token")
	require.Contains(t, line, `"client":"198.51.100.1"`)
	require.Equal(t, exitOK, g.stop())

	g = e.startGateway("--upstream", "http://127.0.0.1:1")
	base = "http://" + g.out.Listen
	for range console.MaxFailures {
		guess(base, "wrong", "198.51.100.1")
	}
	require.Equal(t, http.StatusTooManyRequests, guess(base, consoleToken, "198.51.100.2"), "without it, every client is the proxy")
	require.Equal(t, exitOK, g.stop())

	for _, bad := range []string{"proxy.example", "10.0.0.0/33", "fe80::1%eth0", ""} {
		r := e.run("gateway", "--upstream", "http://127.0.0.1:1", "--trusted-proxy", bad)
		require.Equal(t, exitUsage, r.code, bad)
		require.Contains(t, r.stderr, "-trusted-proxy: \""+bad+"\": want a CIDR", bad)
	}
	p, err := parseProxy("192.0.2.1")
	require.NoError(t, err)
	require.Equal(t, netip.MustParsePrefix("192.0.2.1/32"), p)
}

// TestSecureCookie: --secure-cookie marks the session cookie Secure over
// plain HTTP, behind a proxy that serves the browser over TLS, for the
// gateway and the console command alike.
func TestSecureCookie(t *testing.T) {
	e := newEnv(t)
	t.Setenv(adminTokenEnv, consoleToken)
	g := e.startGateway("--upstream", "http://127.0.0.1:1", "--secure-cookie")
	ck, _ := consoleSignIn(t, http.DefaultClient, "http://"+g.out.Listen, consoleToken)
	require.True(t, ck.Secure)
	require.Equal(t, exitOK, g.stop())

	c := e.startCommand("console", "--listen", "127.0.0.1:0", "--secure-cookie")
	var out consoleOut
	require.NoError(t, json.Unmarshal([]byte(c.stdout.String()), &out))
	ck, _ = consoleSignIn(t, http.DefaultClient, "http://"+out.Listen, consoleToken)
	require.True(t, ck.Secure)
	require.Equal(t, exitOK, c.stop())
}

// TestGatewayRedisSessions: two gateways on one Redis share their
// console's sessions: signed in at one, a session opens the other, and a
// sign-out at the other ends it at both.
func TestGatewayRedisSessions(t *testing.T) {
	url := redistest.Start(t).URL()
	t.Setenv(adminTokenEnv, consoleToken)
	e := newEnv(t)
	a := e.startGateway("--upstream", "http://127.0.0.1:1", "--redis", url)
	b := e.startGateway("--upstream", "http://127.0.0.1:1", "--redis", url)
	ck, s := consoleSignIn(t, http.DefaultClient, "http://"+a.out.Listen, consoleToken)
	resp, body := consoleCall(t, http.DefaultClient, "GET", "http://"+b.out.Listen+"/admin/keys", "", ck.Value, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, _ = consoleCall(t, http.DefaultClient, "DELETE", "http://"+b.out.Listen+"/admin/session", "", ck.Value, s.CSRF)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, body = consoleCall(t, http.DefaultClient, "GET", "http://"+a.out.Listen+"/admin/keys", "", ck.Value, "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
	require.Contains(t, body, "no_session")
	require.Equal(t, exitOK, a.stop())
	require.Equal(t, exitOK, b.stop())
}
