package gateway

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/internal/httpstatus"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/internal/text"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// A request goes through the gateway as a pipeline, read top-down in
// serve: authenticate the key, find the endpoint and its route, take a
// slot of the key, read and parse the body, admit the request in the key
// store, check the request rate, forward it and stream the answer back
// (upstream.go). Each step either fills in what it learnt or returns a
// *refusal, which ServeHTTP writes (writeRefusal) and which ends the
// request. Whatever happened, ServeHTTP then charges what the request
// used (charge.go), and counts and logs it.
//
// What a request is made of is kept in separate values, each written by
// the steps that learn it: its request (what the caller asked, as the
// gateway read it), its admission (what the key store granted), its
// upstreamResult (what the upstream answered) and what it was charged.

// request is what the gateway read of a request, up to its admission:
// who asks, for what, and what it may cost.
type request struct {
	id    string
	start time.Time // when it arrived
	keyID string
	team  string   // the key's team, once authenticated
	allow []string // the key's Policy.Models, for the metrics' model label

	ep     *endpoint
	path   string     // its path's pattern (routePath), for the ledger
	ups    *upstreams // the upstreams in force when it came
	apis   []string   // those that may serve its endpoint
	route  *route     // the route of its path; nil: none
	member *member    // the upstream it goes to, once admitted
	// upstream is the name of the upstream it was last sent to; "": none
	upstream string
	model    string
	endUser  string // the end user it names (EndUserHeader, or the body's); "": none
	// stripUsage: the gateway asked the upstream for the stream's usage,
	// which the caller did not (askUsage), and takes it out of the stream.
	stripUsage bool
	modelAt    [2]int // where the body's model is, for Azure (bodyFields)

	// Its prompt, estimated, and the most output it may produce (read),
	// and its price (Gateway.priceFor; priced false: $0).
	promptEst, outputMax int64
	price                pricing.Price
	priced               bool
}

// admission is what the key store granted a request.
type admission struct {
	adm      *keystore.Admission
	shadowed *keystore.Denial // Options.Shadow: the refusal it would have had; served and charged without an admission
	reserve  int64            // the tokens it asked to hold; once admitted, those it holds
	short    bool             // admitted with less than its optional reservation
}

// refusal is an answer the gateway gives itself, in place of the
// upstream's: the error body of package apierror, with its fields.
type refusal struct {
	status         int
	typ, code, msg string
	// reason is why a key's request was refused, for the metrics and the
	// ledger: a keystore.Denial's Reason, "rps" or "unpriced"; "" when it
	// was not refused on a key's account.
	reason string
	// retry: Retry-After and X-Should-Retry tell the wait (retryFields);
	// noRetry: X-Should-Retry: false whatever the wait.
	retry, noRetry bool
	wait           time.Duration
	allow          string // the Allow field of a 405
}

// writeRefusal writes rf: every answer the gateway gives itself goes
// through it.
func writeRefusal(w http.ResponseWriter, rf *refusal) {
	h := w.Header()
	if rf.allow != "" {
		h.Set("Allow", rf.allow)
	}
	if rf.retry {
		h.Del("Retry-After") // the request rate's, which retryFields replaces
		retryFields(h, rf.wait)
	}
	if rf.noRetry {
		h.Set("X-Should-Retry", "false")
	}
	apierror.Write(w, rf.status, rf.typ, rf.code, rf.msg)
}

// invalid is a 400 invalid_request_error, or of another status, with code
// and msg.
func invalid(status int, code, msg string) *refusal {
	return &refusal{status: status, typ: typeInvalid, code: code, msg: msg}
}

