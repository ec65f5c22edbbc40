// Package console is the operator's side of the gateway: the web page
// under /admin/ to see and manage keys, teams, usage and spend, the
// sign-in that lets a browser use the admin API without holding the admin
// token, and the guard in front of the admin API (package admin) and the
// metrics. A Console is the outermost handler of a gateway's port: it
// answers the operator's paths (/admin, /admin/..., /metrics) and hands
// every other request to Options.Next, the proxy.
//
// A browser cannot be trusted to keep the admin token: a page that kept it
// (in storage, in a URL) would hand it to anything that reads the page. So
// the token is sent once, to POST /admin/session, as JSON, and exchanged
// for a session cookie the page's scripts cannot read (HttpOnly), that no
// other site's page makes the browser send (SameSite=Strict), that only
// travels over TLS when the console is served over TLS or behind a TLS
// proxy (Secure, Options.SecureCookie), and that expires. Each session also
// has a CSRF token, which the page sends in a header with every change: a
// cookie is sent by the browser on its own, a header only by the page. A
// request that carries the cookie from a page of another origin (by the
// Sec-Fetch-Site and Origin the browser writes) is refused, reads
// included, so that no other site's page has the browser fetch the
// operator's data or guess a token in its name.
//
// Sessions are kept by the SHA-256 of their cookie, in the gateway's store
// (Options.Sessions, see Sessions): a restart keeps them, the gateways of
// one Redis share them, and nothing stored is a credential. A Console
// without a store (the read-only console command's) keeps them in memory.
//
// The routes of the console itself:
//
//	GET    /admin          -> 301 /admin/
//	GET    /admin/         the page (index.html); it shows the sign-in form until signed in
//	GET    /admin/assets/F the page's scripts, styles and images, built into the binary
//	POST   /admin/session  {"token"} (application/json only, else 415) -> 200 Session, and the cookie
//	GET    /admin/session  -> 200 Session for a live session, else 401 no_session
//	DELETE /admin/session  (X-CSRF-Token) -> 204; the session forgotten, the cookie expired
//
// Every other path under /admin/ is the admin API's (Options.API), and
// /metrics is Options.Metrics: a request may have them with the admin
// token as a bearer token, as scripts do (and the browser checks above do
// not apply), or with a live session cookie, plus the CSRF token for
// anything but GET and HEAD. The API learns who made each call
// (admin.WithActor) and from which address (admin.WithClient).
//
// That address is the peer's, or behind the proxies of
// Options.TrustedProxies the one their X-Forwarded-For names (see
// Console.client). Wrong tokens are counted by it (an IPv6 host by its
// /64): after MaxFailures wrong tokens from one address within
// FailureWindow, further attempts from that address get 429 until the
// oldest of them is a FailureWindow old. A right token is refused too
// while its address is slowed down, or the answer would tell a guesser
// which guess was right; other addresses are not slowed down, whatever
// one does. See throttle for what bounds the memory of the counts, and
// the log of wrong tokens: a line per address per minute at most, never
// the token. The admin token must be MinTokenLength bytes at least.
package console

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/admin"
)

// Defaults and bounds of Options, and the names the page uses.
const (
	// DefaultSessionTTL is how long a sign-in lasts: a working day, so
	// that an operator signs in once a day and a stolen cookie is not good
	// for long.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultMaxSessions bounds the sessions kept; the oldest is
	// forgotten to make room.
	DefaultMaxSessions = 10_000

	// MaxFailures wrong tokens from one address in FailureWindow, and the
	// next attempts from that address get 429.
	MaxFailures   = 5
	FailureWindow = time.Minute
	// DefaultMaxAddresses bounds the addresses whose wrong tokens are
	// counted at once (see throttle): a few hundred bytes each.
	DefaultMaxAddresses = 10_000

	// CookieName is the session cookie's name; its path is /admin, so that
	// the browser sends it to the admin routes only.
	CookieName = "ratestore_session"
	// CSRFHeader is the request field that carries the session's CSRF
	// token on every request that is not a GET or HEAD.
	CSRFHeader = "X-CSRF-Token"
)

// DefaultBodyTimeout bounds the wait for a sign-in's body of a few
// hundred bytes.
const DefaultBodyTimeout = 10 * time.Second

