package gateway

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/ratestore/ratestore/keystore"
)

// The adversarial suite: an attacker holding one ordinary key, in front of
// a lenient upstream (see lenient) that runs whatever reaches it, reads
// bodies as Go's encoding/json does (names matched case-insensitively, the
// last duplicate winning), reports whatever usage the test tells it to,
// and answers with hostile response fields. Every test asserts what the
// caller got (status and error code), what the upstream received (nothing,
// for a refusal), and what the key was charged.
//
// Every adversary also checks, when its test ends, the invariants of the
// whole suite over every request the upstream received (requireInvariants):
// it was answered to a key of the test; it ran a model its key's policy
// allows; no secret of any key is anywhere in it; it carried the gateway's
// own credential and only the fields the gateway forwards; and each key
// was charged at least what the upstream reported for it (up to
// Options.MaxTokensPerRequest per request), but for retrievals of stored
// responses.

// The attacker's models: the one its key may use, and one it may not.
const (
	allowedModel   = "gpt-4o-mini"
	forbiddenModel = "o1-pro"
)

// gatewayCredential is the gateway's own upstream key (Options.UpstreamKey).
const gatewayCredential = "sk-gateway-own-credential"

// requestID is what every Ratestore-Request-Id must look like.
var requestID = regexp.MustCompile(`^req_[0-9a-f]{16}$`)

