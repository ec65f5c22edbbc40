package gateway

import (
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the gateway's Prometheus metrics, on a registry of each
// Gateway's own (with the Go runtime's and the process's collectors), so
// that two Gateways in one process, or in one test binary, never share or
// clash over a series.
//
// # Names
//
// The metrics that have an OpenTelemetry semantic convention (GenAI
// metrics, experimental) take its name and attributes as OpenTelemetry's
// Prometheus exporter writes them: dots become underscores, a unit of
// UCUM "s" appends "_seconds", an annotation unit such as "{token}"
// appends nothing, and a counter ends in "_total". So the histogram
// gen_ai.client.token.usage ({token}) is gen_ai_client_token_usage, the
// attribute gen_ai.token.type the label gen_ai_token_type,
// gen_ai.request.model gen_ai_request_model, and http.response.status_code
// http_response_status_code. The rest, which no convention covers (per
// key, reservations, refusals), are named the same way as if they were
// OpenTelemetry instruments "ratestore.gateway.*".
//
// The upstream latency is not named after a GenAI duration, because it is
// none of them: gen_ai.client.operation.duration ends when the response
// has ended, gen_ai.client.operation.time_to_first_chunk at the first
// chunk of a stream's body, and gen_ai.server.time_to_first_token is the
// model server's own. The time to the upstream's response header comes
// close to the first of them for a plain response (whose header follows
// the generation) and to the second for a stream.
//
// # Metrics
//
// The package documentation lists them (Metrics). Of requests_total,
// status 0 is a request that ended before anything was written. The
// tokens charged are counted apart from those reported because they are
// what the key's windows count (an estimate, or the usage as weighed), not
// a type of token; a charge that failed counts nothing. The token
// histogram leaves out the convention's required gen_ai.operation.name
// and gen_ai.provider.name: the gateway reads no operation.
//
// # Cardinality
//
// key_id is the ID of the request's key, "" for a request with no key or
// an unknown one (the secret never appears): there are at most as many
// values as keys, and a series of a key lives, once created, as long as
// the Gateway, also after the key is deleted. gen_ai_request_model is
// never what a caller wrote, only what an operator did: the model of an
// admitted request where its key's Policy.Models names it, or the glob of
// Policy.Models that matched it ("claude-*"); every other model (a key
// that may use any, a request served in shadow mode that the models would
// have refused) is "other", and so is any past the first maxModels
// values. A request that names no model (not a model call) has "". The
// other labels take a few fixed values each.
type metrics struct {
	reg    *prometheus.Registry
	handle http.Handler

	requests      *prometheus.CounterVec
	tokens        *prometheus.CounterVec
	charged       *prometheus.CounterVec
	tokenUsage    *prometheus.HistogramVec
	upLatency     *prometheus.HistogramVec
	inFlight      prometheus.Gauge
	reservations  prometheus.Gauge
	reservedToken prometheus.Gauge
	spend         *prometheus.CounterVec
	budgetLeft    *prometheus.GaugeVec

	// By upstream (Options.Upstreams' names, a route's prefix), whose
	// values an operator wrote.
	upRequests *prometheus.CounterVec
	upTokens   *prometheus.CounterVec
	upInFlight *prometheus.GaugeVec
	queue      prometheus.Histogram

	mu     sync.Mutex
	models map[string]struct{} // the values of gen_ai_request_model but "other"
}

// maxModels is the most distinct values of the gen_ai_request_model label
// (besides "other"): enough for the models of every provider a gateway
// serves, few enough that a key allowed any model cannot make the
// histograms' series grow without end.
const maxModels = 100

// otherModel is the gen_ai_request_model of the models past maxModels.
const otherModel = "other"

// Token types, the values of gen_ai_token_type.
const (
	tokenInput      = "input"
	tokenOutput     = "output"
	tokenCacheRead  = "cache_read"
	tokenCacheWrite = "cache_write"
	tokenReasoning  = "reasoning"
)

var (
	// tokenBuckets are the bucket bounds the GenAI conventions advise for
	// gen_ai.client.token.usage: powers of 4 from 1 to 4^13.
	tokenBuckets = prometheus.ExponentialBuckets(1, 4, 14)
	// latencyBuckets bound the wait for an upstream's response header,
	// from a cached or refused answer (50ms) through a stream's first
	// token (seconds) to the whole of a long generation, up to the
	// default FirstByteTimeout (10 minutes).
	latencyBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 300, 600}
)