// hsts is the Strict-Transport-Security of the answers over TLS: a year,
// for this host only (its domain's other hosts are not the gateway's to
// decide for).
const hsts = "max-age=31536000"

// Options configures a Console.
type Options struct {
	// Token is the admin token: MinTokenLength bytes at least.
	Token string
	// SessionTTL is how long a session lasts from its sign-in; 0 means
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxSessions bounds the live sessions; 0 means DefaultMaxSessions.
	MaxSessions int
	// Sessions is the store the sessions are kept in (StoreSessions); nil
	// keeps them in memory, forgotten by a restart.
	Sessions *Sessions
	// ReadOnly serves a console that can look and not change: every
	// request but GET and HEAD to the admin API gets 403 read_only, and
	// Session says so, for the page to hide its buttons.
	ReadOnly bool
	// TrustedProxies are the proxies in front of the console whose
	// X-Forwarded-For is believed (see Console.client); none: it is
	// ignored, and a request comes from its peer.
	TrustedProxies []netip.Prefix
	// SecureCookie marks the session cookie Secure, and takes the
	// console's origin for https, when this server sees plain HTTP behind
	// a proxy that serves the browser over TLS. Over TLS it is so anyway.
	SecureCookie bool
	// MaxAddresses bounds the addresses whose wrong tokens are counted at
	// once; 0 means DefaultMaxAddresses.
	MaxAddresses int
	// Now is the clock of sessions and of the slow-down; nil means
	// time.Now.
	Now func() time.Time
	// Log receives a line per sign-in and sign-out, and the summary of
	// wrong tokens (never the token, nor the cookie); nil discards them.
	Log *slog.Logger

	// BodyTimeout bounds the wait for a sign-in's body; 0 means
	// DefaultBodyTimeout, a negative value no bound.
	BodyTimeout time.Duration

	// API is the admin API the console guards (an *admin.API): every path
	// under /admin/ that is not the console's own. Nil answers them 404.
	API http.Handler
	// Metrics serves GET /metrics, guarded as the API is; nil answers 404.
	Metrics http.Handler
	// Next serves every request that is not the operator's (the proxy);
	// nil answers them 404.
	Next http.Handler
}

// Console serves the console's page and sessions, and authorizes the
// requests of the admin API. It is safe for concurrent use.
type Console struct {
	hash         [sha256.Size]byte // the admin token's SHA-256
	ttl          time.Duration
	readOnly     bool
	trusted      []netip.Prefix
	secureCookie bool
	now          func() time.Time
	log          *slog.Logger
	assets       map[string]*asset // by name under assets/
	index        *asset
	api          http.Handler
	metrics      http.Handler
	next         http.Handler
	bodyTimeout  time.Duration

	store     sessionStore
	nextSweep atomic.Int64 // Unix ns of the next sweep of expired sessions

	failMu sync.Mutex
	fails  throttle
}

// New returns a Console configured by opts. It fails when the admin
// token is too short (ErrWeakToken).
func New(opts Options) (*Console, error) {
	if err := CheckToken(opts.Token); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c := &Console{
		hash:         sha256.Sum256([]byte(opts.Token)),
		ttl:          cmp.Or(opts.SessionTTL, DefaultSessionTTL),
		readOnly:     opts.ReadOnly,
		trusted:      prefixes(opts.TrustedProxies),
		secureCookie: opts.SecureCookie,
		now:          opts.Now,
		log:          opts.Log,
		fails:        newThrottle(cmp.Or(opts.MaxAddresses, DefaultMaxAddresses)),
		api:          opts.API,
		metrics:      opts.Metrics,
		next:         opts.Next,
		bodyTimeout:  cmp.Or(opts.BodyTimeout, DefaultBodyTimeout),
	}
	maxSessions := cmp.Or(opts.MaxSessions, DefaultMaxSessions)
	c.store = newMemorySessions(maxSessions)
	if opts.Sessions != nil {
		c.store = &storeSessions{Sessions: opts.Sessions, max: maxSessions}
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.assets = loadAssets()
	c.index = c.assets["index.html"]
	return c, nil
}

// prefixes returns ps masked (10.1.2.3/8 is 10.0.0.0/8), IPv4-mapped IPv6
// ranges as IPv4, the invalid left out.
func prefixes(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out
}

// Handles reports whether the path of a request is the console's own
// (its page, assets and session), rather than the admin API's or the
// metrics': /admin, /admin/, /admin/assets/... and /admin/session.
func Handles(path string) bool {
	return path == "/admin" || path == "/admin/" || path == "/admin/session" || strings.HasPrefix(path, "/admin/assets/")
}

// Operator reports whether path is the operator's: the console's own, the
// admin API's or the metrics'. A gateway never forwards such a path.
func Operator(path string) bool {
	return path == "/metrics" || path == "/admin" || strings.HasPrefix(path, "/admin/")
}

// ServeHTTP serves a request: the console's own routes (see Handles), the
// admin API and the metrics to those who may have them, and every other
// request to Options.Next. Every answer over TLS has
// Strict-Transport-Security.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS != nil {
		w.Header().Set("Strict-Transport-Security", hsts)
	}
	switch p := r.URL.Path; {
	case Handles(p):
		c.serveOwn(w, r)
	case Operator(p):
		c.serveGuarded(w, r)
	case c.next != nil:
		c.next.ServeHTTP(w, r)
	default:
		writeError(w, http.StatusNotFound, typeInvalid, "not_found", "no such path: this server serves only the admin API and its console, at /admin/")
	}
}

