package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// Defaults of Options.
const (
	DefaultStatsPath     = "/stats"
	DefaultMaxJSONBody   = 8 << 20
	DefaultMaxEventBytes = 1 << 20
)

// RequestLimiter is the name of the limiter of Options.RPS.
const RequestLimiter = "gateway.requests"

// RequestIDHeader is the response field that carries the request's ID, as
// logged.
const RequestIDHeader = "Ratestore-Request-Id"

// Options configures a Gateway.
type Options struct {
	// Upstream is the API that requests are forwarded to: scheme, host and
	// an optional path prefix that the request's path is appended to.
	// Required.
	Upstream *url.URL
	// UpstreamKey, when set, is the credential sent to the upstream with
	// every request. The caller's own key fields are never forwarded.
	UpstreamKey string
	// UpstreamKeyHeader names the field UpstreamKey goes in. "" means
	// Authorization, as "Bearer <key>"; any other field (x-api-key) gets
	// the key as it is.
	UpstreamKeyHeader string

	// RPS, when > 0, limits every key to RPS requests per second, in
	// bursts of Burst (strategies.GCRA, keyed by key ID); Burst 0 means
	// max(1, ceil(RPS)).
	RPS   float64
	Burst int64

	// StatsPath is the path the gateway answers with the caller's own
	// usage rather than forwarding; "" means DefaultStatsPath.
	StatsPath string
	// MaxJSONBody bounds the JSON response body kept to read its usage;
	// 0 means DefaultMaxJSONBody. A larger body records nothing.
	MaxJSONBody int64
	// MaxEventBytes bounds a line and an event of an event stream; 0
	// means DefaultMaxEventBytes. A larger event is skipped.
	MaxEventBytes int

	// Transport forwards the requests; nil means a clone of
	// http.DefaultTransport that keeps more idle connections per host.
	Transport http.RoundTripper
	// Logger receives a line per request and the failures; nil discards
	// them.
	Logger *slog.Logger
}

// Gateway is the metering reverse proxy, an http.Handler. It is safe for
// concurrent use.
type Gateway struct {
	keys      *keystore.Store
	proxy     *httputil.ReverseProxy
	next      http.Handler // proxy, behind the request-rate middleware if any
	upstream  *url.URL
	keyField  string
	keyValue  string
	statsPath string
	maxJSON   int64
	maxEvent  int
	log       *slog.Logger

	idPrefix string
	seq      atomic.Uint64
}

// New returns a Gateway in front of opts.Upstream that meters the keys of
// db's key store: keystore.Open(db, keystore.Options{}), the one Store of
// db that every other user of it shares (an admin creating keys in the same
// process sees the same keys and usage). It takes db rather than the Store
// because the request rate of Options.RPS is a limiter of db too. Its
// errors about opts match ratestore.ErrInvalid; so does that of a key store
// opened already with other options. db must stay open while the Gateway
// serves; closing it after the server has shut down flushes the last usage.
func New(db *ratestore.DB, opts Options) (*Gateway, error) {
	if db == nil {
		return nil, fmt.Errorf("gateway: nil database: %w", ratestore.ErrInvalid)
	}
	keys, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	u := opts.Upstream
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gateway: upstream %s: want an http or https URL with a host: %w", redacted(u), ratestore.ErrInvalid)
	}
	g := &Gateway{
		keys:      keys,
		upstream:  u,
		statsPath: opts.StatsPath,
		maxJSON:   opts.MaxJSONBody,
		maxEvent:  opts.MaxEventBytes,
		log:       opts.Logger,
	}
	if g.statsPath == "" {
		g.statsPath = DefaultStatsPath
	}
	if !strings.HasPrefix(g.statsPath, "/") {
		return nil, fmt.Errorf("gateway: stats path %q: want an absolute path: %w", g.statsPath, ratestore.ErrInvalid)
	}
	if g.maxJSON == 0 {
		g.maxJSON = DefaultMaxJSONBody
	}
	if g.maxEvent == 0 {
		g.maxEvent = DefaultMaxEventBytes
	}
	if g.maxJSON < 0 || g.maxEvent < 0 {
		return nil, fmt.Errorf("gateway: negative MaxJSONBody or MaxEventBytes: %w", ratestore.ErrInvalid)
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if opts.UpstreamKey != "" {
		g.keyField, g.keyValue = http.CanonicalHeaderKey(opts.UpstreamKeyHeader), opts.UpstreamKey
		if g.keyField == "" || g.keyField == "Authorization" {
			g.keyField, g.keyValue = "Authorization", "Bearer "+opts.UpstreamKey
		}
	}
	transport := opts.Transport
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		transport = t
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.proxyError,
		Transport:      transport,
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	g.next = g.proxy
	if opts.RPS != 0 || opts.Burst != 0 {
		mw, err := requestRate(db, opts.RPS, opts.Burst, g.log)
		if err != nil {
			return nil, err
		}
		g.next = mw.Wrap(g.proxy)
	}
	var b [4]byte
	rand.Read(b[:])
	g.idPrefix = hex.EncodeToString(b[:]) + "-"
	return g, nil
}

