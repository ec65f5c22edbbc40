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
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/alert"
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
	// forwarded. Required unless Routes are given.
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
	proxy       *httputil.ReverseProxy
	next        http.Handler // proxy, behind the request-rate middleware if any
	routes      []route      // longest prefix first, the default route last
	shadow      bool         // Options.Shadow
	active      *activity    // the requests being served, for Wait and Abort
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
// errors about opts match ratestore.ErrInvalid; so does that of a key store
// opened already with other options. db must stay open while the Gateway
// serves; closing it after the server has shut down flushes the last usage.
//
// db is any backend meeting ratestore.Store: a *ratestore.DB, or, for a
// gateway run as several instances, a *redisstore.DB, where the keys, their
// windows, request rates and slots, and the request rate of Options.RPS
// are shared by every gateway that uses it (see Several instances in the
// package documentation). The store's statistics, if it keeps any
// (promstats.Of), are among the metrics.
func New[L ratestore.StoreLimiter, B ratestore.StoreBatch[L]](db ratestore.Store[L, B], opts Options) (*Gateway, error) {
	keys, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	if g.routes, err = newRoutes(opts); err != nil {
		return nil, err
	}
	g.keys, g.active = keys, newActivity()
	if !opts.NoLedger {
		if g.ledger, err = ledger.Open(db, opts.Ledger); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.proxyError,
		Transport:      opts.Transport,
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		BufferPool:     &bufferPool{},
	}
	if g.proxy.Transport == nil {
		g.proxy.Transport = newTransport(opts)
	}
	g.next = g.proxy
	if opts.RPS != 0 || opts.Burst != 0 {
		deny := denyRate
		if opts.Shadow {
			deny = g.shadowRate
		}
		s, err := requestStrategy(opts.RPS, opts.Burst)
		if err != nil {
			return nil, err
		}
		l, err := db.Limiter(RequestLimiter, s)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		if g.next, err = requestRate(l, deny, g.log, g.proxy); err != nil {
			return nil, err
		}
	}
	g.metrics = newMetrics(promstats.Of(db, nil))
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
	}
	if !strings.HasPrefix(g.statsPath, "/") {
		return nil, fmt.Errorf("gateway: stats path %q: want an absolute path: %w", g.statsPath, ratestore.ErrInvalid)
	}
	if opts.Weights != nil {
		if !opts.Weights.valid() {
			return nil, fmt.Errorf("gateway: weights %+v: want finite weights >= 0: %w", *opts.Weights, ratestore.ErrInvalid)
		}
		g.weights = *opts.Weights
	}
	if g.maxBody < 0 || g.maxTokens < 0 || g.maxCharge < 0 {
		return nil, fmt.Errorf("gateway: negative MaxRequestBody, DefaultMaxTokens or MaxTokensPerRequest: %w", ratestore.ErrInvalid)
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.now = opts.Now; g.now == nil {
		g.now = time.Now
	}
	if opts.Unpriced > UnpricedDefault {
		return nil, fmt.Errorf("gateway: Unpriced %d: %w", opts.Unpriced, ratestore.ErrInvalid)
	}
	g.prices.file, g.prices.unpriced, g.prices.def = opts.PricesFile, opts.Unpriced, opts.DefaultPrice
	if _, err := g.ReloadPrices(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ratestore.ErrInvalid)
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
		return strategies.GCRA{}, fmt.Errorf("gateway: request rate %v, burst %d: want a rate > 0 and a burst >= 0: %w", rps, burst, ratestore.ErrInvalid)
	}
	if burst == 0 {
		burst = max(1, int64(math.Ceil(rps)))
	}
	return strategies.GCRA{Rate: rps, Burst: burst}, nil
}

