package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
)

// lines is a writer safe for concurrent use that also hands each complete
// line it is written to a channel, for a test to wait on.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
	all bytes.Buffer
	ch  chan string
}

func newLines() *lines { return &lines{ch: make(chan string, 1024)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line) // incomplete: keep for the next write
			return len(p), nil
		}
		select {
		case l.ch <- line:
		default:
		}
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

// await returns the first line to come that contains s.
func (l *lines) await(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(10 * time.Second) // a failure, not a wait
	for {
		select {
		case line := <-l.ch:
			if strings.Contains(line, s) {
				return line
			}
		case <-timeout:
			t.Fatalf("no line with %q in:\n%s", s, l.String())
		}
	}
}

// gatewayRun is the gateway command running in the background.
type gatewayRun struct {
	stdout, stderr *lines
	cancel         context.CancelFunc
	code           chan int
	out            gatewayOut // what it printed once listening
}

func (e *env) startGateway(args ...string) *gatewayRun {
	e.t.Helper()
	g := &gatewayRun{stdout: newLines(), stderr: newLines(), code: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	args = append([]string{"--db", e.db, "--json", "gateway", "--listen", "127.0.0.1:0"}, args...)
	cfg := config{Now: func() time.Time { return now }, Terminal: func(io.Writer) bool { return false }}
	go func() { g.code <- run(ctx, args, strings.NewReader(""), g.stdout, g.stderr, cfg) }()
	e.t.Cleanup(func() {
		cancel()
		<-g.code
	})
	g.stdout.await(e.t, "}") // the end of the indented object
	require.NoError(e.t, json.Unmarshal([]byte(g.stdout.String()), &g.out))
	return g
}

// stop cancels the command's context and returns its exit code.
func (g *gatewayRun) stop() int {
	g.cancel()
	code := <-g.code
	g.code <- code // for the cleanup
	return code
}

// TestGatewayCommand: the command serves on the address it is given,
// meters a key of the database, forwards the upstream key from the
// environment, and on cancel shuts down gracefully: a request in flight
// completes and its usage is on disk when the command returns.
func TestGatewayCommand(t *testing.T) {
	t.Setenv(upstreamKeyEnv, "sk-upstream")
	release := make(chan struct{})
	var gotAuth sync.Map
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.URL.Path, r.Header.Get("Authorization"))
		if r.URL.Path == "/v1/messages" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n")
			http.NewResponseController(w).Flush()
			<-release
			io.WriteString(w, "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":3}}\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`)
	}))
	defer up.Close()

	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "gw", "--limit", "1000")
	g := e.startGateway("--upstream", up.URL, "--rps", "100")
	require.Equal(t, gatewayOut{Listen: g.out.Listen, Upstream: up.URL, Routes: []routeOut{}, Pools: []poolOut{}, StatsPath: "/stats", RPS: 100, Burst: 0, Durability: "sync", Unpriced: "refuse"}, g.out)
	host, _, err := net.SplitHostPort(g.out.Listen)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	base := "http://" + g.out.Listen

	call := func(method, path, secret string) (*http.Response, string) {
		t.Helper()
		body := ""
		if method == "POST" {
			body = `{"model":"gpt-4o"}`
		}
		return send(t, method, base+path, body, secret)
	}
	resp, body := call("POST", "/v1/chat/completions", created.Secret)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotEmpty(t, resp.Header.Get("RateLimit"))
	auth, _ := gotAuth.Load("/v1/chat/completions")
	require.Equal(t, "Bearer sk-upstream", auth)
	resp, body = call("GET", "/stats", created.Secret)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var st admin.Key
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, created.Key.ID, st.ID)
	resp, _ = call("POST", "/v1/chat/completions", "rsk_nobody")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// A stream in flight when the command is stopped.
	req, err := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(`{"model":"claude-x","max_tokens":10,"stream":true}`))
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", created.Secret)
	slow, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer slow.Body.Close()
	g.cancel()
	g.stderr.await(t, "gateway: shutting down")
	close(release)
	rest, err := io.ReadAll(slow.Body)
	require.NoError(t, err)
	require.Contains(t, string(rest), "message_delta")
	require.Equal(t, exitOK, g.stop(), g.stderr.String())

	logs := g.stderr.String()
	require.NotContains(t, logs, created.Secret)
	require.NotContains(t, logs, "sk-upstream")
	require.Contains(t, logs, `"key_id":"`+created.Key.ID+`"`)
	require.Contains(t, logs, `"msg":"gateway: stopped"`)
	require.NotContains(t, logs, `"level":"ERROR"`)
	require.NotContains(t, logs, "closing them", "the stream finished within the timeout")

	// One line per request, with its key, model, tokens and status.
	reqs := requestLines(t, logs)
	require.Len(t, reqs, 4, logs)
	require.Equal(t, map[string]any{"path": "/v1/chat/completions", "key_id": created.Key.ID, "model": "gpt-4o", "tokens": 42.0, "status": 200.0}, pick(reqs[0], "path", "key_id", "model", "tokens", "status"))
	require.Equal(t, map[string]any{"path": "/v1/messages", "key_id": created.Key.ID, "model": "claude-x", "tokens": 8.0, "status": 200.0}, pick(reqs[3], "path", "key_id", "model", "tokens", "status"))

	// The database is closed (it opens again) and holds all the usage.
	db, err := ratestore.Open(e.db, ratestore.Options{Now: func() time.Time { return now }})
	require.NoError(t, err)
	defer db.Close()
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(t, err)
	u, err := ks.Usage(context.Background(), created.Key.ID)
	require.NoError(t, err)
	require.EqualValues(t, 42+8, u.Used)
}

func TestGatewayUsageErrors(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"gateway"}, "--upstream is required"},
		{[]string{"gateway", "--upstream", "localhost:9000"}, "want an http or https URL"},
		{[]string{"gateway", "--upstream", "http://"}, "want an http or https URL"},
		{[]string{"gateway", "--upstream", "http://x", "--rps", "-1"}, "--rps -1"},
		{[]string{"gateway", "--upstream", "http://x", "--burst", "3"}, "only with a rate"},
		{[]string{"gateway", "--upstream", "http://x", "--durability", "never"}, `--durability "never"`},
		{[]string{"gateway", "--upstream", "http://x", "--shutdown-timeout", "0s"}, "--shutdown-timeout 0s"},
		{[]string{"gateway", "--upstream", "http://x", "extra"}, "want no arguments"},
		{[]string{"gateway", "--upstream", "http://x", "--default-max-tokens", "0"}, "--default-max-tokens 0"},
		{[]string{"gateway", "--upstream", "http://x", "--max-request-body", "-1"}, "--max-request-body -1"},
		{[]string{"gateway", "--upstream", "http://x", "--idle-timeout", "-1s"}, "want durations >= 0"},
		{[]string{"gateway", "--upstream", "/v1/messages"}, "want PREFIX=VALUE"},
		{[]string{"gateway", "--upstream", "/v1=localhost:9000"}, `--upstream "/v1=localhost:9000": want an http or https URL`},
		{[]string{"gateway", "--upstream", "http://x", "--upstream", "http://y"}, "the default route's is given already"},
		{[]string{"gateway", "--upstream", "/v1=http://x", "--upstream", "/v1=http://y"}, "the route /v1's is given already"},
		{[]string{"gateway", "--upstream", "http://x", "--upstream-key-env", "/v1=VAR"}, "--upstream-key-env \"/v1=VAR\": no --upstream for the route /v1"},
		{[]string{"gateway", "--upstream", "/v1=http://x", "--upstream-key-header", "x-api-key"}, "no --upstream for the default route"},
		{[]string{"gateway", "--upstream", "http://x", "--upstream-key", "k", "--upstream-key-env", "VAR"}, "give one"},
		{[]string{"gateway", "--upstream", "http://x", "--stats-path", "stats"}, `--stats-path "stats"`},
		{[]string{"gateway", "--upstream", "http://x", "--upstream-key-header", "/v1="}, "empty value"},
		{[]string{"gateway", "--upstream", "http://x", "--drain-timeout", "-1s"}, "--drain-timeout -1s"},
		{[]string{"gateway", "--upstream", "http://x", "--weights", "input=1,thinking=2"}, `"thinking=2": want TYPE=WEIGHT`},
		{[]string{"gateway", "--upstream", "http://x", "--weights", "output=-1"}, "output=-1: want a number >= 0"},
		{[]string{"gateway", "--upstream", "http://x", "--weights", "output=NaN"}, "output=NaN: want a number >= 0"},
		{[]string{"gateway", "--upstream", "http://x", "--weights", "output=2,output=3"}, "output given twice"},
	} {
		r := e.run(c.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
	}
	e.requireNoDB()

	// Failures before serving leave no database behind.
	t.Setenv("RATESTORE_TEST_EMPTY", "")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--upstream", "/v1=http://x", "--upstream-key-env", "/v1=RATESTORE_TEST_EMPTY"}, exitError, "$RATESTORE_TEST_EMPTY is empty or not set"},
		{[]string{"--upstream", "http://x", "--upstream-key-env", "RATESTORE_TEST_EMPTY"}, exitError, "$RATESTORE_TEST_EMPTY is empty"},
		{[]string{"--upstream", "http://x", "--admin-token-file", e.dir + "/missing"}, exitError, "--admin-token-file"},
		{[]string{"--upstream", "/v1=http://x", "--upstream", "/v1/=http://y"}, exitUsage, `route "/v1/": another route has the same prefix`},
		{[]string{"--upstream", "/a/../b=http://x"}, exitUsage, "want a clean path"},
	} {
		r := e.run(append([]string{"gateway", "--listen", "127.0.0.1:0"}, c.args...)...)
		require.Equal(t, c.code, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
		e.requireNoDB()
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := e.run("gateway", "--upstream", "http://x", "--listen", taken.Addr().String())
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "address already in use")
	e.requireNoDB()
	require.NoError(t, taken.Close())

	// A database in use by another process, and an address taken.
	e.ok("keys", "create", "--name", "k", "--limit", "10")
	db, err := ratestore.Open(e.db, ratestore.Options{})
	require.NoError(t, err)
	r = e.run("gateway", "--upstream", "http://x", "--listen", "127.0.0.1:0")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "only one process")
	require.NoError(t, db.Close())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	r = e.run("gateway", "--upstream", "http://x", "--listen", ln.Addr().String())
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "address already in use")
	e.ok("keys", "list") // the failed runs closed the database
}

// TestGatewayDefaults: loopback by default, documented in the help.
func TestGatewayDefaults(t *testing.T) {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	gatewayCmd(&cli{}, fs)
	require.Equal(t, "127.0.0.1:8080", fs.Lookup("listen").DefValue)
	require.Equal(t, "sync", fs.Lookup("durability").DefValue)
	require.Equal(t, "/stats", fs.Lookup("stats-path").DefValue)
	require.Equal(t, "4096", fs.Lookup("default-max-tokens").DefValue)
	require.Equal(t, "10s", fs.Lookup("connect-timeout").DefValue)
	require.Equal(t, "10m0s", fs.Lookup("first-byte-timeout").DefValue)
	require.Equal(t, "1m0s", fs.Lookup("idle-timeout").DefValue)
	r := runArgs(false, "help", "gateway")
	require.Equal(t, exitOK, r.code)
	for _, s := range []string{"127.0.0.1:8080", upstreamKeyEnv, "--upstream-key-header", "loopback",
		"--default-max-tokens", "--max-request-body", "--connect-timeout", "--first-byte-timeout", "--idle-timeout", "x-should-retry"} {
		require.Contains(t, r.stdout, s)
	}
}

// requestLines returns the per-request log lines of logs, decoded.
func requestLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"gateway request"`) {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

// pick returns the fields of m named.
func pick(m map[string]any, fields ...string) map[string]any {
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		out[f] = m[f]
	}
	return out
}

