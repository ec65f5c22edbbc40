package gateway

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/alert"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/promstats"
	"github.com/ratestore/ratestore/strategies"
)

// Defaults of Options.
const (
	DefaultStatsPath = "/stats"

	// DefaultMaxRequestBody bounds the request body the gateway reads
	// (to find its model and reserve tokens) before forwarding it.
	DefaultMaxRequestBody = 32 << 20
	// DefaultMaxTokens is the output a request that names no max_tokens
	// (or max_output_tokens, max_completion_tokens,
	// generationConfig.maxOutputTokens) is expected to generate at most,
	// for its reservation.
	DefaultMaxTokens = 4096

	// DefaultConnectTimeout bounds connecting to the upstream (TCP and
	// TLS handshakes).
	DefaultConnectTimeout = 10 * time.Second
	// DefaultFirstByteTimeout bounds the wait for the upstream's response
	// header once the request is sent. A non-streamed response's header
	// comes only after the whole generation, so it is as long as the
	// official SDKs' own default request timeout (10 minutes): the
	// gateway does not give up on a call its caller still waits for.
	DefaultFirstByteTimeout = 10 * time.Minute
	// DefaultIdleTimeout bounds the wait for each read of the upstream's
	// response body: a stream silent for longer is ended.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultBodyTimeout bounds the wait for a request's body, from the
	// end of its header: a caller that sends it more slowly gets 408.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultMaxTokensPerRequest bounds the usage one response may charge
	// (see Options.MaxTokensPerRequest).
	DefaultMaxTokensPerRequest = 10_000_000

	// DefaultDrainTimeout bounds how long the gateway keeps reading a
	// response for its usage once the caller has hung up: long enough
	// for most generations to end, short of the first-byte timeout.
	DefaultDrainTimeout = 5 * time.Minute
)

// RequestLimiter is the name of the limiter of Options.RPS.
const RequestLimiter = "gateway.requests"

// RequestIDHeader is the response field that carries the request's ID, as
// logged.
const RequestIDHeader = "Ratestore-Request-Id"

