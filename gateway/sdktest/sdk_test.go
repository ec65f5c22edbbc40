// Package sdktest runs the official npm clients, openai and
// @anthropic-ai/sdk, against a gateway on loopback in front of a fake
// upstream. It needs node and the packages of package-lock.json:
//
//	npm ci --prefix gateway/sdktest
//	go test ./gateway/sdktest -v
package sdktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/keystore"
)

const (
	inTokens  = 11
	outTokens = 7
	reply     = "hi there"
)

// fakeUpstream answers /v1/chat/completions and /v1/messages, JSON and
// SSE, with usage as each API reports it.
func fakeUpstream(t *testing.T) *httptest.Server {
	h := func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model         string `json:"model"`
			Stream        bool   `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		event := func(name string, v any) {
			b, _ := json.Marshal(v)
			if name != "" {
				fmt.Fprintf(w, "event: %s\n", name)
			}
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		switch r.URL.Path {
		case "/v1/chat/completions":
			usage := map[string]any{"prompt_tokens": inTokens, "completion_tokens": outTokens, "total_tokens": inTokens + outTokens}
			if !req.Stream {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{
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
			event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
			for _, word := range strings.SplitAfter(reply, " ") {
				event("", chunk(map[string]any{"content": word}, nil))
			}
			event("", chunk(map[string]any{}, "stop"))
			if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
				event("", map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
					"choices": []any{}, "usage": usage})
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		case "/v1/messages":
			msg := map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": req.Model,
				"content": []any{map[string]any{"type": "text", "text": reply}}, "stop_reason": "end_turn", "stop_sequence": nil,
				"usage": map[string]any{"input_tokens": inTokens, "output_tokens": outTokens}}
			if !req.Stream {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(msg)
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
		default:
			http.NotFound(w, r)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(h))
	t.Cleanup(srv.Close)
	return srv
}

// syncBuffer is a bytes.Buffer for the gateway's log, safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// result is one line of sdk.mjs.
type result struct {
	SDK          string          `json:"sdk"`
	Scenario     string          `json:"scenario"`
	OK           bool            `json:"ok"`
	Status       int             `json:"status"`
	ErrorMessage string          `json:"error_message"`
	ElapsedMS    int64           `json:"elapsed_ms"`
	APIMessage   *string         `json:"api_message"`
	ErrorType    *string         `json:"error_type"`
	Code         *string         `json:"code"`
	RetryAfter   *string         `json:"retry_after"`
	ShouldRetry  *string         `json:"should_retry"`
	Detail       json.RawMessage `json:"detail"`
}

func TestSDKs(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: install Node.js >= 18, then run `npm ci --prefix gateway/sdktest`")
	}
	for _, p := range []string{"node_modules/openai/package.json", "node_modules/@anthropic-ai/sdk/package.json"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: run `npm ci --prefix gateway/sdktest` from the repository root", p)
		}
	}

	db, err := ratestore.Open(t.TempDir()+"/gateway.db", ratestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sdkKey, secret, err := ks.Create(ctx, keystore.Spec{Name: "sdk", TokenLimit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
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
		Policy: keystore.Policy{Models: []string{"gpt-*", "claude-*"}}})
	if err != nil {
		t.Fatal(err)
	}

	up := fakeUpstream(t)
	upURL, _ := url.Parse(up.URL)
	var logs syncBuffer
	gw, err := gateway.New(db, gateway.Options{Upstream: upURL, UpstreamKey: "upstream-secret",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)

	cmd := exec.Command(node, "sdk.mjs")
	cmd.Env = append(os.Environ(), "BASE_URL="+srv.URL, "API_KEY="+secret,
		"FULL_KEY="+fullSecret, "NOMODEL_KEY="+noModelSecret, "TIMEOUT_MS=15000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node sdk.mjs: %v\n%s", err, stderr.String())
	}
	got := map[string]result{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		t.Logf("%s", sc.Bytes())
		got[r.SDK+"/"+r.Scenario] = r
	}

	for _, name := range []string{"openai/json", "openai/stream_include_usage", "openai/stream_no_usage", "anthropic/json", "anthropic/stream"} {
		t.Run(name, func(t *testing.T) {
			r, ok := got[name]
			if !ok {
				t.Fatal("no result")
			}
			if !r.OK {
				t.Fatalf("failed: status %d: %s", r.Status, r.ErrorMessage)
			}
			var d struct {
				Text  string         `json:"text"`
				Usage map[string]any `json:"usage"`
			}
			json.Unmarshal(r.Detail, &d)
			if d.Text != reply {
				t.Errorf("text %q, want %q", d.Text, reply)
			}
			// The client sees usage only when it asked for it (the gateway may
			// ask the upstream on its own, and must strip what it added).
			if name == "openai/stream_no_usage" {
				if d.Usage != nil {
					t.Errorf("usage %v in a stream that did not ask for it", d.Usage)
				}
			} else if d.Usage == nil {
				t.Error("no usage")
			}
		})
	}
	// Every successful call is metered, the stream that did not ask for
	// usage too: 5 calls of inTokens+outTokens.
	// The gateway may finish recording after the client has its last byte.
	want := int64(5 * (inTokens + outTokens))
	var u keystore.Usage
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if u, err = ks.Usage(ctx, sdkKey.ID); err != nil {
			t.Fatal(err)
		}
		if u.Used == want && u.InFlight == 0 || time.Now().After(deadline) {
			break
		}
	}
	if u.Used != want || u.InFlight != 0 {
		t.Errorf("key used %d tokens with %d in flight, want %d tokens (5 calls of %d); gateway log:\n%s", u.Used, u.InFlight, want, inTokens+outTokens, logs.String())
	}
	refusals := []struct {
		scenario string
		status   int
	}{{"unknown_key", 401}, {"window_exhausted", 429}, {"model_forbidden", 403}}
	for _, sdk := range []string{"openai", "anthropic"} {
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
				for _, s := range []string{secret, fullSecret, noModelSecret} {
					if strings.Contains(r.ErrorMessage, s) {
						t.Error("message echoes a secret")
					}
				}
			})
		}
	}
}
