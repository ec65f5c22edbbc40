package gateway

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/promstats"
	"github.com/stretchr/testify/require"
)

// TestConcurrentAccounting: many clients on one key, in every dialect,
// plain and streamed; the usage recorded is exactly what the upstream
// reported.
func TestConcurrentAccounting(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := e.key("busy", 1<<40)
	const clients, each = 32, 10
	paths := []string{"/v1/chat/completions", "/v1/messages"}
	var wg sync.WaitGroup
	var sent atomic.Int64
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for i := range each {
				q := fakeReq{Stream: i%2 == 1, Input: rng.Int64N(5000), Output: 1 + rng.Int64N(2000)}
				resp, body, err := e.try(e.request("POST", paths[rng.IntN(2)], secret, q))
				if err != nil {
					t.Error(err)
					return
				}
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d: %s", resp.StatusCode, body)
					return
				}
				sent.Add(q.Input + q.Output)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, clients*each, e.up.hits.Load())
	require.Equal(t, sent.Load(), e.up.reported.Load())
	require.Equal(t, sent.Load(), e.usage(k.ID).Used)
	require.Equal(t, sent.Load(), e.lifetime(k.ID))
}

// TestRefusals: 401, 403 and 429 with their bodies, and none of them
// reaches the upstream or echoes the secret.
func TestRefusals(t *testing.T) {
	e := newEnv(t, Options{})
	_, disabled := e.key("disabled", 100)
	_, expired := e.key("expired", 100)
	k, full := e.key("full", 100)
	ks := e.keys()
	ctx := context.Background()
	dk, err := ks.Authenticate(ctx, disabled)
	require.NoError(t, err)
	require.NoError(t, ks.Disable(ctx, dk.ID))
	ek, err := ks.Authenticate(ctx, expired)
	require.NoError(t, err)
	_, err = ks.Update(ctx, ek.ID, func(s *keystore.Spec) error {
		s.ExpiresAt = start.Add(time.Minute)
		return nil
	})
	require.NoError(t, err)
	e.clock.Advance(time.Minute) // expired from ExpiresAt on

	// A key at its limit is still allowed: 150 tokens take it past.
	resp, body := e.call("POST", "/v1/chat/completions", full, fakeReq{Input: 100, Output: 50})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.EqualValues(t, 150, e.usage(k.ID).Used)
	hits := e.up.hits.Load()

	for _, c := range []struct {
		name   string
		header func(h http.Header)
		status int
		code   string
	}{
		{"none", func(http.Header) {}, 401, "missing_api_key"},
		{"unknown x-goog-api-key", func(h http.Header) { h.Set("X-Goog-Api-Key", "rsk_unknown") }, 401, "invalid_api_key"},
		{"empty bearer", func(h http.Header) { h.Set("Authorization", "Bearer  ") }, 401, "missing_api_key"},
		{"basic", func(h http.Header) { h.Set("Authorization", "Basic "+full) }, 401, "missing_api_key"},
		{"unknown", func(h http.Header) { h.Set("Authorization", "Bearer rsk_unknown") }, 401, "invalid_api_key"},
		{"unknown x-api-key", func(h http.Header) { h.Set("X-Api-Key", "rsk_unknown") }, 401, "invalid_api_key"},
		{"disabled", func(h http.Header) { h.Set("Authorization", "Bearer "+disabled) }, 403, "key_disabled"},
		{"expired", func(h http.Header) { h.Set("X-Api-Key", expired) }, 403, "key_expired"},
	} {
		req := e.request("POST", "/v1/chat/completions", "", fakeReq{Input: 1})
		c.header(req.Header)
		resp, body := e.do(req)
		require.Equal(t, c.status, resp.StatusCode, c.name)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		typ := map[int]string{401: "authentication_error", 403: "permission_error"}[c.status]
		require.Equal(t, c.code, apiError(t, body, typ)["code"], c.name)
		if c.status == 401 {
			require.Equal(t, "Bearer", resp.Header.Get("WWW-Authenticate"))
		}
		for _, s := range []string{full, disabled, expired} {
			require.NotContains(t, string(body), s)
		}
	}

	// Past its limit: 429 until the usage expires, 5 hours after its
	// bucket (12:00) started.
	resp, body = e.call("POST", "/v1/chat/completions", full, fakeReq{Input: 1})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	wait := start.Add(5 * time.Hour).Sub(e.clock.Now())
	require.Equal(t, "17940", resp.Header.Get("Retry-After"))
	require.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	require.Equal(t, 17940*time.Second, wait)
	m := apiError(t, body, "rate_limit_error")
	require.Equal(t, "rate_limit_exceeded", m["code"])
	require.Equal(t, "key "+k.ID+" is over its 5h0m0s token window: 100 tokens; retry after 4h59m0s", m["message"])
	require.Equal(t, hits, e.up.hits.Load(), "a refused request reached the upstream")

	e.clock.Advance(wait)
	resp, body = e.call("POST", "/v1/chat/completions", full, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.EqualValues(t, 1, e.usage(k.ID).Used)
}

// TestUpstreamFailures: what an upstream reports is charged whatever its
// status; a model call that reports nothing is charged its estimate; a
// request that generates nothing, or that never reached the upstream,
// nothing.
func TestUpstreamFailures(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := e.key("k", 1e6)

	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Mode: "error"})
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.JSONEq(t, `{"error":{"message":"overloaded"},"usage":{"total_tokens":999}}`, string(body))
	require.EqualValues(t, 999, e.usage(k.ID).Used)

	resp, body = e.call("GET", "/v1/models", secret, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, body)
	require.EqualValues(t, 999, e.usage(k.ID).Used)

	used := int64(999)
	for _, mode := range []string{"plain", "nousage"} {
		q := fakeReq{Mode: mode, MaxTokens: 10}
		resp, body = e.call("POST", "/v1/chat/completions", secret, q)
		require.Equal(t, http.StatusOK, resp.StatusCode, mode)
		require.NotEmpty(t, body)
		used += reserveOf(t, q, 10)
		require.Equal(t, used, e.usage(k.ID).Used, mode)
	}
	require.EqualValues(t, 4, e.up.hits.Load())
	require.Equal(t, used, e.lifetime(k.ID))

	// The upstream is gone: nothing was sent, nothing generated. The
	// gateway's idle connections to it go first, so that the request dials
	// (and fails to) rather than being written to a connection the
	// upstream closed, which the gateway cannot tell from one that got it.
	e.up.srv.Close()
	e.gw.transport.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	resp, body = e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 5})
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Equal(t, "upstream_unavailable", apiError(t, body, "api_error")["code"])
	require.Equal(t, used, e.usage(k.ID).Used)
}

