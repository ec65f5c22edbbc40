// Package sdktest runs the official npm clients, openai, @anthropic-ai/sdk
// and @google/genai, against a gateway on loopback in front of a fake
// upstream. It needs node (20 or later: @google/genai 2.x requires it; its
// 3.x, npm's latest, requires 22) and the packages of package-lock.json:
//
//	npm ci --prefix gateway/sdktest
//	go test ./gateway/sdktest -v
//
// sdk.mjs, pool.mjs and endusers.mjs print a JSON line per scenario
// (harness.mjs), the first one the versions they ran; TestSDKs,
// TestPoolSDKs and TestSDKEndUsers log them, each on a bolt file and on
// Redis. As of the lock file (node v20.20.2, openai
// 6.49.0, @anthropic-ai/sdk 1.12.0, @google/genai 2.32.0):
//
//   - chat completions (JSON, stream with and without include_usage),
//     messages (JSON, stream), Gemini generateContent and
//     streamGenerateContent (alt=sse, the key as x-goog-api-key), the
//     Responses API (JSON, stream, and a stream that ends with
//     response.incomplete): the text arrives, and each key is charged
//     exactly the usage the upstream reported (18 tokens a chat or
//     messages call; 22 a Gemini call, 13 prompt + 5 candidates + 4
//     thoughts; 110 a completed response, 101 + 9; 117 the incomplete
//     one, 101 + 16), never an estimate.
//   - a chat stream whose caller aborts after its first chunk
//     (stream.controller.abort()): the upstream sends the rest once the
//     gateway has seen the hang-up, and the key is charged the 54 tokens
//     (23 + 31) of its final usage, not the reservation (4116), in about
//     70 ms.
//   - refusals, with the clients' default retries: an unknown key is 401,
//     a used-up window 429 (Retry-After ~17934 s and x-should-retry: false
//     for openai and anthropic; @google/genai does not retry unless
//     retryOptions are set), a model outside the key's globs 403, each in
//     3 to 30 ms. openai's message is "429 key key_… is over its 5h0m0s
//     token window: 100000 tokens; retry after 4h58m54s"; anthropic's and
//     @google/genai's (ApiError) are the whole JSON error body, as with the
//     real APIs, from which sdk.mjs reads error.message.
//   - budgets in money and the caller's rate-limit headers: see
//     budget_test.go.
//   - end users (endusers.mjs, TestSDKEndUsers, on badger too): openai's
//     user (chat completions) and safety_identifier (responses), Anthropic's
//     metadata.user_id, and X-Ratestore-End-User in a client's
//     defaultHeaders ahead of them, each end user charged exactly its usage
//     in its own window; an end user over its window (RateLimitError naming
//     it, x-should-retry: false, one request) while another passes; a key
//     that requires an end user (400 end_user_required); names the gateway
//     refuses (400 invalid_end_user, the upstream never sees them); a model
//     limit on gpt-4o* that refuses gpt-4o and gpt-4o-mini, not other
//     models.
//
// In front of pools of upstreams (gateway.Options.Upstreams; pool_test.go
// and pool.mjs), each upstream an internal/fakeprovider on loopback:
//
//   - Azure OpenAI: the AzureOpenAI client (endpoint the gateway, apiVersion
//     2024-10-21, the secret as its apiKey; with and without its deployment
//     option, and once with apiVersion 2025-04-01-preview) and the plain
//     OpenAI client with model names, in front of an azure-openai upstream
//     whose models gpt-4o and text-embedding-3-small are the deployments
//     gpt4o-prod and embed-small: chat completions (JSON, stream with
//     include_usage, and without it: the usage the gateway asked for is
//     taken out), embeddings and the Responses API (JSON, stream) get their
//     answers. The provider gets its own key in api-key (never the caller's
//     secret, nor any Authorization), api-version=2024-10-21 whatever the
//     client sent, the deployment's path (/openai/deployments/gpt4o-prod/
//     chat/completions, /openai/deployments/embed-small/embeddings) and, for
//     /openai/responses, the deployment as the body's model; each key is
//     charged exactly the usage reported (36 tokens a call, 29 + 7; 29 an
//     embedding), one request a call. The Azure client's deployment option
//     names the path of chat and embeddings calls, not of responses ones,
//     whose model must name the deployment. (Embeddings ask
//     encoding_format float: the fake answers floats, and the SDK's default,
//     base64, would decode them to nothing.)
//   - failover: the first of two openai upstreams answers 503, or closes the
//     connection unanswered (on a connection the gateway kept alive from the
//     call before), and the first of two anthropic upstreams 529, before any
//     byte went to the caller: each call, JSON or streamed, with the clients'
//     default retries, gets the second's answer and usage (13 + 8, the key
//     charged 21) in 15 to 110 ms, from one request: the client saw no
//     failure and did not retry, and the first upstream got exactly one
//     request a call.
//   - waiting: two calls at once on an upstream of MaxConcurrent 1, the
//     first held at the provider: the second waits in the gateway and is
//     served once the first is let go (the provider never has two at once),
//     each in about 110 ms.
//   - with UpstreamQueueTimeout 50ms, the waiting call gets 429
//     upstream_capacity, Retry-After: 1 and no x-should-retry: openai raises
//     RateLimitError, its message '429 no upstream serving model "gpt-4o" has
//     room for this request now; retry after 1s'. With maxRetries 0 that is
//     one request, in about 140 ms; with the default 2 retries, which follow
//     Retry-After, three, failing in about 2.3 s. A refused call is charged
//     nothing and never reaches the provider.
package sdktest

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
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/redisstore"
)

