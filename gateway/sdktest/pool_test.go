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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/internal/fakeprovider"
	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/ratestore/ratestore/keystore"
)

// The official clients against the gateway's pools of upstreams (the
// scenarios of pool.mjs), each upstream a fakeprovider.Provider on
// loopback, on each backend: see the package documentation for what they
// show.

const (
	// fakeText is what every model of a fakeprovider says.
	fakeText = "Hello from fakeprovider"

	azureVersion = "2024-10-21"
	azureKey     = "az-upstream-key"
	azureChat    = "/openai/deployments/gpt4o-prod/chat/completions"
	azureEmbed   = "/openai/deployments/embed-small/embeddings"
	azureResp    = "/openai/responses"

	// The usage the providers report: each call of the Azure upstream
	// (an embedding has no output), each answer of the upstream a pool
	// fails over to, and what its failing first upstream would report.
	azureIn, azureOut = 29, 7
	poolIn, poolOut   = 13, 8
	failIn, failOut   = 1000, 1000

	queueTimeout = 50 * time.Millisecond
)

// usage is a fakeprovider's Options.Usage that reports in and out for
// every call.
func usage(in, out int64) func(string, []byte) (int64, int64) {
	return func(string, []byte) (int64, int64) { return in, out }
}

// poolRig is a gateway in front of fake providers, with a key for each
// scenario of pool.mjs it runs.
type poolRig struct {
	t       *testing.T
	ks      *keystore.Store
	newGW   func(gateway.Options) (*gateway.Gateway, error)
	gw      *gateway.Gateway
	srv     *httptest.Server
	logs    logbuf.Buffer
	keys    map[string]keystore.Key
	secrets map[string]string
	// seen counts the requests the gateway got for each scenario, and
	// scenario is the one whose request came last: the provider requests
	// of scenarios run one at a time are noted under it.
	seen     tally
	scenario atomic.Value
	hooks    map[string]*hook
}

// hook is what the test does when the first request of a scenario comes,
// before the gateway has it: it sets up the providers.
type hook struct {
	once sync.Once
	do   func(ctx context.Context) error
}

// newPoolRig opens a store of backend b for t, with a key for each of
// scenarios.
func newPoolRig(t *testing.T, b string, scenarios ...string) *poolRig {
	rg := &poolRig{t: t, keys: map[string]keystore.Key{}, secrets: map[string]string{}, hooks: map[string]*hook{}}
	rg.ks, rg.newGW = openBackend(t, b)
	rg.scenario.Store("")
	for _, name := range scenarios {
		k, secret, err := rg.ks.Create(context.Background(), keystore.Spec{Name: name, TokenLimit: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		rg.keys[name], rg.secrets[name] = k, secret
	}
	return rg
}

// on sets what the test does when the first request of scenario comes.
func (rg *poolRig) on(scenario string, do func(ctx context.Context) error) {
	rg.hooks[scenario] = &hook{do: do}
}

// provider is a fakeprovider.Provider on loopback that notes each request
// it gets, under the scenario of its rig being run.
type provider struct {
	*fakeprovider.Provider
	url *url.URL

	mu   sync.Mutex
	seen []providerRequest
}

// providerRequest is what a provider got.
type providerRequest struct {
	scenario, path, query string
	header                http.Header
	model                 string // the body's
}

// provider starts a fake provider of opts.
func (rg *poolRig) provider(opts fakeprovider.Options) *provider {
	p := &provider{Provider: fakeprovider.New(opts)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var f struct {
			Model string `json:"model"`
		}
		json.Unmarshal(body, &f)
		p.mu.Lock()
		p.seen = append(p.seen, providerRequest{scenario: rg.scenario.Load().(string), path: r.URL.Path, query: r.URL.RawQuery,
			header: r.Header.Clone(), model: f.Model})
		p.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.ServeHTTP(w, r)
	}))
	rg.t.Cleanup(srv.Close)
	p.url, _ = url.Parse(srv.URL)
	return p
}

// requests returns the requests p got for scenario.
func (p *provider) requests(scenario string) []providerRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []providerRequest
	for _, r := range p.seen {
		if r.scenario == scenario {
			out = append(out, r)
		}
	}
	return out
}

