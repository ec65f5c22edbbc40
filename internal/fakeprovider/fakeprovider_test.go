package fakeprovider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/gateway/meter"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/fakeprovider"
)

// env is a Provider served on 127.0.0.1 (httptest), on a fake clock.
type env struct {
	t     *testing.T
	opts  fakeprovider.Options
	p     *fakeprovider.Provider
	srv   *httptest.Server
	clock *fakeclock.Clock
}

const secret = "sk-fake"

// newEnv serves a Provider of opts, whose Key is secret and whose clock
// is the env's unless opts say otherwise.
func newEnv(t *testing.T, opts fakeprovider.Options) *env {
	e := &env{t: t, clock: fakeclock.New(time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC))}
	if opts.Now == nil {
		opts.Now = e.clock.Now
	}
	if opts.Key == "" {
		opts.Key = secret
	}
	e.opts, e.p = opts, fakeprovider.New(opts)
	e.srv = httptest.NewServer(e.p)
	t.Cleanup(e.srv.Close)
	return e
}

// request is a request of method to path with body, carrying the
// credential key where the provider's API has it ("": none).
func (e *env) request(ctx context.Context, method, path, body, key string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, strings.NewReader(body))
	require.NoError(e.t, err)
	if body == "" {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", "application/json")
	if key == "" {
		return req
	}
	switch e.opts.API {
	case fakeprovider.OpenAI:
		req.Header.Set("Authorization", "Bearer "+key)
	case fakeprovider.AzureOpenAI:
		req.Header.Set("api-key", key)
	case fakeprovider.Anthropic:
		req.Header.Set("x-api-key", key)
	case fakeprovider.Gemini:
		req.Header.Set("x-goog-api-key", key)
	}
	return req
}

// do sends req and reads its answer.
func (e *env) do(req *http.Request) (*http.Response, []byte) {
	resp, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp, body
}

// post sends body to path with the provider's credential.
func (e *env) post(path, body string) (*http.Response, []byte) {
	return e.do(e.request(context.Background(), http.MethodPost, path, body, secret))
}

// idle waits until the provider handles no request, so that its Stats
// are final.
func (e *env) idle() fakeprovider.Stats {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a failure bound, not a wait
	defer cancel()
	require.NoError(e.t, e.p.WaitIdle(ctx))
	return e.p.Stats()
}

// errorOf is the "error" object of an error body.
func errorOf(t *testing.T, body []byte) map[string]any {
	var doc map[string]any
	require.NoError(t, json.Unmarshal(body, &doc), string(body))
	e, ok := doc["error"].(map[string]any)
	require.True(t, ok, string(body))
	return e
}

// fixedUsage is an Options.Usage of 7 prompt and 5 output tokens a call.
func fixedUsage(string, []byte) (int64, int64) { return 7, 5 }