// usageOf opens the database, which must be closed, and returns the usage
// of key id.
func (e *env) usageOf(id string) keystore.Usage {
	e.t.Helper()
	db, err := ratestore.Open(e.db, ratestore.Options{Now: func() time.Time { return now }})
	require.NoError(e.t, err)
	defer func() { require.NoError(e.t, db.Close()) }()
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(e.t, err)
	u, err := ks.Usage(context.Background(), id)
	require.NoError(e.t, err)
	return u
}

// TestGatewayShutdownCut: a stream that outlives --shutdown-timeout is cut
// at it; its usage, an estimate, is recorded (logged at warn as
// estimated) before the database is closed, and nothing is logged as an
// error.
func TestGatewayShutdownCut(t *testing.T) {
	started := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")
		http.NewResponseController(w).Flush()
		close(started)
		<-r.Context().Done() // never ends by itself
	}))
	defer up.Close()

	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "gw", "--limit", "100000")
	g := e.startGateway("--upstream", up.URL, "--shutdown-timeout", "50ms")
	body := `{"model":"claude-x","max_tokens":100,"stream":true}`
	req, err := http.NewRequest("POST", "http://"+g.out.Listen+"/v1/messages", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", created.Secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	<-started

	g.cancel()
	io.Copy(io.Discard, resp.Body) // cut at the timeout
	require.Equal(t, exitOK, g.stop(), g.stderr.String())
	logs := g.stderr.String()
	require.Contains(t, logs, "requests still in flight at the shutdown timeout")
	require.Contains(t, logs, `"level":"WARN","msg":"gateway: no usage read: charging the estimate"`)
	require.NotContains(t, logs, `"level":"ERROR"`)
	reserve := int64(len(body)/4 + 100)
	reqs := requestLines(t, logs)
	require.Len(t, reqs, 1, logs)
	require.Equal(t, map[string]any{"key_id": created.Key.ID, "model": "claude-x", "tokens": float64(reserve), "status": 200.0, "estimated": true},
		pick(reqs[0], "key_id", "model", "tokens", "status", "estimated"))
	require.Less(t, strings.Index(logs, `"msg":"gateway request"`), strings.Index(logs, `"msg":"gateway: stopped"`))

	u := e.usageOf(created.Key.ID) // the database was closed: it opens
	require.Equal(t, reserve, u.Used)
	require.Zero(t, u.InFlight)
}

