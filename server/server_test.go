package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
)

// start is the instant every test begins at.
var start = time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)

// testServer is a Server on a fresh store whose clock the test moves, with
// its RESP side listening on loopback. The store is backendtest.Single: a
// database, or with RATESTORE_TEST_BACKEND=redis (which .ci/run sets for
// one more run of the suite) a redis-server of its own.
type testServer struct {
	*Server
	clock *fakeclock.Clock
	addr  string // the RESP listener's
}

func newTestServer(t *testing.T, opts Options) *testServer {
	return newTestServers(t, backendtest.Single(), opts, 1)[0]
}

// newRedisTestServers is n Servers, each on its own redisstore.DB, all on
// one redis-server and one clock: several instances of `ratestore serve
// --redis`.
func newRedisTestServers(t *testing.T, opts Options, n int) []*testServer {
	return newTestServers(t, backendtest.Redis, opts, n)
}

// newTestServers is n Servers on one store of b and one clock, each on its
// own handle of it (only Redis has more than one).
func newTestServers(t *testing.T, b backendtest.Backend, opts Options, n int) []*testServer {
	clock := fakeclock.New(start)
	st := b.Open(t, clock)
	var servers []*testServer
	for i := range n {
		var db backend.Store = st.Store
		if i > 0 {
			db = st.Another()
		}
		ts := serveRESP(t, New(db, opts))
		ts.clock = clock
		servers = append(servers, ts)
	}
	return servers
}

// serveRESP serves s's RESP side on a loopback port until the test ends.
func serveRESP(t *testing.T, s *Server) *testServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.ServeRESP(ln) }()
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		require.NoError(t, <-done)
	})
	return &testServer{Server: s, addr: ln.Addr().String()}
}

// redisCLI runs the real redis-cli against ts with args, and returns what
// it prints. Without redis-cli (Debian's redis-tools) the test is skipped,
// unless RATESTORE_REQUIRE_REDIS_CLI is set, as .ci/run sets it.
func (ts *testServer) redisCLI(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("RATESTORE_REQUIRE_REDIS_CLI") != "" {
			t.Fatalf("redis-cli is required (apt-get install redis-tools): %v", err)
		}
		t.Skip("redis-cli not installed (apt-get install redis-tools); .ci/run requires it")
	}
	host, port, _ := net.SplitHostPort(ts.addr)
	out, err := exec.Command(path, append([]string{"-h", host, "-p", port, "--no-auth-warning"}, args...)...).CombinedOutput()
	require.NoError(t, err, string(out))
	return strings.TrimSpace(string(out))
}

// TestThrottleAsRedisCell plays redis-cell's own test table (a limit of 5,
// one per second) through the real redis-cli: every reply is the one
// redis-cell gives, in its whole seconds. It does so on one server on the
// embedded store, and on two servers sharing one Redis, each call going to
// the next server.
func TestThrottleAsRedisCell(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { throttleAsRedisCell(t, []*testServer{newTestServer(t, Options{})}) })
	t.Run("redis", func(t *testing.T) { throttleAsRedisCell(t, newRedisTestServers(t, Options{}, 2)) })
}

func throttleAsRedisCell(t *testing.T, servers []*testServer) {
	calls := 0
	next := func() *testServer { calls++; return servers[calls%len(servers)] }
	clock := servers[0].clock
	cases := []struct {
		at       time.Duration
		quantity string
		want     string // limited, limit, remaining, retry after, reset after
	}{
		{0, "6", "1 5 5 -1 0"}, // never more than the limit
		{0, "1", "0 5 4 -1 1"},
		{0, "1", "0 5 3 -1 2"},
		{0, "1", "0 5 2 -1 3"},
		{0, "1", "0 5 1 -1 4"},
		{0, "1", "0 5 0 -1 5"},
		{0, "1", "1 5 0 1 5"},
		{3000 * time.Millisecond, "1", "0 5 2 -1 3"},
		{3100 * time.Millisecond, "1", "0 5 1 -1 4"}, // 3.9s, rounded up
		{4000 * time.Millisecond, "1", "0 5 1 -1 4"},
		{8000 * time.Millisecond, "1", "0 5 4 -1 1"},
		{9500 * time.Millisecond, "1", "0 5 4 -1 1"},
		{9500 * time.Millisecond, "0", "0 5 4 -1 1"}, // a peek
		{9500 * time.Millisecond, "2", "0 5 2 -1 3"},
		{9500 * time.Millisecond, "5", "1 5 2 3 3"},
	}
	for i, c := range cases {
		clock.Set(start.Add(c.at))
		got := next().redisCLI(t, "CL.THROTTLE", "user:1", "4", "1", "1", c.quantity)
		require.Equal(t, c.want, strings.Join(strings.Fields(got), " "), "case %d", i)
	}
	// The default quantity is 1; the state is the key's, whatever the
	// configuration of the call: 10 per 10 seconds reads the same TAT.
	clock.Set(start.Add(20 * time.Second))
	require.Equal(t, "0 5 4 -1 1", strings.Join(strings.Fields(next().redisCLI(t, "cl.throttle", "user:2", "4", "1", "1")), " "))
	require.Equal(t, "0 10 8 -1 2", strings.Join(strings.Fields(next().redisCLI(t, "cl.throttle", "user:2", "9", "10", "10")), " "))
}