// TestStreaming: an event stream passes through unchanged and as it comes
// (the caller reads the first event before the upstream sends the next),
// and the usage of its final events is recorded: OpenAI's last chunk, and
// Anthropic's message_start plus message_delta, each counted once.
func TestStreaming(t *testing.T) {
	chat := openAIStream(11, 29)
	for _, c := range []struct {
		name, path string
		usage      bool // the request asks for the usage chunk (OpenAI)
		events     []string
	}{
		{"chat/completions", "/v1/chat/completions", true, chat},
		// The gateway asks for the usage on the caller's behalf and takes
		// its chunk out: the caller sees the rest byte for byte.
		{"chat/completions without usage", "/v1/chat/completions", false, append(chat[:4:4], chat[5])},
		{"messages", "/v1/messages", false, anthropicStream(11, 29)},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			k, secret := e.key("k", 1000)
			req := fakeReq{Stream: true, Gate: true, Input: 11, Output: 29}
			if c.usage {
				req.StreamOptions = map[string]bool{"include_usage": true}
			}
			resp, err := e.client.Do(e.request("POST", c.path, secret, req))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			br := bufio.NewReader(resp.Body)

			first := make(chan string, 1)
			go func() {
				var ev strings.Builder
				for !strings.HasSuffix(ev.String(), "\n\n") {
					line, err := br.ReadString('\n')
					ev.WriteString(line)
					if err != nil {
						break
					}
				}
				first <- ev.String()
			}()
			select {
			case ev := <-first:
				require.Equal(t, c.events[0], ev)
			case <-time.After(10 * time.Second): // a failure, not a wait: the gateway held the event back
				t.Fatal("the first event did not arrive before the upstream sent the rest")
			}
			// The reservation: the default output, capped by the window.
			require.EqualValues(t, 1000, e.usage(k.ID).Used)
			close(e.up.gate)
			rest, err := io.ReadAll(br)
			require.NoError(t, err)
			require.Equal(t, strings.Join(c.events[1:], ""), string(rest))
			<-e.served
			require.EqualValues(t, 40, e.usage(k.ID).Used)
		})
	}
}