// TestAdversarialBodies proves that a body the gateway cannot read exactly
// as a lenient upstream would (byte order mark, garbage around the object,
// two values, NaN, invalid UTF-8, duplicate names, names that differ in
// case or by Unicode folding, non-objects, counts that are not whole
// numbers) is refused with 400 and never forwarded nor charged; that 100.0
// and 1e2 are read as 100; and that encoded or non-JSON bodies get 415 and
// bodies on GET and DELETE 400.
func TestAdversarialBodies(t *testing.T) {
	a := newAdversary(t, Options{})
	k := a.attacker("bodies", onlyAllowed(1e9))
	const (
		chat      = "/v1/chat/completions"
		messages  = "/v1/messages"
		responses = "/v1/responses"
		gem       = "/v1beta/models/" + allowedModel + ":generateContent"
	)
	deep := `{"model":"gpt-4o-mini","x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`
	for _, c := range []struct {
		name, path, body string
		code             string // of a 400
	}{
		{"UTF-8 byte order mark", chat, "\ufeff{\"model\":\"gpt-4o-mini\"}", "invalid_body"},
		{"leading garbage", chat, `x{"model":"gpt-4o-mini"}`, "invalid_body"},
		{"leading NUL", chat, "\x00{\"model\":\"gpt-4o-mini\"}", "invalid_body"},
		{"trailing garbage", chat, `{"model":"gpt-4o-mini"}x`, "invalid_body"},
		{"trailing NUL", chat, "{\"model\":\"gpt-4o-mini\"}\x00", "invalid_body"},
		{"two JSON values", chat, `{"model":"gpt-4o-mini"}{"model":"o1-pro"}`, "invalid_body"},
		{"two JSON values on two lines", chat, "{\"model\":\"gpt-4o-mini\"}\n{\"model\":\"o1-pro\"}", "invalid_body"},
		{"NaN", chat, `{"model":"gpt-4o-mini","max_tokens":NaN}`, "invalid_body"},
		{"Infinity", chat, `{"model":"gpt-4o-mini","temperature":Infinity}`, "invalid_body"},
		{"invalid UTF-8 in a string", chat, "{\"model\":\"gpt-4o-mini\",\"user\":\"\xff\"}", "invalid_body"},
		{"invalid UTF-8 in the model", chat, "{\"model\":\"gpt-4o-mini\xff\"}", "invalid_body"},
		{"invalid UTF-8 in a name", chat, "{\"model\":\"gpt-4o-mini\",\"\xff\":1}", "invalid_body"},
		{"lone surrogate escape", chat, `{"model":"gpt-4o-mini\ud800"}`, "invalid_body"},
		{"duplicate model", chat, `{"model":"gpt-4o-mini","model":"o1-pro"}`, "invalid_body"},
		{"escaped duplicate model", chat, `{"model":"gpt-4o-mini","mod\u0065l":"o1-pro"}`, "invalid_body"},
		{"escaped duplicate model, escaped first", chat, `{"\u006dodel":"gpt-4o-mini","model":"o1-pro"}`, "invalid_body"},
		{"duplicate max_tokens", chat, `{"model":"gpt-4o-mini","max_tokens":1,"max_tokens":100000}`, "invalid_body"},
		{"nested duplicate", chat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi","content":"bye"}]}`, "invalid_body"},
		{"duplicate include_usage", chat, `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true,"include_usage":false}}`, "invalid_body"},
		{"deeply nested duplicate", chat, `{"model":"gpt-4o-mini","metadata":{"a":{"b":{"c":1,"c":2}}}}`, "invalid_body"},
		{"Model after model", chat, `{"model":"gpt-4o-mini","Model":"o1-pro"}`, "invalid_body"},
		{"Model before model", chat, `{"model":"o1-pro","Model":"gpt-4o-mini"}`, "invalid_body"},
		{"escaped Model", chat, `{"model":"gpt-4o-mini","\u004dodel":"o1-pro"}`, "invalid_body"},
		{"MODEL alone", chat, `{"MODEL":"gpt-4o-mini"}`, "invalid_body"},
		{"MAX_TOKENS raises", chat, `{"model":"gpt-4o-mini","max_tokens":1,"MAX_TOKENS":100000}`, "invalid_body"},
		{"MAX_TOKENS lowers", chat, `{"model":"gpt-4o-mini","max_tokens":100000,"MAX_TOKENS":1}`, "invalid_body"},
		{"Kelvin sign, escaped", chat, `{"model":"gpt-4o-mini","max_to\u212aens":100000}`, "invalid_body"},
		{"Kelvin sign, raw", chat, "{\"model\":\"gpt-4o-mini\",\"max_to\u212aens\":100000}", "invalid_body"},
		{"long s", chat, "{\"model\":\"gpt-4o-mini\",\"max_token\u017f\":100000}", "invalid_body"},
		{"Stream", chat, `{"model":"gpt-4o-mini","Stream":true}`, "invalid_body"},
		{"array", chat, `[{"model":"gpt-4o-mini"}]`, "invalid_body"},
		{"string", chat, `"gpt-4o-mini"`, "invalid_body"},
		{"null", chat, `null`, "invalid_body"},
		{"number", chat, `1`, "invalid_body"},
		{"true", chat, `true`, "invalid_body"},
		{"empty", chat, ``, "invalid_body"},
		{"white space only", chat, " \n", "invalid_body"},
		{"truncated", chat, `{"model":"gpt-4o-mini"`, "invalid_body"},
		{"trailing comma", chat, `{"model":"gpt-4o-mini",}`, "invalid_body"},
		{"comment", chat, `{"model":"gpt-4o-mini" /* o1-pro */}`, "invalid_body"},
		{"single quotes", chat, `{'model':'gpt-4o-mini'}`, "invalid_body"},
		{"deep nesting", chat, deep, "invalid_body"},
		{"max_tokens 100.5", chat, `{"model":"gpt-4o-mini","max_tokens":100.5}`, "invalid_body"},
		{"max_tokens -1", chat, `{"model":"gpt-4o-mini","max_tokens":-1}`, "invalid_body"},
		{`max_tokens "100"`, chat, `{"model":"gpt-4o-mini","max_tokens":"100"}`, "invalid_body"},
		{"max_tokens true", chat, `{"model":"gpt-4o-mini","max_tokens":true}`, "invalid_body"},
		{"max_tokens [100]", chat, `{"model":"gpt-4o-mini","max_tokens":[100]}`, "invalid_body"},
		{"max_tokens 1e-2", chat, `{"model":"gpt-4o-mini","max_tokens":1e-2}`, "invalid_body"},
		{"n 1.5", chat, `{"model":"gpt-4o-mini","n":1.5}`, "invalid_body"},
		{`stream "true"`, chat, `{"model":"gpt-4o-mini","stream":"true"}`, "invalid_body"},
		{"model an array", chat, `{"model":["gpt-4o-mini","o1-pro"]}`, "invalid_body"},
		{"model null", chat, `{"model":null}`, "invalid_body"},
		{"messages: Max_Tokens", messages, `{"model":"gpt-4o-mini","max_tokens":1,"Max_Tokens":100000}`, "invalid_body"},
		{"messages: duplicate model", messages, `{"model":"gpt-4o-mini","max_tokens":1,"model":"o1-pro"}`, "invalid_body"},
		{"responses: Max_Output_Tokens", responses, `{"model":"gpt-4o-mini","max_output_tokens":1,"Max_Output_Tokens":100000}`, "invalid_body"},
		{"responses: background", responses, `{"model":"gpt-4o-mini","background":true}`, "unsupported_parameter"},
		{"gemini: MaxOutputTokens", gem, `{"generationConfig":{"maxOutputTokens":1,"MaxOutputTokens":100000}}`, "invalid_body"},
		{"gemini: both spellings", gem, `{"generationConfig":{"maxOutputTokens":1},"generation_config":{"max_output_tokens":100000}}`, "invalid_body"},
		{"gemini: GenerationConfig", gem, `{"GenerationConfig":{"maxOutputTokens":100000}}`, "invalid_body"},
		{"gemini: byte order mark", gem, "\ufeff{}", "invalid_body"},
		{"no model", chat, `{"messages":[]}`, "missing_model"},
		{"messages: no model", messages, `{"max_tokens":1}`, "missing_model"},
		{"embeddings: no model", "/v1/embeddings", `{"input":"x"}`, "missing_model"},
		{"count_tokens: no model", "/v1/messages/count_tokens", `{}`, "missing_model"},
		{"empty model", chat, `{"model":""}`, "invalid_model"},
	} {
		before := a.state(k)
		resp, body := a.send(&k, a.post(k, c.path, c.body))
		a.requireRefused(k, before, resp, body, http.StatusBadRequest, c.code, c.name)
	}

	// Counts written otherwise are read as the upstream reads them: each
	// reserves 100, charged as the estimate when the upstream reports no
	// usage.
	a.lenient.setReport(reportNone)
	for _, body := range []string{
		`{"model":"gpt-4o-mini","max_tokens":100.0}`,
		`{"model":"gpt-4o-mini","max_tokens":1e2}`,
		`{"model":"gpt-4o-mini","max_tokens":1000e-1}`,
		"\t{\"model\":\"gpt-4o-mini\",\"max_tokens\":100}\r\n ",
	} {
		before := a.state(k)
		resp, b := a.send(&k, a.post(k, chat, body))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", body, b)
		got := a.upstreamOf(resp)
		require.Equal(t, body, string(got.body), "forwarded byte for byte")
		require.EqualValues(t, 100, got.maxOut, body)
		require.Equal(t, before.used+int64(len(body))/4+100, a.usage(k.ID).Used, body)
	}
	a.lenient.setReport(reportCapped(50))

	// Bodies the gateway would forward unread, or that have no place.
	gz := func(s string) io.Reader {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		io.WriteString(zw, s)
		zw.Close()
		return &buf
	}
	valid := `{"model":"gpt-4o-mini","max_tokens":1}`
	for _, c := range []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
	}{
		{"gzip body", func() *http.Request {
			r := a.request("POST", chat, "", nil)
			r.Body, r.ContentLength = io.NopCloser(gz(`{"model":"o1-pro"}`)), -1
			r.Header.Set("Content-Encoding", "gzip")
			return r
		}, 415, "unsupported_encoding"},
		{"Content-Encoding br", func() *http.Request {
			r := a.post(k, chat, valid)
			r.Header.Set("Content-Encoding", "br")
			return r
		}, 415, "unsupported_encoding"},
		{"two Content-Encodings", func() *http.Request {
			r := a.post(k, chat, valid)
			r.Header["Content-Encoding"] = []string{"identity", "identity"}
			return r
		}, 415, "unsupported_encoding"},
		{"text/plain", func() *http.Request {
			r := a.post(k, chat, valid)
			r.Header.Set("Content-Type", "text/plain")
			return r
		}, 415, "unsupported_media_type"},
		{"form", func() *http.Request {
			r := a.post(k, chat, valid)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, 415, "unsupported_media_type"},
		{"two Content-Types", func() *http.Request {
			r := a.post(k, chat, valid)
			r.Header["Content-Type"] = []string{"application/json", "text/plain"}
			return r
		}, 415, "unsupported_media_type"},
		{"malformed Content-Type", func() *http.Request {
			r := a.post(k, chat, valid)
			r.Header.Set("Content-Type", "application/json, text/plain")
			return r
		}, 415, "unsupported_media_type"},
		{"body on GET /v1/models", func() *http.Request {
			return a.withBody(a.get(k, "GET", "/v1/models"), strings.NewReader(valid))
		}, 400, "unexpected_body"},
		{"chunked body on GET /v1/models", func() *http.Request {
			return a.withBody(a.get(k, "GET", "/v1/models"), io.MultiReader(strings.NewReader(valid)))
		}, 400, "unexpected_body"},
		{"body on DELETE /v1/responses/{id}", func() *http.Request {
			return a.withBody(a.get(k, "DELETE", "/v1/responses/resp_1"), strings.NewReader(valid))
		}, 400, "unexpected_body"},
	} {
		before := a.state(k)
		req := c.req()
		req.Header.Set("Authorization", "Bearer "+k.secret)
		resp, body := a.send(&k, req)
		a.requireRefused(k, before, resp, body, c.status, c.code, c.name)
	}
	// The parameters of a JSON media type are its own.
	r := a.post(k, chat, valid)
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, body := a.send(&k, r)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
}

// TestAdversarialModels proves that a key whose Policy.Models is
// ["gpt-4o-mini"] gets no other model to the upstream by any endpoint,
// spelling or path (403, or 400 for names that are not names), that a
// model endpoint without a model is refused, that Gemini paths with a
// model of invalid UTF-8, a control character or over 256 bytes get 400
// invalid_model without a panic, and that every request the upstream
// received ran gpt-4o-mini.
func TestAdversarialModels(t *testing.T) {
	a := newAdversary(t, Options{})
	k := a.attacker("models", onlyAllowed(1e9))
	gemini := func(m, action string) string { return "/v1beta/models/" + m + ":" + action }
	chatOf := func(m string) string {
		b, err := json.Marshal(map[string]any{"model": m, "max_tokens": 5})
		require.NoError(t, err)
		return string(b)
	}
	for _, c := range []struct {
		path, body string
		status     int
		code       string // of a refusal
	}{
		// Served: the allowed model, by every endpoint that runs one.
		{"/v1/chat/completions", chatOf(allowedModel), 200, ""},
		{"/v1/completions", chatOf(allowedModel), 200, ""},
		{"/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":5}`, 200, ""},
		{"/v1/embeddings", `{"model":"gpt-4o-mini","input":"x"}`, 200, ""},
		{"/v1/messages", chatOf(allowedModel), 200, ""},
		{"/v1/messages/count_tokens", `{"model":"gpt-4o-mini"}`, 200, ""},
		{gemini(allowedModel, "generateContent"), `{}`, 200, ""},
		{gemini(allowedModel, "streamGenerateContent") + "?alt=sse", `{}`, 200, ""},
		{gemini(allowedModel, "countTokens"), `{}`, 200, ""},
		{gemini(allowedModel, "embedContent"), `{}`, 200, ""},
		{gemini(allowedModel, "batchEmbedContents"), `{}`, 200, ""},
		{"/v1/models/" + allowedModel + ":generateContent", `{}`, 200, ""},
		// The path names a Gemini request's model, whatever the body says.
		{gemini(allowedModel, "generateContent"), `{"model":"o1-pro"}`, 200, ""},

		// Another model, by every endpoint and spelling.
		{"/v1/chat/completions", chatOf(forbiddenModel), 403, "model_not_allowed"},
		{"/v1/completions", chatOf(forbiddenModel), 403, "model_not_allowed"},
		{"/v1/responses", chatOf(forbiddenModel), 403, "model_not_allowed"},
		{"/v1/embeddings", chatOf(forbiddenModel), 403, "model_not_allowed"},
		{"/v1/messages", chatOf(forbiddenModel), 403, "model_not_allowed"},
		{"/v1/messages/count_tokens", chatOf(forbiddenModel), 403, "model_not_allowed"},
		{"/v1/chat/completions", chatOf("GPT-4o-mini"), 403, "model_not_allowed"},
		{"/v1/chat/completions", chatOf("gpt-4o-mini "), 403, "model_not_allowed"},
		{"/v1/chat/completions", chatOf(" gpt-4o-mini"), 403, "model_not_allowed"},
		{"/v1/chat/completions", chatOf("gpt-4o-mini\u00a0"), 403, "model_not_allowed"},
		{"/v1/chat/completions", chatOf("gpt-4o-*"), 403, "model_not_allowed"},
		{"/v1/chat/completions", chatOf("gpt-4o-mini/../o1-pro"), 403, "model_not_allowed"},
		{"/v1/chat/completions", chatOf("ft:gpt-4o-mini:org::id"), 403, "model_not_allowed"},
		{gemini(forbiddenModel, "generateContent"), `{"model":"gpt-4o-mini"}`, 403, "model_not_allowed"},
		{gemini(forbiddenModel, "streamGenerateContent") + "?alt=sse", `{}`, 403, "model_not_allowed"},
		{gemini(forbiddenModel, "countTokens"), `{}`, 403, "model_not_allowed"},
		{gemini(forbiddenModel, "embedContent"), `{}`, 403, "model_not_allowed"},
		{gemini(forbiddenModel, "batchEmbedContents"), `{}`, 403, "model_not_allowed"},
		{"/v1/models/" + forbiddenModel + ":generateContent", `{}`, 403, "model_not_allowed"},
		{"/v1beta/models/" + forbiddenModel + "%3AgenerateContent", `{}`, 403, "model_not_allowed"},
		{gemini(allowedModel+":x", "generateContent"), `{}`, 403, "model_not_allowed"},

		// Names that are not model names.
		{"/v1/chat/completions", chatOf("gpt-4o-mini\x00"), 400, "invalid_model"},
		{"/v1/chat/completions", chatOf("gpt-4o-mini\n"), 400, "invalid_model"},
		{"/v1/chat/completions", chatOf("gpt-4o-mini\x7f"), 400, "invalid_model"},
		{"/v1/chat/completions", chatOf("gpt-4o-mini\u0085"), 400, "invalid_model"},
		{"/v1/chat/completions", chatOf("gpt-4o-mini\u200b"), 400, "invalid_model"},
		{"/v1/chat/completions", chatOf("gpt-4o-mini\u202e"), 400, "invalid_model"},
		{"/v1/chat/completions", chatOf(strings.Repeat("a", maxModelBytes+1)), 400, "invalid_model"},
		{"/v1/chat/completions", chatOf(strings.Repeat("a", 100<<10)), 400, "invalid_model"},
		{"/v1beta/models/%FF:generateContent", `{}`, 400, "invalid_model"},
		{"/v1beta/models/%C0%AF:generateContent", `{}`, 400, "invalid_model"},
		{"/v1beta/models/gpt-4o-mini%FF:generateContent", `{}`, 400, "invalid_model"},
		{"/v1beta/models/gpt-4o-mini%00:generateContent", `{}`, 400, "invalid_model"},
		{gemini(strings.Repeat("a", 300), "generateContent"), `{}`, 400, "invalid_model"},
		{"/v1beta/models/:generateContent", `{}`, 400, "invalid_model"},
	} {
		msg := fmt.Sprintf("%s %.80q", c.path, c.body)
		before := a.state(k)
		resp, body := a.send(&k, a.post(k, c.path, c.body))
		if c.status != http.StatusOK {
			a.requireRefused(k, before, resp, body, c.status, c.code, msg)
			continue
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", msg, body)
		require.Equal(t, allowedModel, a.upstreamOf(resp).model, msg)
	}
	got := a.lenient.received()
	require.Len(t, got, 13)
	for _, q := range got {
		require.Equal(t, allowedModel, q.model, "a forbidden model reached the upstream: %s %s", q.method, q.target)
	}
}

// TestAdversarialMetricsCardinality proves that a key that may use any
// model cannot grow the metrics with model names of its own: after 200
// distinct 256-byte names served and 200 distinct 100 KB names refused
// (invalid_model), the metrics, scraped with the admin token, stay under
// 1 MB, hold none of the names, and label every model "other".
func TestAdversarialMetricsCardinality(t *testing.T) {
	const token = "admin-token-for-metrics-0123456789"
	a := newAdversaryOp(t, Options{}, operator{token: token})
	k := a.attacker("any model", keystore.Policy{Windows: []keystore.Window{{Limit: 1e12, Window: 5 * time.Hour}}})
	name := func(i, size int) string {
		p := fmt.Sprintf("attacker-model-%04d-", i)
		return p + strings.Repeat("x", size-len(p))
	}
	for i := range 200 {
		n := name(i, maxModelBytes)
		resp, body := a.send(&k, a.post(k, "/v1/chat/completions", `{"model":"`+n+`","max_tokens":1}`))
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, n, a.upstreamOf(resp).model)
	}
	for i := range 200 {
		n := name(1000+i, 100<<10)
		before := a.state(k)
		resp, body := a.send(&k, a.post(k, "/v1/chat/completions", `{"model":"`+n+`","max_tokens":1}`))
		a.requireRefused(k, before, resp, body, http.StatusBadRequest, "invalid_model", "100 KB model name")
	}

	req := a.request("GET", "/metrics", "", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, body := a.send(nil, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Less(t, len(body), 1<<20, "the metrics grew with the attacker's model names")
	text := string(body)
	require.NotContains(t, text, "attacker-model-", "a model name of the attacker's is in the metrics")
	require.NotContains(t, text, k.secret)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	labelled := 0
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "gen_ai_request_model" {
					labelled++
					require.Equal(t, otherModel, l.GetValue(), f.GetName())
				}
			}
		}
	}
	require.NotZero(t, labelled, "no series has a model label: the scrape is not the gateway's")
}

// TestAdversarialStalledBody proves that a body that never finishes,
// whether it stops after 10 of its 100 declared bytes, stops mid-chunk, or
// trickles a byte at a time, gets 408 request_timeout within
// Options.BodyTimeout (the bound is on the whole body, not each read), and
// the connection closed; nothing reaches the upstream or is charged.
func TestAdversarialStalledBody(t *testing.T) {
	a := newAdversary(t, Options{BodyTimeout: 200 * time.Millisecond})
	k := a.attacker("stall", onlyAllowed(1e9))
	head := func(framing string) string {
		return "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer " + k.secret +
			"\r\nContent-Type: application/json\r\n" + framing + "\r\n"
	}
	for _, c := range []struct {
		name, raw string
		trickle   bool // then send a byte every 20ms, for as long as it takes
	}{
		{"10 of 100 bytes", head("Content-Length: 100\r\n") + `{"model": `, false},
		{"a chunk cut short", head("Transfer-Encoding: chunked\r\n") + "64\r\n{\"model\":", false},
		{"a byte at a time", head("Content-Length: 100000\r\n") + `{"model":"gpt-4o-mini","x":"`, true},
	} {
		before := a.state(k)
		conn := a.dial()
		_, err := io.WriteString(conn, c.raw)
		require.NoError(t, err, c.name)
		stop := make(chan struct{})
		var trickler sync.WaitGroup
		if c.trickle {
			trickler.Go(func() {
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := conn.Write([]byte("a")); err != nil {
							return
						}
					}
				}
			})
		}
		resp, body := a.readResponse(&k, conn, "/v1/chat/completions")
		close(stop)
		trickler.Wait()
		a.waitServed()
		require.True(t, resp.Close, "%s: the connection is kept after a timed-out body", c.name)
		a.requireRefused(k, before, resp, body, http.StatusRequestTimeout, "request_timeout", c.name)
	}
}

// TestAdversarialSlotsBeforeBody proves that a key of MaxConcurrent 1
// whose one slot is held by a request stalled mid-body gets 429
// (concurrency) for a second request at once, without that request's body
// being read (with Expect: 100-continue, the refusal comes instead of the
// 100 Continue that reading it would send), that nothing reaches the
// upstream, and that the slot is free again once the stalled request ends.
func TestAdversarialSlotsBeforeBody(t *testing.T) {
	a := newAdversary(t, Options{BodyTimeout: time.Minute})
	p := onlyAllowed(1e9)
	p.MaxConcurrent = 1
	k := a.attacker("one slot", p)
	before := a.state(k)

	stalled := a.dial()
	_, err := io.WriteString(stalled, "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer "+k.secret+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"+`{"model": `) // 10 of its 100 bytes
	require.NoError(t, err)
	require.Eventually(t, func() bool { return slotsHeld(a.gw, k.ID) == 1 }, 10*time.Second, time.Millisecond,
		"the stalled request never took its slot")

	// Its body announced, not sent: the refusal comes first.
	conn := a.dial()
	_, err = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer "+k.secret+
		"\r\nContent-Type: application/json\r\nContent-Length: 40\r\nExpect: 100-continue\r\n\r\n")
	require.NoError(t, err)
	resp, body := a.readResponse(&k, conn, "/v1/chat/completions")
	a.waitServed()
	a.requireRefused(k, before, resp, body, http.StatusTooManyRequests, "rate_limit_exceeded", "announced body")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Contains(t, apiError(t, body, typeRate)["message"], "1 requests in flight")

	// A whole request, as an SDK sends it.
	resp, body = a.send(&k, a.post(k, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1}`))
	a.requireRefused(k, before, resp, body, http.StatusTooManyRequests, "rate_limit_exceeded", "whole request")

	// The stalled request ends (its caller hangs up): the slot is free.
	require.NoError(t, stalled.Close())
	a.waitServed()
	require.Zero(t, slotsHeld(a.gw, k.ID))
	a.requireUnchanged(k, before, "the stalled request")
	resp, body = a.send(&k, a.post(k, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1}`))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
}