// TestThrottleErrors: bad arguments get redis-cell's errors and change
// nothing.
func TestThrottleErrors(t *testing.T) {
	ts := newTestServer(t, Options{})
	for args, want := range map[string]string{
		"CL.THROTTLE k 4 1":                "ERR Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]",
		"CL.THROTTLE k x 1 1":              "ERR Couldn't parse as integer: x",
		"CL.THROTTLE k 4 0 1":              "ERR Zero rates are not supported",
		"CL.THROTTLE k 4 1 0":              "ERR Zero rates are not supported",
		"CL.THROTTLE k -1 1 1":             "ERR max_burst, count, period and quantity must not be negative",
		"CL.THROTTLE k 4 1 1 -2":           "ERR max_burst, count, period and quantity must not be negative",
		"NOSUCH a b":                       "ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b'",
		"AUTH secret":                      "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
		"CL.THROTTLE k 4 1 99999999999999": "ERR period is too long",
	} {
		require.Equal(t, want, ts.redisCLI(t, strings.Fields(args)...), args)
	}
	require.Equal(t, "0 5 4 -1 1", strings.Join(strings.Fields(ts.redisCLI(t, "CL.THROTTLE", "k", "4", "1", "1")), " "), "nothing was taken before")
	require.Equal(t, "PONG", ts.redisCLI(t, "PING"))
}

// TestRESPToken: with a token, every command but AUTH and QUIT needs it;
// a wrong one is refused.
func TestRESPToken(t *testing.T) {
	ts := newTestServer(t, Options{Token: "s3cret"})
	require.Equal(t, "NOAUTH Authentication required.", ts.redisCLI(t, "CL.THROTTLE", "k", "4", "1", "1"))
	require.Contains(t, ts.redisCLI(t, "-a", "wrong", "PING"), "WRONGPASS")
	require.Equal(t, "PONG", ts.redisCLI(t, "-a", "s3cret", "PING"))
	require.Equal(t, "0 5 4 -1 1", strings.Join(strings.Fields(ts.redisCLI(t, "-a", "s3cret", "CL.THROTTLE", "k", "4", "1", "1")), " "))
	require.Equal(t, "PONG", ts.redisCLI(t, "--user", "default", "--pass", "s3cret", "PING"))
}

// TestRESPProtocol drives the listener with raw bytes: pipelined commands
// get their replies in order, inline commands work, and a malformed request
// gets a protocol error and a closed connection.
func TestRESPProtocol(t *testing.T) {
	ts := newTestServer(t, Options{})
	c, err := net.Dial("tcp", ts.addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nCL.THROTTLE k 0 1 60\r\nCL.THROTTLE k 0 1 60\r\n"))
	require.NoError(t, err)
	r := bufio.NewReader(c)
	want := "+PONG\r\n$2\r\nhi\r\n*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:60\r\n*5\r\n:1\r\n:1\r\n:0\r\n:60\r\n:60\r\n"
	got := make([]byte, len(want))
	_, err = io.ReadFull(r, got)
	require.NoError(t, err)
	require.Equal(t, want, string(got))

	_, err = c.Write([]byte("*2\r\n$4\r\nPING\r\n$99999\r\n"))
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "-ERR Protocol error: invalid bulk length \"99999\" (at most 4096)\r\n", line)
	_, err = r.ReadByte()
	require.Error(t, err, "the connection is closed")
}