// requestRate returns next behind the request rate of Options.RPS,
// decided by l.
func requestRate(l ratestore.StoreLimiter, deny func(http.ResponseWriter, *http.Request, httplimit.Decision), log *slog.Logger, next http.Handler) (http.Handler, error) {
	mw, err := httplimit.New(httplimit.Options{
		Rules:  []httplimit.Rule{{Limiter: l, Key: exchangeKeyID, Policy: "requests"}},
		Deny:   deny,
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return mw.Wrap(next), nil
}

// exchange is one request going through the gateway: the ResponseWriter
// it is answered through, which notes the status, and what the log says.
type exchange struct {
	statusWriter
	id     string
	start  time.Time // when it arrived
	keyID  string
	team   string // the key's team, once authenticated
	reason string // why the gateway refused it: a keystore.Denial's Reason, or ""

	// What the request asks for, as the gateway read it (Gateway.endpoint
	// and Gateway.read).
	ep      *endpoint
	path    string // its path's pattern (routePath), for the ledger
	route   *route // where it is forwarded to
	model   string
	allowed []string // the key's Policy.Models, for the metrics' model label
	// stripUsage: the gateway asked the upstream for the stream's usage,
	// which the caller did not (askUsage), and takes it out of the stream.
	stripUsage bool

	// Its prompt, estimated, and the most output it may produce (read),
	// and its price (Gateway.priceFor; priced false: $0).
	promptEst, outputMax int64
	price                pricing.Price
	priced               bool

	// Its admission (Gateway.admit).
	adm      *keystore.Admission
	shadowed *keystore.Denial // Options.Shadow: the refusal it would have had; served and charged without an admission
	reserve  int64
	short    bool // admitted with less than its optional reservation

	up     upstreamResult // what the upstream did
	charge charged        // what the key was charged (Gateway.finish)
}

// upstreamResult is what the upstream answered to an exchange, and what
// the response's meter found once its body ended: written by rewrite,
// modifyResponse, proxyError and the meter, in the request's goroutine.
type upstreamResult struct {
	forwarded bool          // the request was sent upstream (not refused by Options.RPS)
	sent      time.Time     // when it was
	latency   time.Duration // from sent to the upstream's response header
	status    int
	err       error
	metered   bool
	used      usage // what the response reported
	complete  bool  // the body was read to its end
}

// charged is what an exchange was charged, and why.
type charged struct {
	reported, tokens int64       // tokens reported (weighed); charged
	cost             pricing.USD // what the tokens cost the key
	budgetLeft       pricing.USD // the least the key's budgets have left after it
	hasBudget        bool
	counts           tokenCounts // the tokens reported, by type
	estimated        bool        // the tokens charged are the reservation: no usage could be read
	capped           bool        // the usage reported was over Options.MaxTokensPerRequest
}

// statusWriter is a ResponseWriter that notes the status it answered
// with, for the log and the metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader writes the header of the final response. An upstream's
// informational (1xx) responses are not passed on: ReverseProxy would copy
// their fields unfiltered, and the caller, whose body the gateway has read
// already, has no use for them.
func (w *statusWriter) WriteHeader(code int) {
	if code < 200 {
		return
	}
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (which ReverseProxy flushes
// streams with) reach the server's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type exchangeCtx struct{}

func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeCtx{}).(*exchange)
	return x
}

// exchangeKeyID is the KeyFunc of the request rate: the ID of the key the
// request was authenticated with.
func exchangeKeyID(r *http.Request) (string, error) {
	if x := exchangeOf(r.Context()); x != nil && x.keyID != "" {
		return x.keyID, nil
	}
	return "", &httplimit.StatusError{Status: http.StatusInternalServerError, Err: errors.New("gateway: request without a key")}
}

// ServeHTTP serves one request: see the package documentation.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.active.begin()
	defer g.active.end()
	if operatorPath(r.URL.Path) {
		// The operator's paths are the console's to serve (it hands the
		// Gateway every other one): never forwarded, whoever mounts it.
		writeError(w, http.StatusNotFound, typeInvalid, "not_found", "no such path")
		return
	}
	start := time.Now()
	x := &exchange{statusWriter: statusWriter{ResponseWriter: w}, id: newRequestID(), start: start}
	w.Header().Set(RequestIDHeader, x.id)
	completed := false
	defer func() {
		// Also when aborted: ReverseProxy panics with http.ErrAbortHandler
		// when a response cannot be copied to its end, and the caller may
		// have gone away: the admission is finished on a context of its
		// own.
		if x.adm != nil || x.shadowed != nil {
			g.finish(context.WithoutCancel(r.Context()), x)
		}
		if x.short {
			g.short.end(x.keyID) // once charged: see Gateway.admit
		}
		g.metrics.end(r, x, time.Since(start))
		g.live.end(g.now(), x.charge.tokens)
		g.logExchange(r, x, start, !completed)
	}()
	g.metrics.begin(x)
	g.live.begin()
	g.serve(x, r)
	completed = true
	if x.adm != nil {
		// The caller gets all of the response before the usage is
		// recorded, which in Sync mode waits for the disk.
		http.NewResponseController(w).Flush()
	}
}

func (g *Gateway) serve(x *exchange, r *http.Request) {
	if hasBody(r) {
		// Until the body is read, an answer closes the connection: the
		// server would otherwise read the rest of the body, however slowly
		// it comes, before answering.
		x.Header().Set("Connection", "close")
	}
	k, secret, ok := g.authenticate(x, r)
	if !ok {
		return
	}
	model, ok := g.endpoint(x, r)
	if !ok {
		return
	}
	// The key's slots bound the bodies it holds in memory: one is taken
	// before the body is read (see slots).
	if n := k.Policy.MaxConcurrent; n > 0 && !g.shadow {
		if !g.slots.take(k.ID, n) {
			g.deny(r.Context(), x, k, &keystore.Denial{Reason: "concurrency", Limit: fmt.Sprintf("%d requests in flight", n), RetryAfter: concurrencyRetry}, 0)
			return
		}
		defer g.slots.give(k.ID)
	}
	req, ok := g.read(x, r, model)
	if !ok {
		return
	}
	x.Header().Del("Connection")
	if !g.admit(x, r, k, secret, req) {
		return
	}
	g.forward(x, r)
}

// hasBody reports whether r comes with a body.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 || len(r.TransferEncoding) > 0
}

