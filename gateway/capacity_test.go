package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/fakeprovider"
)

// The capacity tests run the gateway's pools against fake providers that
// enforce their own quotas (package fakeprovider) on the test's fake
// clock: the gateway must keep each upstream within the provider's quota
// (no 429 from it) and still use nearly all of it.

// startFake serves a fake provider of opts, and returns it and its URL.
func startFake(t *testing.T, opts fakeprovider.Options) (*fakeprovider.Provider, *url.URL) {
	p := fakeprovider.New(opts)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return p, u
}

// laterClock is the clock of an env made after the fake providers that
// need it: it reads the env's clock once there is one (start before).
type laterClock struct {
	e atomic.Pointer[env]
}

func (c *laterClock) Now() time.Time {
	if e := c.e.Load(); e != nil {
		return e.clock.Now()
	}
	return start
}

// chatBody is the body of a chat completion of about promptBytes bytes
// asking for at most maxTokens of output, which the capacityUsage of a
// fake provider answers with completion tokens.
func chatBody(promptBytes int, maxTokens, completion int64, stream bool) []byte {
	head := fmt.Sprintf("out=%d;", completion)
	b, err := json.Marshal(map[string]any{
		"model": "gpt-4o", "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": head + strings.Repeat("x", max(0, promptBytes-len(head)))}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// capacityUsage is a fake provider's Usage for chatBody's requests: the
// prompt the gateway estimates (a token per 4 bytes of body), and the
// completion the body names.
func capacityUsage(_ string, body []byte) (prompt, completion int64) {
	var q struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if json.Unmarshal(body, &q) == nil && len(q.Messages) > 0 {
		fmt.Sscanf(q.Messages[0].Content, "out=%d;", &completion)
	}
	return int64(len(body)) / 4, completion
}

// sendBody sends body to e's chat completions for secret, and returns
// the answer's status and body.
func sendBody(e *env, secret string, body []byte) (int, string) {
	e.t.Helper()
	res, b := e.call("POST", "/v1/chat/completions", secret, json.RawMessage(body))
	return res.StatusCode, string(b)
}

// TestCapacityBucketEdge: an upstream's tokens count a whole minute from
// the instant they were taken, as a provider that counts an exact
// rolling minute holds them. A request at 0.5 s is in the bucket of
// [0 s, 1 s), whose minute is over at 60 s; its tokens still count there
// (the gateway refuses with its own 429, where it once sent the request
// on and the provider answered 429), until the bucket's minute and a
// bucket more, 61 s.
func TestCapacityBucketEdge(t *testing.T) {
	clock := &laterClock{}
	fake, u := startFake(t, fakeprovider.Options{API: fakeprovider.OpenAI, TokensPerMinute: 1000, Now: clock.Now})
	e := newEnv(t, Options{UpstreamQueueTimeout: -1,
		Upstreams: []Upstream{{Name: "a", API: APIOpenAI, URL: u, Limits: UpstreamLimits{TokensPerMinute: 1000}}}})
	clock.e.Store(e)
	_, secret := e.key("k", 1<<40)
	body := chatBody(400, 500, 500, false) // reserves, and is charged, 600 tokens

	e.clock.Advance(500 * time.Millisecond)
	status, b := sendBody(e, secret, body)
	require.Equal(t, http.StatusOK, status, b)
	for _, at := range []time.Duration{60 * time.Second, 60*time.Second + 500*time.Millisecond} {
		e.clock.Set(start.Add(at))
		status, b = sendBody(e, secret, body)
		require.Equal(t, http.StatusTooManyRequests, status, "at %v: %s", at, b)
		require.Contains(t, b, "upstream_capacity", "at %v: the gateway's own refusal", at)
	}
	e.clock.Set(start.Add(61 * time.Second))
	status, b = sendBody(e, secret, body)
	require.Equal(t, http.StatusOK, status, b)
	st := fake.Stats()
	require.Zero(t, st.Limited)
	require.EqualValues(t, 2, st.Served)
}
