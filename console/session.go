package console

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// The error codes of the console's and authorize's refusals.
const (
	codeMissing   = "missing_admin_token"
	codeInvalid   = "invalid_admin_token"
	codeNoSess    = "no_session"
	codeCSRF      = "csrf_failed"
	codeCrossSite = "cross_site"
	codeReadOnly  = "read_only"
	codeTooMany   = "too_many_attempts"
	codeStore     = "session_store"
)

// maxSignInBody bounds the body of a sign-in: {"token": ...} and a token
// of a few hundred bytes at most.
const maxSignInBody = 4 << 10

// maxCookies bounds the session cookies of a request that are looked up:
// a browser sends one, and each costs a read of the store.
const maxCookies = 3

// sweepEvery is how often expired sessions are swept: at the first
// lookup or sign-in this long after the last sweep.
const sweepEvery = time.Minute

// Session is the answer to POST and GET /admin/session: what the page
// needs to know of its session. The cookie itself is never in a body.
type Session struct {
	// CSRF is the token the page sends in X-CSRF-Token with every request
	// that is not a GET or HEAD.
	CSRF      string    `json:"csrf"`
	ExpiresAt time.Time `json:"expires_at"` // RFC 3339, UTC, to the second
	ReadOnly  bool      `json:"read_only"`  // the console can look, not change: the page hides its buttons
}

// sessionStore keeps a Console's sessions by id, the SHA-256 of the
// cookie: in memory (memorySessions) or in the gateway's store
// (storeSessions).
type sessionStore interface {
	// lookup returns when the session id expires; ok is false when there
	// is none.
	lookup(ctx context.Context, id [sha256.Size]byte) (expires time.Time, ok bool, err error)
	// add stores the session id, made at now and expiring at expires,
	// forgets those of forget, and the oldest to keep MaxSessions.
	add(ctx context.Context, id [sha256.Size]byte, now, expires time.Time, forget [][sha256.Size]byte) error
	forget(ctx context.Context, ids [][sha256.Size]byte) error
	// sweep forgets sessions expired at now.
	sweep(ctx context.Context, now time.Time) error
	// count returns the number of sessions live at now.
	count(ctx context.Context, now time.Time) (int, error)
}

// serveSession answers /admin/session: sign in, see the session, sign out.
func (c *Console) serveSession(w http.ResponseWriter, r *http.Request, client netip.Addr) {
	switch r.Method {
	case http.MethodPost:
		c.signIn(w, r, client)
	case http.MethodGet, http.MethodHead:
		s, ref := c.sessionOf(r)
		if ref == nil && s == nil {
			ref = &refusal{status: http.StatusUnauthorized, code: codeNoSess, msg: "no session: sign in with the admin token"}
		}
		if ref != nil {
			ref.write(w)
			return
		}
		writeJSON(w, http.StatusOK, c.answer(s))
	case http.MethodDelete:
		c.signOut(w, r, client)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, typeInvalid, "method_not_allowed", r.Method+" /admin/session: method not allowed; allowed: GET, HEAD, POST, DELETE")
	}
}

// signIn answers POST /admin/session {"token"}: a new session and its
// cookie for the right token; 401 for a wrong one, 429 while the address
// is slowed down. A page of another site may not sign in (403), nor a
// body that is not JSON (415; a form or text/plain is what a page of any
// site may post without asking): neither is a guess, and neither is
// counted as one. A session the request had already is forgotten: each
// sign-in starts afresh.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request, client netip.Addr) {
	if c.crossSite(r) {
		crossSiteRefusal().write(w)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, typeInvalid, "unsupported_media_type", "sign in with a JSON body: Content-Type: application/json")
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInBody)
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		// The error is not echoed: the body holds a token, maybe the
		// right one mistyped.
		writeError(w, http.StatusBadRequest, typeInvalid, "invalid_body", `the body must be the JSON object {"token": "<admin token>"}`)
		return
	}
	token := strings.TrimSpace(body.Token)
	if token == "" {
		writeError(w, http.StatusUnauthorized, typeAuth, codeInvalid, "no admin token: enter the gateway's admin token")
		return
	}
	if ref := c.check(r, client, token); ref != nil {
		ref.write(w)
		return
	}
	c.startSession(w, r, client)
}