// TestJSONDialects: plain responses of both dialects, and a gzipped one
// that the gateway asks for and decompresses.
func TestJSONDialects(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := e.key("k", 1000)
	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 3, Output: 4})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, openAIJSON(3, 4), string(body))
	require.EqualValues(t, 7, e.usage(k.ID).Used)
	resp, body = e.call("POST", "/v1/messages", secret, fakeReq{Input: 10, Output: 20})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, anthropicJSON(10, 20), string(body))
	require.EqualValues(t, 37, e.usage(k.ID).Used)

	req := e.request("POST", "/v1/chat/completions", secret, fakeReq{Mode: "gzip"})
	req.Header.Set("Accept-Encoding", "br") // not forwarded
	resp, body = e.do(req)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Content-Encoding"))
	require.Equal(t, openAIJSON(4, 3), string(body))
	require.Equal(t, "gzip", e.up.lastHeaders().Get("Accept-Encoding"))
	require.EqualValues(t, 44, e.usage(k.ID).Used)
}

// TestStats: the stats path shows the caller's own key and usage, in the
// one shape of a key (admin.Key), and nothing of another key's.
func TestStats(t *testing.T) {
	e := newEnv(t, Options{StatsPath: "/gateway/stats"})
	a, secretA := e.key("alice", 1000)
	b, secretB := e.key("bob", 500)
	e.call("POST", "/v1/chat/completions", secretA, fakeReq{Input: 10, Output: 20})
	e.call("POST", "/v1/messages", secretB, fakeReq{Input: 60, Output: 10})
	hits := e.up.hits.Load()

	fields := keyJSONFields
	// window is the usage of one 5-hour window, as the stats show it.
	window := func(used, limit int64) map[string]any {
		return map[string]any{"window": "5h0m0s", "bucket": "5m0s", "used": float64(used), "limit": float64(limit),
			"remaining": float64(limit - used), "window_end": "2026-01-18T17:00:00Z", "reset_after_seconds": 18000.0}
	}
	// stats is the stats of a key of one 5-hour window.
	stats := func(id, name string, used, limit int64) map[string]any {
		return map[string]any{"id": id, "name": name, "lifetime_tokens": float64(used), "binding": 0.0, "in_flight": 0.0,
			"windows": []any{window(used, limit)}}
	}
	for _, c := range []struct {
		path, secret string
		want         map[string]any
	}{
		{"/gateway/stats", secretA, stats(a.ID, "alice", 30, 1000)},
		{"/gateway/stats?key_id=" + b.ID, secretA, stats(a.ID, "alice", 30, 1000)},
		{"/gateway/stats", secretB, stats(b.ID, "bob", 70, 500)},
	} {
		resp, body := e.call("GET", c.path, c.secret, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, c.want, pick(decode(t, body, fields...), "id", "name", "windows", "binding", "lifetime_tokens", "in_flight"))
	}
	// A fresh key: nothing in use, no window end.
	_, secretC := e.key("carol", 10)
	_, body := e.call("GET", "/gateway/stats", secretC, nil)
	w := decode(t, body, fields...)["windows"].([]any)[0].(map[string]any)
	require.Nil(t, w["window_end"])
	require.Equal(t, 0.0, w["used"])

	resp, body := e.call("POST", "/gateway/stats", secretA, nil)
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, string(body))
	resp, _ = e.call("GET", "/gateway/stats", "", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = e.call("GET", "/gateway/stats", "rsk_nobody", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.NoError(t, e.keys().Disable(context.Background(), b.ID))
	resp, _ = e.call("GET", "/gateway/stats", secretB, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, hits, e.up.hits.Load(), "the stats path was forwarded")
}

// TestWindows: a key of two token windows is refused by the one past its
// limit, which the 429 names, until its usage expires, however much room
// the other has; the stats show both, the binding one at the top.
func TestWindows(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret, err := e.keys().Create(context.Background(), keystore.Spec{Name: "two", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1000, Window: 5 * time.Hour}, {Limit: 100, Window: 24 * time.Hour}},
	}})
	require.NoError(t, err)
	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 100, Output: 50})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))

	e.clock.Advance(5 * time.Hour) // the 5-hour window is empty again; the day is not
	resp, body = e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
	require.Equal(t, "68400", resp.Header.Get("Retry-After"))
	require.Equal(t, "key "+k.ID+" is over its 24h0m0s token window: 100 tokens; retry after 19h0m0s",
		apiError(t, body, "rate_limit_error")["message"])

	_, body = e.call("GET", DefaultStatsPath, secret, nil)
	want := map[string]any{"id": k.ID, "name": "two", "lifetime_tokens": 150.0, "binding": 1.0, "windows": []any{
		map[string]any{"window": "5h0m0s", "bucket": "5m0s", "used": 0.0, "limit": 1000.0, "remaining": 1000.0,
			"window_end": nil, "reset_after_seconds": 0.0},
		map[string]any{"window": "24h0m0s", "bucket": "24m0s", "used": 150.0, "limit": 100.0, "remaining": 0.0,
			"window_end": "2026-01-19T12:00:00Z", "reset_after_seconds": 68400.0},
	}}
	require.Equal(t, want, pick(decode(t, body, keyJSONFields...), "id", "name", "windows", "binding", "lifetime_tokens"))

	e.clock.Advance(19 * time.Hour)
	resp, body = e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
}