// newRequestID returns a request's id: "req_" and 16 hex digits (64
// random bits), which the ledger stores in 8 bytes.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// ServeHTTP serves one request: see the package documentation.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.active.begin()
	defer g.active.end()
	if operatorPath(r.URL.Path) {
		// The operator's paths are the console's to serve (it hands the
		// Gateway every other one): never forwarded, whoever mounts it.
		writeRefusal(w, invalid(http.StatusNotFound, "not_found", "no such path"))
		return
	}
	sw := &httpstatus.Writer{ResponseWriter: w}
	rq := &request{id: newRequestID(), start: time.Now()}
	w.Header().Set(RequestIDHeader, rq.id)
	var (
		ad        admission
		up        upstreamResult
		ch        charged
		reason    string
		completed bool
	)
	defer func() {
		// Also when aborted (a response that could not be copied to its
		// end panics with http.ErrAbortHandler), and the caller may have
		// gone away: the admission is finished on a context of its own.
		if ad.adm != nil || ad.shadowed != nil {
			ch = g.finish(context.WithoutCancel(r.Context()), rq, &ad, &up, sw.Status)
			g.lines.finished() // its upstream may have room now
		}
		if ad.short {
			g.short.end(rq.keyID) // once charged: see Gateway.admit
		}
		g.metrics.end(rq, &ad, &up, &ch, sw.Status, reason)
		g.live.end(g.now(), ch.tokens)
		g.logRequest(r, rq, &ad, &up, &ch, sw.Status, !completed)
	}()
	g.metrics.begin()
	g.live.begin()
	if rf := g.serve(sw, r, rq, &ad, &up); rf != nil {
		reason = rf.reason
		writeRefusal(sw, rf)
	}
	completed = true
	if ad.adm != nil {
		// The caller gets all of the response before the usage is
		// recorded, which in Sync mode waits for the disk.
		http.NewResponseController(w).Flush()
	}
}

// logRequest logs request r at its end, answered with status.
func (g *Gateway) logRequest(r *http.Request, rq *request, ad *admission, up *upstreamResult, ch *charged, status int, aborted bool) {
	ctx := r.Context()
	if !g.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 14)
	attrs = append(attrs,
		slog.String("request_id", rq.id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.String("key_id", rq.keyID), slog.String("model", rq.model), slog.Int("status", status),
		slog.Int64("tokens", ch.tokens), slog.Int64("reserved", ad.reserve),
		slog.Duration("latency", time.Since(rq.start)))
	if rq.upstream != "" {
		attrs = append(attrs, slog.String("upstream", rq.upstream))
	}
	if rq.endUser != "" {
		attrs = append(attrs, slog.String("end_user", rq.endUser))
	}
	if ch.estimated {
		attrs = append(attrs, slog.Bool("estimated", true))
	}
	if ad.shadowed != nil {
		attrs = append(attrs, slog.String("shadow", ad.shadowed.Reason))
	}
	if aborted {
		attrs = append(attrs, slog.Bool("aborted", true))
	}
	if up.err != nil {
		attrs = append(attrs, slog.String("upstream_error", up.err.Error()))
	}
	g.log.LogAttrs(ctx, slog.LevelInfo, "gateway request", attrs...)
}

// serve takes r through the pipeline's steps, and returns the refusal of
// the first that refuses it; nil once it has been forwarded and answered.
func (g *Gateway) serve(w *httpstatus.Writer, r *http.Request, rq *request, ad *admission, up *upstreamResult) *refusal {
	if hasBody(r) {
		// Until the body is read, an answer closes the connection: the
		// server would otherwise read the rest of the body, however slowly
		// it comes, before answering.
		w.Header().Set("Connection", "close")
	}
	secret := requestSecret(r)
	if secret == "" {
		return &refusal{status: http.StatusUnauthorized, typ: typeAuth, code: "missing_api_key",
			msg: "no API key: send it as Authorization: Bearer <key>, x-api-key, x-goog-api-key or api-key"}
	}
	if r.URL.Path == g.statsPath {
		return g.stats(w, r, rq, secret)
	}
	k, err := g.keys.Lookup(r.Context(), secret) // Admit checks it as stored
	rq.keyID, rq.team = k.ID, k.Team
	if err != nil {
		return g.keyRefused(r.Context(), rq, k, err, 0)
	}
	model, rf := g.endpoint(r, rq)
	if rf != nil {
		return rf
	}
	if rq.endUser, rf = endUserHeader(r); rf != nil {
		return rf
	}
	// The key's slots bound the bodies it holds in memory: one is taken
	// before the body is read (see slots).
	if n := k.Policy.MaxConcurrent; n > 0 && !g.shadow {
		if !g.slots.take(k.ID, n) {
			d := &keystore.Denial{Reason: "concurrency", Limit: fmt.Sprintf("%d requests in flight", n), RetryAfter: concurrencyRetry}
			return g.deny(r.Context(), rq, k, d, 0)
		}
		defer g.slots.give(k.ID)
	}
	body, rf := g.readBody(w, r)
	if rf != nil {
		return rf
	}
	req, body, rf := g.read(rq, ad, model, body)
	if rf != nil {
		return rf
	}
	w.Header().Del("Connection")
	if rf := g.admit(r, rq, ad, k, secret, req); rf != nil {
		return rf
	}
	if rf := g.checkRate(w, r, rq, ad); rf != nil {
		return rf
	}
	return g.forward(w, r, rq, ad, up, body)
}