// startSession makes a session for a request that signed in: 32 random
// bytes for its cookie, of which only the SHA-256 is kept.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, client netip.Addr) {
	now := c.now()
	c.maybeSweep(r.Context(), now)
	cookie := random()
	id, expires := sha256.Sum256([]byte(cookie)), now.Add(c.ttl)
	if err := c.store.add(r.Context(), id, now, expires, cookieIDs(r)); err != nil {
		c.storeRefusal(r, err).write(w)
		return
	}
	c.setCookie(w, r, cookie, max(1, int(c.ttl/time.Second)))
	c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: signed in", slog.String("client", clientString(client)),
		slog.String("session", hex.EncodeToString(id[:4])), slog.Time("expires_at", expires.UTC()), slog.Bool("read_only", c.readOnly))
	writeJSON(w, http.StatusOK, c.answer(&live{id: id, cookie: cookie, expires: expires}))
}

// signOut answers DELETE /admin/session: the session is forgotten and its
// cookie expired. A live session needs its CSRF token, so that no other
// page signs the operator out; without one there is nothing to forget,
// and the cookie is expired all the same.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request, client netip.Addr) {
	s, ref := c.sessionOf(r)
	if ref == nil && s != nil && !csrfOK(r, s.cookie) {
		ref = &refusal{status: http.StatusForbidden, code: codeCSRF, msg: csrfMessage}
	}
	if ref == nil && s != nil {
		if err := c.store.forget(r.Context(), [][sha256.Size]byte{s.id}); err != nil {
			ref = c.storeRefusal(r, err)
		}
	}
	if ref != nil {
		ref.write(w)
		return
	}
	if s != nil {
		c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: signed out", slog.String("client", clientString(client)),
			slog.String("session", hex.EncodeToString(s.id[:4])))
	}
	c.setCookie(w, r, "", -1)
	w.WriteHeader(http.StatusNoContent)
}

// setCookie sets the session cookie to value for maxAge seconds (-1:
// expire it). It is Secure over TLS, and with Options.SecureCookie.
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: value, Path: "/admin", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || c.secureCookie,
	})
}

const csrfMessage = "this change needs the session's CSRF token in X-CSRF-Token: reload the console"

// live is a live session, as a request's cookie opened it.
type live struct {
	id      [sha256.Size]byte
	cookie  string
	expires time.Time
}

// answer is the Session of s.
func (c *Console) answer(s *live) Session {
	return Session{CSRF: csrfOf(s.cookie), ExpiresAt: s.expires.UTC().Truncate(time.Second), ReadOnly: c.readOnly}
}

// csrfOf is the CSRF token of the session of cookie: the SHA-256 of the
// cookie after a label that no other hash of it has. A page that has the
// cookie sent (any site's, by a form) cannot read it, so cannot compute
// the token; the token does not give the cookie back, nor does the
// cookie's plain SHA-256, the session's id in the store, give the token.
// So the store keeps no secret of the session's but its id, and no page
// of the console's needs more than the cookie to know its token.
func csrfOf(cookie string) string {
	h := sha256.Sum256([]byte("ratestore console CSRF token\x00" + cookie))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// csrfOK reports whether r bears the CSRF token of the session of
// cookie, compared in constant time.
func csrfOK(r *http.Request, cookie string) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(csrfOf(cookie))) == 1
}

// sessionCookies returns the values of r's session cookies, maxCookies
// at most.
func sessionCookies(r *http.Request) []string {
	var values []string
	for _, ck := range r.CookiesNamed(CookieName) {
		if ck.Value != "" && len(values) < maxCookies {
			values = append(values, ck.Value)
		}
	}
	return values
}

// cookieIDs returns the ids of r's session cookies.
func cookieIDs(r *http.Request) [][sha256.Size]byte {
	var ids [][sha256.Size]byte
	for _, v := range sessionCookies(r) {
		ids = append(ids, sha256.Sum256([]byte(v)))
	}
	return ids
}

// sessionOf returns the live session of r's cookies: nil when there is
// none, or a refusal when r carries a session cookie but comes from a
// page of another origin (403, see crossSite), or the store fails.
func (c *Console) sessionOf(r *http.Request) (*live, *refusal) {
	cookies := sessionCookies(r)
	if len(cookies) == 0 {
		return nil, nil
	}
	if c.crossSite(r) {
		return nil, crossSiteRefusal()
	}
	now := c.now()
	c.maybeSweep(r.Context(), now)
	for _, ck := range cookies {
		id := sha256.Sum256([]byte(ck))
		expires, ok, err := c.store.lookup(r.Context(), id)
		if err != nil {
			return nil, c.storeRefusal(r, err)
		}
		if ok && now.Before(expires) {
			return &live{id: id, cookie: ck, expires: expires}, nil
		}
	}
	return nil, nil
}