// TestRequestRate: with RPS, each key has its own GCRA allowance, with
// the RateLimit fields; a denied request does not reach the upstream.
func TestRequestRate(t *testing.T) {
	e := newEnv(t, Options{RPS: 1, Burst: 2})
	kA, secretA := e.key("a", 1000)
	_, secretB := e.key("b", 1000)
	for i := range 2 {
		resp, body := e.call("POST", "/v1/chat/completions", secretA, fakeReq{Input: 1})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, `"requests";q=2;w=2`, resp.Header.Get("RateLimit-Policy"))
		require.Contains(t, resp.Header.Get("RateLimit"), `"requests";r=`+[]string{"1", "0"}[i])
	}
	// A model call refused by the rate is charged nothing, not its
	// reservation.
	resp, body := e.call("POST", "/v1/chat/completions", secretA, fakeReq{Model: "gpt-4o", MaxTokens: 10, Input: 1})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.EqualValues(t, 2, e.usage(kA.ID).Used)
	require.Zero(t, e.usage(kA.ID).InFlight)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Equal(t, `"requests";r=0;t=1`, resp.Header.Get("RateLimit"))
	require.Equal(t, "rate_limit_exceeded", apiError(t, body, "rate_limit_error")["code"])
	require.Empty(t, resp.Header.Get("X-Should-Retry"))
	require.EqualValues(t, 2, e.up.hits.Load())

	resp, _ = e.call("POST", "/v1/chat/completions", secretB, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode, "another key has its own allowance")
	e.clock.Advance(time.Second)
	resp, _ = e.call("POST", "/v1/chat/completions", secretA, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 4, e.up.hits.Load())

	_, err := e.newGateway(Options{Upstream: e.up.url(t), Burst: 3})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
}

// TestUpstreamHeaders: the caller's key fields never reach the upstream;
// the gateway's own credential does, where it is configured to go.
func TestUpstreamHeaders(t *testing.T) {
	for _, c := range []struct {
		name      string
		opts      Options
		auth, xak string
	}{
		{"no upstream key", Options{}, "", ""},
		{"bearer", Options{UpstreamKey: "sk-upstream"}, "Bearer sk-upstream", ""},
		{"x-api-key", Options{UpstreamKey: "sk-ant", UpstreamKeyHeader: "x-api-key"}, "", "sk-ant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			e := newEnv(t, opts)
			_, secret := e.key("k", 1000)
			for _, set := range []func(h http.Header){
				func(h http.Header) { h.Set("Authorization", "Bearer "+secret) },
				func(h http.Header) { h.Set("X-Api-Key", secret) },
			} {
				req := e.request("GET", "/v1/models?x=1", "", nil)
				set(req.Header)
				req.Header.Set("X-Custom", "dropped")
				req.Header.Set("Anthropic-Version", "2023-06-01")
				resp, _ := e.do(req)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				h := e.up.lastHeaders()
				require.Equal(t, c.auth, h.Get("Authorization"))
				require.Equal(t, c.xak, h.Get("X-Api-Key"))
				require.Equal(t, "2023-06-01", h.Get("Anthropic-Version"))
				require.Empty(t, h.Get("X-Custom"))
				require.Empty(t, h.Get("X-Forwarded-For"))
				require.Regexp(t, `^req_[0-9a-f]{16}$`, resp.Header.Get(RequestIDHeader))
			}
		})
	}
}

// TestUpstreamPrefix: the upstream's path prefix comes before the
// request's path.
func TestUpstreamPrefix(t *testing.T) {
	var got atomic.Value
	prefixed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.URL.RequestURI())
		if r.Method == "GET" {
			writeBody(w, "application/json", `{"object":"list","data":[]}`)
			return
		}
		writeBody(w, "application/json", `{"usage":{"total_tokens":5}}`)
	}))
	t.Cleanup(prefixed.Close)
	u, err := url.Parse(prefixed.URL + "/api")
	require.NoError(t, err)
	e := newEnv(t, Options{Upstream: u})
	k, secret := e.key("k", 1000)
	resp, _ := e.call("GET", "/v1/models?limit=2", secret, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "/api/v1/models?limit=2", got.Load())
	require.Zero(t, e.usage(k.ID).Used, "no usage reported")
	resp, _ = e.call("POST", "/v1/embeddings", secret, fakeReq{})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "/api/v1/embeddings", got.Load())
	require.EqualValues(t, 5, e.usage(k.ID).Used)
}

