package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/stretchr/testify/require"
)

// provider is a fake provider endpoint of a pool: it answers OpenAI's
// chat completions (and Azure's, on a deployment's path) with the usage
// the request's fakeReq names, or fails as told.
type provider struct {
	srv    *httptest.Server
	hits   atomic.Int64
	status atomic.Int64  // != 0: every answer is this status
	hold   chan struct{} // while not nil and open, answers wait for it

	mu   sync.Mutex
	seen []seenRequest
}

// seenRequest is what a provider saw of a request.
type seenRequest struct {
	path, query string
	header      http.Header
	body        map[string]any
}

func newProvider(t *testing.T) *provider {
	p := &provider{}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	p.hits.Add(1)
	b, _ := io.ReadAll(r.Body)
	var q fakeReq
	json.Unmarshal(b, &q)
	var body map[string]any
	json.Unmarshal(b, &body)
	p.mu.Lock()
	p.seen = append(p.seen, seenRequest{path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: body})
	hold := p.hold
	p.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if s := int(p.status.Load()); s != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(s)
		io.WriteString(w, `{"error":{"message":"fake failure"}}`)
		return
	}
	if r.Method == http.MethodGet {
		writeBody(w, "application/json", `{"id":"resp_1","object":"response"}`)
		return
	}
	writeBody(w, "application/json", openAIJSON(q.Input, q.Output))
}

func (p *provider) url(t *testing.T) *url.URL {
	u, err := url.Parse(p.srv.URL)
	require.NoError(t, err)
	return u
}

func (p *provider) last() seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[len(p.seen)-1]
}

// holding makes the provider's answers wait until the returned release.
func (p *provider) holding() (release func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.hold = ch
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.hold = nil
		p.mu.Unlock()
		close(ch)
	}
}

// poolEnv is an env whose gateway has the pool ups, each upstream on a
// provider of its own (named as it).
func poolEnv(t *testing.T, opts Options, ups ...Upstream) (*env, map[string]*provider) {
	ps := map[string]*provider{}
	for i := range ups {
		p := newProvider(t)
		ps[ups[i].Name] = p
		ups[i].URL = p.url(t)
	}
	opts.Upstreams = ups
	return newEnv(t, opts), ps
}

// chat is a chat completion of model using in and out tokens, at most max.
func chat(model string, in, out, max int64) fakeReq {
	return fakeReq{Model: model, Input: in, Output: out, MaxTokens: max}
}

// TestPoolWeights: requests for a model are shared among the upstreams
// that serve it by weight; a model none of them serves goes to the route.
func TestPoolWeights(t *testing.T) {
	e, ps := poolEnv(t, Options{},
		Upstream{Name: "a", API: APIOpenAI, Models: []string{"gpt-4o*"}, Weight: 3, Key: "sk-a"},
		Upstream{Name: "b", API: APIOpenAI, Models: []string{"gpt-4o*"}, Key: "sk-b"})
	_, secret := e.key("k", 1_000_000)
	for range 8 {
		res, body := e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 3, 2, 10))
		require.Equal(t, 200, res.StatusCode, "%s", body)
	}
	require.EqualValues(t, 6, ps["a"].hits.Load())
	require.EqualValues(t, 2, ps["b"].hits.Load())
	require.Equal(t, "Bearer sk-a", ps["a"].last().header.Get("Authorization"), "each its own credential")
	require.Equal(t, "Bearer sk-b", ps["b"].last().header.Get("Authorization"))

	res, _ := e.call("POST", "/v1/chat/completions", secret, chat("o3", 3, 2, 10))
	require.Equal(t, 200, res.StatusCode)
	require.EqualValues(t, 1, e.up.hits.Load(), "a model no pool serves: the default route")
	res, body := e.call("POST", "/v1/messages", secret, map[string]any{"model": "claude-x", "max_tokens": 5})
	require.Equal(t, 200, res.StatusCode, "%s", body)
}