// requestSecret is the secret r carries: a bearer token, x-api-key
// (Anthropic's), x-goog-api-key (Gemini's) or api-key (Azure OpenAI's).
func requestSecret(r *http.Request) string {
	if s := httplimit.APISecret(r); s != "" {
		return s
	}
	if s := strings.TrimSpace(r.Header.Get("X-Goog-Api-Key")); s != "" {
		return s
	}
	return strings.TrimSpace(r.Header.Get("Api-Key"))
}

// EndUserHeader names the end user of a request, ahead of the body's
// fields (OpenAI's user or safety_identifier, Anthropic's
// metadata.user_id): the key's own customer, whom Policy.EndUsers limits.
// It is the gateway's, and not forwarded.
const EndUserHeader = "X-Ratestore-End-User"

// endUserHeader reads the end user r names in EndUserHeader: "" for none;
// 400 for two of them or a name that is not at most
// keystore.MaxEndUser bytes of printable UTF-8.
func endUserHeader(r *http.Request) (string, *refusal) {
	vs := r.Header.Values(EndUserHeader)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", invalid(http.StatusBadRequest, "invalid_end_user", EndUserHeader+" is given more than once")
	}
	if why := text.Problem(vs[0], keystore.MaxEndUser); why != "" {
		return "", invalid(http.StatusBadRequest, "invalid_end_user", EndUserHeader+": the end user's name "+why)
	}
	return vs[0], nil
}

// operatorPath reports whether p is the operator's (the admin API, its
// console, the metrics: package console serves them), which the Gateway
// never forwards.
func operatorPath(p string) bool {
	return p == "/metrics" || p == "/admin" || strings.HasPrefix(p, "/admin/")
}

// hasBody reports whether r comes with a body.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 || len(r.TransferEncoding) > 0
}

// stats answers the stats path for the key of secret.
func (g *Gateway) stats(w http.ResponseWriter, r *http.Request, rq *request, secret string) *refusal {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		rf := invalid(http.StatusMethodNotAllowed, "method_not_allowed", "the stats path answers GET only")
		rf.allow = "GET, HEAD"
		return rf
	}
	k, err := g.keys.Authenticate(r.Context(), secret)
	rq.keyID = k.ID
	if err != nil {
		return g.keyRefused(r.Context(), rq, k, err, 0)
	}
	u, err := g.keys.Usage(r.Context(), k.ID)
	if err != nil {
		return g.keyRefused(r.Context(), rq, k, err, 0)
	}
	a := admin.NewKey(k, u) // the one shape of a key
	a.ReservedTokens = g.keys.Reserved(k.ID)
	writeJSON(w, http.StatusOK, a)
	return nil
}

// endpoint finds the endpoint and route of r, and checks its body's
// framing. It returns the model the path names (Gemini's), if any.
func (g *Gateway) endpoint(r *http.Request, rq *request) (model string, rf *refusal) {
	ep, model, rf := lookup(r.Method, r.URL.Path, r.URL.RawPath)
	if rf != nil {
		return "", rf
	}
	rq.ep, rq.path = ep, routePath(r.URL.Path)
	rq.ups, rq.apis = g.ups.Load(), apisOf(ep, r.Header)
	if rq.route = match(rq.ups.routes, r.URL.Path); rq.route == nil && !rq.ups.serves(rq.apis, "") {
		return "", invalid(http.StatusNotFound, "no_route", "no upstream serves this path on this gateway")
	}
	return model, acceptable(r, ep)
}