// TestGatewayRoutesCommand: routes by path prefix, each with the
// credential of its own variable in its own field, listed at startup with
// their URLs redacted.
func TestGatewayRoutesCommand(t *testing.T) {
	t.Setenv(upstreamKeyEnv, "sk-default")
	t.Setenv("RATESTORE_TEST_ANTHROPIC", "sk-ant")
	type got struct{ auth, xak string }
	seen := make(chan got, 2)
	handler := func(w http.ResponseWriter, r *http.Request) {
		seen <- got{r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"input_tokens":3,"output_tokens":4}}`)
	}
	def, anth := httptest.NewServer(http.HandlerFunc(handler)), httptest.NewServer(http.HandlerFunc(handler))
	defer def.Close()
	defer anth.Close()
	anthURL := strings.Replace(anth.URL, "http://", "http://user:hunter2@", 1)

	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "gw", "--limit", "1000")
	g := e.startGateway("--upstream", "/v1/messages="+anthURL, "--upstream", def.URL,
		"--upstream-key-env", "/v1/messages=RATESTORE_TEST_ANTHROPIC", "--upstream-key-header", "/v1/messages=x-api-key")
	require.Equal(t, def.URL, g.out.Upstream)
	require.Equal(t, []routeOut{{Prefix: "/v1/messages", Upstream: strings.Replace(anthURL, "hunter2", "xxxxx", 1), KeyEnv: "RATESTORE_TEST_ANTHROPIC"}}, g.out.Routes)
	for path, want := range map[string]got{
		"/v1/messages":         {"", "sk-ant"},
		"/v1/chat/completions": {"Bearer sk-default", ""},
	} {
		resp, _ := send(t, "POST", "http://"+g.out.Listen+path, `{"model":"m"}`, created.Secret)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, want, <-seen, path)
	}
	require.Equal(t, exitOK, g.stop())
	logs := g.stdout.String() + g.stderr.String()
	for _, s := range []string{"hunter2", "sk-ant", "sk-default", created.Secret} {
		require.NotContains(t, logs, s)
	}
	require.EqualValues(t, 14, e.usageOf(created.Key.ID).Used)
}

// TestGatewayTextRoutes: the text startup output lists the routes.
func TestGatewayTextRoutes(t *testing.T) {
	e := newEnv(t)
	stdout := newLines()
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	cfg := config{Now: func() time.Time { return now }, Terminal: func(io.Writer) bool { return false }}
	args := []string{"--db", e.db, "gateway", "--listen", "127.0.0.1:0", "--upstream", "/v1/messages=https://u:p@api.anthropic.com", "--upstream", "/v1beta=https://generativelanguage.googleapis.com"}
	go func() { code <- run(ctx, args, strings.NewReader(""), stdout, io.Discard, cfg) }()
	stdout.await(t, "(any other path)")
	cancel()
	require.Equal(t, exitOK, <-code)
	out := stdout.String()
	require.Contains(t, out, "forwarding by path:\n  /v1/messages -> https://u:xxxxx@api.anthropic.com\n  /v1beta -> https://generativelanguage.googleapis.com\n  (any other path) -> 404\n")
}

// TestGatewayCreatesDB: the gateway starts on a database that does not
// exist yet, creates it, and says so; with no bare --upstream, an
// unrouted path gets 404.
func TestGatewayCreatesDB(t *testing.T) {
	e := newEnv(t)
	g := e.startGateway("--upstream", "/v1/messages=http://127.0.0.1:1")
	require.Empty(t, g.out.Upstream)
	g.stderr.await(t, "gateway: created the database")
	require.Equal(t, exitOK, g.stop())
	e.ok("keys", "list")
	_, err := os.Stat(e.db)
	require.NoError(t, err)
}

// TestGatewayShadowAdmin: --shadow serves a key over its limit and logs
// it; an admin token from the environment or a file opens the admin API,
// with a warning when listening beyond loopback.
func TestGatewayShadowAdmin(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"total_tokens":30}}`)
	}))
	defer up.Close()
	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "gw", "--limit", "20")
	t.Setenv(adminTokenEnv, "admin-token-from-env-0123456789ab")
	g := e.startGateway("--upstream", up.URL, "--shadow")
	require.True(t, g.out.Shadow)
	require.True(t, g.out.Admin)
	for range 2 { // the second is over the limit
		resp, _ := send(t, "POST", "http://"+g.out.Listen+"/v1/chat/completions", `{"model":"m"}`, created.Secret)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	line := g.stderr.await(t, "gateway: shadow: would refuse")
	require.Contains(t, line, `"key_id":"`+created.Key.ID+`"`)
	require.Contains(t, line, `"reason":"window"`)
	require.Equal(t, exitOK, g.stop())
	require.Contains(t, g.stderr.String(), "gateway: shadow mode")
	require.NotContains(t, g.stderr.String(), "admin-token-from-env")
	require.NotContains(t, g.stderr.String(), "admin API is reachable beyond loopback")
	require.EqualValues(t, 60, e.usageOf(created.Key.ID).Used)

	file := filepath.Join(t.TempDir(), "admin-token")
	require.NoError(t, os.WriteFile(file, []byte("admin-token-from-file-0123456789\n"), 0o600))
	t.Setenv(adminTokenEnv, "")
	g = e.startGateway("--upstream", up.URL, "--admin-token-file", file, "--listen", "0.0.0.0:0")
	require.True(t, g.out.Admin)
	require.False(t, g.out.Shadow)
	g.stderr.await(t, "admin API is reachable beyond loopback")
	require.Equal(t, exitOK, g.stop())

	g = e.startGateway("--upstream", up.URL)
	require.False(t, g.out.Admin)
	require.Equal(t, exitOK, g.stop())
}

