package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/redistest"
)

// startServe runs the serve command in the background on free loopback
// ports, and returns what it printed once listening, and a stop function
// that returns its exit code.
func (e *env) startServe(args ...string) (serveOut, func() int) {
	e.t.Helper()
	stdout, stderr := newLines(), newLines()
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	args = append([]string{"--db", e.db, "--json", "serve", "--http", "127.0.0.1:0", "--resp", "127.0.0.1:0"}, args...)
	cfg := config{Now: func() time.Time { return now }, Terminal: func(io.Writer) bool { return false }}
	go func() { code <- run(ctx, args, strings.NewReader(""), stdout, stderr, cfg) }()
	stopped := false
	stop := func() int {
		cancel()
		if stopped {
			return 0
		}
		stopped = true
		return <-code
	}
	e.t.Cleanup(func() { stop() })
	stdout.await(e.t, "}")
	var out serveOut
	require.NoError(e.t, json.Unmarshal([]byte(stdout.String()), &out))
	return out, stop
}

// TestServeCommand: the command serves both sides of one database, with
// the token of --token-file, and a state it wrote is on disk after it
// stops.
func TestServeCommand(t *testing.T) {
	e := newEnv(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	out, stop := e.startServe("--token-file", tokenFile)
	require.True(t, out.Token)
	require.Equal(t, "sync", out.Durability)

	// RESP: AUTH, then CL.THROTTLE.
	c, err := net.Dial("tcp", out.RESP)
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	fmt.Fprintf(c, "CL.THROTTLE k 1 1 60\r\nAUTH s3cret\r\nCL.THROTTLE k 1 1 60\r\n")
	for _, want := range []string{"-NOAUTH Authentication required.", "+OK", "*5", ":0", ":2", ":1", ":-1", ":60"} {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, want, strings.TrimSpace(line))
	}

	// HTTP: the bearer token, then a decision.
	body := `{"limiter": "api", "key": "u1", "strategy": {"type": "gcra", "rate": 1, "burst": 2}}`
	req, _ := http.NewRequest("POST", "http://"+out.HTTP+"/v1/allow", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, _ = http.NewRequest("POST", "http://"+out.HTTP+"/v1/allow", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	resp.Body.Close()
	require.Equal(t, true, v["allowed"])
	require.Equal(t, 1.0, v["remaining"])

	require.Zero(t, stop())
	// The states are in the database the command closed.
	require.Contains(t, e.ok("inspect", "cl.throttle", "k").stdout, "gcra")
	require.Contains(t, e.ok("inspect", "api", "u1").stdout, "gcra")
}

// TestServeRedis: two serve processes given one Redis share each key's
// limit: a GCRA of 3 at once, taken in turn from either, allows 3 in all.
func TestServeRedis(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t)
	url := "redis://:pass%40word@" + srv.Addr + "/0"
	require.NoError(t, redis.NewClient(&redis.Options{Addr: srv.Addr}).ConfigSet(context.Background(), "requirepass", "pass@word").Err())
	a, _ := e.startServe("--redis", url)
	b, _ := e.startServe("--redis", url)
	require.Equal(t, "redis://:xxxxx@"+srv.Addr+"/0", a.Redis, "the password is not printed")
	require.Empty(t, a.Durability)
	var replies []string
	for i := range 5 {
		addr := a.RESP
		if i%2 == 1 {
			addr = b.RESP
		}
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		fmt.Fprintf(c, "CL.THROTTLE shared 2 1 60\r\n")
		r := bufio.NewReader(c)
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "*5", strings.TrimSpace(line))
		limited, err := r.ReadString('\n')
		require.NoError(t, err)
		replies = append(replies, strings.TrimSpace(limited))
		c.Close()
	}
	require.Equal(t, []string{":0", ":0", ":0", ":1", ":1"}, replies, "3 allowed across both servers")
	_, err := os.Stat(e.db)
	require.True(t, os.IsNotExist(err), "--redis opens no database file")
}

// TestServeRefusesOpenAddressWithoutToken: beyond loopback, a token is
// required; bad flags are usage errors.
func TestServeRefusesOpenAddressWithoutToken(t *testing.T) {
	e := newEnv(t)
	t.Setenv(serveTokenEnv, "")
	for _, args := range [][]string{
		{"serve", "--resp", "0.0.0.0:0"},
		{"serve", "--http", "0.0.0.0:0", "--resp", ""},
		{"serve", "--http", "", "--resp", ""},
		{"serve", "--durability", "never"},
	} {
		r := e.run(args...)
		require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
	}
	r := e.run("serve", "--resp", "0.0.0.0:0")
	require.Contains(t, r.stderr, "a token is required")
	_, err := os.Stat(e.db)
	require.True(t, os.IsNotExist(err), "a refused start leaves no database behind")
}