// acceptable refuses a body the gateway cannot read as the upstream
// would: a body endpoint's body is JSON, unencoded (415 for any
// Content-Encoding or Content-Type other than identity and
// application/json: a gzip body would be forwarded unread); the other
// endpoints' requests have none.
func acceptable(r *http.Request, ep *endpoint) *refusal {
	if !ep.body() {
		if hasBody(r) {
			return invalid(http.StatusBadRequest, "unexpected_body", "a "+r.Method+" request to this endpoint has no body")
		}
		return nil
	}
	if ce := r.Header.Values("Content-Encoding"); len(ce) > 1 || (len(ce) == 1 && !strings.EqualFold(ce[0], "identity")) {
		return invalid(http.StatusUnsupportedMediaType, "unsupported_encoding", "this gateway reads request bodies unencoded: send it without Content-Encoding")
	}
	if ct := r.Header.Values("Content-Type"); len(ct) > 0 {
		mt, _, err := mime.ParseMediaType(ct[0])
		if len(ct) > 1 || err != nil || mt != "application/json" {
			return invalid(http.StatusUnsupportedMediaType, "unsupported_media_type", "this endpoint takes a JSON body: send it as Content-Type: application/json")
		}
	}
	return nil
}

// readBody reads the body of r whole, up to g.maxBody, within
// g.bodyTimeout: 413 (too large), 408 (too slow) or 400 (cut off) when it
// cannot.
func (g *Gateway) readBody(w *httpstatus.Writer, r *http.Request) ([]byte, *refusal) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	tooLarge := invalid(http.StatusRequestEntityTooLarge, "request_too_large",
		fmt.Sprintf("the request body is larger than this gateway accepts (%d bytes)", g.maxBody))
	if r.ContentLength > g.maxBody {
		return nil, tooLarge
	}
	defer g.bodyDeadline(w.ResponseWriter)()
	body, err := readAtMost(r.Body, r.ContentLength, g.maxBody)
	r.Body.Close()
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded): // the connection closes: see serve
		return nil, invalid(http.StatusRequestTimeout, "request_timeout",
			fmt.Sprintf("the request body did not arrive within %v", g.bodyTimeout))
	case err != nil:
		return nil, invalid(http.StatusBadRequest, "unreadable_body", "the request body could not be read")
	case int64(len(body)) > g.maxBody:
		return nil, tooLarge
	}
	return body, nil
}

// read parses body, checks its model, and returns the admission it asks
// for and the body to forward.
func (g *Gateway) read(rq *request, ad *admission, model string, body []byte) (keystore.Request, []byte, *refusal) {
	ep := rq.ep
	var f bodyFields
	if ep.body() {
		var rf *refusal
		if f, rf = readFields(ep, body); rf != nil {
			return keystore.Request{}, nil, rf
		}
		if !ep.modelInPath {
			model = f.model
		}
		rq.modelAt = f.modelAt
	}
	if ep.azure {
		model = rq.ups.modelOf(model) // the caller named a deployment
	}
	if ep.model {
		if why := checkModel(model); why != "" {
			return keystore.Request{}, nil, invalid(http.StatusBadRequest, "invalid_model", "the model name "+why)
		}
	}
	if rf := upstreamFor(rq, model); rf != nil {
		return keystore.Request{}, nil, rf
	}
	if rq.endUser == "" {
		rq.endUser = cmp.Or(f.endUser, f.safetyID)
	}
	if rq.endUser == ledger.OtherModel {
		rq.endUser = ""
		return keystore.Request{}, nil, invalid(http.StatusBadRequest, "invalid_end_user", "the end user's name "+ledger.OtherModel+" is the ledger's row of the end users past a day's top ones: name them otherwise")
	}
	if why := text.Problem(rq.endUser, keystore.MaxEndUser); why != "" && rq.endUser != "" {
		rq.endUser = ""
		return keystore.Request{}, nil, invalid(http.StatusBadRequest, "invalid_end_user", "the end user's name (user, safety_identifier or metadata.user_id) "+why)
	}
	req := keystore.Request{Model: model, EndUser: rq.endUser}
	if ep.generates {
		// The prompt as the caller wrote it: the stream options asked for
		// below are no input.
		req.Reserve, req.Optional = g.reservation(len(body), f, ep)
		rq.promptEst = int64(len(body)) / 4
		if ep.output {
			rq.outputMax = sat.Add(req.Reserve-rq.promptEst, req.Optional)
		}
	}
	if ep.askUsage && f.stream && !f.usageAsked {
		body, rq.stripUsage = askUsage(body, f), true
	}
	rq.model, ad.reserve = model, req.Reserve
	return req, body, nil
}