// send sends a request with body ("": none) and secret as its bearer
// token, and returns the response and its body, read whole.
func send(t *testing.T, method, url, body, secret string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func TestParseWeights(t *testing.T) {
	w, err := parseWeights("output=4, cache_read=0.1")
	require.NoError(t, err)
	require.Equal(t, gateway.Weights{Input: 1, Output: 4, CacheRead: 0.1, CacheWrite: 1}, *w)
	w, err = parseWeights("input=0,output=0,cache_read=0,cache_write=0")
	require.NoError(t, err)
	require.Equal(t, gateway.Weights{}, *w)
	for _, bad := range []string{"", "input", "input=", "input=x", "input=1e400", "Input=1", "input=1,,output=2"} {
		_, err := parseWeights(bad)
		require.Error(t, err, bad)
	}
}

// TestGatewayRedis: two gateway commands given one password-protected
// Redis share its keys: a key created through one's admin API is metered
// by the other, whose usage the first reports; the password is never
// printed, and no database file is made.
func TestGatewayRedis(t *testing.T) {
	srv := redistest.Start(t)
	require.NoError(t, redis.NewClient(&redis.Options{Addr: srv.Addr}).ConfigSet(context.Background(), "requirepass", "pass@word").Err())
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","usage":{"input_tokens":7,"output_tokens":5}}`)
	}))
	defer up.Close()
	t.Setenv(adminTokenEnv, "admin-token-0123456789abcdef012345")
	e := newEnv(t)
	url := "redis://:pass%40word@" + srv.Addr + "/0"
	a := e.startGateway("--upstream", up.URL, "--redis", url)
	b := e.startGateway("--upstream", up.URL, "--redis", url, "--redis-clock") // one on Redis's clock: the same decisions
	require.Equal(t, "redis://:xxxxx@"+srv.Addr+"/0", a.out.Redis, "the password is not printed")
	require.Empty(t, a.out.Durability)

	call := func(g *gatewayRun, method, path, auth, body string) (int, []byte) {
		resp, got := send(t, method, "http://"+g.out.Listen+path, body, auth)
		return resp.StatusCode, []byte(got)
	}
	code, body := call(a, "POST", "/admin/keys", "admin-token-0123456789abcdef012345", `{"name":"shared","windows":[{"limit":1000,"window":"5h"}]}`)
	require.Equal(t, http.StatusCreated, code, string(body))
	var created admin.Created
	require.NoError(t, json.Unmarshal(body, &created))

	code, body = call(b, "POST", "/v1/messages", created.Secret, `{"model":"claude-x","max_tokens":10}`)
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, exitOK, b.stop(), "b stops once the request has charged its usage")
	code, body = call(a, "GET", "/admin/keys/"+created.Key.ID, "admin-token-0123456789abcdef012345", "")
	require.Equal(t, http.StatusOK, code, string(body))
	var k admin.Key
	require.NoError(t, json.Unmarshal(body, &k))
	require.EqualValues(t, 12, k.Windows[0].Used, "b's usage, as a reports it")

	require.Equal(t, exitOK, a.stop())
	require.NotContains(t, a.stderr.String()+b.stderr.String(), "pass@word")
	_, err := os.Stat(e.db)
	require.True(t, os.IsNotExist(err), "--redis opens no database file")
}