// requestRate returns the middleware of Options.RPS.
func requestRate(db *ratestore.DB, rps float64, burst int64, log *slog.Logger) (*httplimit.Middleware, error) {
	if !(rps > 0) || math.IsInf(rps, 0) || burst < 0 {
		return nil, fmt.Errorf("gateway: request rate %v, burst %d: want a rate > 0 and a burst >= 0: %w", rps, burst, ratestore.ErrInvalid)
	}
	if burst == 0 {
		burst = max(1, int64(math.Ceil(rps)))
	}
	lim, err := db.Limiter(RequestLimiter, strategies.GCRA{Rate: rps, Burst: burst})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return httplimit.New(httplimit.Options{
		Rules:  []httplimit.Rule{{Limiter: lim, Key: exchangeKeyID, Policy: "requests"}},
		Logger: log,
	})
}

// exchange is one request going through the gateway: the ResponseWriter
// it is answered through, which notes the status, and what the log says.
type exchange struct {
	http.ResponseWriter
	status int
	id     string
	keyID  string
	err    error // of the upstream

	// What the response's meter found, once its body ended, to record
	// when the request is done.
	metered          bool
	found, tooLarge  bool
	reported, tokens int64 // tokens reported; recorded
}

func (x *exchange) WriteHeader(code int) {
	if code >= 200 && x.status == 0 { // not 1xx, which the transport's goroutine may write
		x.status = code
	}
	x.ResponseWriter.WriteHeader(code)
}