// start starts the gateway of opts, behind a server that counts each
// request by its X-Sdktest-Scenario and runs its scenario's hook.
func (rg *poolRig) start(opts gateway.Options) {
	t := rg.t
	opts.Logger = slog.New(slog.NewTextHandler(&rg.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gw, err := rg.newGW(opts)
	if err != nil {
		t.Fatal(err)
	}
	rg.gw = gw
	rg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("X-Sdktest-Scenario")
		rg.scenario.Store(name)
		rg.seen.add(name, 0)
		if h := rg.hooks[name]; h != nil {
			h.once.Do(func() {
				ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second) // a failure bound, not a wait
				defer cancel()
				if err := h.do(ctx); err != nil {
					t.Errorf("%s: setting up: %v", name, err)
				}
			})
		}
		gw.ServeHTTP(w, r)
	}))
	t.Cleanup(rg.srv.Close)
}

// run runs the scenarios of pool.mjs that filter names (SCENARIOS), with
// onLine called with each line as it comes, and waits until the gateway
// has recorded every request's usage.
func (rg *poolRig) run(node, filter string, onLine func(result)) map[string]result {
	t := rg.t
	keys, _ := json.Marshal(rg.secrets)
	got := runNode(t, node, "pool.mjs", []string{"BASE_URL=" + rg.srv.URL, "KEYS=" + string(keys),
		"AZURE_API_VERSION=" + azureVersion, "SCENARIOS=" + filter}, onLine)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := rg.gw.Wait(ctx); err != nil {
		t.Fatalf("gateway still serving: %v; gateway log:\n%s", err, rg.logs.String())
	}
	t.Cleanup(func() {
		if strings.Contains(rg.logs.String(), "estimated") {
			t.Error(`a charge was the estimate: the gateway log says "estimated"`)
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", rg.logs.String())
		}
	})
	return got
}

// charged checks that the key of scenario was charged want tokens, and
// holds none.
func (rg *poolRig) charged(t *testing.T, scenario string, want int64) {
	t.Helper()
	u, err := rg.ks.Usage(context.Background(), rg.keys[scenario].ID)
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != want || u.InFlight != 0 {
		t.Errorf("the key was charged %d tokens, %d in flight; want %d, none in flight", u.Used, u.InFlight, want)
	}
}

// requestsSeen checks that the gateway got want requests for scenario.
func (rg *poolRig) requestsSeen(t *testing.T, scenario string, want int) {
	t.Helper()
	if n, _ := rg.seen.get(scenario); n != want {
		t.Errorf("the gateway got %d requests for the call, want %d", n, want)
	}
}

// succeeded returns the detail of scenario's line, and fails t unless
// the call succeeded.
func succeeded(t *testing.T, got map[string]result, scenario string) callDetail {
	t.Helper()
	r, ok := got[scenario]
	if !ok {
		t.Fatal("no result")
	}
	if !r.OK {
		t.Fatalf("failed: %s %d: %s", r.ErrorName, r.Status, r.ErrorMessage)
	}
	var d callDetail
	if err := json.Unmarshal(r.Detail, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// callDetail is what pool.mjs reports of a call that succeeded.
type callDetail struct {
	Text     string         `json:"text"`
	Dims     int            `json:"dims"`
	Usage    map[string]any `json:"usage"`
	Status   string         `json:"status"`
	Finished int            `json:"finished"`
}

// usageIs checks that the usage an SDK saw has want of each field.
func usageIs(t *testing.T, got map[string]any, want map[string]int64) {
	t.Helper()
	for f, n := range want {
		if v, ok := got[f].(float64); !ok || int64(v) != n {
			t.Errorf("usage %s %v, want %d (usage %v)", f, got[f], n, got)
		}
	}
}

func TestPoolSDKs(t *testing.T) {
	node := needNode(t)
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Run("azure", func(t *testing.T) { poolAzure(t, node, b) })
			t.Run("failover", func(t *testing.T) { poolFailover(t, node, b) })
			t.Run("wait", func(t *testing.T) { poolWait(t, node, b) })
			t.Run("queue_timeout", func(t *testing.T) { poolQueueTimeout(t, node, b) })
		})
	}
}