// TestLogs: a line per request, with its key ID and never a secret.
func TestLogs(t *testing.T) {
	var logs logbuf.Buffer
	e := newEnv(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	k, secret := e.key("k", 1000)
	e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 2, Output: 3})
	e.call("POST", "/v1/chat/completions", secret+"x", fakeReq{})
	req := e.request("GET", "/v1/models", "", nil)
	req.Header.Set("X-Api-Key", secret)
	e.do(req)
	out := logs.String()
	require.NotContains(t, out, secret)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	var first, second map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second))
	require.Equal(t, "gateway request", first["msg"])
	require.Equal(t, k.ID, first["key_id"])
	require.Equal(t, 200.0, first["status"])
	require.Equal(t, 5.0, first["tokens"])
	require.Equal(t, "/v1/chat/completions", first["path"])
	require.NotEmpty(t, first["request_id"])
	require.Contains(t, first, "latency")
	require.Equal(t, 401.0, second["status"])
	require.Equal(t, "", second["key_id"])
	require.NotEqual(t, first["request_id"], second["request_id"])
}

func TestNewErrors(t *testing.T) {
	e := newEnv(t, Options{})
	for _, opts := range []Options{
		{},
		{Upstream: &url.URL{Scheme: "ftp", Host: "x"}},
		{Upstream: &url.URL{Scheme: "http"}},
		{Upstream: e.up.url(t), StatsPath: "stats"},
		{Upstream: e.up.url(t), RPS: -1},
		{Upstream: e.up.url(t), RPS: 1, Burst: -1},
		{Upstream: e.up.url(t), Weights: &Weights{Input: -1, Output: 1}},
		{Upstream: e.up.url(t), Weights: &Weights{Output: math.Inf(1)}},
		{Upstream: e.up.url(t), Weights: &Weights{CacheRead: math.NaN()}},
		{Upstream: e.up.url(t), MaxRequestBody: -1},
		{Upstream: e.up.url(t), DefaultMaxTokens: -1},
	} {
		_, err := e.newGateway(opts)
		require.ErrorIs(t, err, ratestore.ErrInvalid, "%+v", opts)
	}
	_, err := New((*ratestore.DB)(nil), Options{Upstream: e.up.url(t)})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	_, err = e.newGateway(Options{Upstream: &url.URL{Scheme: "ftp", User: url.UserPassword("u", "hunter2"), Host: "x"}})
	require.NotContains(t, err.Error(), "hunter2")
}

// Helpers.

// start is the tests' clock at its start: on a bucket boundary of the
// usage window (5 minutes), so that window ends are whole.
var start = time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)

// fakeReq is the body of a request to the fake upstream: the usage it is to
// report, and whether to stream it.
type fakeReq struct {
	Stream bool  `json:"stream"`
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	// Gate makes a stream wait, after its first event, until the test
	// closes upstream.gate.
	Gate bool `json:"gate"`
	// Model and MaxTokens are what a model call names; e.request names
	// testModel when Model is "".
	Model     string `json:"model"`
	MaxTokens int64  `json:"max_tokens,omitempty"`
	// StreamOptions is OpenAI's: {"include_usage": true} asks a stream for
	// its usage chunk.
	StreamOptions map[string]bool `json:"stream_options,omitempty"`
	// Mode makes the upstream answer a chat completion otherwise: "error"
	// (500, reporting 999 tokens), "hang" (never), "plain" (text/plain
	// with a usage), "gzip" (gzipped if asked for), "nousage" (JSON
	// without one).
	Mode string `json:"mode,omitempty"`
}