// TestPoolQuota: an upstream's tokens per minute are reserved with the
// key's: a request goes to the next upstream when the first has no room,
// and the reported usage is charged to the upstream that served it.
func TestPoolQuota(t *testing.T) {
	e, ps := poolEnv(t, Options{UpstreamQueueTimeout: -1},
		Upstream{Name: "small", API: APIOpenAI, Weight: 100, Limits: UpstreamLimits{TokensPerMinute: 100}},
		Upstream{Name: "big", API: APIOpenAI, Limits: UpstreamLimits{TokensPerMinute: 1000, RequestsPerMinute: 3}})
	_, secret := e.key("k", 1_000_000)
	// Each reserves its body's tokens (about 25) and 60 of output.
	res, body := e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 10, 20, 60))
	require.Equal(t, 200, res.StatusCode, "%s", body)
	require.EqualValues(t, 1, ps["small"].hits.Load(), "the heavier first")
	res, _ = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 10, 20, 60))
	require.Equal(t, 200, res.StatusCode)
	require.EqualValues(t, 1, ps["small"].hits.Load(), "30 used of 100: no room for 85 more")
	require.EqualValues(t, 1, ps["big"].hits.Load())
	require.Empty(t, res.Header.Get("X-Ratelimit-Limit-Requests"), "the upstream's quota is the operator's, not the caller's")
	require.Equal(t, "1000000", res.Header.Get("X-Ratelimit-Limit-Tokens"), "the key's own window")
	for range 2 {
		res, _ = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 10, 20, 60))
		require.Equal(t, 200, res.StatusCode)
	}
	res, body = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 10, 20, 60))
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "%s", body)
	require.Contains(t, string(body), `"code":"upstream_capacity"`)
	require.Contains(t, string(body), `model \"gpt-4o\"`)
	require.NotEmpty(t, res.Header.Get("Retry-After"))
	require.EqualValues(t, 3, ps["big"].hits.Load(), "its 3 requests a minute")

	e.clock.Advance(quotaMinute) // an upstream's tokens count a minute and a bucket
	res, _ = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 10, 20, 60))
	require.Equal(t, 200, res.StatusCode, "a minute later")
	require.EqualValues(t, 2, ps["small"].hits.Load())

	res, body = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 10, 20, 5000))
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Contains(t, string(body), "more than any upstream serving it allows in a minute")
	require.Equal(t, "false", res.Header.Get("X-Should-Retry"))
}

// TestPoolFailover: an upstream that answers 5xx or 429, or cannot be
// reached, cools down and the request goes to the next; the caller gets
// the last answer when every attempt failed.
func TestPoolFailover(t *testing.T) {
	e, ps := poolEnv(t, Options{UpstreamQueueTimeout: 20 * time.Millisecond},
		Upstream{Name: "a", API: APIOpenAI, Weight: 10, Limits: UpstreamLimits{MaxConcurrent: 5}},
		Upstream{Name: "b", API: APIOpenAI, Weight: 5, Limits: UpstreamLimits{MaxConcurrent: 5}},
		Upstream{Name: "c", API: APIOpenAI, Limits: UpstreamLimits{MaxConcurrent: 5}})
	k, secret := e.key("k", 1_000_000)
	ps["a"].status.Store(503)
	res, body := e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, 200, res.StatusCode, "%s", body)
	require.EqualValues(t, 1, ps["a"].hits.Load())
	require.EqualValues(t, 1, ps["b"].hits.Load(), "the next")
	require.EqualValues(t, 7, e.usage(k.ID).Used, "charged once")
	for _, name := range []string{"a", "b"} {
		qu, err := e.ks.QuotaUsage(t.Context(), e.gw.ups.Load().members[map[string]int{"a": 0, "b": 1}[name]].quotas[0])
		require.NoError(t, err)
		require.Zero(t, qu.InFlight, "%s: no slot left held", name)
	}

	res, _ = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, 200, res.StatusCode)
	require.EqualValues(t, 1, ps["a"].hits.Load(), "a cools down for its Retry-After (7 s)")
	e.clock.Advance(8 * time.Second)
	ps["a"].status.Store(0)
	for range 3 {
		res, _ = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
		require.Equal(t, 200, res.StatusCode)
	}
	require.EqualValues(t, 3, ps["a"].hits.Load(), "back, with its weight's share")

	ps["a"].srv.Close() // cannot be reached
	ps["b"].status.Store(429)
	ps["c"].status.Store(500)
	e.clock.Advance(time.Minute)
	res, body = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, 500, res.StatusCode, "the third and last attempt's answer: %s", body)
	require.Contains(t, string(body), "fake failure")
	require.EqualValues(t, 1, ps["c"].hits.Load())
	ups := e.gw.ups.Load().members
	for _, m := range ups {
		require.False(t, m.pu.CoolingUntil(e.clock.Now()).IsZero(), "%s cools down", m.name)
	}
	res, body = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "%s", body)
	require.Contains(t, string(body), "upstream_capacity", "all cooling down: it waited, in vain")

	rec := httptest.NewRecorder()
	e.gw.Metrics().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{
		`ratestore_upstream_requests_total{status="503",upstream="a"} 1`,
		`ratestore_upstream_requests_total{status="error",upstream="a"} 1`,
		`ratestore_upstream_requests_total{status="200",upstream="b"} 3`,
		`ratestore_upstream_requests_total{status="429",upstream="b"} 1`,
		`ratestore_upstream_requests_total{status="500",upstream="c"} 1`,
		`ratestore_upstream_tokens_total{type="output",upstream="b"} 9`,
		`ratestore_upstream_in_flight{upstream="a"} 0`,
		`ratestore_upstream_queue_seconds_count 1`,
		`ratestore_gateway_requests_total{http_response_status_code="429",key_id="` + k.ID + `",reason="upstream"} 1`,
	} {
		require.True(t, strings.Contains(rec.Body.String(), line+"\n"), "no line %s", line)
	}
}

