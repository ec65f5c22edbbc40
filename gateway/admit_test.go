package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/ratestore/ratestore/keystore"
	"github.com/stretchr/testify/require"
)

// policyKey creates a key of policy p and returns it with its secret.
func (e *env) policyKey(name string, p keystore.Policy) (keystore.Key, string) {
	e.t.Helper()
	k, secret, err := e.keys().Create(context.Background(), keystore.Spec{Name: name, Policy: p})
	require.NoError(e.t, err)
	return k, secret
}

// reserveOf is what the gateway reserves for q sent as e.request sends it
// with maxTokens its maximum output: body bytes/4 + maxTokens.
func reserveOf(t testing.TB, q fakeReq, maxTokens int64) int64 {
	b, err := json.Marshal(withModel(q))
	require.NoError(t, err)
	return int64(len(b))/4 + maxTokens
}

// firstEvent reads the first event of an event stream.
func firstEvent(t testing.TB, br *bufio.Reader) string {
	t.Helper()
	var ev strings.Builder
	for !strings.HasSuffix(ev.String(), "\n\n") {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		ev.WriteString(line)
	}
	return ev.String()
}

// requireUnchanged requires that key id has used tokens, nothing in
// flight, and that the upstream had hits requests.
func (e *env) requireUnchanged(id string, used, hits int64, msg string) {
	e.t.Helper()
	u := e.usage(id)
	require.Equal(e.t, used, u.Used, msg)
	require.Zero(e.t, u.InFlight, msg)
	require.Equal(e.t, hits, e.up.hits.Load(), "%s: a refused request reached the upstream", msg)
}

// TestDenials: each limit of a key's policy refuses with its status, body
// and retry fields, and the refusal changes nothing: no usage, no slot,
// no upstream request.
func TestDenials(t *testing.T) {
	e := newEnv(t, Options{})
	chat := "/v1/chat/completions"

	// A model not allowed.
	k, secret := e.policyKey("models", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}}, Models: []string{"gpt-4o*"}})
	resp, body := e.call("POST", chat, secret, fakeReq{Model: "o3", Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	m := apiError(t, body, "permission_error")
	require.Equal(t, "model_not_allowed", m["code"])
	require.Equal(t, `key `+k.ID+` may not use model "o3"; it may use gpt-4o*`, m["message"])
	require.Empty(t, resp.Header.Get("Retry-After"))
	e.requireUnchanged(k.ID, 0, 0, "model")

	// A reservation that can never fit: no Retry-After, no retry.
	k, secret = e.policyKey("small", keystore.Policy{Windows: []keystore.Window{{Limit: 100, Window: 5 * time.Hour}}})
	q := fakeReq{Model: "gpt-4o", MaxTokens: 1000, Input: 1}
	resp, body = e.call("POST", chat, secret, q)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	m = apiError(t, body, "rate_limit_error")
	require.Equal(t, "rate_limit_exceeded", m["code"])
	require.Contains(t, m["message"], fmt.Sprintf("reserves %d tokens", reserveOf(t, q, 1000)))
	require.Contains(t, m["message"], "5h0m0s token window allows (100 tokens)")
	require.Empty(t, resp.Header.Get("Retry-After"))
	require.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	e.requireUnchanged(k.ID, 0, 0, "never fits")

	// A window with no room for the reservation: Retry-After is when the
	// usage expires, hours away: no retry.
	q = fakeReq{Model: "gpt-4o", MaxTokens: 50, Input: 50, Output: 10}
	resp, body = e.call("POST", chat, secret, q)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	e.requireUnchanged(k.ID, 60, 1, "window: first")
	resp, body = e.call("POST", chat, secret, q)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	m = apiError(t, body, "rate_limit_error")
	require.Equal(t, "key "+k.ID+" is over its 5h0m0s token window: 100 tokens; retry after 5h0m0s", m["message"])
	require.Equal(t, "18000", resp.Header.Get("Retry-After"))
	require.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	e.requireUnchanged(k.ID, 60, 1, "window")

	// The request rate: a retry within a minute helps.
	k, secret = e.policyKey("rate", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}}, RequestsPerMinute: 1})
	resp, _ = e.call("POST", chat, secret, fakeReq{Model: "gpt-4o", Input: 1, Output: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	e.requireUnchanged(k.ID, 2, 2, "rate: first")
	resp, body = e.call("POST", chat, secret, fakeReq{Model: "gpt-4o", Input: 1, Output: 1})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	m = apiError(t, body, "rate_limit_error")
	require.Equal(t, "key "+k.ID+" is over its request rate: 1 requests per minute; retry after 1m0s", m["message"])
	require.Equal(t, "60", resp.Header.Get("Retry-After"))
	require.Empty(t, resp.Header.Get("X-Should-Retry"))
	e.requireUnchanged(k.ID, 2, 2, "rate")
}

// TestModels: a key's model globs allow and refuse requests by the model
// of their body or, for Gemini, of their path.
func TestModels(t *testing.T) {
	e := newEnv(t, Options{DefaultMaxTokens: 100})
	k, secret := e.policyKey("m", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}},
		Models: []string{"gpt-4o*", "claude-3-?-haiku", "gemini-*"}})
	var hits int64
	for _, c := range []struct {
		path, model string
		ok          bool
	}{
		{"/v1/chat/completions", "gpt-4o", true},
		{"/v1/chat/completions", "gpt-4o-mini", true},
		{"/v1/messages", "claude-3-5-haiku", true},
		{"/v1/messages", "claude-3-opus", false},
		{"/v1/chat/completions", "gpt-4", false},
		{"/v1beta/models/gemini-1.5-pro:generateContent", "", true},
		{"/v1beta/models/gemini-1.5-pro:streamGenerateContent", "", true},
		{"/v1beta/models/palm-2:generateContent", "", false},
		{"/v1beta/models/palm-2:generateContent", "gemini-x", false}, // the path names the model
	} {
		resp, body := e.call("POST", c.path, secret, fakeReq{Model: c.model, Input: 1, Output: 1})
		if c.ok {
			hits++
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", c.path, c.model, body)
		} else {
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %s: %s", c.path, c.model, body)
			require.Equal(t, "model_not_allowed", apiError(t, body, "permission_error")["code"])
		}
		require.Equal(t, hits, e.up.hits.Load(), c)
	}
	// A request that names no model is not refused: there is nothing to check.
	resp, _ := e.call("GET", "/v1/models", secret, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Zero(t, e.usage(k.ID).InFlight)
}