func (x *exchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (which ReverseProxy flushes
// streams with) reach the server's writer.
func (x *exchange) Unwrap() http.ResponseWriter { return x.ResponseWriter }

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
	start := time.Now()
	x := &exchange{ResponseWriter: w, id: g.idPrefix + strconv.FormatUint(g.seq.Add(1), 36)}
	w.Header().Set(RequestIDHeader, x.id)
	completed := false
	defer func() {
		// Also when aborted: ReverseProxy panics with http.ErrAbortHandler
		// when a response cannot be copied to its end.
		if x.metered {
			g.record(context.WithoutCancel(r.Context()), x)
		}
		g.logExchange(r, x, start, !completed)
	}()
	g.serve(x, r)
	completed = true
	if x.metered {
		// The caller gets all of the response before the usage is
		// recorded, which in Sync mode waits for the disk.
		http.NewResponseController(w).Flush()
	}
}

func (g *Gateway) serve(x *exchange, r *http.Request) {
	secret := httplimit.APISecret(r)
	if secret == "" {
		writeError(x, http.StatusUnauthorized, "missing_api_key", "send the API key as Authorization: Bearer <key> or X-API-Key")
		return
	}
	if r.URL.Path == g.statsPath {
		g.stats(x, r, secret)
		return
	}
	k, res, err := g.keys.Check(r.Context(), secret)
	x.keyID = k.ID
	if err != nil {
		g.refuse(x, r, err)
		return
	}
	if !res.Allowed {
		g.tokenLimit(x, r, k, res)
		return
	}
	g.next.ServeHTTP(x, r.WithContext(context.WithValue(r.Context(), exchangeCtx{}, x)))
}

// refuse answers a request whose key Check or Authenticate refused.
func (g *Gateway) refuse(x *exchange, r *http.Request, err error) {
	switch {
	case errors.Is(err, keystore.ErrNotFound):
		writeError(x, http.StatusUnauthorized, "invalid_api_key", "the API key is not known")
	case errors.Is(err, keystore.ErrDisabled):
		writeError(x, http.StatusForbidden, "key_disabled", "the API key is disabled")
	case errors.Is(err, keystore.ErrExpired):
		writeError(x, http.StatusForbidden, "key_expired", "the API key has expired")
	default:
		level := slog.LevelError
		if r.Context().Err() != nil {
			level = slog.LevelDebug // the caller went away
		}
		g.log.LogAttrs(r.Context(), level, "gateway: key store failed",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.String("error", err.Error()))
		writeError(x, http.StatusServiceUnavailable, "store_unavailable", "the key store failed; retry later")
	}
}

// tokenLimitBody is the body of a 429 for a key past a token window.
type tokenLimitBody struct {
	Error             string  `json:"error"`
	Window            string  `json:"window"` // the window past its limit: its length, as a Go duration
	TokensUsed        int64   `json:"tokens_used"`
	TokenLimit        int64   `json:"token_limit"`
	WindowEnd         *string `json:"window_end"`
	RetryAfterSeconds int64   `json:"retry_after_seconds"`
}

// tokenLimit answers a request of key k, which Check found past a token
// window. The body describes the window that refused it (see exceeded);
// Retry-After is Check's, until every window allows again.
func (g *Gateway) tokenLimit(x *exchange, r *http.Request, k keystore.Key, res strategies.Result) {
	body := tokenLimitBody{Error: "token_limit_exceeded", TokenLimit: res.Limit, TokensUsed: res.Limit - res.Remaining}
	if u, err := g.keys.Usage(r.Context(), k.ID); err == nil {
		w := exceeded(u)
		body.Window, body.TokensUsed, body.TokenLimit, body.WindowEnd = w.Window.String(), w.Used, w.Limit, instant(w.WindowEnd)
	} else {
		g.log.LogAttrs(r.Context(), slog.LevelWarn, "gateway: usage of a key past its limit",
			slog.String("request_id", x.id), slog.String("key_id", k.ID), slog.String("error", err.Error()))
	}
	wait := res.RetryAfter
	if wait < 0 {
		wait = res.ResetAfter
	}
	body.RetryAfterSeconds = max(1, ceilSeconds(wait))
	x.Header().Set("Retry-After", strconv.FormatInt(body.RetryAfterSeconds, 10))
	writeJSON(x, http.StatusTooManyRequests, body)
}

// exceeded returns the window of u that refuses the key: of those past
// their limit, the one whose usage takes longest to expire. When none is
// (the usage expired between the check and now) it is the binding one.
func exceeded(u keystore.Usage) keystore.WindowUsage {
	found := false
	var w keystore.WindowUsage
	for _, wu := range u.Windows {
		if wu.Used > wu.Limit && (!found || wu.ResetAfter > w.ResetAfter) {
			w, found = wu, true
		}
	}
	if !found {
		return binding(u)
	}
	return w
}

// binding returns the window of u whose figures u has at its top level:
// the first with the least Remaining, as keystore.Store.Usage picks it.
func binding(u keystore.Usage) keystore.WindowUsage {
	if len(u.Windows) == 0 {
		return keystore.WindowUsage{Used: u.Used, Limit: u.Limit, Remaining: u.Remaining, ResetAfter: u.ResetAfter, WindowEnd: u.WindowEnd}
	}
	b := u.Windows[0]
	for _, w := range u.Windows[1:] {
		if w.Remaining < b.Remaining {
			b = w
		}
	}
	return b
}

// Stats is the body of the stats path: the caller's key and its usage. The
// top-level figures are those of the binding window (the one with the
// least remaining), Windows those of every token window of the key.
type Stats struct {
	KeyID             string        `json:"key_id"`
	Name              string        `json:"name"`
	Window            string        `json:"window"` // the binding window's length, as a Go duration ("5h0m0s")
	Used              int64         `json:"used"`
	Limit             int64         `json:"limit"`
	Remaining         int64         `json:"remaining"`
	WindowEnd         *string       `json:"window_end"` // RFC 3339; null when nothing is in use
	ResetAfterSeconds int64         `json:"reset_after_seconds"`
	Windows           []WindowStats `json:"windows"`
	LifetimeTokens    int64         `json:"lifetime_tokens"`
}

// WindowStats is one token window of Stats.
type WindowStats struct {
	Window            string  `json:"window"` // its length, as a Go duration
	Used              int64   `json:"used"`
	Limit             int64   `json:"limit"`
	Remaining         int64   `json:"remaining"`
	WindowEnd         *string `json:"window_end"`
	ResetAfterSeconds int64   `json:"reset_after_seconds"`
}

func windowStats(w keystore.WindowUsage) WindowStats {
	return WindowStats{
		Window: w.Window.String(), Used: w.Used, Limit: w.Limit, Remaining: w.Remaining,
		WindowEnd: instant(w.WindowEnd), ResetAfterSeconds: ceilSeconds(w.ResetAfter),
	}
}

// stats answers the stats path for the key of secret.
func (g *Gateway) stats(x *exchange, r *http.Request, secret string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		x.Header().Set("Allow", "GET, HEAD")
		writeError(x, http.StatusMethodNotAllowed, "method_not_allowed", "the stats path answers GET")
		return
	}
	k, err := g.keys.Authenticate(r.Context(), secret)
	x.keyID = k.ID
	if err != nil {
		g.refuse(x, r, err)
		return
	}
	u, err := g.keys.Usage(r.Context(), k.ID)
	if err != nil {
		g.refuse(x, r, err)
		return
	}
	b := windowStats(binding(u))
	st := Stats{
		KeyID: k.ID, Name: k.Name, Window: b.Window,
		Used: b.Used, Limit: b.Limit, Remaining: b.Remaining,
		WindowEnd: b.WindowEnd, ResetAfterSeconds: b.ResetAfterSeconds,
		Windows:        make([]WindowStats, len(u.Windows)),
		LifetimeTokens: k.LifetimeTokens,
	}
	for i, w := range u.Windows {
		st.Windows[i] = windowStats(w)
	}
	writeJSON(x, http.StatusOK, st)
}