// upstream is a fake model API speaking OpenAI's and Anthropic's dialects,
// plain and streamed, over loopback.
type upstream struct {
	srv      *httptest.Server
	hits     atomic.Int64 // requests received
	reported atomic.Int64 // tokens reported in successful responses
	gate     chan struct{}

	mu      sync.Mutex
	headers http.Header // of the last request
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{gate: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		q := u.request(w, r)
		if q.Mode != "" {
			u.odd(w, r, q.Mode)
			return
		}
		total := q.Input + q.Output
		if q.Stream {
			u.stream(w, r, q.Gate, openAIStream(q.Input, q.Output))
		} else {
			writeBody(w, "application/json", openAIJSON(q.Input, q.Output))
		}
		u.reported.Add(total)
	})
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		q := u.request(w, r)
		if q.Stream {
			u.stream(w, r, q.Gate, anthropicStream(q.Input, q.Output))
		} else {
			writeBody(w, "application/json", anthropicJSON(q.Input, q.Output))
		}
		u.reported.Add(q.Input + q.Output)
	})
	mux.HandleFunc("POST /v1beta/", func(w http.ResponseWriter, r *http.Request) {
		u.request(w, r)
		writeBody(w, "application/json", `{"candidates":[]}`) // no usage the gateway reads
	})
	mux.HandleFunc("DELETE /v1/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
		u.request(w, r)
		writeBody(w, "application/json", `{"id":"resp_1","object":"response.deleted","deleted":true}`)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		u.request(w, r)
		writeBody(w, "application/json", `{"object":"list","data":[]}`)
	})
	// A stored response, retrieved or deleted: its usage was charged when
	// it was made. A model reports a usage too, as a lenient upstream may.
	for _, pattern := range []string{"GET /v1/responses/{id}", "GET /v1/models/{id}"} {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			u.request(w, r)
			writeBody(w, "application/json", `{"id":"resp_1","object":"response","usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}`)
		})
	}
	u.srv = httptest.NewServer(mux)
	t.Cleanup(u.srv.Close)
	return u
}

// odd answers a chat completion as q.Mode says.
func (u *upstream) odd(w http.ResponseWriter, r *http.Request, mode string) {
	switch mode {
	case "error":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"overloaded"},"usage":{"total_tokens":999}}`)
	case "hang":
		<-r.Context().Done() // never answers; the gateway gives up
	case "plain":
		writeBody(w, "text/plain", `{"usage":{"total_tokens":999}}`)
	case "nousage":
		writeBody(w, "application/json", `{"object":"chat.completion","choices":[]}`)
	case "gzip":
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			writeBody(w, "application/json", openAIJSON(4, 3))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, openAIJSON(4, 3))
		zw.Close()
		u.reported.Add(7)
	}
}

// request notes r and decodes its fakeReq, if any.
func (u *upstream) request(_ http.ResponseWriter, r *http.Request) fakeReq {
	u.hits.Add(1)
	u.mu.Lock()
	u.headers = r.Header.Clone()
	u.mu.Unlock()
	var q fakeReq
	json.NewDecoder(r.Body).Decode(&q)
	return q
}

func (u *upstream) lastHeaders() http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.headers
}

func (u *upstream) url(t testing.TB) *url.URL {
	p, err := url.Parse(u.srv.URL)
	require.NoError(t, err)
	return p
}

// stream writes events one at a time, each flushed, waiting for the gate
// after the first when asked to.
func (u *upstream) stream(w http.ResponseWriter, r *http.Request, gate bool, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	for i, ev := range events {
		io.WriteString(w, ev)
		http.NewResponseController(w).Flush()
		if i == 0 && gate {
			select {
			case <-u.gate:
			case <-r.Context().Done():
				return
			}
		}
	}
}

func writeBody(w http.ResponseWriter, contentType, body string) {
	w.Header().Set("Content-Type", contentType)
	io.WriteString(w, body)
}

func openAIJSON(in, out int64) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
}

func anthropicJSON(in, out int64) string {
	return fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`, in, out)
}

// openAIStream is a chat completion streamed with
// stream_options.include_usage: every chunk has "usage": null but the last
// one before [DONE], which has no choices.
func openAIStream(in, out int64) []string {
	chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-x","choices":[%s],"usage":%s}` + "\n\n"
	return []string{
		fmt.Sprintf(chunk, `{"index":0,"delta":{"role":"assistant","content":""}}`, "null"),
		fmt.Sprintf(chunk, `{"index":0,"delta":{"content":"Hel"}}`, "null"),
		fmt.Sprintf(chunk, `{"index":0,"delta":{"content":"lo"}}`, "null"),
		fmt.Sprintf(chunk, `{"index":0,"delta":{},"finish_reason":"stop"}`, "null"),
		fmt.Sprintf(chunk, "", fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, in, out, in+out)),
		"data: [DONE]\n\n",
	}
}

// anthropicStream is a message streamed as Anthropic does: message_start
// reports the input tokens (and 1 output token so far), message_delta the
// final output tokens.
func anthropicStream(in, out int64) []string {
	return []string{
		fmt.Sprintf("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"stop_reason\":null,\"usage\":{\"input_tokens\":%d,\"output_tokens\":1}}}\n\n", in),
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"event: ping\ndata: {\"type\": \"ping\"}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
		fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":%d}}\n\n", out),
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	}
}

// testModel is the model of the fakeReqs that name none.
const testModel = "test-model"

// withModel is body with testModel as its model, if it is a fakeReq that
// names none.
func withModel(body any) any {
	if q, ok := body.(fakeReq); ok && q.Model == "" {
		q.Model = testModel
		return q
	}
	return body
}

