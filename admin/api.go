package admin

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/internal/etag"
	"github.com/ratestore/ratestore/internal/httpstatus"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
)

// MaxBody bounds the body of an admin request: a key's fields are a
// few kilobytes at most (keystore.MaxModels patterns of keystore.MaxName
// bytes), so anything larger is a mistake or an attack, refused with 413
// before it is read whole.
const MaxBody = 1 << 20

// DefaultBodyTimeout bounds the wait for an admin request's body.
const DefaultBodyTimeout = 30 * time.Second

// Options configures an API.
type Options struct {
	// Keys is the key store the API manages; required.
	Keys *keystore.Store
	// Ledger is the spend ledger GET /admin/spend and /admin/requests
	// read; nil answers them 404 no_ledger.
	Ledger *ledger.Ledger
	// Audit is the audit log every change made through the API is
	// recorded in, as made by the actor of its call (WithActor; a change
	// with none is refused), and GET /admin/audit reads; nil records
	// nothing, and answers GET /admin/audit 404 no_audit.
	Audit *audit.Log
	// Gateway is the gateway that serves the keys in this process, if
	// any: nil answers GET /admin/live, GET /admin/upstreams and POST
	// /admin/prices/reload 404.
	Gateway Gateway
	// Reload reads the gateway's configuration file again and applies
	// its upstreams and prices, or refuses the file whole, naming its
	// line, and changes nothing: POST /admin/config/reload. The gateway
	// command sets it when given --config; nil answers the route 404.
	Reload func(ctx context.Context) (Reloaded, error)
	// Now is the clock of GET /admin/live; nil means time.Now.
	Now func() time.Time
	// BodyTimeout bounds the wait for a request's body; 0 means
	// DefaultBodyTimeout, a negative value no bound.
	BodyTimeout time.Duration
	// Log receives a line per call (never a body) and the failures; nil
	// discards them.
	Log *slog.Logger
}

// Gateway is what the API shows and asks of the gateway serving beside
// it (a *gateway.Gateway).
type Gateway interface {
	// Traffic returns the requests ended and tokens charged per second of
	// the last seconds, and the requests in flight: GET /admin/live.
	Traffic() (requestsPerSecond, tokensPerSecond float64, inFlight int64)
	// ReloadPrices reads the price table again and returns how many models
	// it prices: POST /admin/prices/reload.
	ReloadPrices() (int, error)
	// Upstreams returns the upstreams requests are sent to, in the order
	// of the gateway's configuration, with their use now: GET
	// /admin/upstreams.
	Upstreams(ctx context.Context) []Upstream
}

// API is the admin API: an http.Handler of the routes under /admin/ that
// manage keys and teams and read the spend ledger (see the package
// documentation). It authenticates nobody: whoever mounts it decides who
// may call it (package console does, for the gateway). It is safe for
// concurrent use.
type API struct {
	keys        *keystore.Store
	ledger      *ledger.Ledger
	audit       *audit.Log
	gw          Gateway
	reload      func(context.Context) (Reloaded, error)
	now         func() time.Time
	bodyTimeout time.Duration
	log         *slog.Logger
	mux         *http.ServeMux
	patterns    []string
}

// New returns the API of opts.
func New(opts Options) (*API, error) {
	if opts.Keys == nil {
		return nil, fmt.Errorf("admin: Options.Keys is nil: %w", backend.ErrInvalid)
	}
	api := &API{
		keys: opts.Keys, ledger: opts.Ledger, audit: opts.Audit, gw: opts.Gateway, reload: opts.Reload, now: opts.Now,
		bodyTimeout: cmp.Or(opts.BodyTimeout, DefaultBodyTimeout), log: opts.Log, mux: http.NewServeMux(),
	}
	if api.log == nil {
		api.log = slog.New(slog.DiscardHandler)
	}
	if api.now == nil {
		api.now = time.Now
	}
	api.handle("POST /admin/keys", api.createKey)
	api.handle("GET /admin/keys", api.listKeys)
	api.handle("GET /admin/keys/{id}", api.getKey)
	api.handle("PATCH /admin/keys/{id}", api.patchKey)
	api.handle("DELETE /admin/keys/{id}", api.deleteKey)
	api.handle("POST /admin/keys/{id}/rotate", api.rotateKey)
	api.handle("GET /admin/keys/{id}/end-users", api.listEndUsers)
	api.handle("GET /admin/keys/{id}/end-users/{name}", api.getEndUser)
	api.handle("POST /admin/teams", api.createTeam)
	api.handle("GET /admin/teams", api.listTeams)
	api.handle("GET /admin/teams/{id}", api.getTeam)
	api.handle("PATCH /admin/teams/{id}", api.patchTeam)
	api.handle("DELETE /admin/teams/{id}", api.deleteTeam)
	api.handle("GET /admin/spend", api.spend)
	api.handle("GET /admin/requests", api.requests)
	api.handle("POST /admin/prices/reload", api.reloadPrices)
	api.handle("POST /admin/config/reload", api.reloadConfig)
	api.handle("GET /admin/live", api.serveLive)
	api.handle("GET /admin/upstreams", api.serveUpstreams)
	api.handle("GET /admin/audit", api.serveAudit)
	return api, nil
}

// handle registers h for pattern and notes the pattern (Patterns).
func (api *API) handle(pattern string, h http.HandlerFunc) {
	api.mux.HandleFunc(pattern, h)
	api.patterns = append(api.patterns, pattern)
}

// Patterns returns the API's routes, as http.ServeMux patterns ("GET
// /admin/keys/{id}"): the tests of whoever mounts it try each, so that a
// route added later is guarded as the others are.
func (api *API) Patterns() []string { return append([]string(nil), api.patterns...) }

