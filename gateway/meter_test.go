package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/ratestore/ratestore/gateway/meter"
	"github.com/stretchr/testify/require"
)

// dialectUpstream answers every request with the body of its path in
// bodies (its path, then "#" and the "case" field of its JSON body, if it
// has one), with the content type of its kind.
func dialectUpstream(t *testing.T, bodies map[string]string) *url.URL {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var q struct{ Case string }
		json.NewDecoder(r.Body).Decode(&q)
		body, ok := bodies[r.URL.Path+"#"+q.Case]
		if !ok {
			body, ok = bodies[r.URL.Path+"?"+r.URL.RawQuery]
		}
		if !ok {
			body, ok = bodies[r.URL.Path]
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		ct := "application/json"
		if strings.HasPrefix(body, "data:") || strings.HasPrefix(body, "event:") {
			ct = "text/event-stream"
		}
		writeBody(w, ct, body)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return u
}

// TestDialects: through the gateway, each dialect's usage is charged:
// Gemini's JSON, its chunk array and its event stream; the Responses API's
// incomplete and failed streams; embeddings; a body of 24 MiB.
func TestDialects(t *testing.T) {
	geminiChunk := func(cand int) string {
		return `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":` +
			strconv.Itoa(cand) + `,"thoughtsTokenCount":20,"totalTokenCount":` + strconv.Itoa(29+cand) + `}}`
	}
	big := strings.Repeat("z", 24<<20)
	up := dialectUpstream(t, map[string]string{
		"/v1beta/models/gemini-2.5-pro:generateContent":               geminiChunk(4),
		"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse": "data: " + geminiChunk(1) + "\r\n\r\ndata: " + geminiChunk(6) + "\r\n\r\n",
		"/v1beta/models/gemini-2.5-pro:streamGenerateContent":         "[" + geminiChunk(1) + ",\r\n" + geminiChunk(8) + "]",
		"/v1/responses#incomplete": "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n" +
			"event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"usage\":{\"input_tokens\":5,\"output_tokens\":64,\"output_tokens_details\":{\"reasoning_tokens\":60},\"total_tokens\":69}}}\n\n",
		"/v1/responses#failed": "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"x\"},\"usage\":{\"input_tokens\":5,\"output_tokens\":2,\"total_tokens\":7}}}\n\n",
		"/v1/embeddings":       `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`,
		"/v1/chat/completions": `{"id":"c","choices":[{"message":{"content":"` + big + `"}}],"usage":{"prompt_tokens":3,"completion_tokens":6000000,"total_tokens":6000003}}`,
	})
	e := newEnv(t, Options{Upstream: up})
	for _, c := range []struct {
		path string
		body any
		want int64
	}{
		{"/v1beta/models/gemini-2.5-pro:generateContent", map[string]any{"contents": []any{}}, 33},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", map[string]any{"contents": []any{}}, 35},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", map[string]any{"contents": []any{}}, 37},
		{"/v1/responses", map[string]any{"model": "o4-mini", "stream": true, "case": "incomplete"}, 69},
		{"/v1/responses", map[string]any{"model": "o4-mini", "stream": true, "case": "failed"}, 7},
		{"/v1/embeddings", map[string]any{"model": "text-embedding-3-small", "input": "hi"}, 8},
		{"/v1/chat/completions", map[string]any{"model": "gpt-4o"}, 6000003},
	} {
		k, secret := e.key(c.path, 1<<40)
		resp, body := e.call("POST", c.path, secret, c.body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", c.path, body)
		require.Equal(t, c.want, e.usage(k.ID).Used, c.path)
	}
}

// TestWeights: Options.Weights weigh each type of token, rounded up and
// saturating; unit weights add input and output.
func TestWeights(t *testing.T) {
	w := Weights{Input: 1, Output: 4, CacheRead: 0.1, CacheWrite: 1.25}
	for _, c := range []struct {
		counts  meter.Counts
		unit    int64
		weighed int64
	}{
		{meter.Counts{Input: 3210, Output: 20, CacheRead: 3000, CacheWrite: 200}, 3230, 10 + 300 + 250 + 80},
		{meter.Counts{Input: 100, Output: 50, CacheRead: 80, Reasoning: 40}, 150, 20 + 8 + 200},
		{meter.Counts{Input: 11, Output: 24, CacheRead: 3, Reasoning: 20}, 35, 105}, // 8 + 0.3 + 96, rounded up
	} {
		require.Equal(t, c.unit, UnitWeights.charge(c.counts), c.counts)
		require.Equal(t, c.weighed, w.charge(c.counts), c.counts)
	}
	const most = 1<<63 - 1
	require.EqualValues(t, most, UnitWeights.charge(meter.Counts{Input: most, Output: 5}))
	require.EqualValues(t, most, Weights{Input: 2, Output: 2, CacheRead: 2, CacheWrite: 2}.charge(meter.Counts{Input: most, CacheRead: most}))

	// Through the gateway.
	e := newEnv(t, Options{Weights: &Weights{Input: 1, Output: 2}})
	k, secret := e.key("w", 1<<40)
	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 3, Output: 4})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.EqualValues(t, 3+2*4, e.usage(k.ID).Used)
}