// authenticate reads the request's secret and answers the stats path, or
// a request whose key is unknown, disabled or expired; ok is false when it
// has answered.
func (g *Gateway) authenticate(x *exchange, r *http.Request) (k keystore.Key, secret string, ok bool) {
	secret = httplimit.APISecret(r)
	if secret == "" {
		secret = strings.TrimSpace(r.Header.Get("X-Goog-Api-Key")) // Gemini's
	}
	if secret == "" {
		writeError(x, http.StatusUnauthorized, typeAuth, "missing_api_key", "no API key: send it as Authorization: Bearer <key>, x-api-key or x-goog-api-key")
		return k, "", false
	}
	if r.URL.Path == g.statsPath {
		g.stats(x, r, secret)
		return k, "", false
	}
	k, err := g.keys.Lookup(r.Context(), secret) // Admit checks it as stored
	x.keyID, x.team = k.ID, k.Team
	if err != nil {
		g.refuse(x, r, k, err)
		return k, "", false
	}
	return k, secret, true
}

// endpoint finds the endpoint and route of r, and checks its body's
// framing, answering 404, 405 or 415 when it cannot be served. It returns
// the model the path names (Gemini's), if any.
func (g *Gateway) endpoint(x *exchange, r *http.Request) (model string, ok bool) {
	ep, model, perr := lookup(r.Method, r.URL.Path, r.URL.RawPath)
	if perr != nil {
		if perr.allow != "" {
			x.Header().Set("Allow", perr.allow)
		}
		code := map[int]string{http.StatusNotFound: "unknown_endpoint", http.StatusMethodNotAllowed: "method_not_allowed"}[perr.status]
		writeError(x, perr.status, typeInvalid, code, perr.msg)
		return "", false
	}
	x.ep, x.path = ep, routePath(r.URL.Path)
	if x.route = match(g.routes, r.URL.Path); x.route == nil {
		writeError(x, http.StatusNotFound, typeInvalid, "no_route", "no upstream serves this path on this gateway")
		return "", false
	}
	return model, g.acceptable(x, r)
}

