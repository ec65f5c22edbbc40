package fakeprovider_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/fakeprovider"
)

// TestFail: Fail answers every request, with a credential or not, with
// its status and the API's error body, a 429 with Retry-After: 1;
// FailRetryAfter says when; Heal ends it.
func TestFail(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.OpenAI})
	e.p.Fail(http.StatusServiceUnavailable)
	resp, body := e.post(chatPath, `{"model":"gpt-4o"}`)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Retry-After"))
	require.JSONEq(t, `{"error":{"message":"Service Unavailable (fakeprovider: set to fail with 503)","type":"server_error","param":null,"code":null}}`, string(body))
	resp, _ = e.do(e.request(context.Background(), http.MethodPost, chatPath, "not even JSON", ""))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	e.p.Fail(http.StatusTooManyRequests)
	resp, body = e.post(chatPath, `{"model":"gpt-4o"}`)
	limited(t, resp, body, "requests", "1")
	e.p.FailRetryAfter(http.StatusTooManyRequests, 6500*time.Millisecond)
	resp, _ = e.post(chatPath, `{"model":"gpt-4o"}`)
	require.Equal(t, "7", resp.Header.Get("Retry-After"))
	e.p.FailRetryAfter(http.StatusInternalServerError, 0)
	resp, _ = e.post(chatPath, `{"model":"gpt-4o"}`)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Retry-After"))

	e.p.Heal()
	resp, body = e.post(chatPath, `{"model":"gpt-4o"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	s := e.idle()
	require.EqualValues(t, 6, s.Requests)
	require.EqualValues(t, 5, s.Failed)
	require.EqualValues(t, 1, s.Served)
	require.PanicsWithValue(t, "fakeprovider: Fail(200): not an error status", func() { e.p.Fail(http.StatusOK) })
}

// TestFailShapes: each API's error body, as its SDK reads it.
func TestFailShapes(t *testing.T) {
	for _, c := range []struct {
		api, path string
		status    int
		want      string
	}{
		{fakeprovider.AzureOpenAI, "/openai/deployments/d/chat/completions?api-version=1", 429,
			`{"error":{"code":"429","message":"Too Many Requests (fakeprovider: set to fail with 429)"}}`},
		{fakeprovider.AzureOpenAI, "/openai/deployments/d/chat/completions?api-version=1", 500,
			`{"error":{"code":"500","message":"Internal Server Error (fakeprovider: set to fail with 500)"}}`},
		{fakeprovider.Anthropic, "/v1/messages", 529,
			`{"type":"error","error":{"type":"overloaded_error","message":" (fakeprovider: set to fail with 529)"}}`},
		{fakeprovider.Anthropic, "/v1/messages", 502,
			`{"type":"error","error":{"type":"api_error","message":"Bad Gateway (fakeprovider: set to fail with 502)"}}`},
		{fakeprovider.Gemini, "/v1beta/models/g:generateContent", 503,
			`{"error":{"code":503,"message":"Service Unavailable (fakeprovider: set to fail with 503)","status":"UNAVAILABLE"}}`},
	} {
		e := newEnv(t, fakeprovider.Options{API: c.api})
		e.p.Fail(c.status)
		resp, body := e.post(c.path, `{"model":"m"}`)
		require.Equal(t, c.status, resp.StatusCode)
		require.JSONEq(t, c.want, string(body))
	}
}

// TestDown: Down closes each connection without an answer; a stream held
// when Down is set is cut off after its first event, and charged nothing.
func TestDown(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.OpenAI})
	e.p.Down()
	_, err := e.srv.Client().Do(e.request(context.Background(), http.MethodPost, chatPath, `{"model":"gpt-4o"}`, secret))
	require.ErrorIs(t, err, io.EOF)
	e.p.Heal()

	release := e.p.Hold()
	defer release()
	resp, err := e.srv.Client().Do(e.request(context.Background(), http.MethodPost, chatPath,
		`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`, secret))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, first, `"role":"assistant"`)
	e.p.Down()
	release()
	rest, err := io.ReadAll(br)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.NotContains(t, string(rest), "[DONE]")
	s := e.idle()
	require.Equal(t, fakeprovider.Stats{Requests: 2, Failed: 2, MaxInFlight: 1, Paths: map[string]int64{chatPath: 2}}, s)
}

// TestHangAndDelay: Hang holds each request until its caller gives up, and
// so does a delay longer than the caller waits; neither is charged.
func TestHangAndDelay(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.Gemini})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a failure bound, not a wait
	defer cancel()
	giveUp := func() {
		t.Helper()
		caller, hangUp := context.WithCancel(ctx)
		failed := make(chan error, 1)
		go func() {
			resp, err := e.srv.Client().Do(e.request(caller, http.MethodPost, "/v1beta/models/g:generateContent", `{}`, secret))
			if err == nil {
				resp.Body.Close()
			}
			failed <- err
		}()
		require.NoError(t, e.p.WaitHeld(ctx, 1))
		hangUp()
		require.ErrorIs(t, <-failed, context.Canceled)
		e.idle()
	}
	e.p.Hang()
	giveUp()
	e.p.Heal()
	e.p.SetDelay(time.Hour)
	giveUp()
	e.p.SetDelay(0)
	resp, body := e.post("/v1beta/models/g:generateContent", `{}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	s := e.idle()
	require.Equal(t, fakeprovider.Stats{Requests: 3, Served: 1, Failed: 1, Canceled: 1, TokensCharged: 16, MaxInFlight: 1,
		Paths: map[string]int64{"/v1beta/models/g:generateContent": 3}}, s)
}

