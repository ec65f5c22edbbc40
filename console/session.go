package console

import (
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// The error codes of the console's and Authorize's refusals.
const (
	codeMissing  = "missing_admin_token"
	codeInvalid  = "invalid_admin_token"
	codeNoSess   = "no_session"
	codeCSRF     = "csrf_failed"
	codeReadOnly = "read_only"
	codeTooMany  = "too_many_attempts"
)

// maxSignInBody bounds the body of a sign-in: {"token": ...} and a token
// of a few hundred bytes at most.
const maxSignInBody = 4 << 10

// Session is the answer to POST and GET /admin/session: what the page
// needs to know of its session. The cookie itself is never in a body.
type Session struct {
	// CSRF is the token the page sends in X-CSRF-Token with every request
	// that is not a GET or HEAD.
	CSRF      string    `json:"csrf"`
	ExpiresAt time.Time `json:"expires_at"` // RFC 3339, UTC, to the second
	ReadOnly  bool      `json:"read_only"`  // the console can look, not change: the page hides its buttons
}

// session is a live session, kept by the SHA-256 of its cookie. Its fields
// do not change once it is made.
type session struct {
	id      [sha256.Size]byte
	csrf    string
	expires time.Time
}

// serveSession answers /admin/session: sign in, see the session, sign out.
func (c *Console) serveSession(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		c.signIn(w, r)
	case http.MethodGet, http.MethodHead:
		s, _ := c.live(r)
		if s == nil {
			writeError(w, http.StatusUnauthorized, typeAuth, codeNoSess, "no session: sign in with the admin token")
			return
		}
		writeJSON(w, http.StatusOK, c.answer(s))
	case http.MethodDelete:
		c.signOut(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, typeInvalid, "method_not_allowed", r.Method+" /admin/session: method not allowed; allowed: GET, HEAD, POST, DELETE")
	}
}

// signIn answers POST /admin/session {"token"}: a new session and its
// cookie for the right token; 401 for a wrong one, 429 while the address
// is slowed down. A session the request had already is forgotten: each
// sign-in starts afresh.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
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
	switch ok, wait := c.check(r, token); {
	case wait > 0:
		writeRetry(w, wait)
		return
	case !ok:
		writeError(w, http.StatusUnauthorized, typeAuth, codeInvalid, "the admin token is wrong")
		return
	}
	c.forget(r)
	cookie, s := c.newSession()
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: cookie, Path: "/admin", MaxAge: max(1, int(c.ttl/time.Second)),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: signed in", slog.String("remote", remoteAddr(r)),
		slog.Time("expires_at", s.expires.UTC()), slog.Bool("read_only", c.readOnly))
	writeJSON(w, http.StatusOK, c.answer(s))
}

// signOut answers DELETE /admin/session: the session is forgotten and its
// cookie expired. A live session needs its CSRF token, so that no other
// page signs the operator out; without one there is nothing to forget,
// and the cookie is expired all the same.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if s, _ := c.live(r); s != nil {
		if !s.csrfOK(r) {
			writeError(w, http.StatusForbidden, typePermission, codeCSRF, csrfMessage)
			return
		}
		c.forget(r)
		c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: signed out", slog.String("remote", remoteAddr(r)))
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: "", Path: "/admin", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	w.WriteHeader(http.StatusNoContent)
}

const csrfMessage = "this change needs the session's CSRF token in X-CSRF-Token: reload the console"

// answer is the Session of s.
func (c *Console) answer(s *session) Session {
	return Session{CSRF: s.csrf, ExpiresAt: s.expires.UTC().Truncate(time.Second), ReadOnly: c.readOnly}
}

// csrfOK reports whether r bears s's CSRF token, compared in constant time.
func (s *session) csrfOK(r *http.Request) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

// newSession makes a session and returns it with its cookie's value: 32
// random bytes, of which only the SHA-256 is kept. The oldest sessions
// are forgotten to keep MaxSessions at most.
func (c *Console) newSession() (cookie string, s *session) {
	now := c.now()
	cookie, s = random(), &session{csrf: random(), expires: now.Add(c.ttl)}
	s.id = sha256.Sum256([]byte(cookie))
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.order.Front(); e != nil && (c.order.Len() >= c.max || !now.Before(e.Value.(*session).expires)); e = c.order.Front() {
		c.remove(e)
	}
	c.sessions[s.id] = c.order.PushBack(s)
	return cookie, s
}

// live returns the live session of r's cookie, or nil; had reports
// whether r has a session cookie at all. An expired session is
// forgotten.
func (c *Console) live(r *http.Request) (s *session, had bool) {
	now := c.now()
	for _, ck := range r.CookiesNamed(CookieName) {
		if ck.Value == "" {
			continue
		}
		had = true
		id := sha256.Sum256([]byte(ck.Value))
		c.mu.Lock()
		e := c.sessions[id]
		switch {
		case e == nil:
		case now.Before(e.Value.(*session).expires):
			s = e.Value.(*session)
		default:
			c.remove(e)
		}
		c.mu.Unlock()
		if s != nil {
			return s, true
		}
	}
	return nil, had
}

// forget forgets the sessions of r's cookies.
func (c *Console) forget(r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ck := range r.CookiesNamed(CookieName) {
		if e := c.sessions[sha256.Sum256([]byte(ck.Value))]; e != nil {
			c.remove(e)
		}
	}
}

// remove forgets the session of e; c.mu is held.
func (c *Console) remove(e *list.Element) {
	delete(c.sessions, c.order.Remove(e).(*session).id)
}

// Sessions returns the number of live sessions, for tests and metrics.
func (c *Console) Sessions() int {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for e := c.order.Front(); e != nil; e = e.Next() {
		if now.Before(e.Value.(*session).expires) {
			n++
		}
	}
	return n
}

// random returns 32 random bytes, base64url without padding.
func random() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails: see crypto/rand.Read
	return base64.RawURLEncoding.EncodeToString(b)
}