// rewrite makes the upstream request: see Headers in the package
// documentation.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(g.upstream)
	pr.SetXForwarded()
	if pr.Out.Body != nil && pr.Out.ContentLength > 0 {
		pr.Out.Body = &sizedBody{pr.Out.Body, pr.Out.ContentLength}
	}
	h := pr.Out.Header
	h.Del("Authorization")
	h.Del("X-Api-Key")
	h.Del("Accept-Encoding")
	if g.keyField != "" {
		h.Set(g.keyField, g.keyValue)
	}
}

// sizedBody is a request body of a known length that ends there, without
// reading the underlying body to its end. The transport reads a body past
// its Content-Length to check that it ends; that read of the server's
// request body would race with the server, which drains and closes the
// body as soon as the proxy writes the response header: if the server
// wins, the transport fails the request body, drops the upstream
// connection and cuts off the response.
type sizedBody struct {
	io.ReadCloser
	n int64 // left
}

func (b *sizedBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.ReadCloser.Read(p)
	b.n -= int64(n)
	if err == io.EOF && b.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// modifyResponse wraps the body of a successful upstream response in a
// meter that records its usage.
func (g *Gateway) modifyResponse(res *http.Response) error {
	ctx := res.Request.Context()
	x := exchangeOf(ctx)
	if x == nil || res.StatusCode < 200 || res.StatusCode >= 400 {
		return nil
	}
	k := bodyKind(res.Header)
	if k == kindNone {
		return nil
	}
	res.Body = newMeter(res.Body, k, g.maxJSON, g.maxEvent, func(tokens int64, found, tooLarge bool) {
		x.metered, x.reported, x.found, x.tooLarge = true, tokens, found, tooLarge
	})
	return nil
}

// record records the usage that the response of x reported.
func (g *Gateway) record(ctx context.Context, x *exchange) {
	tokens := x.reported
	if x.tooLarge {
		g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: JSON body too large to read its usage: nothing recorded",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.Int64("max_json_body", g.maxJSON))
	}
	if !x.found || tokens <= 0 {
		return
	}
	if _, err := g.keys.RecordUsage(ctx, x.keyID, tokens); err != nil {
		g.log.LogAttrs(ctx, slog.LevelError, "gateway: recording usage failed",
			slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.Int64("tokens", tokens), slog.String("error", err.Error()))
		return
	}
	x.tokens = tokens
}

// proxyError answers a request that got no response from the upstream.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if x := exchangeOf(r.Context()); x != nil {
		x.err = err
	}
	writeError(w, http.StatusBadGateway, "upstream_unavailable", "the upstream did not answer")
}

// logExchange logs request r at its end.
func (g *Gateway) logExchange(r *http.Request, x *exchange, start time.Time, aborted bool) {
	ctx := r.Context()
	if !g.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs,
		slog.String("request_id", x.id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.String("key_id", x.keyID), slog.Int("status", x.status), slog.Int64("tokens", x.tokens),
		slog.Duration("latency", time.Since(start)))
	if aborted {
		attrs = append(attrs, slog.Bool("aborted", true))
	}
	if x.err != nil {
		attrs = append(attrs, slog.String("upstream_error", x.err.Error()))
	}
	g.log.LogAttrs(ctx, slog.LevelInfo, "gateway request", attrs...)
}

// errorBody is the body of the gateway's own errors.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	writeJSON(w, status, errorBody{code, msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the bodies are strings and numbers
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// instant formats t as RFC 3339 in UTC, rounded up to the second; nil for
// the zero instant.
func instant(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// redacted is u for messages, without a password.
func redacted(u *url.URL) string {
	if u == nil {
		return "(none)"
	}
	return strconv.Quote(u.Redacted())
}