// call is the ResponseWriter of an admin call: it notes the status and
// the key or team the call was about, for its log line.
type call struct {
	httpstatus.Writer
	keyID, teamID string
}

// ServeHTTP answers a call of the API. A path that is no route gets 404,
// and a method a route does not have 405 with Allow, both with the error
// body; every call is logged (logCall).
func (api *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &call{Writer: httpstatus.Writer{ResponseWriter: w}}
	defer api.logCall(r, c)
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		// A body that never ends must not hold the connection (and its
		// goroutine) for good, and an answer given before the body was
		// read whole closes the connection, which the server would
		// otherwise drain first, however slowly the rest comes. Changes
		// are few: a connection each costs nothing.
		defer api.bodyDeadline(w)()
		w.Header().Set("Connection", "close")
	}
	h, pattern := api.mux.Handler(r)
	switch {
	case pattern != "" && r.Method == http.MethodGet:
		revalidated(c, r, api.mux)
		return
	case pattern != "":
		api.mux.ServeHTTP(c, r) // which sets the path's values; Handler does not
		return
	}
	// No route: the mux would answer 404 or 405 in plain text. Answer
	// with the error body instead, and the mux's Allow.
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		allow := rec.header.Get("Allow")
		c.Header().Set("Allow", allow)
		writeError(c, http.StatusMethodNotAllowed, apierror.Invalid, "method_not_allowed",
			fmt.Sprintf("%s %s: method not allowed; allowed: %s", r.Method, r.URL.Path, allow))
		return
	}
	writeError(c, http.StatusNotFound, apierror.Invalid, "not_found",
		"no such path: the admin API is /admin/keys, /admin/keys/{id}, /admin/teams, /admin/teams/{id}, /admin/spend, /admin/requests and /admin/audit")
}

// revalidated serves GET r with h, answering 304 Not Modified, with no
// body, when r's If-None-Match names the answer's entity tag: a console
// that polls a page sends the tag of what it shows, and learns in a few
// bytes that nothing changed. The answer is built whole first; the API's
// answers are pages, a few megabytes at most.
//
// The tag is weak, a hash of the body with its countdowns zeroed: a
// window's reset_after_seconds is an instant that stays while its usage
// does (the window's end after its newest used bucket) less now, so it
// changes every second while nothing else does, and a tag of every byte
// would never match for a key with usage. Two answers with one tag say the same thing, their
// countdowns read at different times.
func revalidated(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &buffered{header: w.Header()}
	rec.call, _ = w.(*call)
	h.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status == http.StatusOK {
		tag := etag.Of(countdown.ReplaceAll(rec.body.Bytes(), []byte(`"reset_after_seconds":0`)))
		w.Header().Set("ETag", "W/"+tag)
		if etag.Matches(r.Header.Get("If-None-Match"), tag) {
			w.Header().Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}

// countdown matches a countdown and its value in a JSON answer. The
// field's name, quoted and followed by a colon, occurs nowhere else: in a
// string, a quote is escaped.
var countdown = regexp.MustCompile(`"reset_after_seconds":[0-9]+`)

// buffered is the ResponseWriter of revalidated: the handler's header is
// the real one's; its status and body are kept.
type buffered struct {
	header http.Header
	status int
	body   bytes.Buffer
	call   *call // the call it buffers for, if any: what noteKey notes
}

func (b *buffered) Header() http.Header { return b.header }
func (b *buffered) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *buffered) Write(p []byte) (int, error) { return b.body.Write(p) }

// bodyDeadline bounds the reads of w's connection by the body timeout
// from now, and returns what lifts the bound. Setting it fails only where
// the ResponseWriter cannot (tests); the server's ReadTimeout then bounds
// it.
func (api *API) bodyDeadline(w http.ResponseWriter) (lift func()) {
	rc := http.NewResponseController(w)
	if api.bodyTimeout <= 0 || rc.SetReadDeadline(time.Now().Add(api.bodyTimeout)) != nil {
		return func() {}
	}
	return func() { rc.SetReadDeadline(time.Time{}) }
}

// headerRecorder keeps the status and header the mux's own 404 and 405
// would write, and drops the body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerRecorder) WriteHeader(code int)        { h.status = code }

// callOf returns the call w answers, nil if none.
func callOf(w http.ResponseWriter) *call {
	switch c := w.(type) {
	case *call:
		return c
	case *buffered:
		return c.call
	}
	return nil
}

// noteKey notes the key id an admin call is about, for its log line.
func noteKey(w http.ResponseWriter, id string) {
	if c := callOf(w); c != nil {
		c.keyID = id
	}
}

// noteTeam notes the team id an admin call is about, for its log line.
func noteTeam(w http.ResponseWriter, id string) {
	if c := callOf(w); c != nil {
		c.teamID = id
	}
}

// logCall logs call r at its end: method, path, status, key id and, for
// a team's call, team id; never a body, which may hold a secret. A
// successful poll of /admin/live or /admin/upstreams is logged at level
// Debug: the console's pages of them poll every few seconds.
func (api *API) logCall(r *http.Request, c *call) {
	level := slog.LevelInfo
	if (r.URL.Path == "/admin/live" || r.URL.Path == "/admin/upstreams") && c.Status < http.StatusBadRequest {
		level = slog.LevelDebug
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", c.Status), slog.String("key_id", c.keyID)}
	if c.teamID != "" {
		attrs = append(attrs, slog.String("team_id", c.teamID))
	}
	api.log.LogAttrs(r.Context(), level, "admin", attrs...)
}

// writeError answers status with the error body (package apierror).
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	apierror.Write(w, status, typ, code, msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) { apierror.WriteJSON(w, status, v) }