// env is a gateway served over loopback in front of a fake upstream, on a
// backend with a fake clock: backendtest.Single, a database in a temporary
// directory, or with RATESTORE_TEST_BACKEND=redis (which .ci/run sets for
// one more run of the suite) a redis-server of its own. Tests make
// gateways on it with newGateway, whichever it is.
type env struct {
	t     testing.TB
	clock *fakeclock.Clock
	st    *backendtest.Store
	// storeSessions are the console's, kept in the store as the gateway
	// command keeps them.
	storeSessions *console.Sessions
	ks            *keystore.Store
	up            *upstream
	gw            *Gateway
	op            operator         // the operator's side the env serves, if any
	console       *console.Console // nil without op.token
	srv           *httptest.Server
	client        *http.Client
	served        chan struct{} // a value each time the gateway finished a request
}

// operator is the operator's side of an env's gateway: the console
// guarding the admin API and the metrics, mounted in front of it as the
// gateway command mounts it.
type operator struct {
	token       string        // the admin token; "": none, and the gateway's operator paths answer 404
	ttl         time.Duration // the console's sessions; 0: its default
	readOnly    bool          // the console command's: look, never change
	alone       bool          // the console command's: no proxy behind it
	bodyTimeout time.Duration // the admin API's; 0: the gateway's Options.BodyTimeout
	log         *slog.Logger  // the console's and the admin API's; nil: none
}

// newEnv starts an env; opts.Upstream defaults to the fake upstream.
func newEnv(t testing.TB, opts Options) *env {
	return newEnvOp(t, opts, operator{})
}

// newEnvOp starts an env that serves the operator's side op.
func newEnvOp(t testing.TB, opts Options, op operator) *env {
	return newEnvOn(t, backendtest.Single(), ratestore.Options{}, opts, op)
}

// newEnvOn starts an env on a store of b, a database with dbOpts.
func newEnvOn(t testing.TB, b backendtest.Backend, dbOpts ratestore.Options, opts Options, op operator) *env {
	e := &env{t: t, clock: fakeclock.New(start), served: make(chan struct{}, 1<<12), op: op}
	if e.op.bodyTimeout == 0 {
		e.op.bodyTimeout = opts.BodyTimeout
	}
	if e.op.log == nil {
		e.op.log = opts.Logger
	}
	if opts.Now == nil {
		opts.Now = e.clock.Now
	}
	e.st = b.OpenWith(t, e.clock, dbOpts)
	e.storeSessions = console.StoreSessions(e.st.Store)
	e.up = newUpstream(t)
	if opts.Upstream == nil {
		opts.Upstream = e.up.url(t)
	}
	var err error
	e.gw, err = e.newGateway(opts)
	require.NoError(t, err)
	e.ks, err = keystore.Open(e.st.Store, keystore.Options{})
	require.NoError(t, err)
	e.serve()
	return e
}

// stats reports whether the env's store keeps statistics
// (promstats.Source), which /metrics shows.
func (e *env) stats() bool { _, ok := e.st.Store.(promstats.Source); return ok }

// newGateway is New on the env's store.
func (e *env) newGateway(opts Options) (*Gateway, error) {
	g, err := New(e.st.Store, opts)
	if err == nil {
		e.t.Cleanup(func() { require.NoError(e.t, g.Close(context.Background())) })
	}
	return g, err
}

// serve serves e.gw over loopback, behind the console of e.op if it has
// a token.
func (e *env) serve() {
	t := e.t
	// The env's gateway, as it is at each request: a test may replace it.
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.gw.ServeHTTP(w, r) })
	if e.op.token != "" {
		e.console = e.newConsole(e.op)
		h = e.console
	}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { e.served <- struct{}{} }()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	e.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(e.client.CloseIdleConnections)
}

// newConsole returns the console of op in front of e.gw, guarding the
// admin API on e's keys and e.gw's ledger.
func (e *env) newConsole(op operator) *console.Console {
	aopts := admin.Options{Keys: e.ks, Ledger: e.gw.Ledger(), Now: e.clock.Now, BodyTimeout: op.bodyTimeout, Log: op.log}
	copts := console.Options{Token: op.token, SessionTTL: op.ttl, ReadOnly: op.readOnly, Now: e.clock.Now, Log: op.log, BodyTimeout: op.bodyTimeout}
	if !op.readOnly {
		copts.Sessions = e.storeSessions // the console command's, read-only, keeps them in memory
	}
	if !op.alone {
		aopts.Gateway = e.gw
		copts.Metrics = e.gw.Metrics()
		copts.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.gw.ServeHTTP(w, r) })
	}
	api, err := admin.New(aopts)
	require.NoError(e.t, err)
	copts.API = api
	c, err := console.New(copts)
	require.NoError(e.t, err)
	return c
}