// TestCredentials: each API's credential, in its own field: a request
// without it, with another, or with it in another API's field, gets 401
// in the API's shape. A provider without a Key takes any request.
func TestCredentials(t *testing.T) {
	for _, c := range []struct {
		api, path, body, other string
		want                   string
	}{
		{fakeprovider.OpenAI, chatPath, `{"model":"m"}`, "x-api-key",
			`{"error":{"message":"Incorrect API key provided (fakeprovider).","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{fakeprovider.AzureOpenAI, "/openai/deployments/d/embeddings?api-version=v", `{"input":"x"}`, "Authorization",
			`{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint (fakeprovider)."}}`},
		{fakeprovider.Anthropic, "/v1/messages", `{"model":"m"}`, "Authorization",
			`{"type":"error","error":{"type":"authentication_error","message":"Incorrect API key provided (fakeprovider)."}}`},
		{fakeprovider.Gemini, "/v1beta/models/m:streamGenerateContent?alt=sse", `{}`, "x-api-key",
			`{"error":{"code":401,"message":"Incorrect API key provided (fakeprovider).","status":"UNAUTHENTICATED"}}`},
	} {
		t.Run(c.api, func(t *testing.T) {
			e := newEnv(t, fakeprovider.Options{API: c.api})
			for _, key := range []string{"", "sk-wrong", secret + "x"} {
				resp, body := e.do(e.request(context.Background(), http.MethodPost, c.path, c.body, key))
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, key)
				require.JSONEq(t, c.want, string(body))
			}
			req := e.request(context.Background(), http.MethodPost, c.path, c.body, "")
			req.Header.Set(c.other, secret)
			resp, _ := e.do(req)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			resp, body := e.post(c.path, c.body)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			require.EqualValues(t, 4, e.idle().Refused)

			open := fakeprovider.New(fakeprovider.Options{API: c.api})
			rec := httptestRecorder(open, e.request(context.Background(), http.MethodPost, c.path, c.body, ""))
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		})
	}
}

// TestAzure: an Azure resource serves its deployments' paths, with its
// api-version, and /openai/responses with a deployment as the model; it
// sees the api-version and api-key the request came with.
func TestAzure(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.AzureOpenAI, APIVersion: "2024-10-21", Deployments: []string{"gpt4o-prod", "mini"}})
	const chat = "/openai/deployments/gpt4o-prod/chat/completions"
	resp, body := e.post(chat+"?api-version=2024-10-21", `{"messages":[],"max_tokens":5}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"model":"gpt4o-prod"`)
	last := e.p.Last()
	require.Equal(t, chat, last.Path)
	require.Equal(t, "2024-10-21", last.Query.Get("api-version"))
	require.Equal(t, secret, last.Header.Get("api-key"))
	require.JSONEq(t, `{"messages":[],"max_tokens":5}`, string(last.Body))

	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", chat, `{}`, 400, "BadRequest"},
		{"POST", chat + "?api-version=2024-02-01", `{}`, 400, "BadRequest"},
		{"POST", "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21", `{}`, 404, "DeploymentNotFound"},
		{"POST", "/openai/responses?api-version=2024-10-21", `{"model":"gpt-4o"}`, 404, "DeploymentNotFound"},
		{"POST", "/openai/responses?api-version=2024-10-21", `{"input":"x"}`, 400, "400"},
		{"POST", "/openai/deployments/mini/images/generations?api-version=2024-10-21", `{}`, 404, "404"},
		{"POST", "/v1/chat/completions", `{"model":"mini"}`, 404, "404"},
		{"GET", chat + "?api-version=2024-10-21", ``, 405, "405"},
	} {
		resp, body := e.do(e.request(context.Background(), c.method, c.path, c.body, secret))
		require.Equal(t, c.status, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
		require.Equal(t, c.code, errorOf(t, body)["code"], string(body))
	}
	resp, body = e.post("/openai/responses?api-version=2024-10-21", `{"model":"mini","input":"x"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"model":"mini"`)
	s := e.idle()
	require.Equal(t, int64(2), s.Served)
	require.Equal(t, int64(8), s.Refused)
	require.Equal(t, int64(4), s.Paths[chat])
}