// poolAzure: the AzureOpenAI client, with and without its deployment
// option, and the plain OpenAI client with model names, in front of an
// Azure upstream: the provider gets its own key in api-key, its own
// api-version and the deployment's path, and each key is charged exactly
// the usage reported.
func poolAzure(t *testing.T, node, b string) {
	chatUsage := map[string]int64{"prompt_tokens": azureIn, "completion_tokens": azureOut, "total_tokens": azureIn + azureOut}
	respUsage := map[string]int64{"input_tokens": azureIn, "output_tokens": azureOut}
	embedUsage := map[string]int64{"prompt_tokens": azureIn, "total_tokens": azureIn}
	cases := []struct {
		name, path string
		usage      map[string]int64 // what the client sees; nil: none
		charge     int64
	}{
		{"azure/chat_json", azureChat, chatUsage, azureIn + azureOut},
		{"azure/chat_stream", azureChat, chatUsage, azureIn + azureOut},
		{"azure/chat_json_deployment", azureChat, chatUsage, azureIn + azureOut},
		{"azure/chat_stream_deployment", azureChat, chatUsage, azureIn + azureOut},
		{"azure/chat_json_other_version", azureChat, chatUsage, azureIn + azureOut},
		{"azure/embeddings", azureEmbed, embedUsage, azureIn},
		{"azure/embeddings_deployment", azureEmbed, embedUsage, azureIn},
		{"azure/responses", azureResp, respUsage, azureIn + azureOut},
		{"azure/responses_deployment", azureResp, respUsage, azureIn + azureOut},
		{"azure/responses_stream", azureResp, respUsage, azureIn + azureOut},
		{"openai/azure_chat_json", azureChat, chatUsage, azureIn + azureOut},
		{"openai/azure_chat_stream", azureChat, chatUsage, azureIn + azureOut},
		{"openai/azure_chat_stream_no_usage", azureChat, nil, azureIn + azureOut},
		{"openai/azure_embeddings", azureEmbed, embedUsage, azureIn},
		{"openai/azure_responses", azureResp, respUsage, azureIn + azureOut},
		{"openai/azure_responses_stream", azureResp, respUsage, azureIn + azureOut},
	}
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
	}
	rg := newPoolRig(t, b, names...)
	az := rg.provider(fakeprovider.Options{API: fakeprovider.AzureOpenAI, Key: azureKey, APIVersion: azureVersion,
		Deployments: []string{"gpt4o-prod", "embed-small"}, Usage: usage(azureIn, azureOut)})
	rg.start(gateway.Options{Upstreams: []gateway.Upstream{{Name: "azure-east", API: gateway.APIAzureOpenAI, URL: az.url,
		Key: azureKey, APIVersion: azureVersion,
		Deployments: map[string]string{"gpt-4o": "gpt4o-prod", "text-embedding-3-small": "embed-small"}}}})
	got := rg.run(node, "azure/,openai/azure_*", nil)

	var total int64
	for _, c := range cases {
		total += c.charge
		t.Run(c.name, func(t *testing.T) {
			d := succeeded(t, got, c.name)
			switch {
			case c.path == azureEmbed && d.Dims == 0:
				t.Error("no embedding")
			case c.path != azureEmbed && d.Text != fakeText:
				t.Errorf("text %q, want %q", d.Text, fakeText)
			}
			if c.usage == nil && d.Usage != nil {
				t.Errorf("usage %v in a stream that did not ask for it", d.Usage)
			}
			usageIs(t, d.Usage, c.usage)
			rg.requestsSeen(t, c.name, 1)
			reqs := az.requests(c.name)
			if len(reqs) != 1 {
				t.Fatalf("the provider got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.path != c.path || r.query != "api-version="+azureVersion {
				t.Errorf("the provider got %s?%s, want %s?api-version=%s", r.path, r.query, c.path, azureVersion)
			}
			if c.path == azureResp && r.model != "gpt4o-prod" {
				t.Errorf("the responses call named model %q, want the deployment gpt4o-prod", r.model)
			}
			if k := r.header.Get("Api-Key"); k != azureKey {
				t.Errorf("api-key %q, want the upstream's own", k)
			}
			for h, vv := range r.header {
				for _, v := range vv {
					if strings.Contains(v, rg.secrets[c.name]) || (h == "Authorization" && v != "") {
						t.Errorf("the provider got %s: %q", h, v)
					}
				}
			}
			rg.charged(t, c.name, c.charge)
		})
	}
	if st := az.Stats(); st.Served != int64(len(cases)) || st.TokensCharged != total {
		t.Errorf("the provider served %d calls of %d tokens, want %d of %d (stats %+v)", st.Served, st.TokensCharged, len(cases), total, st)
	}
}