// TestGeminiReserve: a Gemini request's reservation counts its
// generationConfig.maxOutputTokens, and its estimate is charged when no
// usage can be read.
func TestGeminiReserve(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := e.key("g", 1e6)
	body := `{"contents":[{"parts":[{"text":"Hello"}]}],"generationConfig":{"maxOutputTokens":50}}`
	req, err := http.NewRequest("POST", e.srv.URL+"/v1beta/models/gemini-2.0-flash:generateContent", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Goog-Api-Key", secret)
	resp, b := e.do(req)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Empty(t, e.up.lastHeaders().Get("X-Goog-Api-Key"), "the secret reached the upstream")
	require.EqualValues(t, len(body)/4+50, e.usage(k.ID).Used)
}

// TestConcurrency: with MaxConcurrent 2 and two streams held open by the
// upstream, a third request is refused for its concurrency; once they
// end, requests are admitted again.
func TestConcurrency(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := e.policyKey("c", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}}, MaxConcurrent: 2})
	var open []*bufio.Reader
	for range 2 {
		resp, err := e.client.Do(e.request("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", Stream: true, Gate: true, Input: 11, Output: 29}))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		br := bufio.NewReader(resp.Body)
		firstEvent(t, br) // admitted and streaming
		open = append(open, br)
	}
	require.Equal(t, 2, e.usage(k.ID).InFlight)
	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", Input: 1})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	m := apiError(t, body, "rate_limit_error")
	require.Equal(t, "rate_limit_exceeded", m["code"])
	require.Contains(t, m["message"], "is at its limit of 2 requests in flight; retry shortly")
	require.Equal(t, "1", resp.Header.Get("Retry-After"), "a slot frees when a request ends: a short wait")
	require.Empty(t, resp.Header.Get("X-Should-Retry"), "the SDKs' own retries may try again")
	require.EqualValues(t, 2, e.up.hits.Load())

	close(e.up.gate)
	for _, br := range open {
		_, err := io.ReadAll(br)
		require.NoError(t, err)
		<-e.served
	}
	require.Zero(t, e.usage(k.ID).InFlight)
	resp, body = e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", Input: 1, Output: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.EqualValues(t, 40+40+2, e.usage(k.ID).Used)
}