// TestDialects: every operation of every API answers in its API's shape,
// JSON or streamed, with the usage the gateway's meter reads: the
// Options.Usage of the call, which the provider charges.
func TestDialects(t *testing.T) {
	const chat = `{"model":"gpt-4o","messages":[]}`
	const chatStream = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`
	for _, c := range []struct {
		api, path, body string
		kind            meter.Kind
		in, out         int64 // the usage the meter reads; 0, 0: none
		last            string
	}{
		{fakeprovider.OpenAI, "/v1/chat/completions", chat, meter.JSON, 7, 5, "}"},
		{fakeprovider.OpenAI, "/v1/chat/completions", chatStream, meter.SSE, 7, 5, "data: [DONE]\n\n"},
		{fakeprovider.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","stream":true}`, meter.SSE, 0, 0, "data: [DONE]\n\n"},
		{fakeprovider.OpenAI, "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"hi"}`, meter.JSON, 7, 5, "}"},
		{fakeprovider.OpenAI, "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","stream":true,"stream_options":{"include_usage":true}}`, meter.SSE, 7, 5, "data: [DONE]\n\n"},
		{fakeprovider.OpenAI, "/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`, meter.JSON, 7, 0, "}"},
		{fakeprovider.OpenAI, "/v1/responses", `{"model":"o4-mini","input":"hi"}`, meter.JSON, 7, 5, "}"},
		{fakeprovider.OpenAI, "/v1/responses", `{"model":"o4-mini","input":"hi","stream":true}`, meter.SSE, 7, 5, "event: response.completed\n"},
		{fakeprovider.AzureOpenAI, "/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21", `{"messages":[]}`, meter.JSON, 7, 5, "}"},
		{fakeprovider.AzureOpenAI, "/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21", `{"stream":true,"stream_options":{"include_usage":true}}`, meter.SSE, 7, 5, "data: [DONE]\n\n"},
		{fakeprovider.AzureOpenAI, "/openai/deployments/embed/embeddings?api-version=2024-10-21", `{"input":"hi"}`, meter.JSON, 7, 0, "}"},
		{fakeprovider.AzureOpenAI, "/openai/deployments/gpt4o/completions?api-version=2024-10-21", `{"prompt":"hi"}`, meter.JSON, 7, 5, "}"},
		{fakeprovider.AzureOpenAI, "/openai/responses?api-version=2024-10-21", `{"model":"gpt4o","stream":true}`, meter.SSE, 7, 5, "event: response.completed\n"},
		{fakeprovider.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":100}`, meter.JSON, 7, 5, "}"},
		{fakeprovider.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true}`, meter.SSE, 7, 5, "event: message_stop\n"},
		{fakeprovider.Gemini, "/v1beta/models/gemini-2.5-pro:generateContent", `{"contents":[]}`, meter.JSON, 7, 5, "}"},
		{fakeprovider.Gemini, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[]}`, meter.SSE, 7, 5, "\r\n\r\n"},
		{fakeprovider.Gemini, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", `{"contents":[]}`, meter.JSON, 7, 5, "]"},
	} {
		t.Run(c.api+c.path+c.body, func(t *testing.T) {
			e := newEnv(t, fakeprovider.Options{API: c.api, Usage: fixedUsage})
			resp, err := e.srv.Client().Do(e.request(context.Background(), http.MethodPost, c.path, c.body, secret))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, c.kind, meter.KindOf(resp.Header))
			var got meter.Usage
			var body bytes.Buffer
			_, err = io.Copy(&body, meter.New(resp.Body, c.kind, false, func(u meter.Usage) { got = u }))
			require.NoError(t, err)
			if c.out != 0 { // not an embedding
				require.Contains(t, body.String(), "fakeprovider")
			}
			require.Equal(t, c.in != 0, got.Found, body.String())
			require.Equal(t, meter.Counts{Input: c.in, Output: c.out}, got.Counts, body.String())
			last := body.String()[strings.LastIndex(body.String(), c.last):]
			require.True(t, last == c.last || strings.HasPrefix(c.last, "event:"), "ends with %q", last)
			s := e.idle()
			charged := int64(7 + 5)
			if strings.Contains(c.path, "embeddings") {
				charged = 7 // no output
			}
			require.Equal(t, charged, s.TokensCharged) // whether the answer says it or not
			require.EqualValues(t, 1, s.Served)
		})
	}
}

// TestModels: GET /v1/models lists Options.Models (or a few), as OpenAI
// and Anthropic list them, and costs nothing.
func TestModels(t *testing.T) {
	for api, want := range map[string]string{
		fakeprovider.OpenAI:    `{"object":"list","data":[{"id":"m1","object":"model","created":1768737600,"owned_by":"fakeprovider"}]}`,
		fakeprovider.Anthropic: `{"data":[{"type":"model","id":"m1","display_name":"m1","created_at":"2025-01-01T00:00:00Z"}],"has_more":false,"first_id":"m1","last_id":"m1"}`,
	} {
		e := newEnv(t, fakeprovider.Options{API: api, Models: []string{"m1"}, TokensPerMinute: 1})
		resp, body := e.do(e.request(context.Background(), http.MethodGet, "/v1/models", "", secret))
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.JSONEq(t, want, string(body))
		resp, body = e.post("/v1/models", "{}")
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, string(body))
		s := e.idle()
		require.EqualValues(t, 0, s.TokensCharged)
		require.Equal(t, fakeprovider.Stats{Requests: 2, Served: 1, Refused: 1, MaxInFlight: 1, Paths: map[string]int64{"/v1/models": 2}}, s)
	}
}
