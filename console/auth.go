package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ratestore/ratestore/admin"
)

// authorize decides whether r may have an operator's route that is not
// the console's own (see Handles): the admin API and the metrics. ok is
// true when it may, and actor names who r comes from (admin.ActorToken, or
// the session's admin.SessionActor); otherwise status, code and msg are
// the refusal, for the caller to answer with its error body
// (ErrorType(status) is its type; a 429 has RetryAfter(r)).
//
// A request with an Authorization field is judged by it alone, as before
// the console: it must be "Bearer <admin token>" (401 missing_admin_token
// or invalid_admin_token; 429 too_many_attempts while its address is
// slowed down). A request without one needs a live session cookie (401
// no_session for an expired or forgotten one, missing_admin_token for
// none), and for any method but GET and HEAD the session's CSRF token in
// X-CSRF-Token (403 csrf_failed). A read-only Console then refuses every
// method but GET and HEAD (403 read_only), whoever asks.
func (c *Console) authorize(r *http.Request) (actor string, ok bool, status int, code, msg string) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		actor = admin.ActorToken
		ok, status, code, msg = c.bearer(r, auth)
	} else {
		actor, ok, status, code, msg = c.cookie(r)
	}
	if ok && c.readOnly && !safeMethod(r.Method) {
		return "", false, http.StatusForbidden, codeReadOnly, "this console is read-only: it can show the database, not change it"
	}
	return actor, ok, status, code, msg
}

// bearer judges a request by its Authorization field, auth.
func (c *Console) bearer(r *http.Request, auth string) (ok bool, status int, code, msg string) {
	scheme, token, _ := strings.Cut(auth, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false, http.StatusUnauthorized, codeMissing, "the admin API needs the admin token: send it as Authorization: Bearer <token>"
	}
	switch ok, wait := c.check(r, token); {
	case wait > 0:
		return false, http.StatusTooManyRequests, codeTooMany, tooManyMessage(wait)
	case !ok:
		return false, http.StatusUnauthorized, codeInvalid, "the admin token is wrong"
	}
	return true, 0, "", ""
}

// cookie judges a request without an Authorization field by its session
// cookie and CSRF token.
func (c *Console) cookie(r *http.Request) (actor string, ok bool, status int, code, msg string) {
	s, had := c.live(r)
	switch {
	case s == nil && had:
		return "", false, http.StatusUnauthorized, codeNoSess, "the console's session has expired or was signed out: sign in again"
	case s == nil:
		return "", false, http.StatusUnauthorized, codeMissing, "the admin API needs the admin token: send it as Authorization: Bearer <token>, or sign in to the console at /admin/"
	case !safeMethod(r.Method) && !s.csrfOK(r):
		return "", false, http.StatusForbidden, codeCSRF, csrfMessage
	}
	return admin.SessionActor(hex.EncodeToString(s.id[:])), true, 0, "", ""
}

// check reports whether token is the admin token; wait > 0 when r's
// address is slowed down, and token was not looked at. A wrong token
// counts against r's address.
//
// The comparison takes the same time whatever the token: both sides are
// SHA-256 digests, of the same length whatever the tokens' lengths, and
// subtle.ConstantTimeCompare reads every byte of both. What a guesser
// could time is the hashing of their own guess, which tells nothing of the
// token. (The tests do not time it: a timing test would be flaky and prove
// little; the construction is the proof.)
func (c *Console) check(r *http.Request, token string) (ok bool, wait time.Duration) {
	h := sha256.Sum256([]byte(token))
	addr, now := remoteAddr(r), c.now()
	c.failMu.Lock()
	defer c.failMu.Unlock()
	if wait = c.fails.wait(addr, now); wait > 0 {
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: too many wrong admin tokens: refused unchecked",
			slog.String("remote", addr), slog.String("path", r.URL.Path), slog.Int64("retry_after", retrySeconds(wait)))
		return false, wait
	}
	if subtle.ConstantTimeCompare(h[:], c.hash[:]) == 1 && c.hash != [sha256.Size]byte{} {
		return true, 0
	}
	c.fails.fail(addr, now)
	c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: wrong admin token",
		slog.String("remote", addr), slog.String("path", r.URL.Path))
	return false, 0
}

// RetryAfter returns how long r's address must wait before a token of its
// is checked again: 0 when one would be now. It is the Retry-After of
// Authorize's 429.
func (c *Console) RetryAfter(r *http.Request) time.Duration {
	addr, now := remoteAddr(r), c.now()
	c.failMu.Lock()
	defer c.failMu.Unlock()
	return c.fails.wait(addr, now)
}