// read reads and parses the body of r, checks its model, and returns the
// admission it asks for, its body set to what will be forwarded.
func (g *Gateway) read(x *exchange, r *http.Request, model string) (keystore.Request, bool) {
	ep := x.ep
	body, ok := g.readBody(x, r)
	if !ok {
		return keystore.Request{}, false
	}
	var f bodyFields
	if ep.body() {
		if f, ok = g.readFields(x, body); !ok {
			return keystore.Request{}, false
		}
		if !ep.modelInPath {
			model = f.model
		}
	}
	if ep.model {
		if why := checkModel(model); why != "" {
			writeError(x, http.StatusBadRequest, typeInvalid, "invalid_model", "the model name "+why)
			return keystore.Request{}, false
		}
	}
	req := keystore.Request{Model: model}
	if ep.generates {
		// The prompt as the caller wrote it: the stream options asked for
		// below are no input.
		req.Reserve, req.Optional = g.reservation(len(body), f, ep)
		x.promptEst = int64(len(body)) / 4
		if ep.output {
			x.outputMax = sat.Add(req.Reserve-x.promptEst, req.Optional)
		}
	}
	if ep.askUsage && f.stream && !f.usageAsked {
		body, x.stripUsage = askUsage(body, f), true
	}
	if ep.body() {
		r.ContentLength, r.Body = int64(len(body)), io.NopCloser(bytes.NewReader(body))
	}
	x.model, x.reserve = model, req.Reserve
	return req, true
}

// admit admits x's request, or answers its refusal. A request that got
// less than the whole of its optional reservation is short: one of a key
// runs at a time (see Request bodies in the package documentation), and
// another is refused.
func (g *Gateway) admit(x *exchange, r *http.Request, k keystore.Key, secret string, req keystore.Request) bool {
	x.allowed = k.Policy.Models
	if !g.priceFor(x, k, &req) {
		return false
	}
	since := g.short.epochOf(k.ID)
	a, err := g.keys.Admit(r.Context(), secret, req)
	switch {
	case a == nil && g.shadowServes(x, r, err):
		return true // served without an admission; finish charges its usage
	case a == nil:
		g.refuse(x, r, k, err)
		return false
	}
	if a.Reserved() < sat.Add(req.Reserve, req.Optional) {
		if !g.short.takeSince(k.ID, since) {
			if _, ferr := a.Finish(context.WithoutCancel(r.Context()), 0); ferr != nil && !errors.Is(ferr, ratestore.ErrUncertain) {
				g.log.LogAttrs(r.Context(), slog.LevelError, "gateway: giving back an admission failed",
					slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.String("error", ferr.Error()))
			}
			g.deny(r.Context(), x, k, &keystore.Denial{Reason: "short", RetryAfter: concurrencyRetry}, req.Reserve)
			return false
		}
		x.short = true
	}
	x.adm, x.reserve = a, a.Reserved()
	g.metrics.admitted(x)
	if err != nil {
		// Admitted, just not known to be on disk: serve it.
		g.log.LogAttrs(r.Context(), slog.LevelWarn, "gateway: admission not known to be durable",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.String("error", err.Error()))
	}
	return true
}

