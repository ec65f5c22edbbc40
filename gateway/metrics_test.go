package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/ratestore/ratestore/keystore"
	"github.com/stretchr/testify/require"
)

// scrape is the metrics of a gateway as a scraper reads them: its metrics
// handler's text exposition, parsed.
type scrape map[string]*dto.MetricFamily

// scrape reads the metrics of e's gateway through its handler.
func (e *env) scrape() scrape {
	e.t.Helper()
	rec := httptest.NewRecorder()
	e.gw.metrics.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(e.t, http.StatusOK, rec.Code, rec.Body.String())
	require.True(e.t, strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain"), rec.Header().Get("Content-Type"))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	require.NoError(e.t, err)
	return fams
}

// series returns every series of the family name, by its labels
// (`{a="x",b="y"}`, sorted by name; "{}" for none): a counter's or gauge's
// value, a histogram's count. A family that has no series yet is empty.
func (s scrape) series(name string) map[string]float64 {
	out := map[string]float64{}
	f := s[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		var v float64
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			v = float64(m.GetHistogram().GetSampleCount())
		default:
			panic("unexpected metric type " + f.GetType().String())
		}
		out[labelsOf(m)] = v
	}
	return out
}

// sum returns the sum of the histogram name's series of labels.
func (s scrape) sum(name, labels string) float64 {
	for _, m := range s[name].GetMetric() {
		if labelsOf(m) == labels {
			return m.GetHistogram().GetSampleSum()
		}
	}
	return -1
}

// value returns the value of the unlabelled gauge name.
func (s scrape) value(name string) float64 {
	v, ok := s.series(name)["{}"]
	if !ok {
		panic("no gauge " + name)
	}
	return v
}

func labelsOf(m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(ls)
	return "{" + strings.Join(ls, ",") + "}"
}

// TestMetrics: a 200 with its tokens, a 429 with its reason, 401s, and a
// 403 whose model appears nowhere; nothing is left in flight.
func TestMetrics(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := e.key("k", 100)
	_, models := e.policyKey("models", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}}, Models: []string{"gpt-4o*"}})

	s := e.scrape()
	require.Contains(t, s, "go_goroutines", "the Go collector")
	require.Contains(t, s, "process_start_time_seconds", "the process collector")
	if e.stats() {
		require.Contains(t, s, "ratestore_cached_keys", "the database's statistics (promstats)")
		require.Contains(t, s, "ratestore_disk_bytes")
	} else {
		require.NotContains(t, s, "ratestore_cached_keys", "Redis: no database statistics")
	}
	require.Empty(t, s.series("ratestore_gateway_requests_total"))
	require.Zero(t, s.value("ratestore_gateway_requests_in_flight"))

	// Served: 150 tokens take the key past its 100.
	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", MaxTokens: 10, Input: 100, Output: 50})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	// Refused by its window, its key, its model.
	resp, _ = e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", MaxTokens: 10, Input: 1})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	resp, _ = e.call("POST", "/v1/chat/completions", "", fakeReq{Input: 1})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = e.call("POST", "/v1/chat/completions", "rsk_unknown", fakeReq{Input: 1})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = e.call("POST", "/v1/chat/completions", models, fakeReq{Model: "o3", Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	mk, err := e.keys().Authenticate(t.Context(), models)
	require.NoError(t, err)

	s = e.scrape()
	require.Equal(t, map[string]float64{
		fmt.Sprintf(`{http_response_status_code="200",key_id=%q,reason=""}`, k.ID):       1,
		fmt.Sprintf(`{http_response_status_code="429",key_id=%q,reason="window"}`, k.ID): 1,
		`{http_response_status_code="401",key_id="",reason=""}`:                          1, // no key
		`{http_response_status_code="401",key_id="",reason="unknown"}`:                   1,
		fmt.Sprintf(`{http_response_status_code="403",key_id=%q,reason="model"}`, mk.ID): 1,
	}, s.series("ratestore_gateway_requests_total"))
	require.Equal(t, map[string]float64{
		fmt.Sprintf(`{estimated="false",key_id=%q}`, k.ID): 150,
	}, s.series("ratestore_gateway_charged_tokens_total"))
	require.Equal(t, map[string]float64{
		fmt.Sprintf(`{gen_ai_token_type="input",key_id=%q}`, k.ID):  100,
		fmt.Sprintf(`{gen_ai_token_type="output",key_id=%q}`, k.ID): 50,
	}, s.series("ratestore_gateway_tokens_total"))
	// Only the request that reached the upstream has a latency; the
	// refused model is in no series. A key that may use any model has
	// its models "other": the label holds only names of a policy.
	require.Equal(t, map[string]float64{`{gen_ai_request_model="other"}`: 1}, s.series("ratestore_gateway_upstream_latency_seconds"))
	require.Equal(t, map[string]float64{
		`{gen_ai_request_model="other",gen_ai_token_type="input"}`:  1,
		`{gen_ai_request_model="other",gen_ai_token_type="output"}`: 1,
	}, s.series("gen_ai_client_token_usage"))
	require.Equal(t, 100.0, s.sum("gen_ai_client_token_usage", `{gen_ai_request_model="other",gen_ai_token_type="input"}`))
	require.Equal(t, 50.0, s.sum("gen_ai_client_token_usage", `{gen_ai_request_model="other",gen_ai_token_type="output"}`))
	require.Zero(t, s.value("ratestore_gateway_requests_in_flight"))
	require.Zero(t, s.value("ratestore_gateway_reservations"))
	require.Zero(t, s.value("ratestore_gateway_reserved_tokens"))
}