// TestAdversarialRefusalsDoNotWaitForBody proves that the answers the
// gateway gives before reading a body (no free slot, unknown key, unknown
// endpoint, wrong method, unsupported media type) reach a caller whose
// body stalls, without waiting for that body: the gateway never reads it,
// and nothing may read it on the gateway's behalf (net/http discards an
// unread body before it writes a response on a connection it keeps).
func TestAdversarialRefusalsDoNotWaitForBody(t *testing.T) {
	a := newAdversary(t, Options{BodyTimeout: time.Minute})
	p := onlyAllowed(1e9)
	p.MaxConcurrent = 1
	k := a.attacker("one slot", p)
	other := a.attacker("other", onlyAllowed(1e9))
	before, otherBefore := a.state(k), a.state(other)

	stalled := a.dial()
	_, err := io.WriteString(stalled, "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer "+k.secret+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"+`{"model": `) // 10 of its 100 bytes
	require.NoError(t, err)
	require.Eventually(t, func() bool { return slotsHeld(a.gw, k.ID) == 1 }, 10*time.Second, time.Millisecond,
		"the stalled request never took its slot")

	rows := []struct {
		name, method, path, secret, ctype string
		status                            int
		code                              string
	}{
		{"no free slot", "POST", "/v1/chat/completions", k.secret, "application/json", 429, "rate_limit_exceeded"},
		{"unknown key", "POST", "/v1/chat/completions", "rsk_unknown", "application/json", 401, "invalid_api_key"},
		{"unknown endpoint", "POST", "/v1/batches", other.secret, "application/json", 404, "unknown_endpoint"},
		{"wrong method", "PUT", "/v1/chat/completions", other.secret, "application/json", 405, "method_not_allowed"},
		{"media type", "POST", "/v1/chat/completions", other.secret, "text/plain", 415, "unsupported_media_type"},
	}
	type result struct {
		resp *http.Response
		body []byte
		err  error
	}
	results := make([]result, len(rows))
	var wg sync.WaitGroup
	for i, c := range rows {
		conn := a.dial() // a read fails after its deadline: the bound of a failure
		wg.Go(func() {
			raw := c.method + " " + c.path + " HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer " + c.secret +
				"\r\nContent-Type: " + c.ctype + "\r\nContent-Length: 100\r\n\r\n" + `{"model":`
			if _, err := io.WriteString(conn, raw); err != nil {
				results[i].err = err
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				results[i].err = err
				return
			}
			body, err := io.ReadAll(resp.Body)
			results[i] = result{resp, body, err}
		})
	}
	wg.Wait()
	var failed []string
	for i, c := range rows {
		r := results[i]
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("%s (%s %s): no answer while its body stalls: %v", c.name, c.method, c.path, r.err))
			continue
		}
		require.Equal(t, c.status, r.resp.StatusCode, "%s: %s", c.name, r.body)
		require.Equal(t, c.code, apiError(t, r.body, apierror.TypeOf(c.status))["code"], c.name)
	}
	require.NoError(t, stalled.Close())
	for range len(rows) + 1 {
		a.waitServed()
	}
	a.requireUnchanged(k, before, "refused before their bodies")
	a.requireUnchanged(other, otherBefore, "refused before their bodies")
	require.Empty(t, failed)
}