// key creates a key of limit tokens and returns it with its secret.
func (e *env) key(name string, limit int64) (keystore.Key, string) {
	e.t.Helper()
	k, secret, err := e.keys().Create(context.Background(), keystore.Spec{Name: name, TokenLimit: limit})
	require.NoError(e.t, err)
	return k, secret
}

// keys is the key store of the env's database: the same Store as the
// gateway's.
func (e *env) keys() *keystore.Store {
	return e.ks
}

// request makes a request to the gateway; secret goes in a bearer token
// unless it is "".
func (e *env) request(method, path, secret string, body any) *http.Request {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(withModel(body))
		require.NoError(e.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	return req
}

// do sends req, reads the whole response, and waits until the gateway has
// finished a request: once every do has returned, every request has been
// finished, its usage recorded.
func (e *env) do(req *http.Request) (*http.Response, []byte) {
	e.t.Helper()
	resp, body, err := e.try(req)
	require.NoError(e.t, err)
	return resp, body
}

// try is do for goroutines other than the test's: it returns its error.
func (e *env) try(req *http.Request) (*http.Response, []byte, error) {
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, nil, err // the gateway may not have seen it: no wait
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	<-e.served
	return resp, body, err
}

// call is do of a new request.
func (e *env) call(method, path, secret string, body any) (*http.Response, []byte) {
	e.t.Helper()
	return e.do(e.request(method, path, secret, body))
}

func (e *env) usage(id string) keystore.Usage {
	e.t.Helper()
	u, err := e.keys().Usage(context.Background(), id)
	require.NoError(e.t, err)
	return u
}

func (e *env) lifetime(id string) int64 {
	e.t.Helper()
	k, err := e.keys().Get(context.Background(), id)
	require.NoError(e.t, err)
	return k.LifetimeTokens
}

// decode decodes a JSON body into a map, requiring exactly the fields
// named.
// keyJSONFields are the fields of a key in JSON (admin.Key).
var keyJSONFields = []string{"id", "name", "model", "models", "windows", "binding", "requests_per_minute", "max_concurrent",
	"expires_at", "disabled", "lifetime_tokens", "last_used", "created_at", "in_flight", "reserved_tokens", "budgets", "lifetime_usd",
	"previous_secret_expires_at"}

// pick is m with only the fields named.
func pick(m map[string]any, fields ...string) map[string]any {
	p := make(map[string]any, len(fields))
	for _, f := range fields {
		p[f] = m[f]
	}
	return p
}

func decode(t testing.TB, body []byte, fields ...string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m), string(body))
	got := make([]string, 0, len(m))
	for k := range m {
		got = append(got, k)
	}
	require.ElementsMatch(t, fields, got, string(body))
	return m
}

// apiError decodes an error body of the gateway, requiring its shape
// ({"type":"error","error":{"type","code","message"}}) and error type typ,
// and returns its "error" object.
func apiError(t testing.TB, body []byte, typ string) map[string]any {
	t.Helper()
	m := decode(t, body, "type", "error")
	require.Equal(t, "error", m["type"])
	inner, ok := m["error"].(map[string]any)
	require.True(t, ok, string(body))
	for name := range inner {
		require.Contains(t, []string{"type", "code", "message", "param"}, name, string(body))
	}
	require.Equal(t, typ, inner["type"], string(body))
	require.NotEmpty(t, inner["code"])
	require.NotEmpty(t, inner["message"])
	return inner
}

// TestInformational: an upstream's 1xx responses, whose fields
// ReverseProxy would copy unfiltered, never reach the caller; the final
// response's fields are filtered, and keep the request's ID.
func TestInformational(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</x>; rel=preload")
		w.Header().Set("Set-Cookie", "session=upstream")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		writeBody(w, "application/json", openAIJSON(2, 3))
	}))
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	require.NoError(t, err)
	e := newEnv(t, Options{Upstream: u})
	k, secret := e.key("k", 1000)
	var early []int
	req := e.request("POST", "/v1/chat/completions", secret, fakeReq{})
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			early = append(early, code)
			return nil
		},
	}))
	resp, body := e.do(req)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Empty(t, early)
	require.Empty(t, resp.Header.Values("Set-Cookie"))
	require.Empty(t, resp.Header.Values("Link"))
	require.Len(t, resp.Header.Values(RequestIDHeader), 1)
	require.EqualValues(t, 5, e.usage(k.ID).Used)
}