// TestPoolOneAttempt: with UpstreamAttempts 1 a failure is the caller's.
func TestPoolOneAttempt(t *testing.T) {
	e, ps := poolEnv(t, Options{UpstreamAttempts: 1},
		Upstream{Name: "a", API: APIOpenAI, Weight: 10},
		Upstream{Name: "b", API: APIOpenAI})
	_, secret := e.key("k", 1_000_000)
	ps["a"].status.Store(502)
	res, _ := e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, 502, res.StatusCode)
	require.Zero(t, ps["b"].hits.Load())
}

// goChat sends a chat completion of gpt-4o with secret from a goroutine of
// its own, and returns the channel of its status (closed without one when
// it got no answer).
func goChat(e *env, secret string) <-chan int {
	status := make(chan int, 1)
	go func() {
		res, _, err := e.try(e.request("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10)))
		if err == nil {
			status <- res.StatusCode
		}
		close(status)
	}()
	return status
}

// TestPoolWait: a request that finds no upstream with room waits for one,
// holding nothing of its key's, and is served when a request ends.
func TestPoolWait(t *testing.T) {
	e, ps := poolEnv(t, Options{},
		Upstream{Name: "one", API: APIOpenAI, Limits: UpstreamLimits{MaxConcurrent: 1}})
	k, secret := e.key("k", 1_000_000)
	release := ps["one"].holding()
	first := goChat(e, secret)
	require.Eventually(t, func() bool { return ps["one"].hits.Load() == 1 }, 5*time.Second, time.Millisecond)
	second := goChat(e, secret)
	require.Eventually(t, func() bool { return e.gw.lines.waiting.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, 1, e.usage(k.ID).InFlight, "the waiting request holds no slot of its key's")
	release()
	require.Equal(t, 200, <-first)
	require.Equal(t, 200, <-second)
	require.EqualValues(t, 2, ps["one"].hits.Load())
}

// TestPoolWaitTimeout: a request that waits in vain for an upstream's
// one slot gets 429 upstream_capacity with a short Retry-After, worth
// retrying: the slot frees when the request in flight ends, not at the
// end of its lease.
func TestPoolWaitTimeout(t *testing.T) {
	e, ps := poolEnv(t, Options{UpstreamQueueTimeout: 20 * time.Millisecond},
		Upstream{Name: "one", API: APIOpenAI, Limits: UpstreamLimits{MaxConcurrent: 1}})
	_, secret := e.key("k", 1_000_000)
	release := sync.OnceFunc(ps["one"].holding())
	defer release()
	first := goChat(e, secret)
	require.Eventually(t, func() bool { return ps["one"].hits.Load() == 1 }, 5*time.Second, time.Millisecond)
	res, body := e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "%s", body)
	require.Contains(t, string(body), `"code":"upstream_capacity"`)
	require.Equal(t, "1", res.Header.Get("Retry-After"), "%s", body)
	require.Empty(t, res.Header.Get("X-Should-Retry"))
	release()
	require.Equal(t, 200, <-first)
}

// TestLineFairness: a line serves its keys in turn: a key with many
// requests waiting holds up another's one by one turn at most.
func TestLineFairness(t *testing.T) {
	var ls lines
	var served []string
	var doneW []*waiter
	a := make([]*waiter, 5)
	for i := range a {
		a[i] = ls.join("m", "a")
	}
	b := ls.join("m", "b")
	c := ls.join("m", "c")
	heads := []*waiter{a[0], b, c, a[1], a[2], a[3], a[4]}
	for _, want := range heads {
		var head *waiter
		for _, w := range append(append([]*waiter{}, a...), b, c) {
			select {
			case <-w.ready:
				if !slices.Contains(doneW, w) {
					require.Nil(t, head, "one head at a time")
					head = w
				}
			default:
			}
		}
		require.Same(t, want, head)
		served = append(served, head.key)
		doneW = append(doneW, head)
		ls.leave(head)
	}
	require.Equal(t, []string{"a", "b", "c", "a", "a", "a", "a"}, served)
	require.Zero(t, ls.waiting.Load())
	require.Empty(t, ls.m, "an empty line is gone")
}

// TestPoolAzure: a request on OpenAI's path goes to an Azure deployment
// with its api-version and api-key; the Azure client's paths, with the
// caller's secret in api-key, are read back to the model.
func TestPoolAzure(t *testing.T) {
	e, ps := poolEnv(t, Options{},
		Upstream{Name: "east", API: APIAzureOpenAI, Key: "az-secret", APIVersion: "2024-10-21",
			Deployments: map[string]string{"gpt-4o": "gpt4o-prod", "gpt-4o-mini": "mini"}})
	k, secret := e.key("k", 1_000_000)
	res, body := e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, 200, res.StatusCode, "%s", body)
	got := ps["east"].last()
	require.Equal(t, "/openai/deployments/gpt4o-prod/chat/completions", got.path)
	require.Equal(t, "api-version=2024-10-21", got.query)
	require.Equal(t, "az-secret", got.header.Get("Api-Key"))
	require.Empty(t, got.header.Get("Authorization"))

	req := e.request("POST", "/openai/deployments/mini/chat/completions?api-version=2099-01-01", "", chat("", 2, 1, 10))
	req.Header.Set("Api-Key", secret)
	res, body = e.do(req)
	require.Equal(t, 200, res.StatusCode, "%s", body)
	got = ps["east"].last()
	require.Equal(t, "/openai/deployments/mini/chat/completions", got.path)
	require.Equal(t, "api-version=2024-10-21", got.query, "the upstream's version")
	require.Equal(t, "az-secret", got.header.Get("Api-Key"), "never the caller's")
	require.EqualValues(t, 10, e.usage(k.ID).Used)

	res, body = e.call("POST", "/v1/responses", secret, map[string]any{"model": "gpt-4o-mini", "input": "hi", "max_output_tokens": 10})
	require.Equal(t, 200, res.StatusCode, "%s", body)
	got = ps["east"].last()
	require.Equal(t, "/openai/responses", got.path)
	require.Equal(t, "mini", got.body["model"], "a responses request names the deployment")

	res, body = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4.1", 4, 3, 10))
	require.Equal(t, 200, res.StatusCode, "a model without a deployment goes to the route: %s", body)
	require.EqualValues(t, 1, e.up.hits.Load())
}

// TestSetUpstreams: a configuration with a mistake is refused whole, and
// the one in force stays; a good one replaces it, and keeps the counts of
// an upstream of the same name.
func TestSetUpstreams(t *testing.T) {
	e, ps := poolEnv(t, Options{}, Upstream{Name: "a", API: APIOpenAI, Models: []string{"gpt-*"}})
	_, secret := e.key("k", 1_000_000)
	res, _ := e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, 200, res.StatusCode)
	u := ps["a"].url(t)
	for _, bad := range [][]Upstream{
		{{Name: "a", API: "openai", URL: u}, {Name: "a", API: "openai", URL: u}},
		{{Name: "a", API: "bedrock", URL: u}},
		{{Name: "a", API: "openai", URL: u, Deployments: map[string]string{"m": "d"}}},
		{{Name: "a", API: "azure-openai", URL: u, Deployments: map[string]string{"m": "d"}}},
		{{Name: "a", API: "openai", URL: u, Models: []string{"["}}},
		{{Name: "a", API: "openai", URL: u, Limits: UpstreamLimits{TokensPerMinute: -1}}},
		{{Name: "", API: "openai", URL: u}},
	} {
		require.ErrorIs(t, e.gw.SetUpstreams(bad), backend.ErrInvalid, "%+v", bad)
	}
	require.Len(t, e.gw.ups.Load().members, 1)
	require.NoError(t, e.gw.SetUpstreams([]Upstream{{Name: "a", API: APIOpenAI, URL: u, Models: []string{"o3"}}}))
	require.EqualValues(t, 1, e.gw.ups.Load().members[0].requests.Load(), "its count carried over")
	res, _ = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, 200, res.StatusCode)
	require.EqualValues(t, 1, ps["a"].hits.Load(), "gpt-4o is not a's any more: the route's")
	require.EqualValues(t, 1, e.up.hits.Load())
}