// TestAdversarialPaths proves that unclean paths (a trailing "/", "//",
// "." and ".." segments, escaped "/", "\" and dots, NUL) and endpoints the
// gateway does not meter (batches, files, cached contents, and the like)
// are refused, 404 or 405, and never forwarded, sent raw on the request
// line as an attacker would; an absolute-form target goes to the gateway's
// own upstream.
func TestAdversarialPaths(t *testing.T) {
	a := newAdversary(t, Options{})
	k := a.attacker("paths", onlyAllowed(1e9))
	body := `{"model":"gpt-4o-mini","max_tokens":1}`
	for _, c := range []struct {
		method, target string
		status         int
	}{
		{"POST", "/v1/chat/completions/", 404},
		{"POST", "//v1/chat/completions", 404},
		{"POST", "/v1//chat/completions", 404},
		{"POST", "/v1/./chat/completions", 404},
		{"POST", "/v1/chat/./completions", 404},
		{"POST", "/v1/chat/completions/.", 404},
		{"POST", "/v1/x/../chat/completions", 404},
		{"POST", "/v1/models/../chat/completions", 404},
		{"POST", "/v1/chat%2Fcompletions", 404},
		{"POST", "/v1/chat%2fcompletions", 404},
		{"POST", "/v1%2Fchat/completions", 404},
		{"POST", "/v1/chat%5Ccompletions", 404},
		{"POST", "/v1\\chat/completions", 404},
		{"POST", "/v1/%2E/chat/completions", 404},
		{"POST", "/v1/x/%2E%2E/chat/completions", 404},
		{"POST", "/v1/chat/completions%00", 404},
		{"POST", "/v1/chat/completions;o1-pro", 404},
		{"POST", "/V1/chat/completions", 404},
		{"POST", "/v1beta/models/gpt-4o-mini:generateContent/", 404},
		{"POST", "/v1beta/models/gpt-4o-mini%2F..%2Fo1-pro:generateContent", 404},
		{"GET", "/v1/responses//input_items", 404},
		{"GET", "/v1/responses/resp_1/", 404},
		{"GET", "/v1/models/", 404},
		// Endpoints the gateway cannot meter.
		{"POST", "/v1/batches", 404},
		{"GET", "/v1/batches", 404},
		{"POST", "/v1/messages/batches", 404},
		{"GET", "/v1/messages/batches/msgbatch_1/results", 404},
		{"POST", "/v1/files", 404},
		{"GET", "/v1/files", 404},
		{"POST", "/v1beta/cachedContents", 404},
		{"POST", "/v1/fine_tuning/jobs", 404},
		{"POST", "/v1/images/generations", 404},
		{"POST", "/v1/audio/speech", 404},
		{"POST", "/v1/assistants", 404},
		{"POST", "/v1/threads/runs", 404},
		{"POST", "/v1/realtime/sessions", 404},
		{"POST", "/v1/responses/resp_1/cancel", 404},
		{"POST", "/v1/chat/completions/chatcmpl_1", 404},
		{"POST", "/v2/chat/completions", 404},
		{"POST", "/v1beta/models/gpt-4o-mini:batchGenerateContent", 405},
		{"POST", "/v1beta/models/gpt-4o-mini:predictLongRunning", 405},
		{"POST", "/v1/responses/resp_1", 405},
	} {
		msg := c.method + " " + c.target
		before := a.state(k)
		raw := c.method + " " + c.target + " HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer " + k.secret +
			"\r\nConnection: close\r\n"
		if c.method == "POST" {
			raw += fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		} else {
			raw += "\r\n"
		}
		resp, b := a.raw(&k, raw)
		code := map[int]string{404: "unknown_endpoint", 405: "method_not_allowed"}[c.status]
		a.requireRefused(k, before, resp, b, c.status, code, msg)
		if c.status == http.StatusMethodNotAllowed {
			require.NotEmpty(t, resp.Header.Get("Allow"), msg)
		}
	}

	// An absolute-form target names a host: the request goes to the
	// gateway's upstream all the same, with its own Host.
	raw := "POST http://evil.example/v1/chat/completions HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer " + k.secret +
		fmt.Sprintf("\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, b := a.raw(&k, raw)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	got := a.upstreamOf(resp)
	require.Equal(t, a.lenient.url(t).Host, got.host)
	require.Equal(t, "/v1/chat/completions", got.path)
	require.Len(t, a.lenient.received(), 1)
}

// TestAdversarialMethods proves that methods an endpoint does not answer
// get 405 with Allow and are never forwarded; that method-override fields
// are not forwarded (the upstream gets the method the gateway checked);
// and that a model lookup whose lenient response reports usage is charged
// it, while retrieving a stored response is not.
func TestAdversarialMethods(t *testing.T) {
	a := newAdversary(t, Options{})
	k := a.attacker("methods", onlyAllowed(1e9))
	chat := "/v1/chat/completions"
	body := `{"model":"gpt-4o-mini","max_tokens":1}`
	for _, c := range []struct {
		method, path, allow string
		body                bool
	}{
		{"GET", chat, "POST", false},
		{"HEAD", chat, "POST", false},
		{"OPTIONS", chat, "POST", false},
		{"PUT", chat, "POST", true},
		{"PATCH", chat, "POST", true},
		{"DELETE", chat, "POST", false},
		{"post", chat, "POST", true},
		{"TRACE", chat, "POST", false},
		{"POST", "/v1/models", "GET", true},
		{"POST", "/v1/models/gpt-4o-mini", "GET", true},
		{"POST", "/v1/responses/resp_1", "GET, DELETE", true},
		{"PUT", "/v1/responses/resp_1/input_items", "GET", true},
		{"GET", "/v1beta/models/gpt-4o-mini:generateContent", "POST", false},
		{"GET", "/v1/messages", "POST", false},
	} {
		msg := c.method + " " + c.path
		before := a.state(k)
		req := a.get(k, c.method, c.path)
		if c.body {
			req = a.withBody(req, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
		}
		resp, b := a.send(&k, req)
		require.Equal(t, c.allow, resp.Header.Get("Allow"), msg)
		if c.method == "HEAD" {
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, msg)
			a.requireUnchanged(k, before, msg)
			continue
		}
		a.requireRefused(k, before, resp, b, http.StatusMethodNotAllowed, "method_not_allowed", msg)
	}

	// Method overrides go nowhere: the upstream gets the method checked.
	overrides := map[string]string{"X-Http-Method-Override": "GET", "X-Method-Override": "DELETE", "X-Http-Method": "PUT"}
	for _, req := range []*http.Request{a.post(k, chat, body), a.get(k, "GET", "/v1/models")} {
		method := req.Method
		for name, v := range overrides {
			req.Header.Set(name, v)
		}
		resp, b := a.send(&k, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		got := a.upstreamOf(resp)
		require.Equal(t, method, got.method)
		for name := range overrides {
			require.Empty(t, got.header.Values(name), name)
		}
	}

	// A lenient upstream reports usage on lookups: a model's is charged (it
	// is not a stored response), a stored response's never again.
	for _, c := range []struct {
		path    string
		charged bool
	}{
		{"/v1/models/gpt-4o-mini", true},
		{"/v1beta/models/gpt-4o-mini", true},
		{"/v1/responses/resp_1", false},
		{"/v1/responses/resp_1/input_items", false},
	} {
		before := a.state(k)
		resp, b := a.send(&k, a.get(k, "GET", c.path))
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		got := a.upstreamOf(resp)
		require.True(t, got.reported)
		want := before.used
		if c.charged {
			want += got.in + got.out
		}
		require.Equal(t, want, a.usage(k.ID).Used, c.path)
		require.Equal(t, want-before.used, a.lifetime(k.ID)-before.lifetime, c.path)
	}
}

// TestAdversarialResponseHeaders proves that none of the upstream's
// hostile response fields (its rate limits, organization, cookies, CORS,
// internal fields, a spoofed request ID) nor its trailers reach the
// caller, in every dialect, plain and streamed, while Content-Type and
// X-Request-Id do.
func TestAdversarialResponseHeaders(t *testing.T) {
	a := newAdversary(t, Options{})
	k := a.attacker("headers", onlyAllowed(1e9))
	trailers := map[string]http.Header{} // that reached the caller, by request
	for i, c := range []struct {
		req   *http.Request
		ctype string
	}{
		{a.post(k, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":5}`), "application/json"},
		{a.post(k, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":5,"stream":true}`), "text/event-stream"},
		{a.post(k, "/v1/messages", `{"model":"gpt-4o-mini","max_tokens":5,"stream":true}`), "text/event-stream"},
		{a.post(k, "/v1beta/models/gpt-4o-mini:streamGenerateContent?alt=sse", `{}`), "text/event-stream"},
		{a.post(k, "/v1beta/models/gpt-4o-mini:streamGenerateContent", `{}`), "application/json"},
		{a.get(k, "GET", "/v1/models"), "application/json"},
	} {
		msg := fmt.Sprintf("#%d %s %s", i, c.req.Method, c.req.URL.RequestURI())
		resp, b := a.send(&k, c.req)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", msg, b)
		got := a.upstreamOf(resp)
		require.Equal(t, c.ctype, resp.Header.Get("Content-Type"), msg)
		require.Equal(t, got.id, resp.Header.Get("X-Request-Id"), msg)
		for name, v := range hostileHeaders {
			if name != RequestIDHeader {
				require.NotContains(t, resp.Header.Values(name), v, "%s: %s", msg, name)
			}
		}
		ids := resp.Header.Values(RequestIDHeader)
		require.Len(t, ids, 1, msg)
		require.Regexp(t, requestID, ids[0], msg)
		if len(resp.Trailer) > 0 {
			trailers[msg] = resp.Trailer
		}
	}
	require.Empty(t, trailers, "the upstream's trailers reached the caller")
}

// TestAdversarialRequestHeaders proves that only Content-Type, Accept and
// the fields of the endpoint's API (OpenAI-Beta; Anthropic-Version and
// Anthropic-Beta) reach the upstream, with the gateway's own credential:
// none of the caller's credentials in any field, organization or project
// selectors, cookies, forwarding fields, SDK fields or method overrides;
// and that of the query only what the endpoint uses goes (alt=sse), never
// a ?key= holding the secret.
func TestAdversarialRequestHeaders(t *testing.T) {
	a := newAdversary(t, Options{})
	k := a.attacker("headers", onlyAllowed(1e9))
	hostile := map[string]string{
		"Openai-Organization":    "org-victim",
		"Openai-Project":         "proj-victim",
		"Api-Key":                k.secret,
		"X-Api-Key":              k.secret,
		"X-Goog-Api-Key":         k.secret,
		"Proxy-Authorization":    "Bearer " + k.secret,
		"Cookie":                 "session=" + k.secret,
		"X-Forwarded-For":        "10.0.0.1",
		"X-Forwarded-Host":       "victim.example",
		"Forwarded":              "for=10.0.0.1;host=victim.example",
		"X-Real-Ip":              "10.0.0.1",
		"X-Stainless-Foo":        "bar",
		"X-Stainless-Retry":      "7",
		"Traceparent":            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"X-Http-Method-Override": "GET",
		"Anthropic-Dangerous-Direct-Browser-Access": "true",
		"Openai-Beta":       "assistants=v2",
		"Anthropic-Version": "2023-06-01",
		"Anthropic-Beta":    "prompt-caching-2024-07-31",
		"Accept":            "application/json",
		"Accept-Encoding":   "br",
	}
	base := []string{"Accept", "Accept-Encoding", "Authorization"}
	for _, c := range []struct {
		req  *http.Request
		want []string // the fields the upstream gets
	}{
		{a.post(k, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":5}`), append([]string{"Content-Type", "Content-Length", "Openai-Beta"}, base...)},
		{a.post(k, "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":5}`), append([]string{"Content-Type", "Content-Length", "Openai-Beta"}, base...)},
		{a.post(k, "/v1/messages", `{"model":"gpt-4o-mini","max_tokens":5}`), append([]string{"Content-Type", "Content-Length", "Anthropic-Version", "Anthropic-Beta"}, base...)},
		{a.post(k, "/v1beta/models/gpt-4o-mini:generateContent", `{}`), append([]string{"Content-Type", "Content-Length"}, base...)},
		{a.get(k, "GET", "/v1/models"), append([]string{"Openai-Beta", "Anthropic-Version", "Anthropic-Beta"}, base...)},
	} {
		msg := c.req.Method + " " + c.req.URL.Path
		for name, v := range hostile {
			c.req.Header.Set(name, v)
		}
		resp, b := a.send(&k, c.req)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", msg, b)
		got := a.upstreamOf(resp)
		names := make([]string, 0, len(got.header))
		for name := range got.header {
			names = append(names, name)
		}
		require.ElementsMatch(t, c.want, names, msg)
		require.Equal(t, "Bearer "+gatewayCredential, got.header.Get("Authorization"), msg)
		require.Equal(t, "gzip", got.header.Get("Accept-Encoding"), "%s: the transport's own", msg)
		for _, name := range []string{"Openai-Beta", "Anthropic-Version", "Anthropic-Beta", "Accept"} {
			if slices.Contains(c.want, name) {
				require.Equal(t, hostile[name], got.header.Get(name), "%s: %s", msg, name)
			}
		}
		requireNoSecret(t, got, k.secret)
	}

	// Gemini style: the secret in x-goog-api-key alone, and in ?key=.
	for _, c := range []struct{ query, want string }{
		{"key=" + k.secret + "&alt=sse", "alt=sse"},
		{"alt=sse&key=" + k.secret, "alt=sse"},
		{"%6Bey=" + k.secret + "&alt=sse", "alt=sse"},
		{"key=" + k.secret + "&KEY=" + k.secret + "&api_key=" + k.secret + "&alt=sse", "alt=sse"},
		{"key=" + k.secret, ""},
	} {
		req := a.request("POST", "/v1beta/models/gpt-4o-mini:streamGenerateContent?"+c.query, "", nil)
		req = a.withBody(req, strings.NewReader(`{}`))
		req.Header.Set("X-Goog-Api-Key", k.secret)
		resp, b := a.send(&k, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", c.query, b)
		got := a.upstreamOf(resp)
		require.Equal(t, c.want, got.query, c.query)
		require.Empty(t, got.header.Values("X-Goog-Api-Key"))
		requireNoSecret(t, got, k.secret)
	}
	for _, c := range []struct{ target, want string }{
		{"/v1/models?limit=2&key=" + k.secret + "&api-key=" + k.secret, "limit=2"},
		{"/v1/chat/completions?api-version=2024-10-21&key=" + k.secret, ""},
	} {
		var req *http.Request
		if strings.HasPrefix(c.target, "/v1/models") {
			req = a.get(k, "GET", c.target)
		} else {
			req = a.post(k, c.target, `{"model":"gpt-4o-mini","max_tokens":1}`)
		}
		resp, b := a.send(&k, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", c.target, b)
		got := a.upstreamOf(resp)
		require.Equal(t, c.want, got.query, c.target)
		requireNoSecret(t, got, k.secret)
	}
}

// TestAdversarialRequestIDs proves that the Ratestore-Request-Id of 1000
// requests, served, refused for want of a key, for their path or for
// their method, concurrently, are unique and of the documented form.
func TestAdversarialRequestIDs(t *testing.T) {
	a := newAdversary(t, Options{})
	k := a.attacker("ids", onlyAllowed(1e12))
	const workers, each = 8, 125
	reqs := make([][]*http.Request, workers)
	for w := range reqs {
		for i := range each {
			switch (w + i) % 4 {
			case 0:
				reqs[w] = append(reqs[w], a.get(k, "GET", "/v1/models"))
			case 1:
				reqs[w] = append(reqs[w], a.request("POST", "/v1/chat/completions", "", nil)) // no key
			case 2:
				reqs[w] = append(reqs[w], a.get(k, "POST", "/v1/batches"))
			case 3:
				reqs[w] = append(reqs[w], a.get(k, "GET", "/v1/chat/completions"))
			}
		}
	}
	var mu sync.Mutex
	seen := make(map[string]int, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for _, req := range reqs[w] {
				owner := &k
				if req.Header.Get("Authorization") == "" {
					owner = nil
				}
				resp, _, err := a.trySend(owner, req)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, id := range resp.Header.Values(RequestIDHeader) {
					seen[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, workers*each, "request IDs repeat")
	for id, n := range seen {
		require.Equal(t, 1, n, id)
		require.Regexp(t, requestID, id)
	}
}

// TestAdversarialSmallWindow proves that on a key of one 1000-token
// window, a request whose own maximum output no window can hold is
// refused (429, x-should-retry: false, no Retry-After), counts that
// saturate included, while requests that name no maximum, as SDKs send
// them, are admitted as long as their prompt fits, never refused for the
// sake of the gateway's 4096-token default.
func TestAdversarialSmallWindow(t *testing.T) {
	a := newAdversary(t, Options{})
	k := a.attacker("small", keystore.Policy{Windows: []keystore.Window{{Limit: 1000, Window: 5 * time.Hour}}, Models: []string{allowedModel}})
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1001}`},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_completion_tokens":5000}`},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":600,"n":2}`},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1e400}`},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":9223372036854775807,"n":9223372036854775807}`},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"n":1e30}`},
		{"/v1/completions", `{"model":"gpt-4o-mini","max_tokens":2000,"stream":true}`},
		{"/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":1001}`},
		{"/v1/messages", `{"model":"gpt-4o-mini","max_tokens":100000}`},
		{"/v1beta/models/gpt-4o-mini:generateContent", `{"generationConfig":{"maxOutputTokens":2000}}`},
		{"/v1beta/models/gpt-4o-mini:generateContent", `{"generationConfig":{"maxOutputTokens":600,"candidateCount":2}}`},
	} {
		msg := c.path + " " + c.body
		before := a.state(k)
		resp, body := a.send(&k, a.post(k, c.path, c.body))
		a.requireRefused(k, before, resp, body, http.StatusTooManyRequests, "rate_limit_exceeded", msg)
		require.Equal(t, "false", resp.Header.Get("X-Should-Retry"), msg)
		require.Empty(t, resp.Header.Values("Retry-After"), msg)
		require.Contains(t, apiError(t, body, typeRate)["message"], "reserves", msg)
	}

	// Requests without a maximum, in every dialect, until the window is
	// full: each admitted while its prompt (bytes/4) fits.
	shapes := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true}`},
		{"/v1/messages", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true}`},
		{"/v1/responses", `{"model":"gpt-4o-mini","input":"hi"}`},
		{"/v1beta/models/gpt-4o-mini:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`},
		{"/v1beta/models/gpt-4o-mini:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"hi"}]}]}`},
	}
	admitted := 0
	for i := 0; ; i++ {
		require.Less(t, i, 100, "never refused")
		c := shapes[i%len(shapes)]
		before := a.state(k)
		fits := before.used+int64(len(c.body))/4 <= 1000
		resp, body := a.send(&k, a.post(k, c.path, c.body))
		if !fits {
			a.requireRefused(k, before, resp, body, http.StatusTooManyRequests, "rate_limit_exceeded", c.path)
			require.NotEmpty(t, resp.Header.Get("Retry-After"), "the window empties in time")
			break
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d (%s), %d used: %s", i, c.path, before.used, body)
		got := a.upstreamOf(resp)
		require.Zero(t, got.maxOut)
		require.Equal(t, before.used+got.in+got.out, a.usage(k.ID).Used)
		admitted++
	}
	require.GreaterOrEqual(t, admitted, 10)
}

// TestAdversarialUsageBound proves that an upstream reporting 5,000,000
// tokens for one request, in any dialect, plain or streamed, model call
// or not, charges the key Options.MaxTokensPerRequest (1000) exactly, and
// that each overrun is logged at level Error.
func TestAdversarialUsageBound(t *testing.T) {
	var logs logbuf.Buffer
	a := newAdversary(t, Options{MaxTokensPerRequest: 1000, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	a.lenient.setReport(reportFixed(4_000_000, 1_000_000))
	k := a.attacker("bound", onlyAllowed(1e12))
	reqs := []*http.Request{
		a.post(k, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":10}`),
		a.post(k, "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true}`),
		a.post(k, "/v1/messages", `{"model":"gpt-4o-mini","max_tokens":10,"stream":true}`),
		a.post(k, "/v1beta/models/gpt-4o-mini:generateContent", `{}`),
		a.post(k, "/v1beta/models/gpt-4o-mini:streamGenerateContent", `{}`),
		a.get(k, "GET", "/v1/models"),
	}
	for i, req := range reqs {
		resp, b := a.send(&k, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		got := a.upstreamOf(resp)
		require.EqualValues(t, 5_000_000, got.in+got.out)
		require.EqualValues(t, 1000*(i+1), a.usage(k.ID).Used, req.URL.Path)
		require.EqualValues(t, 1000*(i+1), a.lifetime(k.ID), req.URL.Path)
	}
	var overruns int
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["level"] != "ERROR" {
			continue
		}
		overruns++
		require.Contains(t, m["msg"], "more usage than one request may be charged", line)
		require.Equal(t, 5e6, m["reported"], line)
		require.Equal(t, 1000.0, m["tokens"], line)
		require.Equal(t, k.ID, m["key_id"], line)
	}
	require.Equal(t, len(reqs), overruns, logs.String())
	require.NotContains(t, logs.String(), k.secret)
}

// TestAdversarialConcurrentMixed proves, over 5 rounds of 16 concurrent
// callers, each sending requests of its own shape (OpenAI, Anthropic,
// Gemini; with and without a maximum; streamed and not; some malformed)
// one after the other, on a fresh key of one 1000-token window each, that
// the key ends within its limit plus the largest usage one request
// reported, that it is charged exactly the usage the upstream reported for
// the requests it admitted, and that the malformed ones are refused and
// never forwarded.
func TestAdversarialConcurrentMixed(t *testing.T) {
	var logs logbuf.Buffer
	a := newAdversary(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	a.lenient.setReport(reportCapped(100))
	const attempts = 4 // requests of each caller, one after the other
	shapes := []struct {
		path, body string
		malformed  bool
	}{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"one"}]}`, false},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"two"}]}`, false},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":200,"stream":true,"messages":[]}`, false},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":false},"messages":[]}`, false},
		{"/v1/completions", `{"model":"gpt-4o-mini","max_tokens":30,"stream":true,"prompt":"three"}`, false},
		{"/v1/messages", `{"model":"gpt-4o-mini","max_tokens":300,"messages":[{"role":"user","content":"four"}]}`, false},
		{"/v1/messages", `{"model":"gpt-4o-mini","max_tokens":80,"stream":true,"messages":[]}`, false},
		{"/v1/messages", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"five"}]}`, false},
		{"/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":40,"input":"six"}`, false},
		{"/v1/embeddings", `{"model":"gpt-4o-mini","input":"seven"}`, false},
		{"/v1beta/models/gpt-4o-mini:generateContent", `{"generationConfig":{"maxOutputTokens":120}}`, false},
		{"/v1beta/models/gpt-4o-mini:generateContent", `{"generationConfig":{"maxOutputTokens":100,"candidateCount":2}}`, false},
		{"/v1beta/models/gpt-4o-mini:streamGenerateContent?alt=sse", `{"contents":[]}`, false},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","model":"o1-pro","max_tokens":1}`, true},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"MAX_TOKENS":100000}`, true},
		{"/v1/messages", "\ufeff{\"model\":\"gpt-4o-mini\",\"max_tokens\":1}", true},
	}
	for round := range 5 {
		k := a.attacker(fmt.Sprintf("round %d", round), keystore.Policy{Windows: []keystore.Window{{Limit: 1000, Window: 5 * time.Hour}}, Models: []string{allowedModel}})
		// Each of 16 callers sends its shape, in a random order, several
		// times in a row, so that the window fills while requests of every
		// shape are in flight.
		order := rand.New(rand.NewPCG(uint64(round), 7)).Perm(len(shapes))
		type outcome struct {
			status int
			body   []byte
		}
		outcomes := make([][]outcome, len(shapes))
		reqs := make([][]*http.Request, len(shapes))
		for i, s := range order {
			for range attempts {
				reqs[i] = append(reqs[i], a.post(k, shapes[s].path, shapes[s].body))
			}
		}
		startGate := make(chan struct{})
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Go(func() {
				<-startGate
				for _, req := range reqs[i] {
					resp, body, err := a.trySend(&k, req)
					if err != nil {
						t.Error(err)
						return
					}
					outcomes[i] = append(outcomes[i], outcome{resp.StatusCode, body})
				}
			})
		}
		close(startGate)
		wg.Wait()
		require.False(t, t.Failed())

		ok := 0
		for i, s := range order {
			for _, o := range outcomes[i] {
				msg := fmt.Sprintf("round %d: %s %s: %s", round, shapes[s].path, shapes[s].body, o.body)
				switch {
				case shapes[s].malformed:
					require.Equal(t, http.StatusBadRequest, o.status, msg)
					require.Equal(t, "invalid_body", apiError(t, o.body, typeInvalid)["code"], msg)
				case o.status == http.StatusOK:
					ok++
				default:
					require.Equal(t, http.StatusTooManyRequests, o.status, msg)
					require.Equal(t, "rate_limit_exceeded", apiError(t, o.body, typeRate)["code"], msg)
				}
			}
		}
		var sum, largest int64
		forwarded := 0
		for _, q := range a.lenient.received() {
			if a.ownerOf(q.id) != k.ID {
				continue
			}
			forwarded++
			sum += q.in + q.out
			largest = max(largest, q.in+q.out)
		}
		u := a.usage(k.ID)
		t.Logf("round %d: %d admitted, %d tokens charged, largest %d", round, ok, u.Used, largest)
		require.Equal(t, ok, forwarded, "round %d: requests forwarded but those admitted", round)
		require.NotZero(t, ok, "round %d", round)
		require.Zero(t, u.InFlight)
		require.Equal(t, sum, u.Used, "round %d: charged but reported", round)
		require.Equal(t, sum, a.lifetime(k.ID), "round %d", round)
		require.LessOrEqual(t, u.Used, 1000+largest, "round %d: reserved and charged, by request:\n%s", round, exchanges(t, &logs, k.ID))
	}
}

// TestAdversarialDefaultOutputOvershoot proves that requests that name no
// maximum output, each admitted into the last room of a 1000-token window
// (their prompt, and none of the default output) while a short request
// that names its maximum holds the rest, cannot together take the key past
// its limit by more than one request's usage once they run to a long
// answer: the attacker frees the room by ending the short request, and
// fills it again, as often as it likes, but while one such request runs
// the next is refused.
func TestAdversarialDefaultOutputOvershoot(t *testing.T) {
	var logs logbuf.Buffer
	a := newAdversary(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	a.lenient.setReport(func(q *upstreamReq) (int64, int64, bool) {
		out := int64(DefaultMaxTokens) // no maximum: a long answer
		if q.maxOut > 0 {
			out = min(q.maxOut, 10) // a short answer, within its maximum
		}
		return int64(len(q.body)) / 4, out, true
	})
	const limit = 1000
	k := a.attacker("overlap", keystore.Policy{Windows: []keystore.Window{{Limit: limit, Window: 5 * time.Hour}}, Models: []string{allowedModel}})
	long := `{"model":"gpt-4o-mini","hold":"long","messages":[{"role":"user","content":"write a long essay"}]}`
	type result struct {
		status int
		body   []byte
	}
	async := func(req *http.Request) <-chan result {
		done := make(chan result, 1)
		go func() {
			resp, body, err := a.trySend(&k, req)
			if err != nil {
				t.Error(err)
				close(done)
				return
			}
			done <- result{resp.StatusCode, body}
		}()
		return done
	}
	atUpstream := func(n int) {
		require.Eventually(t, func() bool { return len(a.lenient.received()) == n }, 10*time.Second, time.Millisecond)
	}
	var first <-chan result
	for i := range 3 {
		// A short request reserves all the room but the long one's prompt
		// and is held at the upstream; the long one is admitted into what
		// is left, the first time: the window is full of reservations.
		// Later, while that one runs, another such request is refused.
		hold := fmt.Sprintf("short %d", i)
		short := async(a.post(k, "/v1/chat/completions", reserving(limit-a.usage(k.ID).Used-int64(len(long))/4, hold)))
		atUpstream(map[int]int{0: 1, 1: 3, 2: 4}[i]) // short 0, long, short 1, short 2
		if i == 0 {
			first = async(a.post(k, "/v1/chat/completions", long))
			atUpstream(2)
			require.EqualValues(t, limit, a.usage(k.ID).Used, "the window is full")
		} else {
			r := <-async(a.post(k, "/v1/chat/completions", long))
			require.Equal(t, http.StatusTooManyRequests, r.status, string(r.body))
			require.Contains(t, apiError(t, r.body, "rate_limit_error")["message"], "names no maximum output is already running")
			require.Len(t, a.lenient.received(), i+2, "round %d: the refused request reached the upstream", i)
		}
		a.lenient.release(hold)
		r := <-short
		require.Equal(t, http.StatusOK, r.status, string(r.body))
	}
	a.lenient.release("long")
	r := <-first
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var largest int64
	for _, q := range a.lenient.received() {
		largest = max(largest, q.in+q.out)
	}
	u := a.usage(k.ID)
	require.Zero(t, u.InFlight)
	require.LessOrEqual(t, u.Used, limit+largest, "reserved and charged, by request:\n%s", exchanges(t, &logs, k.ID))
}

// Helpers.

// reserving is a chat completion body, held at the lenient upstream on
// hold, whose reservation (bytes/4 + max_tokens) is reserve.
func reserving(reserve int64, hold string) string {
	const format = `{"model":"gpt-4o-mini","hold":%q,"max_tokens":%-12d}` // the number padded: one length for all
	n := reserve - int64(len(fmt.Sprintf(format, hold, 0)))/4
	return fmt.Sprintf(format, hold, n)
}

// onlyAllowed is the policy of the attacker's key: one window of limit
// tokens, and allowedModel only.
func onlyAllowed(limit int64) keystore.Policy {
	return keystore.Policy{Windows: []keystore.Window{{Limit: limit, Window: 5 * time.Hour}}, Models: []string{allowedModel}}
}

// adversary is an env whose gateway forwards to a lenient upstream with
// the gateway's own credential, and that knows which key each upstream
// request was answered to.
type adversary struct {
	*env
	lenient   *lenient
	maxCharge int64 // Options.MaxTokensPerRequest

	mu        sync.Mutex
	attackers map[string]attacker // by key ID
	owners    map[string]string   // upstream request ID (X-Request-Id) -> key ID
}

// attacker is a key of the test, with its secret.
type attacker struct {
	keystore.Key
	secret string
}

// newAdversary starts an adversary: opts.Upstream is the lenient upstream,
// opts.UpstreamKey gatewayCredential unless set. The suite's invariants
// are checked when t ends.
func newAdversary(t *testing.T, opts Options) *adversary {
	return newAdversaryOp(t, opts, operator{})
}

// newAdversaryOp is newAdversary with the operator's side op.
func newAdversaryOp(t *testing.T, opts Options, op operator) *adversary {
	up := newLenient(t)
	opts.Upstream = up.url(t)
	opts.UpstreamKey = cmp.Or(opts.UpstreamKey, gatewayCredential)
	a := &adversary{
		env:       newEnvOp(t, opts, op),
		lenient:   up,
		maxCharge: cmp.Or(opts.MaxTokensPerRequest, DefaultMaxTokensPerRequest),
		attackers: make(map[string]attacker),
		owners:    make(map[string]string),
	}
	t.Cleanup(a.requireInvariants)
	t.Cleanup(up.releaseAll) // first: the gateway's server waits for its requests
	return a
}

// attacker creates a key of policy p.
func (a *adversary) attacker(name string, p keystore.Policy) attacker {
	a.t.Helper()
	k, secret := a.policyKey(name, p)
	at := attacker{Key: k, secret: secret}
	a.mu.Lock()
	a.attackers[k.ID] = at
	a.mu.Unlock()
	return at
}

// post is a POST of body, byte for byte, to target with k's secret as a
// bearer token, as JSON.
func (a *adversary) post(k attacker, target, body string) *http.Request {
	a.t.Helper()
	req := a.withBody(a.get(k, "POST", target), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return req
}

// get is a request without a body of method to target with k's secret as
// a bearer token.
func (a *adversary) get(k attacker, method, target string) *http.Request {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+target, nil)
	require.NoError(a.t, err)
	req.Header.Set("Authorization", "Bearer "+k.secret)
	return req
}

// withBody gives req the body of rd, of a known length for the readers
// http.NewRequest knows, else sent chunked.
func (a *adversary) withBody(req *http.Request, rd io.Reader) *http.Request {
	a.t.Helper()
	r, err := http.NewRequest(req.Method, req.URL.String(), rd)
	require.NoError(a.t, err)
	r.Header = req.Header
	return r
}

// send sends req on behalf of k (nil: no key of the test's) and reads the
// response: see trySend.
func (a *adversary) send(k *attacker, req *http.Request) (*http.Response, []byte) {
	a.t.Helper()
	resp, body, err := a.trySend(k, req)
	require.NoError(a.t, err)
	return resp, body
}

// trySend is send for goroutines other than the test's: it sends req,
// reads the whole response, waits until the gateway has finished the
// request, checks the fields every answer must have, and notes which key
// the upstream request, if any, was answered to.
func (a *adversary) trySend(k *attacker, req *http.Request) (*http.Response, []byte, error) {
	resp, body, err := a.env.try(req)
	if err != nil {
		return nil, nil, err
	}
	a.note(k, req.URL.Path, resp)
	return resp, body, nil
}

// raw sends raw, a whole HTTP/1.1 request, on a connection of its own
// for k, and reads the response.
func (a *adversary) raw(k *attacker, raw string) (*http.Response, []byte) {
	a.t.Helper()
	conn := a.dial()
	_, err := io.WriteString(conn, raw)
	require.NoError(a.t, err)
	target := strings.Fields(raw)[1]
	if u, err := url.Parse(target); err == nil {
		target = u.Path
	}
	resp, body := a.readResponse(k, conn, target)
	a.waitServed()
	return resp, body
}

// dial opens a connection to the gateway, which fails its reads and
// writes after 10 seconds: the bound of a failure, not a wait.
func (a *adversary) dial() net.Conn {
	a.t.Helper()
	conn, err := net.Dial("tcp", a.srv.Listener.Addr().String())
	require.NoError(a.t, err)
	a.t.Cleanup(func() { conn.Close() })
	require.NoError(a.t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	return conn
}

// readResponse reads the response to the request for k to target sent on
// conn.
func (a *adversary) readResponse(k *attacker, conn net.Conn, target string) (*http.Response, []byte) {
	a.t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(a.t, err, "no answer")
	body, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	a.note(k, target, resp)
	return resp, body
}

// waitServed waits until the gateway has finished one more request.
func (a *adversary) waitServed() {
	a.t.Helper()
	select {
	case <-a.served:
	case <-time.After(10 * time.Second): // a failure, not a wait
		a.t.Fatal("the gateway did not finish the request")
	}
}

// note checks that resp, the answer to a request for k to the path
// target, has one request ID of the gateway's and none of the upstream's
// hostile fields (its trailers are TestAdversarialResponseHeaders'), and
// notes which key its upstream request was answered to. It reports with Errorf: it runs in goroutines other
// than the test's.
func (a *adversary) note(k *attacker, target string, resp *http.Response) {
	t := a.t
	if !operatorPath(target) {
		if ids := resp.Header.Values(RequestIDHeader); len(ids) != 1 || !requestID.MatchString(ids[0]) {
			t.Errorf("%s: %s %q", target, RequestIDHeader, ids)
		}
	}
	for name, v := range hostileHeaders {
		if name != RequestIDHeader && slices.Contains(resp.Header.Values(name), v) {
			t.Errorf("%s: the upstream's %s reached the caller: %q", target, name, resp.Header.Values(name))
		}
	}
	id := resp.Header.Get("X-Request-Id")
	if id == "" {
		return
	}
	if k == nil {
		t.Errorf("%s: forwarded (%s) for no key", target, id)
		return
	}
	a.mu.Lock()
	a.owners[id] = k.ID
	a.mu.Unlock()
}

// ownerOf returns the ID of the key the upstream request id was answered
// to, or "".
func (a *adversary) ownerOf(id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.owners[id]
}

// upstreamOf returns the upstream request that resp answers.
func (a *adversary) upstreamOf(resp *http.Response) upstreamReq {
	a.t.Helper()
	id := resp.Header.Get("X-Request-Id")
	require.NotEmpty(a.t, id, "the answer did not come from the upstream")
	for _, q := range a.lenient.received() {
		if q.id == id {
			return q
		}
	}
	a.t.Fatalf("the upstream received no request %s", id)
	return upstreamReq{}
}

// keyState is what a refusal must leave unchanged.
type keyState struct {
	hits           int // requests the upstream received
	used, lifetime int64
}

func (a *adversary) state(k attacker) keyState {
	a.t.Helper()
	return keyState{hits: len(a.lenient.received()), used: a.usage(k.ID).Used, lifetime: a.lifetime(k.ID)}
}

// requireUnchanged requires that nothing reached the upstream since
// before, and that k is charged as it was then, nothing in flight.
func (a *adversary) requireUnchanged(k attacker, before keyState, msg string) {
	a.t.Helper()
	require.Equal(a.t, before.hits, len(a.lenient.received()), "%s: a refused request reached the upstream", msg)
	u := a.usage(k.ID)
	require.Equal(a.t, before.used, u.Used, "%s: charged", msg)
	require.Zero(a.t, u.InFlight, msg)
	require.Equal(a.t, before.lifetime, a.lifetime(k.ID), "%s: charged", msg)
}

// requireRefused requires that resp is the gateway's own answer of status
// and code, and that nothing reached the upstream or was charged since
// before.
func (a *adversary) requireRefused(k attacker, before keyState, resp *http.Response, body []byte, status int, code, msg string) {
	a.t.Helper()
	require.Equal(a.t, status, resp.StatusCode, "%s: %s", msg, body)
	require.Equal(a.t, code, apiError(a.t, body, apierror.TypeOf(status))["code"], msg)
	require.Empty(a.t, resp.Header.Get("X-Request-Id"), "%s: answered by the upstream", msg)
	a.requireUnchanged(k, before, msg)
}

// requireInvariants requires, of every request the upstream received,
// that it was answered to a key of the test, ran a model that key may
// use, carries no secret of any key anywhere, and carries the gateway's
// credential and only fields the gateway forwards; and that each key was
// charged at least what the upstream reported for it, up to maxCharge per
// request, but for retrieved stored responses.
func (a *adversary) requireInvariants() {
	t := a.t
	a.mu.Lock()
	defer a.mu.Unlock()
	forwardable := []string{"Content-Type", "Content-Length", "Accept", "Accept-Encoding", "Authorization",
		"Openai-Beta", "Anthropic-Version", "Anthropic-Beta"}
	reported := make(map[string]int64)
	for _, q := range a.lenient.received() {
		msg := q.method + " " + q.target
		id, ok := a.owners[q.id]
		require.True(t, ok, "%s reached the upstream, answered to no key", msg)
		k := a.attackers[id]
		if p := k.Policy.Models; len(p) > 0 && (q.method == "POST" || q.model != "") {
			require.True(t, slices.ContainsFunc(p, func(g string) bool { ok, _ := path.Match(g, q.model); return ok }),
				"%s ran model %q, which key %s may not use", msg, q.model, k.Name)
		}
		for _, other := range a.attackers {
			requireNoSecret(t, q, other.secret)
		}
		require.Equal(t, "Bearer "+gatewayCredential, q.header.Get("Authorization"), msg)
		for name := range q.header {
			require.Contains(t, forwardable, name, msg)
		}
		if q.reported && !(q.method == "GET" && strings.HasPrefix(q.path, "/v1/responses/")) {
			reported[id] += min(q.in+q.out, a.maxCharge)
		}
	}
	for id, n := range reported {
		require.GreaterOrEqual(t, a.lifetime(id), n, "key %s was charged less than the upstream reported", a.attackers[id].Name)
	}
}

// exchanges lists the requests of key id that the gateway admitted, as its
// log has them: path, tokens reserved and charged.
func exchanges(t testing.TB, logs *logbuf.Buffer, id string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == "gateway request" && m["key_id"] == id && m["status"] == 200.0 {
			fmt.Fprintf(&b, "%s reserved %v charged %v\n", m["path"], m["reserved"], m["tokens"])
		}
	}
	return b.String()
}

// requireNoSecret requires that secret is nowhere in q.
func requireNoSecret(t testing.TB, q upstreamReq, secret string) {
	t.Helper()
	msg := q.method + " " + q.path
	require.NotContains(t, q.target, secret, "%s: in the target", msg)
	require.NotContains(t, string(q.body), secret, "%s: in the body", msg)
	for name, vs := range q.header {
		for _, v := range vs {
			require.NotContains(t, v, secret, "%s: in %s", msg, name)
		}
	}
}

// slotsHeld returns the slots of key id that g's own slots hold.
func slotsHeld(g *Gateway, id string) int {
	g.slots.mu.Lock()
	defer g.slots.mu.Unlock()
	return g.slots.used[id]
}

// hostileHeaders are the fields of every answer of the lenient upstream
// that must not reach the caller. Their values cannot be the gateway's
// own: it sets X-Ratelimit-* for the caller's key, in numbers.
var hostileHeaders = map[string]string{
	"X-Ratelimit-Limit-Requests":           "10000-upstream",
	"X-Ratelimit-Remaining-Tokens":         "1-upstream",
	"Anthropic-Ratelimit-Tokens-Remaining": "1",
	"Openai-Organization":                  "org-operator",
	"Openai-Project":                       "proj-operator",
	"Set-Cookie":                           "session=upstream; Path=/; HttpOnly",
	"Access-Control-Allow-Origin":          "*",
	"Access-Control-Allow-Credentials":     "true",
	"X-Upstream-Secret":                    "upstream-internal-secret",
	"Location":                             "https://evil.example/",
	"Strict-Transport-Security":            "max-age=0",
	RequestIDHeader:                        "req_SPOOFEDBYTHEUPSTREAMXXXX",
}

// lenient is an upstream that accepts any method, path and body, reads
// bodies as Go's encoding/json does (names matched case-insensitively,
// the last of duplicates winning, the first of several values, a byte
// order mark skipped), runs the model it reads there or in a Gemini path,
// records every request, and answers in the dialect of the path, plain or
// streamed, with the usage its report says and hostileHeaders. Its
// X-Request-Id names the request.
type lenient struct {
	srv *httptest.Server
	n   atomic.Int64

	mu     sync.Mutex
	report reportFunc
	got    []upstreamReq
	holds  map[string]*hold // by name
}

// hold is where the requests whose body says "hold": name wait, until
// the test releases them.
type hold struct {
	released chan struct{}
	once     sync.Once
}

// upstreamReq is a request the lenient upstream received.
type upstreamReq struct {
	id                   string // its X-Request-Id
	method, host, target string // target: as on the request line
	path, query          string // the path, decoded; the raw query
	header               http.Header
	body                 []byte

	model  string // the model it ran; "" for none
	maxOut int64  // the maximum output named, as encoding/json reads it; 0: none
	stream bool
	hold   string // the body's "hold": wait for its release before answering

	in, out  int64 // the usage it reported, if it did
	reported bool
}

// reportFunc is the usage the lenient upstream reports for q; ok false:
// none.
type reportFunc func(q *upstreamReq) (in, out int64, ok bool)

// reportCapped reports the body's bytes/4 as input and as output the
// maximum named, at most limit, or limit when none is (none for
// embeddings).
func reportCapped(limit int64) reportFunc {
	return func(q *upstreamReq) (int64, int64, bool) {
		out := limit
		if q.maxOut > 0 {
			out = min(q.maxOut, limit)
		}
		if strings.Contains(q.path, "embed") {
			out = 0
		}
		return int64(promptBytes(q.body)) / 4, out, true
	}
}

// promptBytes is the length of body less its stream_options member, which
// is no prompt (and which the gateway adds when a stream does not ask for
// its usage): the input an upstream counts is the caller's.
func promptBytes(body []byte) int {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return len(body)
	}
	if raw, ok := m["stream_options"]; ok {
		return max(0, len(body)-len(`"stream_options":,`)-len(raw))
	}
	return len(body)
}

// reportFixed reports in and out, whatever the request.
func reportFixed(in, out int64) reportFunc {
	return func(*upstreamReq) (int64, int64, bool) { return in, out, true }
}

// reportNone reports no usage.
func reportNone(*upstreamReq) (int64, int64, bool) { return 0, 0, false }

func newLenient(t testing.TB) *lenient {
	l := &lenient{report: reportCapped(50)}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *lenient) url(t testing.TB) *url.URL {
	u, err := url.Parse(l.srv.URL)
	require.NoError(t, err)
	return u
}

func (l *lenient) setReport(f reportFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.report = f
}

// received returns the requests received so far.
func (l *lenient) received() []upstreamReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

func (l *lenient) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	q := upstreamReq{
		id:     fmt.Sprintf("up_%d", l.n.Add(1)),
		method: r.Method, host: r.Host, target: r.RequestURI,
		path: r.URL.Path, query: r.URL.RawQuery,
		header: r.Header.Clone(), body: body,
	}
	q.read()
	l.mu.Lock()
	q.in, q.out, q.reported = l.report(&q)
	l.got = append(l.got, q)
	l.mu.Unlock()
	if q.hold != "" {
		select {
		case <-l.holdOf(q.hold).released:
		case <-r.Context().Done():
			return
		}
	}
	l.answer(w, &q)
}

// holdOf returns the hold of name.
func (l *lenient) holdOf(name string) *hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == nil {
		l.holds = make(map[string]*hold)
	}
	h, ok := l.holds[name]
	if !ok {
		h = &hold{released: make(chan struct{})}
		l.holds[name] = h
	}
	return h
}

// release lets the requests held on name, and those to come, be answered.
func (l *lenient) release(name string) {
	h := l.holdOf(name)
	h.once.Do(func() { close(h.released) })
}

// releaseAll releases every hold: a test that failed may have left some.
func (l *lenient) releaseAll() {
	l.mu.Lock()
	names := make([]string, 0, len(l.holds))
	for name := range l.holds {
		names = append(names, name)
	}
	l.mu.Unlock()
	for _, name := range names {
		l.release(name)
	}
}

// lenientBody is what the lenient upstream reads of a body, with
// encoding/json.
type lenientBody struct {
	Model               string `json:"model"`
	MaxTokens           any    `json:"max_tokens"`
	MaxCompletionTokens any    `json:"max_completion_tokens"`
	MaxOutputTokens     any    `json:"max_output_tokens"`
	Stream              any    `json:"stream"`
	Hold                string `json:"hold"` // the test's, not an API's
	GenerationConfig    *struct {
		MaxOutputTokens any `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

// read reads q's model, maximum output and streaming as a lenient
// upstream would.
func (q *upstreamReq) read() {
	var b lenientBody
	// Whatever it can read: the first value, fields of the wrong type
	// skipped.
	_ = json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(q.body, []byte("\ufeff")))).Decode(&b)
	q.model, q.hold = b.Model, b.Hold
	q.maxOut = max(lenientCount(b.MaxTokens), lenientCount(b.MaxCompletionTokens), lenientCount(b.MaxOutputTokens))
	if b.GenerationConfig != nil {
		q.maxOut = max(q.maxOut, lenientCount(b.GenerationConfig.MaxOutputTokens))
	}
	q.stream = b.Stream == true || b.Stream == "true"
	if m, action, ok := q.geminiAction(); ok {
		q.model, q.stream = m, action == "streamGenerateContent"
	}
}

// geminiAction reads a Gemini model action path, as a lenient upstream
// would: the model up to the first colon.
func (q *upstreamReq) geminiAction() (m, action string, ok bool) {
	if q.method != "POST" {
		return "", "", false
	}
	for _, pre := range []string{"/v1beta/models/", "/v1/models/"} {
		if rest, found := strings.CutPrefix(q.path, pre); found {
			return strings.Cut(rest, ":")
		}
	}
	return "", "", false
}

// lenientCount reads a count as a lenient upstream would: a number
// truncated, or a string holding one.
func lenientCount(v any) int64 {
	switch v := v.(type) {
	case float64:
		switch {
		case v >= math.MaxInt64:
			return math.MaxInt64
		case v > 0:
			return int64(v)
		}
	case string:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return lenientCount(f)
		}
	}
	return 0
}

// answer writes the response to q: JSON, a JSON array (a Gemini stream
// without alt=sse) or an event stream, in q's dialect, with hostile
// fields and a trailer.
func (l *lenient) answer(w http.ResponseWriter, q *upstreamReq) {
	h := w.Header()
	for name, v := range hostileHeaders {
		h.Set(name, v)
	}
	h.Set("X-Request-Id", q.id)
	h.Set("Trailer", "X-Upstream-Trailer")
	defer h.Set("X-Upstream-Trailer", "upstream-trailer")

	in, out, ok := q.in, q.out, q.reported
	var events []string
	_, _, gemini := q.geminiAction()
	switch {
	case gemini:
		doc := `{"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"}}]`
		if ok {
			doc += fmt.Sprintf(`,"usageMetadata":{"promptTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d}`, in, out, in+out)
		}
		doc += "}"
		switch {
		case !q.stream:
			writeBody(w, "application/json", doc)
			return
		case q.query != "alt=sse":
			writeBody(w, "application/json", "["+doc+"]")
			return
		}
		events = []string{"data: " + doc + "\n\n"}
	case strings.HasPrefix(q.path, "/v1/messages"):
		usage := ""
		if ok {
			usage = fmt.Sprintf(`,"usage":{"input_tokens":%d,"output_tokens":%d}`, in, out)
		}
		if !q.stream {
			writeBody(w, "application/json", `{"id":"msg_lenient","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn"`+usage+"}")
			return
		}
		start, delta := "", ""
		if ok {
			start = fmt.Sprintf(`,"usage":{"input_tokens":%d,"output_tokens":1}`, in)
			delta = fmt.Sprintf(`,"usage":{"output_tokens":%d}`, out)
		}
		events = []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_lenient\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]" + start + "}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}" + delta + "}\n\n",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		}
	default:
		usage := ""
		if ok {
			usage = fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, in, out, in+out)
		}
		if !q.stream {
			writeBody(w, "application/json", `{"id":"chatcmpl-lenient","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]`+usage+"}")
			return
		}
		events = []string{`data: {"id":"chatcmpl-lenient","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"ok"}}],"usage":null}` + "\n\n"}
		if ok {
			events = append(events, `data: {"id":"chatcmpl-lenient","object":"chat.completion.chunk","choices":[]`+usage+"}\n\n")
		}
		events = append(events, "data: [DONE]\n\n")
	}
	h.Set("Content-Type", "text/event-stream")
	for _, ev := range events {
		io.WriteString(w, ev)
		http.NewResponseController(w).Flush()
	}
}