// serveGuarded serves the admin API or the metrics to a request that may
// have them (authorize), with its actor and client address, and refuses
// the others.
func (c *Console) serveGuarded(w http.ResponseWriter, r *http.Request) {
	h := c.api
	if r.URL.Path == "/metrics" {
		h = c.metrics
	}
	if h == nil {
		writeError(w, http.StatusNotFound, typeInvalid, "not_found", "no such path")
		return
	}
	client := c.client(r)
	actor, ref := c.authorize(r, client)
	if ref != nil {
		ref.write(w)
		return
	}
	h.ServeHTTP(w, r.WithContext(withCaller(r.Context(), actor, client)))
}

// withCaller returns ctx for a call of the admin API by actor from client.
func withCaller(ctx context.Context, actor string, client netip.Addr) context.Context {
	return admin.WithClient(admin.WithActor(ctx, actor), client)
}

// serveOwn serves the console's own routes: the page, its assets and the
// session. Any other path gets 404.
func (c *Console) serveOwn(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		// A sign-in's body: one that never ends must not hold the
		// connection for good (see admin.API.ServeHTTP).
		rc := http.NewResponseController(w)
		if c.bodyTimeout > 0 && rc.SetReadDeadline(time.Now().Add(c.bodyTimeout)) == nil {
			defer rc.SetReadDeadline(time.Time{})
		}
		w.Header().Set("Connection", "close")
	}
	switch p := r.URL.Path; {
	case p == "/admin/session":
		c.serveSession(w, r, c.client(r))
	case p == "/admin":
		if !readMethod(w, r) {
			return
		}
		http.Redirect(w, r, "/admin/", http.StatusMovedPermanently)
	case p == "/admin/":
		if !readMethod(w, r) {
			return
		}
		if c.index == nil {
			writeError(w, http.StatusNotFound, typeInvalid, "not_found", "this build has no console page")
			return
		}
		c.index.serve(w, r)
	case strings.HasPrefix(p, "/admin/assets/"):
		if !readMethod(w, r) {
			return
		}
		a := c.assets[strings.TrimPrefix(p, "/admin/assets/")]
		if a == nil {
			writeError(w, http.StatusNotFound, typeInvalid, "not_found", "no such asset")
			return
		}
		a.serve(w, r)
	default:
		writeError(w, http.StatusNotFound, typeInvalid, "not_found", "no such path")
	}
}

// readMethod answers 405 to a request for a page or asset that is not a
// GET or HEAD; it reports whether the request may go on.
func readMethod(w http.ResponseWriter, r *http.Request) bool {
	if safeMethod(r.Method) {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, typeInvalid, "method_not_allowed", r.Method+" "+r.URL.Path+": method not allowed; allowed: GET, HEAD")
	return false
}

// safeMethod reports whether method only reads: GET and HEAD need no CSRF
// token, and a read-only console serves them.
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead
}

// securityHeaders sets the fields that confine the console's page: its
// scripts, styles, images and calls come from the gateway only, no other
// site may frame it (clickjacking), and no URL of it leaks in a Referer.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}
