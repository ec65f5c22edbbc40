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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/keystore"
	"github.com/stretchr/testify/require"
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
		if r.URL.Path == "/slow" {
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
	created := jsonOf[createOut](e, "keys", "create", "--name", "gw", "--limit", "1000")
	g := e.startGateway("--upstream", up.URL, "--rps", "100")
	require.Equal(t, gatewayOut{Listen: g.out.Listen, Upstream: up.URL, StatsPath: "/stats", RPS: 100, Burst: 0, Durability: "sync"}, g.out)
	host, _, err := net.SplitHostPort(g.out.Listen)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	base := "http://" + g.out.Listen

	call := func(method, path, secret string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, body := call("POST", "/v1/chat/completions", created.Secret)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotEmpty(t, resp.Header.Get("RateLimit"))
	auth, _ := gotAuth.Load("/v1/chat/completions")
	require.Equal(t, "Bearer sk-upstream", auth)
	resp, body = call("GET", "/stats", created.Secret)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var st gateway.Stats
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, created.Key.ID, st.KeyID)
	resp, _ = call("POST", "/v1/chat/completions", "rsk_nobody")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// A stream in flight when the command is stopped.
	req, err := http.NewRequest("POST", base+"/slow", nil)
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
	} {
		r := e.run(c.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
	}
	e.requireNoDB()
	r := e.run("gateway", "--upstream", "http://x")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "no database at")
	e.requireNoDB()

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