// forward sends the admitted request upstream, through the request-rate
// middleware if any, and streams the response back through its meter.
func (g *Gateway) forward(x *exchange, r *http.Request) {
	ep := x.ep
	parent := context.WithValue(r.Context(), exchangeCtx{}, x)
	if ep.generates {
		// The upstream generates, and bills, to the end whether the
		// caller waits for it or not: its request outlives the caller's
		// by up to the drain timeout, so that the usage at its end is
		// read (see meter).
		parent = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancelCause(parent)
	if ep.generates {
		var drain atomic.Pointer[time.Timer]
		stop := context.AfterFunc(r.Context(), func() {
			if g.drain < 0 {
				cancel(errDrain)
				return
			}
			drain.Store(time.AfterFunc(g.drain, func() { cancel(errDrain) }))
		})
		defer func() {
			// A timer stored after this Load (the caller hung up as the
			// request ended) only cancels a context that is done.
			if !stop() {
				if t := drain.Load(); t != nil {
					t.Stop()
				}
			}
		}()
	}
	defer func() { // also when ReverseProxy panics
		if cause := context.Cause(ctx); (errors.Is(cause, errIdle) || errors.Is(cause, errDrain)) && x.up.err == nil {
			x.up.err = cause
		}
		cancel(nil)
	}()
	ctx = context.WithValue(ctx, cancelCtx{}, cancel)
	g.next.ServeHTTP(x, r.WithContext(ctx))
}

// errDrain is the cause of an upstream request ended because its caller
// hung up longer than Options.DrainTimeout ago.
var errDrain = errors.New("gateway: the caller hung up, and the upstream did not end within the drain timeout")

// cancelCtx is the context key of the function that cancels the upstream
// request (when its body is idle too long).
type cancelCtx struct{}

// acceptable reports whether the body of r is one the gateway reads as
// the upstream would, and answers the request when it is not: a body
// endpoint's body is JSON, unencoded (415 for any Content-Encoding or
// Content-Type other than identity and application/json: a gzip body
// would be forwarded unread); the other endpoints' requests have none.
func (g *Gateway) acceptable(x *exchange, r *http.Request) bool {
	if !x.ep.body() {
		if hasBody(r) {
			writeError(x, http.StatusBadRequest, typeInvalid, "unexpected_body", "a "+r.Method+" request to this endpoint has no body")
			return false
		}
		return true
	}
	if ce := r.Header.Values("Content-Encoding"); len(ce) > 1 || (len(ce) == 1 && !strings.EqualFold(ce[0], "identity")) {
		writeError(x, http.StatusUnsupportedMediaType, typeInvalid, "unsupported_encoding", "this gateway reads request bodies unencoded: send it without Content-Encoding")
		return false
	}
	if ct := r.Header.Values("Content-Type"); len(ct) > 0 {
		mt, _, err := mime.ParseMediaType(ct[0])
		if len(ct) > 1 || err != nil || mt != "application/json" {
			writeError(x, http.StatusUnsupportedMediaType, typeInvalid, "unsupported_media_type", "this endpoint takes a JSON body: send it as Content-Type: application/json")
			return false
		}
	}
	return true
}

// readBody reads the body of r whole, up to g.maxBody, within
// g.bodyTimeout. It answers 413 (too large), 408 (too slow) or 400 (cut
// off) and returns false when it cannot.
func (g *Gateway) readBody(x *exchange, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	tooLarge := func() {
		writeError(x, http.StatusRequestEntityTooLarge, typeInvalid, "request_too_large",
			fmt.Sprintf("the request body is larger than this gateway accepts (%d bytes)", g.maxBody))
	}
	if r.ContentLength > g.maxBody {
		tooLarge()
		return nil, false
	}
	defer g.bodyDeadline(x.ResponseWriter)()
	body, err := readAtMost(r.Body, r.ContentLength, g.maxBody)
	r.Body.Close()
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded): // the connection closes: see serve
		writeError(x, http.StatusRequestTimeout, typeInvalid, "request_timeout",
			fmt.Sprintf("the request body did not arrive within %v", g.bodyTimeout))
		return nil, false
	case err != nil:
		writeError(x, http.StatusBadRequest, typeInvalid, "unreadable_body", "the request body could not be read")
		return nil, false
	case int64(len(body)) > g.maxBody:
		tooLarge()
		return nil, false
	}
	r.ContentLength, r.TransferEncoding, r.Body = 0, nil, http.NoBody
	return body, true
}

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