// TestMetricsInFlight: a stream the upstream holds open is in flight with
// its reservation outstanding, and neither is once it has ended.
func TestMetricsInFlight(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := e.key("k", 1e6)
	q := fakeReq{Model: "claude-x", MaxTokens: 100, Stream: true, Gate: true, Input: 11, Output: 29}
	resp, err := e.client.Do(e.request("POST", "/v1/messages", secret, q))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	firstEvent(t, br) // admitted, forwarded, and streaming

	s := e.scrape()
	require.Equal(t, 1.0, s.value("ratestore_gateway_requests_in_flight"))
	require.Equal(t, 1.0, s.value("ratestore_gateway_reservations"))
	require.Equal(t, float64(reserveOf(t, q, 100)), s.value("ratestore_gateway_reserved_tokens"))
	require.Empty(t, s.series("ratestore_gateway_requests_total"), "a request counts once it has ended")
	// The header has come: the latency is known, but noted at the end.
	require.Empty(t, s.series("ratestore_gateway_upstream_latency_seconds"))

	close(e.up.gate)
	_, err = io.ReadAll(br)
	require.NoError(t, err)
	<-e.served

	s = e.scrape()
	require.Zero(t, s.value("ratestore_gateway_requests_in_flight"))
	require.Zero(t, s.value("ratestore_gateway_reservations"))
	require.Zero(t, s.value("ratestore_gateway_reserved_tokens"))
	require.Equal(t, map[string]float64{
		fmt.Sprintf(`{http_response_status_code="200",key_id=%q,reason=""}`, k.ID): 1,
	}, s.series("ratestore_gateway_requests_total"))
	require.Equal(t, map[string]float64{fmt.Sprintf(`{estimated="false",key_id=%q}`, k.ID): 40}, s.series("ratestore_gateway_charged_tokens_total"))
	require.Equal(t, map[string]float64{`{gen_ai_request_model="other"}`: 1}, s.series("ratestore_gateway_upstream_latency_seconds"))
	lat := s.sum("ratestore_gateway_upstream_latency_seconds", `{gen_ai_request_model="other"}`)
	require.True(t, lat > 0 && lat < 600, "latency %vs", lat)
}