// TestRefusals: what the real APIs refuse is refused before the quotas,
// and costs them nothing.
func TestRefusals(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.OpenAI, Models: []string{"gpt-4o"}, RequestsPerMinute: 1})
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{chatPath, `not JSON`, 400},
		{chatPath, `{"messages":[]}`, 400},
		{chatPath, `{"model":"gpt-5"}`, 404},
		{"/v1/images/generations", `{"model":"gpt-4o"}`, 404},
		{"/v1/messages", `{"model":"gpt-4o"}`, 404},
		{"/v1beta/models/gpt-4o:generateContent", `{}`, 404},
	} {
		resp, body := e.post(c.path, c.body)
		require.Equal(t, c.status, resp.StatusCode, "%s %s: %s", c.path, c.body, body)
		require.Equal(t, "invalid_request_error", errorOf(t, body)["type"])
	}
	resp, body := e.post(chatPath, `{"model":"gpt-4o"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	s := e.idle()
	require.EqualValues(t, 6, s.Refused)
	require.EqualValues(t, 1, s.Served)

	g := newEnv(t, fakeprovider.Options{API: fakeprovider.Gemini})
	for _, path := range []string{"/v1beta/models/g:countTokens", "/v1beta/models/:generateContent", "/v1/models/g:generateContent"} {
		resp, body := g.post(path, `{}`)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", path, body)
		require.Equal(t, "NOT_FOUND", errorOf(t, body)["status"])
	}
}

// TestLast: Last is the last request as it came, a copy of its own.
func TestLast(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.Anthropic})
	require.Equal(t, fakeprovider.Seen{}, e.p.Last())
	req := e.request(context.Background(), http.MethodPost, "/v1/messages?beta=true", `{"model":"m"}`, secret)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	e.do(req)
	last := e.p.Last()
	require.Equal(t, "POST", last.Method)
	require.Equal(t, "/v1/messages", last.Path)
	require.Equal(t, "beta=true", last.RawQuery)
	require.Equal(t, "2023-06-01", last.Header.Get("Anthropic-Version"))
	last.Header.Set("Anthropic-Version", "x")
	last.Query.Set("beta", "x")
	last.Body[0] = 'x'
	again := e.p.Last()
	require.Equal(t, "2023-06-01", again.Header.Get("Anthropic-Version"))
	require.Equal(t, "true", again.Query.Get("beta"))
	require.Equal(t, `{"model":"m"}`, string(again.Body))
	require.True(t, strings.HasPrefix(again.Header.Get("X-Api-Key"), "sk-"))
}

// httptestRecorder serves req with h in process.
func httptestRecorder(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
