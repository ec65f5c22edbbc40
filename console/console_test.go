package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/fakeclock"
)

const token = "console-test-token-0123456789"

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// call serves one request on c from remote, with the cookie and CSRF
// token given ("" for none), and returns the recorded answer.
func call(c *Console, method, path, remote, body, cookie, csrf string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = remote
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	}
	if csrf != "" {
		r.Header.Set(CSRFHeader, csrf)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

// signIn signs in from remote and returns the cookie and CSRF token.
func signIn(t *testing.T, c *Console, remote string) (cookie, csrf string) {
	t.Helper()
	w := call(c, "POST", "/admin/session", remote, `{"token":"`+token+`"}`, "", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var s Session
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &s))
	cks := w.Result().Cookies()
	require.Len(t, cks, 1)
	return cks[0].Value, s.CSRF
}

// authorize asks c about a request to path from remote with an
// Authorization field (none when "") and a session.
func authorize(c *Console, method, remote, auth, cookie, csrf string) (bool, int, string) {
	r := httptest.NewRequest(method, "/admin/keys", nil)
	r.RemoteAddr = remote
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	}
	if csrf != "" {
		r.Header.Set(CSRFHeader, csrf)
	}
	_, ok, status, code, _ := c.authorize(r)
	return ok, status, code
}

// TestSlowDownGlobal: MaxGlobalFailures wrong tokens from as many
// addresses slow every address down, until the first is a minute old.
func TestSlowDownGlobal(t *testing.T) {
	clock := fakeclock.New(t0)
	c := New(Options{Token: token, Now: clock.Now})
	for i := range MaxGlobalFailures {
		_, status, code := authorize(c, "GET", fmt.Sprintf("10.0.%d.%d:1234", i/200, i%200), "Bearer wrong", "", "")
		require.Equal(t, []any{401, codeInvalid}, []any{status, code}, i)
		clock.Advance(100 * time.Millisecond)
	}
	for _, auth := range []string{"Bearer wrong", "Bearer " + token} {
		_, status, code := authorize(c, "GET", "192.0.2.1:1", auth, "", "")
		require.Equal(t, []any{429, codeTooMany}, []any{status, code})
	}
	r := httptest.NewRequest("GET", "/admin/keys", nil)
	require.Equal(t, FailureWindow-5*time.Second, c.RetryAfter(r))
	w := call(c, "POST", "/admin/session", "192.0.2.1:1", `{"token":"`+token+`"}`, "", "")
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "55", w.Header().Get("Retry-After"))
	require.Equal(t, rateErr(codeTooMany, "too many wrong admin tokens: retry in 55s"), w.Body.String())

	clock.Advance(55*time.Second + 100*time.Millisecond) // the first two drop out
	ok, _, _ := authorize(c, "GET", "192.0.2.1:1", "Bearer "+token, "", "")
	require.True(t, ok)
	require.LessOrEqual(t, len(c.fails.byAddr), MaxGlobalFailures, "the addresses stay bounded")
	_, status, _ := authorize(c, "GET", "192.0.2.1:1", "Bearer wrong", "", "")
	require.Equal(t, 401, status)
	require.Len(t, c.fails.byAddr, MaxGlobalFailures-1, "those a minute old are forgotten")
}

func rateErr(code, msg string) string {
	return `{"type":"error","error":{"type":"rate_limit_error","code":"` + code + `","message":"` + msg + `"}}` + "\n"
}

// TestSlowDownAddress: failures are counted by address (an IPv6 host by
// its /64); another address is not slowed down.
func TestSlowDownAddress(t *testing.T) {
	clock := fakeclock.New(t0)
	c := New(Options{Token: token, Now: clock.Now})
	for i := range MaxFailures {
		_, status, _ := authorize(c, "GET", fmt.Sprintf("[2001:db8::%d]:443", i), "Bearer wrong", "", "")
		require.Equal(t, 401, status)
	}
	_, status, _ := authorize(c, "GET", "[2001:db8::ffff]:1", "Bearer "+token, "", "")
	require.Equal(t, 429, status, "the same /64")
	ok, _, _ := authorize(c, "GET", "[2001:db8:0:1::1]:1", "Bearer "+token, "", "")
	require.True(t, ok, "another /64")
	ok, _, _ = authorize(c, "GET", "127.0.0.1:1", "Bearer "+token, "", "")
	require.True(t, ok)

	require.Equal(t, "192.0.2.7", remoteAddr(&http.Request{RemoteAddr: "[::ffff:192.0.2.7]:80"}))
	require.Equal(t, "2001:db8::/64", remoteAddr(&http.Request{RemoteAddr: "[2001:db8::1%eth0]:80"}))
	require.Equal(t, "@", remoteAddr(&http.Request{RemoteAddr: "@"}), "a unix socket's peer")
}