// TestReservation: 40 concurrent requests of 1000 tokens (max_tokens 1000)
// on a key of 10k tokens: the reservations keep the usage within the
// limit plus one request's tokens.
func TestReservation(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := e.key("r", 10_000)
	const n, each = 40, 1000
	var ok, denied atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, body, err := e.try(e.request("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", MaxTokens: 1000, Input: 600, Output: 400}))
			switch {
			case err != nil:
				t.Error(err)
			case resp.StatusCode == http.StatusOK:
				ok.Add(1)
			case resp.StatusCode == http.StatusTooManyRequests:
				denied.Add(1)
			default:
				t.Errorf("status %d: %s", resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	u := e.usage(k.ID)
	t.Logf("%d admitted, %d refused, %d tokens used of 10000", ok.Load(), denied.Load(), u.Used)
	require.EqualValues(t, n, ok.Load()+denied.Load())
	require.Equal(t, ok.Load()*each, u.Used)
	require.LessOrEqual(t, u.Used, int64(10_000+each))
	require.GreaterOrEqual(t, ok.Load(), int64(9))
	require.Zero(t, u.InFlight)
	require.Equal(t, ok.Load(), e.up.hits.Load())
}

// hangUp sends q as a stream on a key of e, reads its first event and
// hangs up once the gateway's handler knows it, the upstream's stream
// still open (gated). It returns the key.
func (e *env) hangUp(q fakeReq) keystore.Key {
	e.t.Helper()
	k, secret := e.key("h", 1e6)
	hungUp := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		context.AfterFunc(r.Context(), func() { close(hungUp) })
		defer func() { e.served <- struct{}{} }()
		e.gw.ServeHTTP(w, r)
	}))
	e.t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	req := e.request("POST", "/v1/chat/completions", secret, q).WithContext(ctx)
	req.URL.Host = srv.Listener.Addr().String()
	resp, err := e.client.Do(req)
	require.NoError(e.t, err)
	firstEvent(e.t, bufio.NewReader(resp.Body))
	require.Equal(e.t, 1, e.usage(k.ID).InFlight)
	cancel()
	resp.Body.Close()
	<-hungUp
	return k
}