// readFields parses the body of a request to ep, and refuses it when it
// cannot be read exactly as the upstream would read it, or asks for what
// the gateway cannot meter.
func readFields(ep *endpoint, body []byte) (bodyFields, *refusal) {
	f, err := parseBody(body, ep.dialect)
	switch {
	case err != nil:
		return f, invalid(http.StatusBadRequest, "invalid_body", err.Error())
	case f.background:
		return f, invalid(http.StatusBadRequest, "unsupported_parameter",
			"this gateway does not serve background responses: it could not meter their usage")
	case ep.model && !ep.modelInPath && !f.hasModel:
		return f, invalid(http.StatusBadRequest, "missing_model", "the request body names no model: this gateway requires the model field")
	}
	return f, nil
}

// admit admits the request in the key store, or returns its refusal. A
// request that got less than the whole of its optional reservation is
// short: one of a key runs at a time (see Request bodies in the package
// documentation), and another is refused.
func (g *Gateway) admit(r *http.Request, rq *request, ad *admission, k keystore.Key, secret string, req keystore.Request) *refusal {
	ctx := r.Context()
	rq.allow = k.Policy.Models
	if rf := g.priceFor(rq, k, &req); rf != nil {
		return rf
	}
	since := g.short.epochOf(k.ID)
	a, err := g.admitOn(ctx, rq, secret, req)
	var ce *capacityError
	switch {
	case errors.As(err, &ce):
		return capacityRefusal(rq, ce)
	case a == nil && g.shadowServes(ctx, rq, ad, err):
		return nil // served without an admission; finish charges its usage
	case a == nil:
		return g.keyRefused(ctx, rq, k, err, ad.reserve)
	}
	if a.Reserved() < sat.Add(req.Reserve, req.Optional) {
		if !g.short.takeSince(k.ID, since) {
			if _, ferr := a.Finish(context.WithoutCancel(ctx), 0); ferr != nil && !errors.Is(ferr, backend.ErrUncertain) {
				g.log.LogAttrs(ctx, slog.LevelError, "gateway: giving back an admission failed",
					slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.String("error", ferr.Error()))
			}
			return g.deny(ctx, rq, k, &keystore.Denial{Reason: "short", RetryAfter: concurrencyRetry}, req.Reserve)
		}
		ad.short = true
	}
	ad.adm, ad.reserve = a, a.Reserved()
	g.metrics.admitted(ad.reserve)
	if err != nil {
		// Admitted, just not known to be on disk: serve it.
		g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: admission not known to be durable",
			slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.String("error", err.Error()))
	}
	return nil
}

// checkRate applies the request rate of Options.RPS, if any, to the
// admitted request, setting its RateLimit fields. It is applied after the
// admission, so a request it refuses was admitted and is finished at
// once, charged nothing. In shadow mode a request over the rate is served
// all the same, its fields telling it is over, and logged.
func (g *Gateway) checkRate(w http.ResponseWriter, r *http.Request, rq *request, ad *admission) *refusal {
	if g.rate == nil {
		return nil
	}
	d, ok := g.rate.Check(w.Header(), r, rq.keyID)
	switch {
	case ok:
		return nil
	case d.Status != http.StatusTooManyRequests:
		return &refusal{status: d.Status, typ: typeAPI, code: "rate_limit_failed", msg: "the gateway could not apply its request rate; retry later"}
	case g.shadow:
		sd := &keystore.Denial{Reason: "rps", Limit: d.Policy, RetryAfter: d.Result.RetryAfter}
		if ad.shadowed == nil {
			ad.shadowed = sd
		}
		g.logShadow(r.Context(), rq, sd)
		w.Header().Del("Retry-After") // of a refusal, which this is not
		return nil
	}
	wait := d.Result.RetryAfter
	return &refusal{status: http.StatusTooManyRequests, typ: typeRate, code: "rate_limit_exceeded", reason: "rps", retry: true, wait: wait,
		msg: fmt.Sprintf("key %s is over the gateway's request rate (--rps); retry after %v", rq.keyID, roundWait(wait))}
}
