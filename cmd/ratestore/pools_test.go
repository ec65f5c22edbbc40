package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/fakeprovider"
)

// TestGatewayPools: the upstreams of --config are served: each with its
// credential from its key_env, a failing one cooled down and the request
// sent to the next; POST /admin/config/reload applies a new file, refuses
// a bad one naming its line and keeps the running upstreams; ratestore
// upstreams shows them.
func TestGatewayPools(t *testing.T) {
	t.Setenv("FAKE_KEY_A", "sk-a")
	t.Setenv("FAKE_KEY_B", "sk-b")
	t.Setenv(adminTokenEnv, testAdminToken)
	a := fakeprovider.New(fakeprovider.Options{API: fakeprovider.OpenAI, Key: "sk-a"})
	b := fakeprovider.New(fakeprovider.Options{API: fakeprovider.OpenAI, Key: "sk-b"})
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	defer sa.Close()
	defer sb.Close()
	config := func(weightA int, extra string) string {
		return "upstreams:\n" +
			"  - {name: a, api: openai, url: " + sa.URL + ", key_env: FAKE_KEY_A, weight: " + strconv.Itoa(weightA) + ", limits: {tokens_per_minute: 100000}}\n" +
			"  - {name: b, api: openai, url: " + sb.URL + ", key_env: FAKE_KEY_B, models: [\"gpt-*\"]}\n" + extra
	}
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config(5, "")), 0o600))
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "k", "--limit", "100000")
	g := e.startGateway("--config", path)
	base := "http://" + g.out.Listen
	chat := func() (*http.Response, string) {
		return send(t, "POST", base+"/v1/chat/completions", `{"model":"gpt-4o","max_tokens":20,"messages":[]}`, created.Secret)
	}
	resp, body := chat()
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.EqualValues(t, 1, a.Stats().Served, "the heavier first, with its own credential")

	a.Fail(http.StatusServiceUnavailable)
	resp, body = chat()
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.EqualValues(t, 1, b.Stats().Served, "failed over")

	ups := jsonOf[admin.Upstreams](e, "upstreams", "--admin", base).Upstreams
	require.Len(t, ups, 2)
	require.Equal(t, "a", ups[0].Name)
	require.NotNil(t, ups[0].CoolingDownUntil, "a cools down")
	require.EqualValues(t, 1, ups[0].Errors)
	require.EqualValues(t, 100000, ups[0].Limits.TokensPerMinute)
	require.Positive(t, ups[0].Used.TokensPerMinute)

	require.NoError(t, os.WriteFile(path, []byte(config(1, "  - {name: b, api: openai, url: "+sb.URL+"}\n")), 0o600))
	resp, body = send(t, "POST", base+"/admin/config/reload", "", testAdminToken)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, "line 4")
	require.Contains(t, body, "invalid_config")

	require.NoError(t, os.WriteFile(path, []byte(config(1, "")+"  - {name: c, api: anthropic, url: "+sb.URL+"}\n"), 0o600))
	resp, body = send(t, "POST", base+"/admin/config/reload", "", testAdminToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var rl admin.Reloaded
	require.NoError(t, json.Unmarshal([]byte(body), &rl))
	require.Equal(t, 3, rl.Upstreams)
	require.Positive(t, rl.Models, "the prices, read again")
	r := e.run("upstreams", "--admin", base)
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, name := range []string{"a ", "b ", "c "} {
		require.Contains(t, r.stdout, name)
	}
	require.Equal(t, exitOK, g.stop(), g.stderr.String())
	logs := g.stderr.String()
	require.NotContains(t, logs, "sk-a")
	require.Contains(t, logs, `"upstream":"b"`, "the request line names its upstream")
	require.Contains(t, logs, "trying the next")
}

// TestGatewayHangup: SIGHUP reads --config again: its upstreams replace the
// running ones, and a bad file is logged and changes nothing.
func TestGatewayHangup(t *testing.T) {
	t.Setenv(adminTokenEnv, testAdminToken)
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	write := func(names ...string) {
		var b strings.Builder
		b.WriteString("upstreams:\n")
		for _, n := range names {
			b.WriteString("  - {name: " + n + ", api: openai, url: http://127.0.0.1:9}\n")
		}
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	}
	write("a")
	g := e.startGateway("--config", path)
	base := "http://" + g.out.Listen
	count := func() int {
		resp, body := send(t, "GET", base+"/admin/upstreams", "", testAdminToken)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var ups admin.Upstreams
		require.NoError(t, json.Unmarshal([]byte(body), &ups))
		return len(ups.Upstreams)
	}
	require.Equal(t, 1, count())
	write("a", "b", "c")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	g.stderr.await(t, "gateway: reloaded")
	require.Equal(t, 3, count())
	write("a", "a")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	g.stderr.await(t, "the running configuration stays")
	require.Equal(t, 3, count())
	require.Equal(t, exitOK, g.stop(), g.stderr.String())
}