// TestHangUp: a caller that hangs up mid-stream is charged what the
// upstream reports at the end of the stream, which the gateway goes on
// reading: the upstream generates, and bills, all the same.
func TestHangUp(t *testing.T) {
	var logs logbuf.Buffer
	e := newEnv(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	q := fakeReq{Model: "gpt-4o", MaxTokens: 100, Stream: true, Gate: true, Input: 11, Output: 29}
	k := e.hangUp(q)
	close(e.up.gate) // the upstream goes on to its end
	<-e.served
	u := e.usage(k.ID)
	require.Zero(t, u.InFlight)
	require.EqualValues(t, 40, u.Used)
	require.EqualValues(t, 40, e.lifetime(k.ID))
	require.NotContains(t, logs.String(), `"estimated":true`)
	require.NotContains(t, logs.String(), "charging usage failed") // finished once
}

// TestHangUpDrainTimeout: when the upstream does not end within the drain
// timeout after the caller hung up (here: at once), its request is ended
// and the reservation charged, logged as estimated.
func TestHangUpDrainTimeout(t *testing.T) {
	var logs logbuf.Buffer
	e := newEnv(t, Options{DrainTimeout: -1, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	q := fakeReq{Model: "gpt-4o", MaxTokens: 100, Stream: true, Gate: true, Input: 11, Output: 29}
	k := e.hangUp(q)
	<-e.served // the gate stays shut
	u := e.usage(k.ID)
	require.Zero(t, u.InFlight)
	require.Equal(t, reserveOf(t, q, 100), u.Used)
	require.Equal(t, reserveOf(t, q, 100), e.lifetime(k.ID))
	require.Contains(t, logs.String(), `"estimated":true`)
	require.Contains(t, logs.String(), "drain timeout")
	require.Equal(t, 1, strings.Count(logs.String(), "no usage read: charging the estimate"))
	require.NotContains(t, logs.String(), "charging usage failed")
}

// TestNotCharged: retrieving a stored response, whose usage was charged
// when it was made, is never charged again, though the upstream reports
// it; nor is deleting one; a model listing that reports usage (a lenient
// upstream) is charged it, whatever its method. Each counts against the
// request rate.
func TestNotCharged(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := e.policyKey("g", keystore.Policy{Windows: []keystore.Window{{Limit: 1000, Window: 5 * time.Hour}}, RequestsPerMinute: 3})
	for _, method := range []string{"GET", "DELETE"} {
		resp, _ := e.call(method, "/v1/responses/resp_1", secret, nil) // reports 7 tokens
		require.Equal(t, http.StatusOK, resp.StatusCode, method)
	}
	require.Zero(t, e.usage(k.ID).Used)
	require.Zero(t, e.lifetime(k.ID))
	resp, _ := e.call("GET", "/v1/models/gpt-4o", secret, nil) // reports 7 tokens
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 7, e.usage(k.ID).Used)
	resp, body := e.call("GET", "/v1/models", secret, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Contains(t, apiError(t, body, "rate_limit_error")["message"], "3 requests per minute")
}

// TestTimeouts: an upstream that never answers gets 504 after the first
// byte timeout, one that stalls mid-stream has its stream ended after the
// idle timeout; both are charged the estimate.
func TestTimeouts(t *testing.T) {
	e := newEnv(t, Options{FirstByteTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond})
	k, secret := e.key("t", 1e6)
	q := fakeReq{Model: "gpt-4o", MaxTokens: 10, Input: 1, Mode: "hang"}
	first := reserveOf(t, q, 10)
	resp, body := e.call("POST", "/v1/chat/completions", secret, q)
	require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode, string(body))
	require.Equal(t, "upstream_timeout", apiError(t, body, "api_error")["code"])
	u := e.usage(k.ID)
	require.Equal(t, reserveOf(t, q, 10), u.Used)
	require.Zero(t, u.InFlight)

	// A stream that stalls after its first event (the gate stays shut).
	q = fakeReq{Model: "gpt-4o", MaxTokens: 10, Stream: true, Gate: true, Input: 11, Output: 29}
	resp, err := e.client.Do(e.request("POST", "/v1/chat/completions", secret, q))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	firstEvent(t, br)
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(br)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err, "the stream ended as if complete")
	case <-time.After(10 * time.Second): // a failure, not a wait
		t.Fatal("the stalled stream was not ended")
	}
	<-e.served
	u = e.usage(k.ID)
	require.Equal(t, first+reserveOf(t, q, 10), u.Used)
	require.Zero(t, u.InFlight)
}

// TestTooLarge: a request body over MaxRequestBody gets 413 and reaches
// nothing, whether its length is declared or not.
func TestTooLarge(t *testing.T) {
	e := newEnv(t, Options{MaxRequestBody: 64})
	k, secret := e.key("big", 1e6)
	big := `{"model":"gpt-4o","input":` + strings.Repeat(" ", 100) + `1}`
	for _, chunked := range []bool{false, true} {
		var rd io.Reader = strings.NewReader(big)
		if chunked {
			rd = io.MultiReader(rd) // no length known: sent chunked
		}
		req, err := http.NewRequest("POST", e.srv.URL+"/v1/chat/completions", rd)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, body := e.do(req)
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(body))
		require.Equal(t, "request_too_large", apiError(t, body, "invalid_request_error")["code"])
	}
	e.requireUnchanged(k.ID, 0, 0, "too large")
	// At the bound it passes, the same bytes upstream.
	fits := `{"model":"gpt-4o","input":3,"output":4}` + strings.Repeat(" ", 64-39)
	require.Len(t, fits, 64)
	req, err := http.NewRequest("POST", e.srv.URL+"/v1/chat/completions", io.MultiReader(bytes.NewReader([]byte(fits))))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, body := e.do(req)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.EqualValues(t, 7, e.usage(k.ID).Used)
}