// readFields parses the body of a request to x's endpoint, and answers
// 400 when it cannot be read exactly as the upstream would read it, or
// asks for what the gateway cannot meter.
func (g *Gateway) readFields(x *exchange, body []byte) (bodyFields, bool) {
	f, err := parseBody(body, x.ep.dialect)
	switch {
	case err != nil:
		writeError(x, http.StatusBadRequest, typeInvalid, "invalid_body", err.Error())
		return f, false
	case f.background:
		writeError(x, http.StatusBadRequest, typeInvalid, "unsupported_parameter",
			"this gateway does not serve background responses: it could not meter their usage")
		return f, false
	case x.ep.model && !x.ep.modelInPath && !f.hasModel:
		writeError(x, http.StatusBadRequest, typeInvalid, "missing_model", "the request body names no model: this gateway requires the model field")
		return f, false
	}
	return f, true
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

// finish finishes the admission of x: see Usage in the package
// documentation.
func (g *Gateway) finish(ctx context.Context, x *exchange) {
	tokens := g.tokens(x)
	if x.charge.capped {
		g.log.LogAttrs(ctx, slog.LevelError, "gateway: the upstream reported more usage than one request may be charged: charging the bound",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.String("model", x.model),
			slog.Int64("reported", x.charge.reported), slog.Int64("tokens", tokens), slog.Int64("max_tokens_per_request", g.maxCharge))
	}
	if x.up.used.tooLarge {
		g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: a usage object too large to read was skipped",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.Int("max_usage_bytes", maxUsageBytes))
	}
	if x.charge.estimated {
		g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: no usage read: charging the estimate",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.String("model", x.model),
			slog.Int64("tokens", tokens), slog.Bool("estimated", true), slog.Int("upstream_status", x.up.status))
	}
	var err error
	cost := g.cost(x, tokens)
	if x.adm != nil {
		var u keystore.Usage
		note := g.note(x, tokens, cost)
		if note != nil {
			u, err = x.adm.FinishWith(ctx, tokens, cost, note)
			note.Done(err)
		} else {
			u, err = x.adm.FinishSpend(ctx, tokens, cost)
		}
		if err == nil || errors.Is(err, ratestore.ErrUncertain) {
			g.observe(ctx, x, u)
		}
		for i, b := range u.Budgets {
			if i == 0 || b.Remaining < x.charge.budgetLeft {
				x.charge.budgetLeft, x.charge.hasBudget = b.Remaining, true
			}
		}
	} else if tokens > 0 { // shadowed: served without an admission
		_, err = g.keys.RecordUsage(ctx, x.keyID, tokens)
		if note := g.note(x, tokens, cost); note != nil && err == nil {
			g.ledgerFailed(ctx, x, g.ledger.Add(ctx, note.Entry()))
		}
	}
	if errors.Is(err, ratestore.ErrUncertain) {
		// Charged in memory, which every later request sees; the next
		// commit writes it. Not an error an operator reconciles from.
		g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: usage charged, not yet known to be on disk (the next commit retries)",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.Int64("tokens", tokens), slog.String("error", err.Error()))
		err = nil
	}
	if err != nil {
		level := slog.LevelError
		if errors.Is(err, keystore.ErrNotFound) {
			level = slog.LevelWarn // the key was deleted meanwhile
		}
		g.log.LogAttrs(ctx, level, "gateway: charging usage failed",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.Int64("tokens", tokens), slog.String("error", err.Error()))
		return
	}
	x.charge.tokens, x.charge.cost = tokens, cost
	g.logSpend(ctx, x)
}

// tokens returns the tokens to charge x with, at most
// Options.MaxTokensPerRequest, and notes in x whether they are an
// estimate or capped.
func (g *Gateway) tokens(x *exchange) int64 {
	n := g.charge(x)
	if n > g.maxCharge {
		x.charge.capped, n = true, g.maxCharge
	}
	return n
}

