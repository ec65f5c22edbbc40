package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/apierror"
)

// MinTokenLength is the least length of an admin token, in bytes: 32
// random bytes, or 32 hex digits (128 bits), are beyond any number of
// guesses, however many addresses make them.
const MinTokenLength = 32

// ErrWeakToken is matched by the error of New and CheckToken for an admin
// token shorter than MinTokenLength.
var ErrWeakToken = errors.New("want at least 32 random bytes; make one with: openssl rand -hex 32")

// CheckToken returns an error matching ErrWeakToken when token is too
// short to be an admin token, and nil otherwise.
func CheckToken(token string) error {
	if len(token) < MinTokenLength {
		return fmt.Errorf("the admin token is %d bytes: %w", len(token), ErrWeakToken)
	}
	return nil
}

// refusal is why a request may not have what it asked for: the status,
// code and message of its answer, and for a 429 the wait.
type refusal struct {
	status    int
	code, msg string
	wait      time.Duration
}

// write answers the refusal with the gateway's error body; a 429 has
// Retry-After.
func (f *refusal) write(w http.ResponseWriter) {
	switch {
	case f.status == http.StatusTooManyRequests:
		writeRetry(w, f.wait)
	case f.status >= 500:
		writeError(w, f.status, apierror.API, f.code, f.msg)
	default:
		writeError(w, f.status, ErrorType(f.status), f.code, f.msg)
	}
}

// authorize decides whether r, from client, may have an operator's route
// that is not the console's own (see Handles): the admin API and the
// metrics. It returns who r comes from (admin.ActorToken, or the
// session's admin.SessionActor), or the refusal to answer.
//
// A request with an Authorization field is judged by it alone, as before
// the console: it must be "Bearer <admin token>" (401 missing_admin_token
// or invalid_admin_token; 429 too_many_attempts while its address is
// slowed down). A request without one needs a live session cookie (401
// no_session for an expired or forgotten one, missing_admin_token for
// none), sent by a page of the console's own origin (403 cross_site,
// GETs included, see crossSite), and for any method but GET and HEAD the
// session's CSRF token in X-CSRF-Token (403 csrf_failed). A read-only
// Console then refuses every method but GET and HEAD (403 read_only),
// whoever asks.
func (c *Console) authorize(r *http.Request, client netip.Addr) (actor string, ref *refusal) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		actor, ref = admin.ActorToken, c.bearer(r, client, auth)
	} else {
		actor, ref = c.cookie(r)
	}
	if ref == nil && c.readOnly && !safeMethod(r.Method) {
		return "", &refusal{status: http.StatusForbidden, code: codeReadOnly, msg: "this console is read-only: it can show the database, not change it"}
	}
	return actor, ref
}

// bearer judges a request by its Authorization field, auth.
func (c *Console) bearer(r *http.Request, client netip.Addr, auth string) *refusal {
	scheme, token, _ := strings.Cut(auth, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return &refusal{status: http.StatusUnauthorized, code: codeMissing, msg: "the admin API needs the admin token: send it as Authorization: Bearer <token>"}
	}
	return c.check(r, client, token)
}

// cookie judges a request without an Authorization field by its session
// cookie and CSRF token.
func (c *Console) cookie(r *http.Request) (actor string, ref *refusal) {
	s, ref := c.sessionOf(r)
	switch {
	case ref != nil:
		return "", ref
	case s == nil && len(sessionCookies(r)) > 0:
		return "", &refusal{status: http.StatusUnauthorized, code: codeNoSess, msg: "the console's session has expired or was signed out: sign in again"}
	case s == nil:
		return "", &refusal{status: http.StatusUnauthorized, code: codeMissing, msg: "the admin API needs the admin token: send it as Authorization: Bearer <token>, or sign in to the console at /admin/"}
	case !safeMethod(r.Method) && !csrfOK(r, s.cookie):
		return "", &refusal{status: http.StatusForbidden, code: codeCSRF, msg: csrfMessage}
	}
	return admin.SessionActor(hex.EncodeToString(s.id[:])), nil
}

// check checks token, sent by client: nil when it is the admin token, and
// otherwise the refusal, 401 for a wrong token, or 429 when client's
// address is slowed down (see throttle), whatever the token. A wrong
// token counts against client's address, and is logged, a line per
// address per minute at most.
//
// The comparison takes the same time whatever the token: both sides are
// SHA-256 digests, of the same length whatever the tokens' lengths, and
// subtle.ConstantTimeCompare reads every byte of both. What a guesser
// could time is the hashing of their own guess, which tells nothing of the
// token. (The tests do not time it: a timing test would be flaky and prove
// little; the construction is the proof.)
func (c *Console) check(r *http.Request, client netip.Addr, token string) *refusal {
	h := sha256.Sum256([]byte(token))
	right := subtle.ConstantTimeCompare(h[:], c.hash[:]) == 1
	now := c.now()
	c.failMu.Lock()
	wait, lines := c.fails.attempt(client, r.URL.Path, now, right)
	c.failMu.Unlock()
	for _, l := range lines {
		c.log.LogAttrs(r.Context(), slog.LevelWarn, l.msg, l.attrs...)
	}
	switch {
	case wait > 0:
		return &refusal{status: http.StatusTooManyRequests, code: codeTooMany, wait: wait}
	case !right:
		return &refusal{status: http.StatusUnauthorized, code: codeInvalid, msg: "the admin token is wrong"}
	}
	return nil
}