// Options configures a Gateway.
type Options struct {
	// Upstream is the API that requests are forwarded to: scheme, host and
	// an optional path prefix that the request's path is appended to. It
	// is the default route, for the paths that no route of Routes
	// matches; without it, such paths are answered 404 and never
	// forwarded. Required unless Routes or Upstreams are given.
	Upstream *url.URL
	// UpstreamKey, when set, is the credential sent to the upstream with
	// every request. The caller's own key fields are never forwarded.
	UpstreamKey string
	// UpstreamKeyHeader names the field UpstreamKey goes in. "" means
	// Authorization, as "Bearer <key>"; any other field (x-api-key) gets
	// the key as it is.
	UpstreamKeyHeader string
	// Routes send the requests under a path prefix to upstreams of their
	// own, each with its own credential: the longest prefix that matches
	// a request's path wins (see Route), and Upstream takes the rest.
	Routes []Route
	// Upstreams are the pools of upstreams that serve requests by api and
	// model (see Upstreams in the package documentation): a request goes
	// to one whose api serves its endpoint and whose models match its
	// model, with room in its limits, else to its route (Routes and
	// Upstream). SetUpstreams replaces them.
	Upstreams []Upstream
	// UpstreamAttempts bounds the upstreams one request is sent to, the
	// first included, when they answer 429 or 5xx or cannot be reached;
	// 0 means DefaultUpstreamAttempts, 1 no failover.
	UpstreamAttempts int
	// UpstreamQueueTimeout bounds the wait of a request for an upstream
	// with room in its limits; 0 means DefaultUpstreamQueueTimeout, a
	// negative value no wait (429 upstream_capacity at once).
	UpstreamQueueTimeout time.Duration

	// Shadow serves the requests that a key's limits or models would
	// refuse, and logs that they would have been refused: to roll limits
	// out without refusing anyone. See Shadow mode in the package
	// documentation.
	Shadow bool

	// Ledger configures the spend ledger the gateway keeps in its
	// database (package ledger): an entry per finished request, written
	// in the commit that charges it, and rollups by key, team, model and
	// day, which GET /admin/spend and /admin/requests read. NoLedger
	// keeps none.
	Ledger   ledger.Options
	NoLedger bool

	// Alerts, if set, is told each key's and team's usage after each
	// request, and sends a webhook call when one crosses a threshold of a
	// budget or token window (package alert). The caller closes it after
	// the gateway.
	Alerts *alert.Notifier

	// RPS, when > 0, limits every key to RPS requests per second, in
	// bursts of Burst (strategies.GCRA, keyed by key ID); Burst 0 means
	// max(1, ceil(RPS)).
	RPS   float64
	Burst int64

	// StatsPath is the path the gateway answers with the caller's own
	// usage rather than forwarding; "" means DefaultStatsPath.
	StatsPath string
	// Weights weigh the tokens a response reports by type; nil means
	// UnitWeights.
	Weights *Weights

	// MaxRequestBody bounds the request body, which the gateway reads
	// whole before admitting the request; 0 means DefaultMaxRequestBody.
	// A larger body is refused with 413.
	MaxRequestBody int64
	// DefaultMaxTokens is the output reserved for a request that names no
	// maximum of its own, as far as the key's windows have room for it
	// (keystore.Request.Optional); 0 means DefaultMaxTokens.
	DefaultMaxTokens int64
	// MaxTokensPerRequest bounds the usage one response may be charged:
	// an upstream that reports more (a bug, or a lenient fake) is trusted
	// up to it, and the overrun logged at level Error, so that one bogus
	// figure cannot lock a key out for its whole window. 0 means
	// DefaultMaxTokensPerRequest.
	MaxTokensPerRequest int64
	// BodyTimeout bounds the wait for a request's body (408 when it is
	// slower); 0 means DefaultBodyTimeout, a negative value no bound.
	BodyTimeout time.Duration

	// ConnectTimeout, FirstByteTimeout and IdleTimeout bound connecting
	// to the upstream, waiting for its response header, and waiting for
	// each read of its response body; 0 means DefaultConnectTimeout,
	// DefaultFirstByteTimeout and DefaultIdleTimeout, a negative value no
	// bound. ConnectTimeout and FirstByteTimeout apply to the default
	// Transport only: a Transport of the caller's brings its own.
	ConnectTimeout, FirstByteTimeout, IdleTimeout time.Duration
	// DrainTimeout bounds how long the gateway goes on reading a model
	// call's response for its usage after the caller has hung up (the
	// upstream generates, and bills, to the end all the same); then the
	// upstream request is ended and the estimate charged. 0 means
	// DefaultDrainTimeout, a negative value that it is ended at once.
	DrainTimeout time.Duration

	// Transport forwards the requests; nil means a clone of
	// http.DefaultTransport that keeps more idle connections per host,
	// with ConnectTimeout and FirstByteTimeout.
	Transport http.RoundTripper
	// Logger receives a line per request and the failures; nil discards
	// them.
	Logger *slog.Logger

	// Now is the clock of the live traffic (Traffic); nil means
	// time.Now. (The keys' clock is their database's.)
	Now func() time.Time

	// PricesFile is a price table in LiteLLM's format
	// (model_prices_and_context_window.json) whose entries replace those
	// of the built-in one (pricing.Default); "" means the built-in alone.
	// ReloadPrices reads it again. A request is charged its usage at its
	// model's price, each token type at its own.
	PricesFile string
	// Unpriced is what a request costs a key with a budget when its model
	// has no price: refused (the zero value), $0, or DefaultPrice.
	Unpriced     Unpriced
	DefaultPrice pricing.Price
}

// Gateway is the metering reverse proxy, an http.Handler. It is safe for
// concurrent use.
type Gateway struct {
	keys        *keystore.Store
	ledger      *ledger.Ledger // nil: Options.NoLedger
	alerts      *alert.Notifier
	transport   http.RoundTripper
	rate        *httplimit.Middleware     // Options.RPS; nil: none
	buffers     buffers                   // of the responses' copies
	ups         atomic.Pointer[upstreams] // the pools and routes in force (SetUpstreams)
	attempts    int                       // Options.UpstreamAttempts
	queue       time.Duration             // Options.UpstreamQueueTimeout; 0: no wait
	lines       lines                     // the requests waiting for an upstream with room
	shadow      bool                      // Options.Shadow
	active      *activity                 // the requests being served, for Wait and Abort
	statsPath   string
	weights     Weights
	drain       time.Duration // < 0: none
	maxBody     int64
	maxTokens   int64
	maxCharge   int64         // Options.MaxTokensPerRequest
	bodyTimeout time.Duration // 0: none
	slots       slots         // requests of a key holding a slot, from before their body is read
	short       shortSlots    // short admissions of a key in flight: one at most
	idle        time.Duration // 0: none
	log         *slog.Logger
	now         func() time.Time // Options.Now
	live        live             // the rates of Traffic
	metrics     *metrics
	prices      prices
}