// charge returns the tokens x is to be charged, uncapped: see Usage in
// the package documentation.
func (g *Gateway) charge(x *exchange) int64 {
	x.charge.counts, x.charge.reported = x.up.used.counts, g.weights.charge(x.up.used.counts)
	switch {
	case !x.up.forwarded || x.ep == nil || x.ep.retrieve:
		return 0
	case x.up.used.found && x.up.complete:
		return x.charge.reported
	case !x.ep.generates || (x.up.status >= 400 && x.up.status < 500):
		// Nothing generated (nothing reserved), or a model call the
		// upstream refused: what usage was read, if any.
		if x.up.used.found {
			return x.charge.reported
		}
		return 0
	}
	// The upstream failed, broke off or reported no usage, or the
	// caller went away: the reservation, or more if more was reported.
	x.charge.estimated = true
	return max(x.charge.reported, x.reserve)
}

// refuse answers a request whose key Authenticate or Admit refused, or
// whose key store failed.
func (g *Gateway) refuse(x *exchange, r *http.Request, k keystore.Key, err error) {
	var d *keystore.Denial
	if !errors.As(err, &d) {
		switch {
		case errors.Is(err, keystore.ErrNotFound):
			d = &keystore.Denial{Reason: "unknown", RetryAfter: -1}
		case errors.Is(err, keystore.ErrDisabled):
			d = &keystore.Denial{Reason: "disabled", RetryAfter: -1}
		case errors.Is(err, keystore.ErrExpired):
			d = &keystore.Denial{Reason: "expired", RetryAfter: -1}
		}
	}
	if d == nil {
		level := slog.LevelError
		if r.Context().Err() != nil {
			level = slog.LevelDebug // the caller went away
		}
		g.log.LogAttrs(r.Context(), level, "gateway: key store failed",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.String("error", err.Error()))
		writeError(x, http.StatusServiceUnavailable, typeAPI, "store_unavailable", "the gateway's key store failed; retry later")
		return
	}
	g.deny(r.Context(), x, k, d, x.reserve)
}

// stats answers the stats path for the key of secret.
func (g *Gateway) stats(x *exchange, r *http.Request, secret string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		x.Header().Set("Allow", "GET, HEAD")
		writeError(x, http.StatusMethodNotAllowed, typeInvalid, "method_not_allowed", "the stats path answers GET only")
		return
	}
	k, err := g.keys.Authenticate(r.Context(), secret)
	x.keyID = k.ID
	if err != nil {
		g.refuse(x, r, k, err)
		return
	}
	u, err := g.keys.Usage(r.Context(), k.ID)
	if err != nil {
		g.refuse(x, r, k, err)
		return
	}
	a := admin.NewKey(k, u) // the one shape of a key
	a.ReservedTokens = g.keys.Reserved(k.ID)
	writeJSON(x, http.StatusOK, a)
}

// rewrite makes the upstream request: see Headers in the package
// documentation.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	// Every exchange has its route and endpoint (serve answers a path
	// without them itself); a request without one goes to the empty URL,
	// which the transport fails: 502.
	rt, ep := &route{upstream: &url.URL{}}, &endpoint{}
	if x := exchangeOf(pr.In.Context()); x != nil {
		x.up.forwarded, x.up.sent = true, time.Now()
		rt, ep = x.route, x.ep
	}
	pr.Out = pr.Out.WithContext(g.active.abortable(pr.Out.Context()))
	pr.SetURL(rt.upstream)
	pr.Out.URL.RawQuery = forwardQuery(pr.In.URL.RawQuery, ep.query)
	pr.Out.Header = forwardHeader(pr.In.Header, ep.dialect)
	if ep.body() {
		pr.Out.Header.Set("Content-Type", "application/json")
	}
	if rt.keyField != "" {
		pr.Out.Header.Set(rt.keyField, rt.keyValue)
	}
}