// TestSessions: the cookie's attributes follow the TTL; sessions expire,
// the oldest is forgotten beyond MaxSessions, and a sign-in forgets the
// session it came with.
func TestSessions(t *testing.T) {
	clock := fakeclock.New(t0)
	var logs bytes.Buffer
	c := New(Options{TokenHash: sha256.Sum256([]byte(token)), Now: clock.Now, SessionTTL: 90 * time.Second, MaxSessions: 3,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	w := call(c, "POST", "/admin/session", "127.0.0.1:1", `{"token":" `+token+`\n"}`, "", "")
	require.Equal(t, http.StatusOK, w.Code, "surrounding spaces are no part of the token")
	ck := w.Result().Cookies()[0]
	require.Equal(t, []any{"/admin", 90, true, http.SameSiteStrictMode, false}, []any{ck.Path, ck.MaxAge, ck.HttpOnly, ck.SameSite, ck.Secure})
	require.JSONEq(t, fmt.Sprintf(`{"csrf":%q,"expires_at":"2026-11-26T12:01:30Z","read_only":false}`, sessionOf(t, c, ck.Value).csrf), w.Body.String())

	var cookies []string
	for range 3 {
		cookie, _ := signIn(t, c, "127.0.0.1:1")
		cookies = append(cookies, cookie)
	}
	require.Equal(t, 3, c.Sessions())
	require.Nil(t, sessionOf(t, c, ck.Value), "the oldest, forgotten for the fourth")
	clock.Advance(89 * time.Second)
	ok, _, _ := authorize(c, "GET", "127.0.0.1:1", "", cookies[0], "")
	require.True(t, ok)
	clock.Advance(time.Second)
	ok, status, code := authorize(c, "GET", "127.0.0.1:1", "", cookies[0], "")
	require.Equal(t, []any{false, 401, codeNoSess}, []any{ok, status, code})
	require.Zero(t, c.Sessions())

	cookie, _ := signIn(t, c, "127.0.0.1:1")
	w = call(c, "POST", "/admin/session", "127.0.0.1:1", `{"token":"`+token+`"}`, cookie, "")
	require.Equal(t, http.StatusOK, w.Code)
	require.Nil(t, sessionOf(t, c, cookie), "signing in again forgets the session it came with")
	require.Equal(t, 1, c.Sessions())
	require.NotContains(t, logs.String(), token)
	require.NotContains(t, logs.String(), cookie)
}

// sessionOf returns the live session of cookie, or nil.
func sessionOf(t *testing.T, c *Console, cookie string) *session {
	t.Helper()
	r := httptest.NewRequest("GET", "/admin/session", nil)
	r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	s, _ := c.live(r)
	return s
}

// TestAuthorize: bearer or session; CSRF for changes; read-only refuses
// changes whoever asks, and serves reads and the session.
func TestAuthorize(t *testing.T) {
	for _, ro := range []bool{false, true} {
		c := New(Options{Token: token, ReadOnly: ro})
		cookie, csrf := signIn(t, c, "127.0.0.1:1")
		for _, tc := range []struct {
			method, auth, cookie, csrf string
			status                     int
			code                       string
		}{
			{"GET", "", "", "", 401, codeMissing},
			{"GET", "Basic " + token, cookie, csrf, 401, codeMissing},
			{"GET", "Bearer " + token, "", "", 0, ""},
			{"GET", "", cookie, "", 0, ""},
			{"HEAD", "", cookie, "", 0, ""},
			{"POST", "", cookie, "", 403, codeCSRF},
			{"DELETE", "", cookie, cookie, 403, codeCSRF},
			{"PATCH", "", cookie, csrf, 0, ""},
			{"POST", "Bearer " + token, "", "", 0, ""},
			{"POST", "Bearer " + token, "unknown", "", 0, ""},
			{"GET", "", "unknown", csrf, 401, codeNoSess},
		} {
			if ro && tc.status == 0 && !safeMethod(tc.method) {
				tc.status, tc.code = 403, codeReadOnly
			}
			ok, status, code := authorize(c, tc.method, "127.0.0.1:1", tc.auth, tc.cookie, tc.csrf)
			require.Equal(t, []any{tc.status == 0, tc.status, tc.code}, []any{ok, status, code}, "read-only %v: %+v", ro, tc)
		}
		w := call(c, "GET", "/admin/session", "127.0.0.1:1", "", cookie, "")
		require.Equal(t, http.StatusOK, w.Code)
		require.Contains(t, w.Body.String(), fmt.Sprintf(`"read_only":%v`, ro))
		w = call(c, "DELETE", "/admin/session", "127.0.0.1:1", "", cookie, csrf)
		require.Equal(t, http.StatusNoContent, w.Code)
	}
	none := New(Options{})
	ok, status, _ := authorize(none, "GET", "127.0.0.1:1", "Bearer x", "", "")
	require.Equal(t, []any{false, 401}, []any{ok, status}, "without a token, none is right")
}

// TestSessionRoute: the sign-in's bad bodies and methods.
func TestSessionRoute(t *testing.T) {
	c := New(Options{Token: token})
	for body, want := range map[string]int{
		`{"token":"` + token + `"`: 400,
		`["` + token + `"]`:        400,
		`{"token":""}`:             401,
		`{}`:                       401,
		`{"token":"` + strings.Repeat("x", 5000) + `"}`: 400,
	} {
		w := call(c, "POST", "/admin/session", "127.0.0.1:1", body, "", "")
		require.Equal(t, want, w.Code, body)
		require.NotContains(t, w.Body.String(), token)
		require.Empty(t, w.Result().Cookies())
	}
	w := call(c, "PUT", "/admin/session", "127.0.0.1:1", "", "", "")
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "GET, HEAD, POST, DELETE", w.Header().Get("Allow"))
	w = call(c, "GET", "/admin/other", "127.0.0.1:1", "", "", "")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.True(t, Handles("/admin/session") && Handles("/admin") && Handles("/admin/") && Handles("/admin/assets/x.js"))
	require.False(t, Handles("/admin/keys") || Handles("/admin/live") || Handles("/metrics") || Handles("/admin/sessions"))
}

// TestAssets: gzipped for a client that takes it, identical once
// inflated; HEAD has no body; q=0 refuses gzip.
func TestAssets(t *testing.T) {
	c := New(Options{Token: token})
	plain := call(c, "GET", "/admin/", "127.0.0.1:1", "", "", "")
	require.Equal(t, http.StatusOK, plain.Code)
	require.Empty(t, plain.Header().Get("Content-Encoding"))
	require.Equal(t, "Accept-Encoding", plain.Header().Get("Vary"))

	r := httptest.NewRequest("GET", "/admin/", nil)
	r.Header.Set("Accept-Encoding", "br, gzip;q=0.8")
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	require.Equal(t, "gzip", w.Header().Get("Content-Encoding"))
	require.NotEqual(t, plain.Header().Get("ETag"), w.Header().Get("ETag"))
	zr, err := gzip.NewReader(w.Body)
	require.NoError(t, err)
	inflated, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, plain.Body.Bytes(), inflated)

	r.Header.Set("Accept-Encoding", "gzip;q=0")
	w = httptest.NewRecorder()
	c.ServeHTTP(w, r)
	require.Empty(t, w.Header().Get("Content-Encoding"))

	w = call(c, "HEAD", "/admin/", "127.0.0.1:1", "", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	require.Zero(t, w.Body.Len())
	require.Equal(t, plain.Header().Get("Content-Length"), w.Header().Get("Content-Length"))

	for _, name := range Assets() {
		require.NotEqual(t, "application/octet-stream", contentType(name), name)
	}
	require.Equal(t, "text/javascript; charset=utf-8", contentType("app.js"))
}