// newMetrics returns the gateway's metrics, with stats (the database's
// statistics, package promstats) among them unless it is nil.
func newMetrics(stats prometheus.Collector) *metrics {
	m := &metrics{
		reg:    prometheus.NewRegistry(),
		models: make(map[string]struct{}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratestore_gateway_requests_total",
			Help: "Requests that ended, by key, the status the caller got, and the reason the gateway refused them (\"\" if it did not on a key's account).",
		}, []string{"key_id", "http_response_status_code", "reason"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratestore_gateway_tokens_total",
			Help: "Tokens the upstream reported, by key and type; input includes cache_read and cache_write, output includes reasoning.",
		}, []string{"key_id", "gen_ai_token_type"}),
		charged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratestore_gateway_charged_tokens_total",
			Help: "Tokens charged to keys, by key and whether they are the estimate of a request whose usage could not be read.",
		}, []string{"key_id", "estimated"}),
		tokenUsage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_client_token_usage",
			Help:    "Input and output tokens used by each model call whose usage was reported (OpenTelemetry gen_ai.client.token.usage).",
			Buckets: tokenBuckets,
		}, []string{"gen_ai_token_type", "gen_ai_request_model"}),
		upLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ratestore_gateway_upstream_latency_seconds",
			Help:    "Time from sending a request upstream to its response header.",
			Buckets: latencyBuckets,
		}, []string{"gen_ai_request_model"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ratestore_gateway_requests_in_flight",
			Help: "Requests begun and not yet ended.",
		}),
		reservations: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ratestore_gateway_reservations",
			Help: "Requests in flight that the key store admitted, each holding a concurrency slot and a token reservation.",
		}),
		reservedToken: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ratestore_gateway_reserved_tokens",
			Help: "Tokens reserved by admitted requests in flight, counted as used in their keys' windows until they end.",
		}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratestore_spend_usd_total",
			Help: "What keys were charged, in USD, by key, team (\"\" for none) and model (gen_ai_request_model's values).",
		}, []string{"key_id", "team", "gen_ai_request_model"}),
		budgetLeft: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ratestore_budget_remaining_usd",
			Help: "The least any budget of a key has left, in USD, as of the key's latest request to end.",
		}, []string{"key_id"}),
	}
	m.newUpstreamMetrics()
	m.register(stats)
	return m
}

// register registers the metrics, the runtime's and the process's, and
// stats unless it is nil, and makes their handler.
func (m *metrics) register(stats prometheus.Collector) {
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.tokens, m.charged, m.tokenUsage, m.upLatency,
		m.inFlight, m.reservations, m.reservedToken, m.spend, m.budgetLeft,
		m.upRequests, m.upTokens, m.upInFlight, m.queue,
	)
	if stats != nil {
		m.reg.MustRegister(stats)
	}
	m.handle = scrapeHandler(m.reg)
}

// scrapeHandler serves the metrics of reg.
func scrapeHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// A collector that fails (the process collector, on a system
		// without /proc) should not take the gateway's own metrics
		// down with it; the failures are counted in
		// promhttp_metric_handler_errors_total.
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg,
		// Scrapes are an operator's, behind the admin token: a few at a
		// time is plenty, and more are refused rather than left to pile
		// up gathering.
		MaxRequestsInFlight: 4,
	})
}

// begin notes that a request has started.
func (m *metrics) begin() { m.inFlight.Inc() }

// admitted notes that a request was admitted, reserving reserve tokens.
func (m *metrics) admitted(reserve int64) {
	m.reservations.Inc()
	m.reservedToken.Add(float64(reserve))
}

// handler serves the metrics in Prometheus' text exposition format (or
// its protobuf format, when the scraper asks for it), gzipped when asked.
func (m *metrics) handler() http.Handler { return m.handle }