// New returns a Gateway in front of opts.Upstream that meters the keys of
// db's key store: keystore.Open(db, keystore.Options{}), the one Store of
// db that every other user of it shares (an admin creating keys in the same
// process sees the same keys and usage). It takes db rather than the Store
// because the request rate of Options.RPS is a limiter of db too. Its
// errors about opts match backend.ErrInvalid; so does that of a key store
// opened already with other options. db must stay open while the Gateway
// serves; closing it after the server has shut down flushes the last usage.
//
// db is any backend meeting backend.Store: a *ratestore.DB, or, for a
// gateway run as several instances, a *redisstore.DB, where the keys, their
// windows, request rates and slots, and the request rate of Options.RPS
// are shared by every gateway that uses it (see Several instances in the
// package documentation). The store's statistics, if it keeps any
// (promstats.Of), are among the metrics.
func New(db backend.Store, opts Options) (*Gateway, error) {
	keys, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	routes, err := newRoutes(opts)
	if err != nil {
		return nil, err
	}
	ups, err := newUpstreams(keys, opts.Upstreams, routes)
	if err != nil {
		return nil, err
	}
	g.ups.Store(ups)
	g.keys, g.active = keys, newActivity()
	if !opts.NoLedger {
		if g.ledger, err = ledger.Open(db, opts.Ledger); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	if g.transport = opts.Transport; g.transport == nil {
		g.transport = newTransport(opts)
	}
	if opts.RPS != 0 || opts.Burst != 0 {
		s, err := requestStrategy(opts.RPS, opts.Burst)
		if err != nil {
			return nil, err
		}
		l, err := db.Handle(RequestLimiter, s)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		if g.rate, err = requestRate(l, g.log); err != nil {
			return nil, err
		}
	}
	g.metrics = newMetrics(promstats.Of(db, nil))
	g.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ratestore_upstream_waiting",
		Help: "Requests waiting now for an upstream with room.",
	}, func() float64 { return float64(g.lines.waiting.Load()) }))
	if g.alerts = opts.Alerts; g.alerts != nil {
		g.metrics.reg.MustRegister(newAlertCollector(g.alerts))
	}
	return g, nil
}

// withDefaults returns a Gateway with the settings of opts, their
// defaults filled in, or the error of the first that is invalid.
func withDefaults(opts Options) (*Gateway, error) {
	g := &Gateway{
		shadow:      opts.Shadow,
		statsPath:   cmp.Or(opts.StatsPath, DefaultStatsPath),
		weights:     UnitWeights,
		drain:       cmp.Or(opts.DrainTimeout, DefaultDrainTimeout),
		maxBody:     cmp.Or(opts.MaxRequestBody, DefaultMaxRequestBody),
		maxTokens:   cmp.Or(opts.DefaultMaxTokens, DefaultMaxTokens),
		maxCharge:   cmp.Or(opts.MaxTokensPerRequest, DefaultMaxTokensPerRequest),
		bodyTimeout: timeout(opts.BodyTimeout, DefaultBodyTimeout),
		idle:        timeout(opts.IdleTimeout, DefaultIdleTimeout),
		log:         opts.Logger,
		attempts:    cmp.Or(opts.UpstreamAttempts, DefaultUpstreamAttempts),
		queue:       timeout(opts.UpstreamQueueTimeout, DefaultUpstreamQueueTimeout),
	}
	if g.attempts < 1 {
		return nil, fmt.Errorf("gateway: UpstreamAttempts %d: want at least 1: %w", opts.UpstreamAttempts, backend.ErrInvalid)
	}
	if !strings.HasPrefix(g.statsPath, "/") {
		return nil, fmt.Errorf("gateway: stats path %q: want an absolute path: %w", g.statsPath, backend.ErrInvalid)
	}
	if opts.Weights != nil {
		if !opts.Weights.valid() {
			return nil, fmt.Errorf("gateway: weights %+v: want finite weights >= 0: %w", *opts.Weights, backend.ErrInvalid)
		}
		g.weights = *opts.Weights
	}
	if g.maxBody < 0 || g.maxTokens < 0 || g.maxCharge < 0 {
		return nil, fmt.Errorf("gateway: negative MaxRequestBody, DefaultMaxTokens or MaxTokensPerRequest: %w", backend.ErrInvalid)
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.now = opts.Now; g.now == nil {
		g.now = time.Now
	}
	if opts.Unpriced > UnpricedDefault {
		return nil, fmt.Errorf("gateway: Unpriced %d: %w", opts.Unpriced, backend.ErrInvalid)
	}
	g.prices.file, g.prices.unpriced, g.prices.def = opts.PricesFile, opts.Unpriced, opts.DefaultPrice
	if _, err := g.ReloadPrices(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, backend.ErrInvalid)
	}
	return g, nil
}