// TestMetricsTokenTypes: the tokens by type as the upstreams report them,
// input with the cache reads and writes and output with the reasoning
// (Anthropic's input_tokens leaves its cache out; OpenAI's prompt_tokens
// has it in), and an estimate charged as one.
func TestMetricsTokenTypes(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/messages":
			writeBody(w, "application/json", `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":"end_turn",`+
				`"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":40}}`)
		case "/v1/chat/completions":
			writeBody(w, "application/json", `{"id":"chatcmpl-1","object":"chat.completion","model":"o3","choices":[],`+
				`"usage":{"prompt_tokens":50,"completion_tokens":25,"total_tokens":75,"prompt_tokens_details":{"cached_tokens":20},"completion_tokens_details":{"reasoning_tokens":15}}}`)
		default: // fails: the model call is charged its estimate
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	require.NoError(t, err)
	e := newEnv(t, Options{Upstream: u})
	k, secret := e.policyKey("k", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}}, Models: []string{"claude-x", "o3"}})
	resp, body := e.call("POST", "/v1/messages", secret, fakeReq{Model: "claude-x", MaxTokens: 100})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, body = e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "o3", MaxTokens: 100})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	q := fakeReq{Model: "o3", MaxTokens: 100}
	resp, _ = e.call("POST", "/v1/responses", secret, q)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	s := e.scrape()
	require.Equal(t, map[string]float64{
		fmt.Sprintf(`{estimated="false",key_id=%q}`, k.ID): 100 + 75,
		fmt.Sprintf(`{estimated="true",key_id=%q}`, k.ID):  float64(reserveOf(t, q, 100)),
	}, s.series("ratestore_gateway_charged_tokens_total"))
	require.Equal(t, map[string]float64{
		fmt.Sprintf(`{gen_ai_token_type="input",key_id=%q}`, k.ID):       (10 + 20 + 30) + 50,
		fmt.Sprintf(`{gen_ai_token_type="cache_write",key_id=%q}`, k.ID): 20,
		fmt.Sprintf(`{gen_ai_token_type="cache_read",key_id=%q}`, k.ID):  30 + 20,
		fmt.Sprintf(`{gen_ai_token_type="output",key_id=%q}`, k.ID):      40 + 25,
		fmt.Sprintf(`{gen_ai_token_type="reasoning",key_id=%q}`, k.ID):   15,
	}, s.series("ratestore_gateway_tokens_total"))
	require.Equal(t, 60.0, s.sum("gen_ai_client_token_usage", `{gen_ai_request_model="claude-x",gen_ai_token_type="input"}`))
	require.Equal(t, 25.0, s.sum("gen_ai_client_token_usage", `{gen_ai_request_model="o3",gen_ai_token_type="output"}`))
	require.Equal(t, map[string]float64{
		`{gen_ai_request_model="claude-x"}`: 1,
		`{gen_ai_request_model="o3"}`:       2, // the failure too: it got a header
	}, s.series("ratestore_gateway_upstream_latency_seconds"))
}

// TestMetricsShadowModel: in shadow mode, a model the key may not use is
// served, and its name, the caller's to choose, is "other".
func TestMetricsShadowModel(t *testing.T) {
	e := newEnv(t, Options{Shadow: true})
	_, secret := e.policyKey("m", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}}, Models: []string{"gpt-4o"}})
	for _, m := range []string{"gpt-4o", "made-up-model"} {
		resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: m, Input: 1, Output: 1})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	require.Equal(t, map[string]float64{`{gen_ai_request_model="gpt-4o"}`: 1, `{gen_ai_request_model="other"}`: 1},
		e.scrape().series("ratestore_gateway_upstream_latency_seconds"))
}

// TestMetricsModelLabel: a model's label is a name of its key's policy,
// exact or the glob that matched, never the caller's own; past maxModels
// values the rest are "other", those seen before keeping their own.
func TestMetricsModelLabel(t *testing.T) {
	m := newMetrics(nil)
	require.Empty(t, m.model("", nil))
	require.Equal(t, otherModel, m.model("gpt-4o", nil), "a key that may use any model")
	require.Equal(t, "gpt-4o", m.model("gpt-4o", []string{"gpt-*", "gpt-4o"}))
	require.Equal(t, "claude-*", m.model("claude-x", []string{"gpt-4o", "claude-*"}))
	for i := range maxModels - 2 {
		name := fmt.Sprintf("model-%d", i)
		require.Equal(t, name, m.model(name, []string{name}))
	}
	require.Equal(t, otherModel, m.model("one-too-many", []string{"one-too-many"}))
	require.Equal(t, "model-0", m.model("model-0", []string{"model-0"}))
}