// end notes that a request ended with status, refused for reason (""
// if it was not), once it has been charged ch.
func (m *metrics) end(rq *request, ad *admission, up *upstreamResult, ch *charged, status int, reason string) {
	defer m.inFlight.Dec()
	served := ad.shadowed != nil // Options.Shadow: served without an admission
	if ad.adm != nil {
		served = true
		m.reservations.Dec()
		m.reservedToken.Sub(float64(ad.reserve))
	}
	model := ""
	switch {
	case ad.shadowed != nil && ad.shadowed.Reason == "model":
		// A model the key's policy does not allow, served anyway: it
		// is the caller's to name, bound by nothing.
		model = otherModel
	case served:
		model = m.model(rq.model, rq.allow)
	}
	m.requests.WithLabelValues(rq.keyID, strconv.Itoa(status), reason).Inc()
	m.charge(rq, ad, ch, model)
	if served && rq.model != "" && up.used.Found {
		m.tokenUsage.WithLabelValues(tokenInput, model).Observe(float64(ch.counts.Input))
		m.tokenUsage.WithLabelValues(tokenOutput, model).Observe(float64(ch.counts.Output))
	}
	if up.forwarded && up.status != 0 {
		m.upLatency.WithLabelValues(model).Observe(up.latency.Seconds())
	}
}

// charge counts the tokens reported and charged, the spend and the budget
// left of a request of model (its label) charged ch.
func (m *metrics) charge(rq *request, ad *admission, ch *charged, model string) {
	c := ch.counts
	for _, t := range [...]struct {
		typ string
		n   int64
	}{
		{tokenInput, c.Input}, {tokenOutput, c.Output},
		{tokenCacheRead, c.CacheRead}, {tokenCacheWrite, c.CacheWrite}, {tokenReasoning, c.Reasoning},
	} {
		if t.n > 0 {
			m.tokens.WithLabelValues(rq.keyID, t.typ).Add(float64(t.n))
			if rq.member != nil {
				m.upTokens.WithLabelValues(rq.member.name, t.typ).Add(float64(t.n))
			}
		}
	}
	if ch.tokens > 0 {
		m.charged.WithLabelValues(rq.keyID, strconv.FormatBool(ch.estimated)).Add(float64(ch.tokens))
	}
	if ch.cost > 0 {
		team := ""
		if ad.adm != nil {
			team = ad.adm.Key().Team // the team the request was admitted in
		}
		m.spend.WithLabelValues(rq.keyID, team, model).Add(ch.cost.Float64())
	}
	if ch.hasBudget {
		m.budgetLeft.WithLabelValues(rq.keyID).Set(ch.budgetLeft.Float64())
	}
}

// model returns the gen_ai_request_model of model, admitted under a policy
// whose Models are allowed: the model itself where allowed names it, the
// glob that matched it where one did ("claude-*"), else otherLabel. So
// the label's values are names the operator wrote, never a caller's, and
// at most maxModels of them.
func (m *metrics) model(model string, allowed []string) string {
	if model == "" {
		return ""
	}
	label := otherModel
	for _, pat := range allowed {
		if pat == model {
			label = model
			break
		}
		if ok, _ := path.Match(pat, model); ok && label == otherModel {
			label = pat
		}
	}
	if label == otherModel {
		return label
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.models[label]; ok {
		return label
	}
	if len(m.models) >= maxModels {
		return otherModel
	}
	m.models[label] = struct{}{}
	return label
}

// newUpstreamMetrics makes the metrics by upstream.
func (m *metrics) newUpstreamMetrics() {
	m.upRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratestore_upstream_requests_total",
		Help: "Requests sent to each upstream, failovers included, by the status it answered (\"error\": none, it could not be reached or failed).",
	}, []string{"upstream", "status"})
	m.upTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratestore_upstream_tokens_total",
		Help: "Tokens each upstream reported, by type (as ratestore_gateway_tokens_total).",
	}, []string{"upstream", "type"})
	m.upInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ratestore_upstream_in_flight",
		Help: "Requests sent to each upstream whose response has not ended.",
	}, []string{"upstream"})
	m.queue = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ratestore_upstream_queue_seconds",
		Help:    "How long the requests that found no upstream with room waited for one, served or not.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60},
	})
}

// queued notes a request's wait for an upstream with room.
func (m *metrics) queued(d time.Duration) { m.queue.Observe(d.Seconds()) }

// sent notes a request sent to upstream name, and returns what notes its
// answer: its status, 0 for none.
func (m *metrics) sent(name string) (answered func(status int)) {
	g := m.upInFlight.WithLabelValues(name)
	g.Inc()
	return func(status int) {
		g.Dec()
		s := "error"
		if status != 0 {
			s = strconv.Itoa(status)
		}
		m.upRequests.WithLabelValues(name, s).Inc()
	}
}