// TestRESPConcurrent: many connections on one key allow exactly the limit,
// as many as one connection would.
func TestRESPConcurrent(t *testing.T) {
	ts := newTestServer(t, Options{})
	const conns, calls = 16, 50
	allowed := make(chan int, conns)
	for range conns {
		go func() {
			c, err := net.Dial("tcp", ts.addr)
			if err != nil {
				allowed <- -1
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			n := 0
			for range calls {
				fmt.Fprintf(c, "CL.THROTTLE shared 99 1 3600\r\n")
				var reply [5]int64
				if _, err := fmt.Fscanf(r, "*5\r\n:%d\r\n:%d\r\n:%d\r\n:%d\r\n:%d\r\n", &reply[0], &reply[1], &reply[2], &reply[3], &reply[4]); err != nil {
					allowed <- -1
					return
				}
				if reply[0] == 0 {
					n++
				}
			}
			allowed <- n
		}()
	}
	total := 0
	for range conns {
		n := <-allowed
		require.GreaterOrEqual(t, n, 0)
		total += n
	}
	require.Equal(t, 100, total, "a burst of max_burst+1, and no more")
}

// TestHTTPAllow: the HTTP API decides as a Limiter does, with the IETF
// fields; bad requests get 400 naming what was wrong, and change nothing.
func TestHTTPAllow(t *testing.T) {
	ts := newTestServer(t, Options{})
	srv := httptest.NewServer(ts.Handler())
	defer srv.Close()
	post := func(body string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/allow", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var v map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		return resp, v
	}
	fw := `{"limiter": "api", "strategy": {"type": "fixed_window", "quotas": [{"name": "minute", "limit": 2, "window": "1m"}]}, "key": "u1"}`
	resp, v := post(fw)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, map[string]any{"allowed": true, "limit": 2.0, "remaining": 1.0, "reset_after_ms": 60000.0, "retry_after_ms": 0.0}, v)
	require.Equal(t, `"api";q=2`, resp.Header.Get("RateLimit-Policy"))
	require.Equal(t, `"api";r=1;t=60`, resp.Header.Get("RateLimit"))
	post(fw)
	ts.clock.Advance(15 * time.Second)
	resp, v = post(fw)
	require.Equal(t, false, v["allowed"])
	require.Equal(t, 45000.0, v["retry_after_ms"])
	require.Equal(t, "45", resp.Header.Get("Retry-After"))

	// Every strategy, by its JSON form; a peek; a record.
	for _, st := range []string{
		`{"type": "gcra", "rate": 1, "burst": 3}`,
		`{"type": "token_bucket", "rate": 1, "burst": 3}`,
		`{"type": "leaky_bucket", "rate": 1, "capacity": 3}`,
		`{"type": "sliding_window", "limit": 3, "window": "1m"}`,
		`{"type": "sliding_log", "limit": 3, "window": "1m"}`,
		`{"type": "rolling_window", "limit": 3, "window": "1h", "bucket": "1m"}`,
		`{"type": "composite", "primary": {"type": "gcra", "rate": 1, "burst": 3}, "secondary": {"type": "sliding_log", "limit": 5, "window": "1h"}}`,
	} {
		name := strings.Split(st, `"`)[3]
		_, v := post(fmt.Sprintf(`{"limiter": %q, "strategy": %s, "key": "u1", "n": 2}`, name, st))
		require.Equal(t, true, v["allowed"], st)
		require.Equal(t, 1.0, v["remaining"], st)
		_, v = post(fmt.Sprintf(`{"limiter": %q, "strategy": %s, "key": "u1", "n": 0}`, name, st))
		require.Equal(t, 1.0, v["remaining"], "%s: a peek takes nothing", st)
		_, v = post(fmt.Sprintf(`{"limiter": %q, "strategy": %s, "key": "u1", "n": 5, "record": true}`, name, st))
		require.Equal(t, false, v["allowed"], "%s: recorded past the limit", st)
	}

	for body, want := range map[string]string{
		`{"limiter": "api", "key": "u1"}`:                                                               "strategy is required",
		`{"limiter": "api", "strategy": {"type": "nope"}, "key": "u1"}`:                                 `unknown type "nope"`,
		`{"limiter": "api", "strategy": {"type": "gcra", "rate": 0, "burst": 1}, "key": "u1"}`:          "rate must be a positive finite number",
		`{"limiter": "bad name", "strategy": {"type": "gcra", "rate": 1, "burst": 1}, "key": "u"}`:      "limiter name",
		`{"limiter": "api", "strategy": {"type": "gcra", "rate": 1, "burst": 1}, "key": ""}`:            "key",
		`{"limiter": "api", "strategy": {"type": "gcra", "rate": 1, "burst": 1}, "key": "u", "n": -1}`:  "negative n",
		`{"limiter": "api", "strategy": {"type": "sliding_log", "limit": 1, "window": 60}, "key": "u"}`: "duration string",
		`{"limiter": "api", "extra": 1}`:                                                                "unknown field",
		`not json`:                                                                                      "body",
	} {
		resp, v := post(body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		require.Contains(t, v["error"], want, body)
	}
}

// TestHTTPToken: with a token, a request without it, or with another one,
// gets 401 and decides nothing.
func TestHTTPToken(t *testing.T) {
	ts := newTestServer(t, Options{Token: "s3cret"})
	srv := httptest.NewServer(ts.Handler())
	defer srv.Close()
	body := `{"limiter": "api", "strategy": {"type": "gcra", "rate": 1, "burst": 1}, "key": "u1"}`
	for _, auth := range []string{"", "Bearer wrong", "s3cret", "Basic s3cret"} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/allow", strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, auth)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/v1/allow", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var v allowResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	require.True(t, v.Allowed, "the first call the key ever made")
}

// FuzzReadCommand: no input makes the RESP reader panic, loop, or return
// more arguments than it allows.
func FuzzReadCommand(f *testing.F) {
	for _, s := range []string{"*1\r\n$4\r\nPING\r\n", "PING\r\n", "*-1\r\n", "*99\r\n", "$5\r\nhello\r\n", "*2\r\n$1\r\na\r\n$x\r\n", "*1\r\n$3\r\nabcd\r\n", "\r\n", "*1\r\n$0\r\n\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for range 100 {
			args, err := readCommand(r)
			if err != nil {
				return
			}
			if len(args) > maxArgs {
				t.Fatalf("%d arguments", len(args))
			}
		}
	})
}