// poolFailover: the first upstream of a pool of two fails (503, then cut
// off; Anthropic's 529) before any byte reaches the caller: the client's
// call, JSON or streamed, gets the second's answer from one request, the
// first upstream having got exactly one.
func poolFailover(t *testing.T, node, b string) {
	type failure struct {
		scenario string
		fail     func(p *provider)
	}
	openai := []failure{
		{"openai/failover_503_json", func(p *provider) { p.Fail(http.StatusServiceUnavailable) }},
		{"openai/failover_503_stream", func(p *provider) { p.Fail(http.StatusServiceUnavailable) }},
		{"openai/failover_down_json", func(p *provider) { p.Down() }},
		{"openai/failover_down_stream", func(p *provider) { p.Down() }},
	}
	anthropic := []failure{
		{"anthropic/failover_529_json", func(p *provider) { p.Fail(529) }},
		{"anthropic/failover_529_stream", func(p *provider) { p.Fail(529) }},
	}
	var names []string
	for _, f := range append(openai, anthropic...) {
		names = append(names, f.scenario)
	}
	rg := newPoolRig(t, b, names...)
	oaA := rg.provider(fakeprovider.Options{API: fakeprovider.OpenAI, Key: "sk-a", Usage: usage(failIn, failOut)})
	oaB := rg.provider(fakeprovider.Options{API: fakeprovider.OpenAI, Key: "sk-b", Usage: usage(poolIn, poolOut)})
	anA := rg.provider(fakeprovider.Options{API: fakeprovider.Anthropic, Key: "ant-a", Usage: usage(failIn, failOut)})
	anB := rg.provider(fakeprovider.Options{API: fakeprovider.Anthropic, Key: "ant-b", Usage: usage(poolIn, poolOut)})
	ups := []gateway.Upstream{
		{Name: "openai-a", API: gateway.APIOpenAI, URL: oaA.url, Key: "sk-a"},
		{Name: "openai-b", API: gateway.APIOpenAI, URL: oaB.url, Key: "sk-b"},
		{Name: "anthropic-a", API: gateway.APIAnthropic, URL: anA.url, Key: "ant-a"},
		{Name: "anthropic-b", API: gateway.APIAnthropic, URL: anB.url, Key: "ant-b"},
	}
	// Each scenario starts afresh: its first upstream, back from the
	// cooldown of the one before (SetUpstreams starts cooldowns anew), is
	// the one tried first (equal weights: the first in order), and fails.
	for _, f := range openai {
		rg.on(f.scenario, func(context.Context) error { oaA.Heal(); f.fail(oaA); return rg.gw.SetUpstreams(ups) })
	}
	for _, f := range anthropic {
		rg.on(f.scenario, func(context.Context) error { anA.Heal(); f.fail(anA); return rg.gw.SetUpstreams(ups) })
	}
	rg.start(gateway.Options{Upstreams: ups})
	got := rg.run(node, "openai/failover_*,anthropic/failover_*", nil)

	check := func(t *testing.T, scenario string, a, b *provider, field, keyA, keyB string, want map[string]int64) {
		d := succeeded(t, got, scenario)
		if d.Text != fakeText {
			t.Errorf("text %q, want %q", d.Text, fakeText)
		}
		usageIs(t, d.Usage, want) // the second upstream's
		rg.requestsSeen(t, scenario, 1)
		for _, u := range []struct {
			p         *provider
			what, key string
		}{{a, "the failing upstream", keyA}, {b, "the second upstream", keyB}} {
			reqs := u.p.requests(scenario)
			if len(reqs) != 1 {
				t.Errorf("%s got %d requests, want 1", u.what, len(reqs))
				continue
			}
			if got := reqs[0].header.Get(field); got != u.key {
				t.Errorf("%s got %s %q, want %q", u.what, field, got, u.key)
			}
		}
		rg.charged(t, scenario, poolIn+poolOut)
	}
	for _, f := range openai {
		t.Run(f.scenario, func(t *testing.T) {
			check(t, f.scenario, oaA, oaB, "Authorization", "Bearer sk-a", "Bearer sk-b", map[string]int64{"prompt_tokens": poolIn, "completion_tokens": poolOut})
		})
	}
	for _, f := range anthropic {
		t.Run(f.scenario, func(t *testing.T) {
			check(t, f.scenario, anA, anB, "X-Api-Key", "ant-a", "ant-b", map[string]int64{"input_tokens": poolIn, "output_tokens": poolOut})
		})
	}
	for _, p := range []*provider{oaA, oaB, anA, anB} {
		if err := p.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := oaA.Stats(), oaB.Stats(); a.Failed != 4 || a.Served != 0 || b.Served != 4 {
		t.Errorf("the first openai upstream failed %d and served %d, the second served %d; want 4, 0, 4", a.Failed, a.Served, b.Served)
	}
	for _, u := range rg.gw.Upstreams(context.Background()) {
		t.Logf("upstream %s: %d requests, %d errors", u.Name, u.Requests, u.Errors)
	}
}

// poolWait: two calls at once on an upstream that serves one at a time:
// the second waits in the gateway while the first is held at the
// provider, and is served once it is let go.
func poolWait(t *testing.T, node, b string) {
	rg := newPoolRig(t, b, "openai/wait_first", "openai/wait_second")
	one := rg.provider(fakeprovider.Options{API: fakeprovider.OpenAI, Usage: usage(poolIn, poolOut)})
	release := one.Hold()
	defer release()
	// The second comes once the first is held at the provider; the first
	// is let go once the second waits in the gateway.
	secondIn := make(chan struct{})
	rg.on("openai/wait_second", func(ctx context.Context) error {
		defer close(secondIn)
		return one.WaitHeld(ctx, 1)
	})
	var beforeRelease int64
	released := make(chan struct{})
	go func() {
		defer close(released)
		defer release()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a failure bound, not a wait
		defer cancel()
		select {
		case <-secondIn:
		case <-ctx.Done():
			t.Error("the second call never came")
			return
		}
		if err := waitQueued(ctx, rg.gw, 1); err != nil {
			t.Error(err)
		}
		beforeRelease = one.Stats().Requests
	}()
	rg.start(gateway.Options{Upstreams: []gateway.Upstream{{Name: "one", API: gateway.APIOpenAI, URL: one.url,
		Limits: gateway.UpstreamLimits{MaxConcurrent: 1}}}})
	got := rg.run(node, "openai/wait_*", nil)
	<-released

	first, second := succeeded(t, got, "openai/wait_first"), succeeded(t, got, "openai/wait_second")
	if first.Finished != 1 || second.Finished != 2 {
		t.Errorf("the first call ended %d., the second %d.; want the first first", first.Finished, second.Finished)
	}
	if beforeRelease != 1 {
		t.Errorf("the provider got %d requests before the first was let go, want 1", beforeRelease)
	}
	if err := one.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := one.Stats(); st.Requests != 2 || st.Served != 2 || st.MaxInFlight != 1 {
		t.Errorf("the provider got %d requests, served %d, at most %d at once; want 2, 2, 1", st.Requests, st.Served, st.MaxInFlight)
	}
	if n, sum := queueWaits(t, rg.gw); n != 1 {
		t.Errorf("%d requests waited for an upstream, want 1", n)
	} else {
		t.Logf("the second call waited %v in the gateway, and took %dms in all", time.Duration(sum*float64(time.Second)).Round(time.Millisecond), got["openai/wait_second"].ElapsedMS)
	}
	for _, s := range []string{"openai/wait_first", "openai/wait_second"} {
		rg.requestsSeen(t, s, 1)
		rg.charged(t, s, poolIn+poolOut)
	}
}

// poolQueueTimeout: with UpstreamQueueTimeout 50ms, a call that finds the
// one upstream busy (its call held at the provider) gets 429
// upstream_capacity: what the openai client shows of it, without retries
// and with its default ones.
func poolQueueTimeout(t *testing.T, node, b string) {
	rg := newPoolRig(t, b, "openai/queue_first", "openai/queue_timeout", "openai/queue_timeout_retries")
	one := rg.provider(fakeprovider.Options{API: fakeprovider.OpenAI, Usage: usage(poolIn, poolOut)})
	release := one.Hold()
	defer release()
	held := func(ctx context.Context) error { return one.WaitHeld(ctx, 1) }
	rg.on("openai/queue_timeout", held)
	rg.on("openai/queue_timeout_retries", held)
	rg.start(gateway.Options{UpstreamQueueTimeout: queueTimeout, Upstreams: []gateway.Upstream{{Name: "one", API: gateway.APIOpenAI,
		URL: one.url, Limits: gateway.UpstreamLimits{MaxConcurrent: 1}}}})
	got := rg.run(node, "openai/queue_*", func(r result) {
		if r.Scenario == "queue_timeout_retries" {
			release()
		}
	})

	t.Run("openai/queue_first", func(t *testing.T) {
		succeeded(t, got, "openai/queue_first")
		rg.requestsSeen(t, "openai/queue_first", 1)
		rg.charged(t, "openai/queue_first", poolIn+poolOut)
	})
	for _, c := range []struct {
		name    string
		retries int
	}{{"openai/queue_timeout", 0}, {"openai/queue_timeout_retries", 2}} {
		t.Run(c.name, func(t *testing.T) {
			r, ok := got[c.name]
			if !ok {
				t.Fatal("no result")
			}
			t.Logf("%s %d in %dms (Retry-After %s, x-should-retry %s): %s", r.ErrorName, r.Status, r.ElapsedMS,
				deref(r.RetryAfter), deref(r.ShouldRetry), r.ErrorMessage)
			if r.OK || r.Status != http.StatusTooManyRequests || r.ErrorName != "RateLimitError" {
				t.Fatalf("ok %v, %s %d, want RateLimitError 429", r.OK, r.ErrorName, r.Status)
			}
			if deref(r.Code) != "upstream_capacity" || !strings.Contains(deref(r.APIMessage), `model "gpt-4o"`) {
				t.Errorf("code %q, message %q; want upstream_capacity naming the model", deref(r.Code), deref(r.APIMessage))
			}
			// The slot frees when the held call ends, which nothing
			// foretells: a short wait, which the client's retries honour (as
			// for a key's own cap on its requests in flight).
			wait, err := strconv.Atoi(deref(r.RetryAfter))
			if err != nil || wait < 1 || wait > 5 || deref(r.ShouldRetry) == "false" {
				t.Errorf("Retry-After %q, x-should-retry %q: want a wait of a few seconds, worth retrying", deref(r.RetryAfter), deref(r.ShouldRetry))
			}
			rg.requestsSeen(t, c.name, 1+c.retries)
			if least := time.Duration(c.retries*wait) * time.Second; time.Duration(r.ElapsedMS)*time.Millisecond < least {
				t.Errorf("took %dms: its %d retries did not wait Retry-After (%ds)", r.ElapsedMS, c.retries, wait)
			}
			rg.charged(t, c.name, 0)
		})
	}
	if err := one.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := one.Stats(); st.Requests != 1 {
		t.Errorf("the provider got %d requests, want 1: the refused calls never reached it", st.Requests)
	}
	// The refused call, and the other's three tries.
	if n, sum := queueWaits(t, rg.gw); n != 4 {
		t.Errorf("%d requests waited for an upstream, want 4: every refused one", n)
	} else {
		t.Logf("the refused requests waited %v in all", time.Duration(sum*float64(time.Second)).Round(time.Millisecond))
	}
}

// waitQueued waits until n requests wait in gw's lines for an upstream
// with room (its gauge ratestore_upstream_waiting), or ctx ends. It looks
// every millisecond.
func waitQueued(ctx context.Context, gw *gateway.Gateway, n int) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		rec := httptest.NewRecorder()
		gw.Metrics().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		waiting := -1
		for line := range strings.Lines(rec.Body.String()) {
			if v, ok := strings.CutPrefix(line, "ratestore_upstream_waiting "); ok {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				waiting = int(f)
			}
		}
		if waiting >= n {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%d requests wait for an upstream, want %d: %w", waiting, n, context.Cause(ctx))
		}
	}
}

// queueWaits returns the count and sum of ratestore_upstream_queue_seconds:
// the requests that waited for an upstream with room, and how long, in
// seconds.
func queueWaits(t *testing.T, gw *gateway.Gateway) (n int, sum float64) {
	t.Helper()
	rec := httptest.NewRecorder()
	gw.Metrics().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		name, v, _ := strings.Cut(sc.Text(), " ")
		switch name {
		case "ratestore_upstream_queue_seconds_count":
			n, _ = strconv.Atoi(v)
		case "ratestore_upstream_queue_seconds_sum":
			sum, _ = strconv.ParseFloat(v, 64)
		}
	}
	return n, sum
}