const (
	inTokens  = 11
	outTokens = 7
	reply     = "hi there"

	// Gemini's usageMetadata: the prompt (of which cachedContentTokenCount
	// were cached), the candidates, and the thoughts, which it counts apart
	// and the gateway counts as output.
	geminiPrompt   = 13
	geminiCached   = 3
	geminiOut      = 5
	geminiThoughts = 4

	// The Responses API's usage: input_tokens (cached_tokens included) and
	// output_tokens (reasoning_tokens included). respIncompleteOut is the
	// output of a stream that ends at max_output_tokens (response.incomplete).
	respIn            = 101
	respCached        = 5
	respOut           = 9
	respReasoning     = 3
	respIncompleteOut = 16

	// The usage the upstream reports at the end of the stream whose caller
	// hangs up after its first chunk.
	abortIn  = 23
	abortOut = 31

	upstreamKey = "upstream-secret"
)

// upstreamLimits are the rate-limit headers of the fake upstream's every
// answer: the operator's account, which the gateway never passes on.
var upstreamLimits = map[string]string{
	"X-Ratelimit-Limit-Tokens":       "777",
	"X-Ratelimit-Remaining-Tokens":   "1",
	"X-Ratelimit-Reset-Tokens":       "42s",
	"X-Ratelimit-Limit-Requests":     "9",
	"X-Ratelimit-Remaining-Requests": "1",
	"X-Ratelimit-Reset-Requests":     "43s",
}

// upstream is a fake model API: it answers /v1/chat/completions,
// /v1/messages, /v1/responses and Gemini's /v1beta/models/{model}:
// generateContent and :streamGenerateContent, JSON and SSE, with usage as
// each API reports it, and notes what it finds wrong in the requests the
// gateway forwards.
type upstream struct {
	*httptest.Server
	// hungUp is closed once the gateway has seen the caller of the "abort"
	// scenario hang up; the upstream holds the rest of that stream until then.
	hungUp <-chan struct{}

	mu       sync.Mutex
	problems []string
}

func (u *upstream) problem(format string, args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.problems = append(u.problems, fmt.Sprintf(format, args...))
}

func (u *upstream) Problems() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.problems...)
}