// maybeSweep sweeps expired sessions if the last sweep is sweepEvery old.
func (c *Console) maybeSweep(ctx context.Context, now time.Time) {
	next := c.nextSweep.Load()
	if now.UnixNano() < next || !c.nextSweep.CompareAndSwap(next, now.Add(sweepEvery).UnixNano()) {
		return
	}
	if err := c.store.sweep(ctx, now); err != nil {
		c.log.LogAttrs(ctx, slog.LevelError, "console: sweeping expired sessions", slog.String("error", err.Error()))
	}
}

// storeRefusal logs err, of the session store, and returns the refusal of
// a request it failed: what is wrong is in the log, not the answer.
func (c *Console) storeRefusal(r *http.Request, err error) *refusal {
	c.log.LogAttrs(r.Context(), slog.LevelError, "console: session store", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	if errors.Is(err, errTooMany) {
		return &refusal{status: http.StatusServiceUnavailable, code: codeStore, msg: "too many sessions: sign out of some, or wait for them to expire"}
	}
	return &refusal{status: http.StatusInternalServerError, code: codeStore, msg: "the console's sessions could not be read or written: see the gateway's log"}
}

func crossSiteRefusal() *refusal {
	return &refusal{status: http.StatusForbidden, code: codeCrossSite,
		msg: "a page of another site may not use the console's session: open the console at its own address (behind a proxy: pass the Host field through, and say whether it serves TLS: --secure-cookie)"}
}

// Sessions returns the number of live sessions, for tests and metrics.
// Sessions in a store are swept first, a page of them.
func (c *Console) Sessions(ctx context.Context) (int, error) {
	return c.store.count(ctx, c.now())
}

// random returns 32 random bytes, base64url without padding.
func random() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails: see crypto/rand.Read
	return base64.RawURLEncoding.EncodeToString(b)
}

// memorySessions keeps sessions in memory, those of a Console without
// Options.Sessions: a restart forgets them. It holds MaxSessions at most,
// forgetting the oldest to make room.
type memorySessions struct {
	max   int
	mu    sync.Mutex
	byID  map[[sha256.Size]byte]*list.Element // values *memorySession
	order *list.List                          // oldest first
}

type memorySession struct {
	id      [sha256.Size]byte
	expires time.Time
}

func newMemorySessions(max int) *memorySessions {
	return &memorySessions{max: max, byID: make(map[[sha256.Size]byte]*list.Element), order: list.New()}
}

func (m *memorySessions) lookup(_ context.Context, id [sha256.Size]byte) (time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.byID[id]; e != nil {
		return e.Value.(*memorySession).expires, true, nil
	}
	return time.Time{}, false, nil
}

func (m *memorySessions) add(_ context.Context, id [sha256.Size]byte, now, expires time.Time, forget [][sha256.Size]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remove(forget)
	m.expire(now)
	for m.order.Len() >= m.max {
		m.drop(m.order.Front())
	}
	m.byID[id] = m.order.PushBack(&memorySession{id: id, expires: expires})
	return nil
}

func (m *memorySessions) forget(_ context.Context, ids [][sha256.Size]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remove(ids)
	return nil
}

// remove forgets the sessions of ids; m.mu is held.
func (m *memorySessions) remove(ids [][sha256.Size]byte) {
	for _, id := range ids {
		if e := m.byID[id]; e != nil {
			m.drop(e)
		}
	}
}

// expire forgets the sessions expired at now, the oldest first (every
// session of a Console lasts as long); m.mu is held.
func (m *memorySessions) expire(now time.Time) {
	for e := m.order.Front(); e != nil && !now.Before(e.Value.(*memorySession).expires); e = m.order.Front() {
		m.drop(e)
	}
}

// drop forgets the session of e; m.mu is held.
func (m *memorySessions) drop(e *list.Element) {
	delete(m.byID, m.order.Remove(e).(*memorySession).id)
}

func (m *memorySessions) sweep(_ context.Context, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	return nil
}

func (m *memorySessions) count(_ context.Context, now time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	return m.order.Len(), nil
}