// TestPoolStoredResponse: a stored response an upstream does not have
// (404) is asked of the next, which does not cool the first down.
func TestPoolStoredResponse(t *testing.T) {
	e, ps := poolEnv(t, Options{},
		Upstream{Name: "a", API: APIOpenAI, Weight: 10},
		Upstream{Name: "b", API: APIOpenAI})
	_, secret := e.key("k", 1_000_000)
	ps["a"].status.Store(404)
	res, body := e.call("GET", "/v1/responses/resp_1", secret, nil)
	require.Equal(t, 200, res.StatusCode, "%s", body)
	require.EqualValues(t, 1, ps["b"].hits.Load())
	require.True(t, e.gw.ups.Load().members[0].pu.CoolingUntil(e.clock.Now()).IsZero())
	res, _ = e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10))
	require.Equal(t, 404, res.StatusCode, "a model call's 404 is the caller's")
	require.EqualValues(t, 1, ps["b"].hits.Load())
}

// TestPoolFailoverWaits: a request whose upstream failed, when the others
// that serve it have no room, waits for one in its line rather than get
// the failure.
func TestPoolFailoverWaits(t *testing.T) {
	e, ps := poolEnv(t, Options{},
		Upstream{Name: "a", API: APIOpenAI, Weight: 10, Limits: UpstreamLimits{MaxConcurrent: 5}},
		Upstream{Name: "b", API: APIOpenAI, Limits: UpstreamLimits{MaxConcurrent: 1}})
	_, secret := e.key("k", 1_000_000)
	ps["a"].status.Store(503)
	release := ps["b"].holding()
	first := make(chan int, 1)
	go func() {
		res, _, err := e.try(e.request("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10)))
		if err == nil {
			first <- res.StatusCode
		}
		close(first)
	}()
	require.Eventually(t, func() bool { return ps["b"].hits.Load() == 1 }, 5*time.Second, time.Millisecond, "a failed, b holds the first")
	e.clock.Advance(time.Minute) // a is back from its cooldown
	second := make(chan int, 1)
	go func() {
		res, _, err := e.try(e.request("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 3, 10)))
		if err == nil {
			second <- res.StatusCode
		}
		close(second)
	}()
	require.Eventually(t, func() bool { return ps["a"].hits.Load() == 2 && e.gw.lines.waiting.Load() == 1 }, 5*time.Second, time.Millisecond,
		"a failed the second too, which waits for b")
	release()
	require.Equal(t, 200, <-first)
	require.Equal(t, 200, <-second)
	require.EqualValues(t, 2, ps["b"].hits.Load())
}

// TestPoolWaitTimeoutMany: many requests waiting in vain each get 429
// upstream_capacity at the queue timeout, never a store failure: the
// timeout bounds the wait, not the head's Admit under way when it ends.
func TestPoolWaitTimeoutMany(t *testing.T) {
	e, ps := poolEnv(t, Options{UpstreamQueueTimeout: 30 * time.Millisecond},
		Upstream{Name: "one", API: APIOpenAI, Limits: UpstreamLimits{TokensPerMinute: 200}})
	_, secret := e.key("k", 1_000_000)
	res, body := e.call("POST", "/v1/chat/completions", secret, chat("gpt-4o", 40, 40, 80))
	require.Equal(t, 200, res.StatusCode, "%s", body)
	statuses := make(chan int, 100)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			res, _, err := e.try(e.request("POST", "/v1/chat/completions", secret, chat("gpt-4o", 4, 4, 150)))
			if err == nil {
				statuses <- res.StatusCode
			}
		})
	}
	wg.Wait()
	close(statuses)
	n := 0
	for s := range statuses {
		require.Equal(t, http.StatusTooManyRequests, s)
		n++
	}
	require.Equal(t, 100, n)
	require.EqualValues(t, 1, ps["one"].hits.Load())
}