func fakeUpstream(t *testing.T, hungUp <-chan struct{}) *upstream {
	u := &upstream{hungUp: hungUp}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	// The gateway sends its own credential, never the caller's secret.
	if got := r.Header.Get("Authorization"); got != "Bearer "+upstreamKey {
		u.problem("%s %s: Authorization %q, want the gateway's upstream key", r.Method, r.URL.Path, got)
	}
	for _, h := range []string{"X-Api-Key", "X-Goog-Api-Key"} {
		if r.Header.Get(h) != "" {
			u.problem("%s %s: the caller's %s was forwarded", r.Method, r.URL.Path, h)
		}
	}
	for h, v := range upstreamLimits {
		w.Header().Set(h, v)
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		MaxOutputTokens int `json:"max_output_tokens"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	flush := func() { w.(http.Flusher).Flush() }
	event := func(name string, v any) {
		b, _ := json.Marshal(v)
		if name != "" {
			fmt.Fprintf(w, "event: %s\n", name)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		flush()
	}
	writeJSON := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	switch p := r.URL.Path; {
	case p == "/v1/chat/completions":
		usage := map[string]any{"prompt_tokens": inTokens, "completion_tokens": outTokens, "total_tokens": inTokens + outTokens}
		if req.Model == "gpt-abort" {
			usage = map[string]any{"prompt_tokens": abortIn, "completion_tokens": abortOut, "total_tokens": abortIn + abortOut}
		}
		if !req.Stream {
			writeJSON(map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
					"message": map[string]any{"role": "assistant", "content": reply}}},
				"usage": usage,
			})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		words := strings.SplitAfter(reply, " ")
		if req.Model == "gpt-abort" {
			// The first word, then nothing until the gateway has seen the
			// caller hang up: the rest, usage last, goes to a gateway whose
			// caller is gone.
			event("", chunk(map[string]any{"role": "assistant", "content": words[0]}, nil))
			guard := time.NewTimer(10 * time.Second) // a failure bound, not a wait
			defer guard.Stop()
			select {
			case <-u.hungUp:
			case <-r.Context().Done():
				u.problem("gpt-abort: the gateway ended the upstream request when its caller hung up (%v)", context.Cause(r.Context()))
				return
			case <-guard.C:
				u.problem("gpt-abort: the gateway did not see its caller hang up within 10s")
			}
			// More than socket buffers hold, so that the gateway's writes to
			// the gone caller fail and it reads the rest passing it nowhere.
			pad := strings.Repeat("x", 4096)
			for range 128 {
				event("", chunk(map[string]any{"content": pad}, nil))
			}
			words = words[1:]
		} else {
			event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		}
		for _, word := range words {
			event("", chunk(map[string]any{"content": word}, nil))
		}
		event("", chunk(map[string]any{}, "stop"))
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			event("", map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
				"choices": []any{}, "usage": usage})
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	case p == "/v1/messages":
		msg := map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{map[string]any{"type": "text", "text": reply}}, "stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": inTokens, "output_tokens": outTokens}}
		if !req.Stream {
			writeJSON(msg)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		msg["content"] = []any{}
		msg["stop_reason"] = nil
		msg["usage"] = map[string]any{"input_tokens": inTokens, "output_tokens": 1}
		event("message_start", map[string]any{"type": "message_start", "message": msg})
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, word := range strings.SplitAfter(reply, " ") {
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": word}})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": outTokens}})
		event("message_stop", map[string]any{"type": "message_stop"})
	case p == "/v1/responses":
		u.responses(w, req.Model, req.Stream, req.MaxOutputTokens, event, writeJSON)
	case strings.HasPrefix(p, "/v1beta/models/"):
		model, method, _ := strings.Cut(strings.TrimPrefix(p, "/v1beta/models/"), ":")
		u.gemini(w, r, model, method, writeJSON, flush)
	default:
		http.NotFound(w, r)
	}
}

// responses answers /v1/responses as the OpenAI Responses API does: a
// response object, or a stream of events whose response.completed (or
// response.incomplete, when the request set max_output_tokens) carries the
// usage; the earlier events carry "usage": null.
func (u *upstream) responses(w http.ResponseWriter, model string, stream bool, maxOut int, event func(string, any), writeJSON func(any)) {
	words := strings.SplitAfter(reply, " ")
	status, out, incomplete := "completed", respOut, any(nil)
	if maxOut > 0 {
		status, out, incomplete, words = "incomplete", maxOut, map[string]any{"reason": "max_output_tokens"}, words[:1]
	}
	text := strings.Join(words, "")
	usage := map[string]any{
		"input_tokens": respIn, "input_tokens_details": map[string]any{"cached_tokens": respCached},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": respReasoning},
		"total_tokens": respIn + out,
	}
	msg := func(text, status string) map[string]any {
		return map[string]any{"type": "message", "id": "msg_1", "status": status, "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	response := func(status string, output []any, usage any) map[string]any {
		return map[string]any{"id": "resp_1", "object": "response", "created_at": 1, "status": status, "model": model,
			"error": nil, "incomplete_details": incomplete, "output": output, "usage": usage}
	}
	reasoning := map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}}
	if !stream {
		writeJSON(response(status, []any{reasoning, msg(text, "completed")}, usage))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	ev := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		event(typ, v)
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	ev("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": reasoning})
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": reasoning})
	ev("response.output_item.added", map[string]any{"output_index": 1, "item": msg("", "in_progress")})
	for _, word := range words {
		ev("response.output_text.delta", map[string]any{"item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": word})
	}
	ev("response.output_text.done", map[string]any{"item_id": "msg_1", "output_index": 1, "content_index": 0, "text": text})
	ev("response.output_item.done", map[string]any{"output_index": 1, "item": msg(text, status)})
	ev("response."+status, map[string]any{"response": response(status, []any{reasoning, msg(text, status)}, usage)})
}

// gemini answers generateContent with a GenerateContentResponse, and
// streamGenerateContent?alt=sse with one per event (CRLF-delimited, as the
// Gemini API sends them), each with the usageMetadata so far.
func (u *upstream) gemini(w http.ResponseWriter, r *http.Request, model, method string, writeJSON func(any), flush func()) {
	chunk := func(text string, out int, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}, "index": 0}
		if last {
			cand["finishReason"] = "STOP"
		}
		return map[string]any{
			"candidates": []any{cand},
			"usageMetadata": map[string]any{
				"promptTokenCount": geminiPrompt, "cachedContentTokenCount": geminiCached,
				"candidatesTokenCount": out, "thoughtsTokenCount": geminiThoughts,
				"totalTokenCount":     geminiPrompt + out + geminiThoughts,
				"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": geminiPrompt}},
			},
			"modelVersion": model, "responseId": "gemini-1",
		}
	}
	switch method {
	case "generateContent":
		writeJSON(chunk(reply, geminiOut, true))
	case "streamGenerateContent":
		if r.URL.Query().Get("alt") != "sse" {
			u.problem("streamGenerateContent without alt=sse: %s", r.URL.RawQuery)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		words := strings.SplitAfter(reply, " ")
		for i, word := range words {
			last := i == len(words)-1
			out := geminiOut
			if !last {
				out = 2
			}
			b, _ := json.Marshal(chunk(word, out, last))
			fmt.Fprintf(w, "data: %s\r\n\r\n", b)
			flush()
		}
	default:
		http.NotFound(w, r)
	}
}

// result is one line of sdk.mjs.
type result struct {
	SDK          string          `json:"sdk"`
	Scenario     string          `json:"scenario"`
	OK           bool            `json:"ok"`
	Status       int             `json:"status"`
	ErrorMessage string          `json:"error_message"`
	ErrorName    string          `json:"error_name"`
	ElapsedMS    int64           `json:"elapsed_ms"`
	APIMessage   *string         `json:"api_message"`
	ErrorType    *string         `json:"error_type"`
	Code         *string         `json:"code"`
	RetryAfter   *string         `json:"retry_after"`
	ShouldRetry  *string         `json:"should_retry"`
	Detail       json.RawMessage `json:"detail"`
}

func TestSDKs(t *testing.T) {
	node := needNode(t)
	// The same clients through a gateway whose keys are in a bolt file,
	// and in Redis (gateway.New on a redisstore.DB), as one of several
	// instances would be.
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			ks, newGateway := openBackend(t, b)
			runSDKs(t, node, ks, newGateway)
		})
	}
}

// needNode returns the path of node, and fails t when node or the npm
// packages are missing.
func needNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: install Node.js >= 20, then run `npm ci --prefix gateway/sdktest`")
	}
	for _, p := range []string{"node_modules/openai/package.json", "node_modules/@anthropic-ai/sdk/package.json", "node_modules/@google/genai/package.json"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: run `npm ci --prefix gateway/sdktest` from the repository root", p)
		}
	}
	return node
}

// backends are the stores the scenarios run on: a bolt file, and Redis.
var backends = []string{"bolt", "redis"}

// openBackend opens a new store of backend b (see backends; or "badger",
// a badger directory, on which TestSDKEndUsers runs too) for t, and
// returns its key store and a maker of gateways on it, each closed at the
// end of t.
func openBackend(t *testing.T, b string) (*keystore.Store, func(gateway.Options) (*gateway.Gateway, error)) {
	t.Helper()
	var db backend.Store
	switch b {
	case "bolt":
		bolt, err := ratestore.Open(t.TempDir()+"/gateway.db", ratestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bolt.Close() })
		db = bolt
	case "badger":
		bdb, err := ratestore.Open(t.TempDir()+"/gateway.badger", ratestore.Options{Backend: badger.Backend})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bdb.Close() })
		db = bdb
	case "redis":
		srv := redistest.Start(t)
		rdb, err := redisstore.Open(context.Background(), srv.URL(), redisstore.Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		db = rdb
	default:
		t.Fatalf("no backend %q", b)
	}
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ks, func(o gateway.Options) (*gateway.Gateway, error) {
		gw, err := gateway.New(db, o)
		if err == nil {
			// Before the database closes (cleanups run last first): the
			// ledger's last writes.
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				if err := gw.Close(ctx); err != nil {
					t.Errorf("closing the gateway: %v", err)
				}
			})
		}
		return gw, err
	}
}

// runNode runs script with env added to this process's, within a minute,
// and returns its lines by "sdk/scenario", each logged; onLine, if not
// nil, is called with each as it comes, while the script runs on.
func runNode(t *testing.T, node, script string, env []string, onLine func(result)) map[string]result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := map[string]result{}
	var bad error
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			bad = fmt.Errorf("line %q: %v", sc.Text(), err)
			continue
		}
		t.Logf("%s", sc.Bytes())
		got[r.SDK+"/"+r.Scenario] = r
		if onLine != nil {
			onLine(r)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	if bad != nil {
		t.Fatal(bad)
	}
	t.Logf("node %s ran in %v", script, time.Since(start).Round(time.Millisecond))
	return got
}

// runSDKs runs every scenario of sdk.mjs through a gateway made by
// newGateway on the keys of ks.
func runSDKs(t *testing.T, node string, ks *keystore.Store, newGateway func(gateway.Options) (*gateway.Gateway, error)) {
	ctx := context.Background()
	// One key per group of scenarios, so that each group's charge is told
	// apart.
	newKey := func(name string) (keystore.Key, string) {
		k, secret, err := ks.Create(ctx, keystore.Spec{Name: name, TokenLimit: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		return k, secret
	}
	sdkKey, secret := newKey("sdk")
	geminiKey, geminiSecret := newKey("gemini")
	respKey, respSecret := newKey("responses")
	abortKey, abortSecret := newKey("abort")
	// A key whose window is used up, yet large enough for any one of the
	// requests below: the 429 is "wait for the window", with a Retry-After
	// hours away that the SDKs would honour by default.
	full, fullSecret, err := ks.Create(ctx, keystore.Spec{Name: "full", TokenLimit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.RecordUsage(ctx, full.ID, 200_000); err != nil {
		t.Fatal(err)
	}
	_, noModelSecret, err := ks.Create(ctx, keystore.Spec{Name: "nomodel", TokenLimit: 1 << 30,
		Policy: keystore.Policy{Models: []string{"gpt-*", "claude-*", "gemini-*"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Budgets in money (see budgetKeys), and keys for the caller's
	// rate-limit headers.
	bk := budgetKeys(t, ks)
	secrets := []string{secret, geminiSecret, respSecret, abortSecret, fullSecret, noModelSecret,
		bk.spentSecret, bk.tinySecret, bk.headersSecret, bk.plainSecret}

	hungUp := make(chan struct{})
	up := fakeUpstream(t, hungUp)
	upURL, _ := url.Parse(up.URL)
	var logs logbuf.Buffer
	gw, err := newGateway(gateway.Options{Upstream: upURL, UpstreamKey: upstreamKey,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	// The gateway, and a watch on the context of the request of the "abort"
	// scenario: the server cancels it when the caller's connection closes
	// (the gateway's own cue that its caller hung up). hungUp is closed
	// then, not when the request ends.
	// The other scenarios that name themselves are counted, each request
	// the gateway sees (a client's retries too), with the size of its body.
	var hangUp sync.Once
	var seen tally
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch name := r.Header.Get("X-Sdktest-Scenario"); name {
		case "":
		case "abort":
			stop := context.AfterFunc(r.Context(), func() { hangUp.Do(func() { close(hungUp) }) })
			defer stop()
		default:
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			seen.add(name, len(body))
		}
		gw.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	got := runNode(t, node, "sdk.mjs", []string{"BASE_URL=" + srv.URL, "API_KEY=" + secret,
		"GEMINI_KEY=" + geminiSecret, "RESPONSES_KEY=" + respSecret, "ABORT_KEY=" + abortSecret,
		"FULL_KEY=" + fullSecret, "NOMODEL_KEY=" + noModelSecret, "SPENT_KEY=" + bk.spentSecret, "TINY_KEY=" + bk.tinySecret,
		"HEADERS_KEY=" + bk.headersSecret, "PLAIN_KEY=" + bk.plainSecret, "TIMEOUT_MS=15000", "SCENARIOS="}, nil)
	// Every request has been answered; the gateway records each one's usage
	// after its caller has the last byte (the "abort" one after its upstream
	// ends, once the gateway saw the hang-up).
	waitCtx, cancelWait := context.WithTimeout(ctx, 15*time.Second)
	defer cancelWait()
	if err := gw.Wait(waitCtx); err != nil {
		t.Fatalf("gateway still serving: %v; gateway log:\n%s", err, logs.String())
	}

	type detail struct {
		Text    string         `json:"text"`
		Usage   map[string]any `json:"usage"`
		Status  string         `json:"status"`
		Aborted bool           `json:"aborted"`
	}
	success := []struct {
		name, text string
		usage      bool // the client sees usage
	}{
		{"openai/json", reply, true},
		{"openai/stream_include_usage", reply, true},
		// The client sees usage only when it asked for it (the gateway may
		// ask the upstream on its own, and must strip what it added).
		{"openai/stream_no_usage", reply, false},
		{"anthropic/json", reply, true},
		{"anthropic/stream", reply, true},
		{"gemini/json", reply, true},
		{"gemini/stream", reply, true},
		{"openai/responses_json", reply, true},
		{"openai/responses_stream", reply, true},
		{"openai/responses_incomplete", "hi ", true},
		// The caller read the first chunk, then hung up.
		{"openai/abort", "hi ", false},
		{"openai/limit_headers", reply, true},
		{"openai/limit_headers_plain", reply, true},
	}
	for _, c := range success {
		t.Run(c.name, func(t *testing.T) {
			r, ok := got[c.name]
			if !ok {
				t.Fatal("no result")
			}
			if !r.OK {
				t.Fatalf("failed: status %d: %s", r.Status, r.ErrorMessage)
			}
			var d detail
			json.Unmarshal(r.Detail, &d)
			if d.Text != c.text {
				t.Errorf("text %q, want %q", d.Text, c.text)
			}
			if c.usage && d.Usage == nil {
				t.Error("no usage")
			} else if !c.usage && d.Usage != nil {
				t.Errorf("usage %v in a stream that did not ask for it", d.Usage)
			}
			switch c.name {
			case "openai/responses_json", "openai/responses_stream":
				if d.Status != "completed" {
					t.Errorf("status %q, want completed", d.Status)
				}
			case "openai/responses_incomplete":
				if d.Status != "incomplete" {
					t.Errorf("status %q, want incomplete", d.Status)
				}
			case "openai/abort":
				if !d.Aborted {
					t.Error("the client did not abort")
				}
			}
		})
	}
	select {
	case <-hungUp:
	default:
		t.Error("the gateway never saw the caller of the abort scenario hang up")
	}
	for _, p := range up.Problems() {
		t.Errorf("upstream: %s", p)
	}

	// Every successful call is charged the usage its upstream reported: the
	// stream that did not ask for usage too, Gemini's thoughts as output,
	// and the stream whose caller hung up its usage at the end, not its
	// reservation.
	charges := []struct {
		key   keystore.Key
		want  int64
		calls string
	}{
		{sdkKey, 5 * (inTokens + outTokens), "5 chat and messages calls"},
		{geminiKey, 2 * (geminiPrompt + geminiOut + geminiThoughts), "generateContent and streamGenerateContent, thoughts as output"},
		{respKey, 2*(respIn+respOut) + respIn + respIncompleteOut, "2 responses completed, 1 incomplete"},
		{abortKey, abortIn + abortOut, "a stream whose caller hung up after its first chunk"},
	}
	for _, c := range charges {
		u, err := ks.Usage(ctx, c.key.ID)
		if err != nil {
			t.Fatal(err)
		}
		if u.Used != c.want || u.InFlight != 0 {
			t.Errorf("key %s used %d tokens with %d in flight, want %d (%s)", c.key.Name, u.Used, u.InFlight, c.want, c.calls)
		}
	}
	if strings.Contains(logs.String(), "estimated") {
		t.Error(`a charge was the estimate: the gateway log says "estimated"`)
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "model=gpt-abort") {
			t.Logf("gateway: %s", l)
		}
	}
	if t.Failed() {
		t.Logf("gateway log:\n%s", logs.String())
	}

	refusals := []struct {
		scenario string
		status   int
	}{{"unknown_key", 401}, {"window_exhausted", 429}, {"model_forbidden", 403}}
	for _, sdk := range []string{"openai", "anthropic", "gemini"} {
		for _, want := range refusals {
			name := sdk + "/" + want.scenario
			t.Run(name, func(t *testing.T) {
				r, ok := got[name]
				if !ok {
					t.Fatal("no result")
				}
				if r.OK || r.Status != want.status {
					t.Errorf("ok %v status %d (%q), want status %d", r.OK, r.Status, r.ErrorMessage, want.status)
				}
				for _, m := range []*string{&r.ErrorMessage, r.APIMessage} {
					if m == nil || *m == "" || strings.Contains(*m, "undefined") || strings.Contains(*m, "[object Object]") {
						t.Errorf("unreadable message in %q (api message %v)", r.ErrorMessage, m)
						break
					}
				}
				// Default client settings: the refusal must come at once, not after
				// the SDK's retries (3 tries with backoff or Retry-After).
				if r.ElapsedMS >= 5000 {
					t.Errorf("took %v, want < 5s", time.Duration(r.ElapsedMS)*time.Millisecond)
				}
				for _, s := range secrets {
					if strings.Contains(r.ErrorMessage, s) {
						t.Error("message echoes a secret")
					}
				}
			})
		}
	}

	checkBudgets(t, ks, bk, got, &seen)
	checkLimitHeaders(t, bk, got, &seen)
}
