package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/ratestore/ratestore/keystore"
	"github.com/stretchr/testify/require"
)

// shadowLines returns the "would refuse" lines of logs, decoded.
func shadowLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !strings.Contains(line, "gateway: shadow: would refuse") {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

// TestShadow: in shadow mode a request over a token window, over the
// request rate, over the concurrency cap or for a model the key may not
// use is served and its usage charged (past the limit), with a warning
// that names what would have refused it; unknown, disabled and expired
// keys are refused still. Without shadow mode the same requests are
// refused.
func TestShadow(t *testing.T) {
	chat := "/v1/chat/completions"
	var logs logbuf.Buffer
	e := newEnv(t, Options{Shadow: true, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	k, secret := e.key("full", 100)

	// Within the limit, then over it: served all the same, and charged.
	resp, body := e.call("POST", chat, secret, fakeReq{Input: 100, Output: 50})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Empty(t, shadowLines(t, logs.String()))
	resp, body = e.call("POST", chat, secret, fakeReq{Input: 30, Output: 20})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Empty(t, resp.Header.Get("Retry-After"))
	u := e.usage(k.ID)
	require.EqualValues(t, 200, u.Used, "charged past the limit")
	require.Zero(t, u.InFlight)
	require.EqualValues(t, 200, e.lifetime(k.ID))
	require.EqualValues(t, 2, e.up.hits.Load())
	lines := shadowLines(t, logs.String())
	require.Len(t, lines, 1, logs.String())
	require.Equal(t, "WARN", lines[0]["level"])
	require.Equal(t, k.ID, lines[0]["key_id"])
	require.Equal(t, "window", lines[0]["reason"])
	require.Equal(t, "window 5h0m0s", lines[0]["limit"])
	require.EqualValues(t, 5*3600, lines[0]["retry_after"])
	require.NotEmpty(t, lines[0]["request_id"])
	require.NotContains(t, logs.String(), secret)
	require.NotContains(t, logs.String(), "charging usage failed")

	// A model the key may not use.
	km, secretM := e.policyKey("models", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}}, Models: []string{"gpt-4o*"}})
	resp, body = e.call("POST", chat, secretM, fakeReq{Model: "o3", Input: 4, Output: 6})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.EqualValues(t, 10, e.usage(km.ID).Used)
	lines = shadowLines(t, logs.String())
	require.Len(t, lines, 2)
	require.Equal(t, "model", lines[1]["reason"])
	require.Equal(t, "o3", lines[1]["model"])
	require.EqualValues(t, -1, lines[1]["retry_after"], "never")

	// The concurrency cap: a stream holds the only slot.
	kc, secretC := e.policyKey("c", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}}, MaxConcurrent: 1})
	held, err := e.client.Do(e.request("POST", chat, secretC, fakeReq{Model: "gpt-4o", Stream: true, Gate: true, Input: 11, Output: 29}))
	require.NoError(t, err)
	defer held.Body.Close()
	br := bufio.NewReader(held.Body)
	firstEvent(t, br)
	resp, body = e.call("POST", chat, secretC, fakeReq{Model: "gpt-4o", Input: 1, Output: 2})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	close(e.up.gate)
	_, err = io.ReadAll(br)
	require.NoError(t, err)
	<-e.served
	u = e.usage(kc.ID)
	require.EqualValues(t, 40+3, u.Used)
	require.Zero(t, u.InFlight)
	lines = shadowLines(t, logs.String())
	require.Len(t, lines, 3)
	require.Equal(t, "concurrency", lines[2]["reason"])

	// Identity is not a limit: refused as ever.
	ctx := context.Background()
	_, disabled := e.key("disabled", 100)
	dk, err := e.keys().Authenticate(ctx, disabled)
	require.NoError(t, err)
	require.NoError(t, e.keys().Disable(ctx, dk.ID))
	hits := e.up.hits.Load()
	resp, _ = e.call("POST", chat, disabled, fakeReq{Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = e.call("POST", chat, "rsk_unknown", fakeReq{Input: 1})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, hits, e.up.hits.Load())
	require.Len(t, shadowLines(t, logs.String()), 3)

	// Without shadow mode, the key over its window is refused.
	off, err := e.newGateway(Options{Upstream: e.up.url(t)})
	require.NoError(t, err)
	e.gw = off
	resp, body = e.call("POST", chat, secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "rate_limit_exceeded", apiError(t, body, "rate_limit_error")["code"])
	resp, _ = e.call("POST", chat, secretM, fakeReq{Model: "o3", Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.EqualValues(t, 200, e.usage(k.ID).Used)
	require.Equal(t, hits, e.up.hits.Load())
}

// TestShadowRate: in shadow mode, a request over Options.RPS is served,
// with its RateLimit fields but no Retry-After, and logged.
func TestShadowRate(t *testing.T) {
	var logs logbuf.Buffer
	e := newEnv(t, Options{Shadow: true, RPS: 1, Burst: 1, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	k, secret := e.key("k", 1000)
	for i := range 2 {
		resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 2, Output: 3})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Empty(t, resp.Header.Get("Retry-After"))
		require.Equal(t, `"requests";r=0;t=1`, resp.Header.Get("RateLimit"), i)
	}
	require.EqualValues(t, 2, e.up.hits.Load())
	require.EqualValues(t, 10, e.usage(k.ID).Used)
	lines := shadowLines(t, logs.String())
	require.Len(t, lines, 1, logs.String())
	require.Equal(t, "rps", lines[0]["reason"])
	require.Equal(t, k.ID, lines[0]["key_id"])
	require.EqualValues(t, 1, lines[0]["retry_after"])
}

// TestShadowEstimatedCost: a request served in shadow mode past its key's
// window, at a price, whose usage the upstream does not report, is charged
// the estimate at that price: it has no admission whose reserved cost
// could be asked for.
func TestShadowEstimatedCost(t *testing.T) {
	e := newEnv(t, Options{Shadow: true})
	k, secret := e.key("full", 10)
	q := fakeReq{Model: "gpt-4o", MaxTokens: 100, Mode: "nousage"}
	resp, body := e.call("POST", "/v1/chat/completions", secret, q)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	u := e.usage(k.ID)
	require.Equal(t, reserveOf(t, q, 100), u.Used, "the estimate, past the window")
	require.Zero(t, u.InFlight)
}