// newTransport returns the default Transport of Options: a clone of
// http.DefaultTransport with Options' connect and first-byte timeouts,
// keeping more idle connections to the upstream, which every request
// goes to.
func newTransport(opts Options) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	t.DialContext = (&net.Dialer{Timeout: timeout(opts.ConnectTimeout, DefaultConnectTimeout), KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = timeout(opts.ConnectTimeout, DefaultConnectTimeout)
	t.ResponseHeaderTimeout = timeout(opts.FirstByteTimeout, DefaultFirstByteTimeout)
	return t
}

// timeout is the bound of an Options timeout d: def for 0, none (0) for a
// negative d.
func timeout(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// requestStrategy is the strategy of Options.RPS and Options.Burst.
func requestStrategy(rps float64, burst int64) (strategies.GCRA, error) {
	if !(rps > 0) || math.IsInf(rps, 0) || burst < 0 {
		return strategies.GCRA{}, fmt.Errorf("gateway: request rate %v, burst %d: want a rate > 0 and a burst >= 0: %w", rps, burst, backend.ErrInvalid)
	}
	if burst == 0 {
		burst = max(1, int64(math.Ceil(rps)))
	}
	return strategies.GCRA{Rate: rps, Burst: burst}, nil
}

// requestRate returns the middleware of the request rate of Options.RPS,
// decided by l. The gateway checks it by the key ID of each request it
// has admitted (httplimit.Middleware.Check): the rule's KeyFunc, which
// would read the key from the request, is never used.
func requestRate(l backend.Limiter, log *slog.Logger) (*httplimit.Middleware, error) {
	return httplimit.New(httplimit.Options{
		Rules:  []httplimit.Rule{{Limiter: l, Key: byKeyID, Policy: "requests"}},
		Logger: log,
	})
}

// byKeyID is the KeyFunc of the request rate's rule, which Check passes
// over: see requestRate.
func byKeyID(*http.Request) (string, error) {
	return "", errors.New("gateway: the request rate is checked by key ID")
}

// Keys returns the key store the Gateway meters, for the admin API.
func (g *Gateway) Keys() *keystore.Store { return g.keys }

// Metrics returns the handler of the Gateway's metrics, in Prometheus'
// text exposition format: to be served behind the admin token (package
// console).
func (g *Gateway) Metrics() http.Handler { return g.metrics.handler() }

// Ledger returns the gateway's spend ledger, or nil with
// Options.NoLedger.
func (g *Gateway) Ledger() *ledger.Ledger { return g.ledger }

// Close ends the gateway's background work: the ledger compacts what it
// wrote and stops, waiting until ctx ends. Call it after Wait and before
// closing the database.
func (g *Gateway) Close(ctx context.Context) error {
	if g.ledger == nil {
		return nil
	}
	return g.ledger.Close(ctx)
}

var _ admin.Gateway = (*Gateway)(nil)

// bodyDeadline bounds the reads of w's connection by g.bodyTimeout from
// now, for a request's body, and returns what lifts the bound. Setting it
// fails (HTTP/2 over a ResponseWriter that cannot) only in tests: the
// server's own ReadTimeout then bounds it.
func (g *Gateway) bodyDeadline(w http.ResponseWriter) (lift func()) {
	rc := http.NewResponseController(w)
	if g.bodyTimeout <= 0 || rc.SetReadDeadline(time.Now().Add(g.bodyTimeout)) != nil {
		return func() {}
	}
	return func() { rc.SetReadDeadline(time.Time{}) }
}

// readAtMost reads rd whole, up to limit+1 bytes. length is its declared
// length, -1 when unknown: a body of known length (at most limit) is read
// into one slice of that size, which net/http's body reader ends at.
func readAtMost(rd io.Reader, length, limit int64) ([]byte, error) {
	if length >= 0 && length <= limit {
		b := make([]byte, length)
		_, err := io.ReadFull(rd, b)
		return b, err
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(io.LimitReader(rd, limit+1))
	return buf.Bytes(), err
}

// reservation returns the tokens a request to ep holds while it runs: its
// prompt, estimated at a token per 4 bytes of body, plus its maximum
// output times its choices. A request that names no maximum holds
// Options.DefaultMaxTokens per choice as optional (keystore.Request): as
// far as the key's windows have room for it, so that the gateway's guess
// never refuses a request on its own account.
func (g *Gateway) reservation(bodyLen int, f bodyFields, ep *endpoint) (reserve, optional int64) {
	prompt := int64(bodyLen) / 4
	if !ep.output {
		return prompt, 0
	}
	choices := max(1, f.choices)
	if f.maxOutput == 0 {
		return prompt, sat.Mul(g.maxTokens, choices)
	}
	return sat.Add(prompt, sat.Mul(f.maxOutput, choices)), 0
}

// writeJSON writes v as the JSON body of an answer of status (package
// apierror). Its strings are not HTML-escaped: the answers are read by
// programs and people in terminals ("max_tokens >= 0", not "\u003e= 0"),
// and nosniff keeps browsers from reading them as HTML.
func writeJSON(w http.ResponseWriter, status int, v any) { apierror.WriteJSON(w, status, v) }

func ceilSeconds(d time.Duration) int64 { return sat.CeilDiv(int64(d), int64(time.Second)) }

// redacted is u for messages, without a password.
func redacted(u *url.URL) string {
	if u == nil {
		return "(none)"
	}
	return strconv.Quote(u.Redacted())
}