// modifyResponse notes the upstream's status, bounds the wait for each
// read of the body (Options.IdleTimeout), and wraps the body of a
// successful response in a meter that reads its usage.
func (g *Gateway) modifyResponse(res *http.Response) error {
	ctx := res.Request.Context()
	x := exchangeOf(ctx)
	if x == nil {
		return nil
	}
	x.up.status, x.up.latency = res.StatusCode, time.Since(x.up.sent)
	filterResponse(res.Header)
	if x.adm != nil {
		limitHeaders(res.Header, x.adm.Limits())
	}
	x.Header().Set(RequestIDHeader, x.id) // again: ReverseProxy clears the fields after a 1xx
	res.Trailer = nil
	res.Body = &noTrailer{ReadCloser: res.Body, res: res}
	if cancel, ok := ctx.Value(cancelCtx{}).(context.CancelCauseFunc); ok && g.idle > 0 {
		res.Body = newIdleBody(res.Body, g.idle, cancel)
	}
	k := bodyKind(res.Header)
	if k == kindNone {
		return nil
	}
	var m *meter
	m = newMeter(res.Body, k, x.ep.generates, func(u usage) {
		x.up.metered, x.up.used, x.up.complete = true, u, m.eof
	})
	res.Body = m
	if x.stripUsage && k == kindSSE {
		res.Body = newStripUsage(m, maxStripEvent)
		withoutLength(res)
	}
	return nil
}

// noTrailer is a response body whose response has no trailer once it is
// closed: the transport fills res.Trailer at the body's end, and
// ReverseProxy passes on what it holds after closing the body.
type noTrailer struct {
	io.ReadCloser
	res *http.Response
}

func (b *noTrailer) Close() error {
	err := b.ReadCloser.Close()
	b.res.Trailer = nil
	return err
}

// errIdle is the cause of an upstream request cancelled because its body
// was idle for longer than Options.IdleTimeout.
var errIdle = errors.New("gateway: upstream idle timeout: no data within the idle timeout")

// idleBody is a response body whose reads each end the request (cancel)
// when they wait longer than idle. The time between reads (spent writing
// to the caller) does not count.
type idleBody struct {
	io.ReadCloser
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

func newIdleBody(body io.ReadCloser, idle time.Duration, cancel context.CancelCauseFunc) *idleBody {
	b := &idleBody{ReadCloser: body, idle: idle, cancel: cancel}
	b.timer = time.AfterFunc(idle, func() { cancel(errIdle) })
	b.timer.Stop()
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.idle)
	n, err := b.ReadCloser.Read(p)
	b.timer.Stop()
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}

// proxyError answers a request that got no response from the upstream:
// 504 when it timed out, else 502.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if cause := context.Cause(r.Context()); cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	if x := exchangeOf(r.Context()); x != nil {
		x.up.err = err
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			x.up.forwarded = false // never reached the upstream: nothing generated
		}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errIdle) || (errors.As(err, &ne) && ne.Timeout()) {
		writeError(w, http.StatusGatewayTimeout, typeAPI, "upstream_timeout", "the upstream API did not answer in time")
		return
	}
	writeError(w, http.StatusBadGateway, typeAPI, "upstream_unavailable", "the upstream API could not be reached or failed")
}

// logExchange logs request r at its end.
func (g *Gateway) logExchange(r *http.Request, x *exchange, start time.Time, aborted bool) {
	ctx := r.Context()
	if !g.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 13)
	attrs = append(attrs,
		slog.String("request_id", x.id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.String("key_id", x.keyID), slog.String("model", x.model), slog.Int("status", x.status),
		slog.Int64("tokens", x.charge.tokens), slog.Int64("reserved", x.reserve),
		slog.Duration("latency", time.Since(start)))
	if x.charge.estimated {
		attrs = append(attrs, slog.Bool("estimated", true))
	}
	if x.shadowed != nil {
		attrs = append(attrs, slog.String("shadow", x.shadowed.Reason))
	}
	if aborted {
		attrs = append(attrs, slog.Bool("aborted", true))
	}
	if x.up.err != nil {
		attrs = append(attrs, slog.String("upstream_error", x.up.err.Error()))
	}
	g.log.LogAttrs(ctx, slog.LevelInfo, "gateway request", attrs...)
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

// bufferPool is the ReverseProxy's pool of copy buffers. Without one it
// allocates 32 KiB per response, most of what a request allocates, and the
// garbage collector's work shows in the proxy's tail latency.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
