package console

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/fakeclock"
)

// token is the admin token of the tests: 32 bytes, the least accepted.
const token = "console-test-token-0123456789abc"

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// newConsole is New with token, an API and metrics that answer who
// called and from where, and opts' other fields.
func newConsole(t testing.TB, opts Options) *Console {
	t.Helper()
	if opts.Token == "" {
		opts.Token = token
	}
	if opts.API == nil {
		opts.API = callerEcho("api")
	}
	if opts.Metrics == nil {
		opts.Metrics = callerEcho("metrics")
	}
	c, err := New(opts)
	require.NoError(t, err)
	return c
}

// callerEcho answers "name actor client".
func callerEcho(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", name, admin.ActorOf(r.Context()), admin.ClientOf(r.Context()))
	})
}

// call serves one request on c from remote, with the cookie and CSRF
// token given ("" for none), and returns the recorded answer. A body is
// sent as JSON.
func call(c *Console, method, path, remote, body, cookie, csrf string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = remote
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
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

// authorize asks c about a request to /admin/keys from remote with an
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
	_, ref := c.authorize(r, c.client(r))
	if ref == nil {
		return true, 0, ""
	}
	return false, ref.status, ref.code
}

func rateErr(code, msg string) string {
	return `{"type":"error","error":{"type":"rate_limit_error","code":"` + code + `","message":"` + msg + `"}}` + "\n"
}

// TestSlowDownAddress: failures are counted by address (an IPv6 host by
// its /64), and only that address waits, until its oldest failure is a
// minute old; a right token is refused while it waits.
func TestSlowDownAddress(t *testing.T) {
	clock := fakeclock.New(t0)
	c := newConsole(t, Options{Now: clock.Now})
	for i := range MaxFailures {
		_, status, _ := authorize(c, "GET", fmt.Sprintf("[2001:db8::%d]:443", i), "Bearer wrong", "", "")
		require.Equal(t, 401, status)
		clock.Advance(time.Second)
	}
	for _, auth := range []string{"Bearer wrong", "Bearer " + token} {
		_, status, code := authorize(c, "GET", "[2001:db8::ffff]:1", auth, "", "")
		require.Equal(t, []any{429, codeTooMany}, []any{status, code}, "the same /64")
	}
	w := call(c, "POST", "/admin/session", "[2001:db8::1]:1", `{"token":"`+token+`"}`, "", "")
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "55", w.Header().Get("Retry-After"))
	require.Equal(t, rateErr(codeTooMany, "too many wrong admin tokens: retry in 55s"), w.Body.String())
	ok, _, _ := authorize(c, "GET", "[2001:db8:0:1::1]:1", "Bearer "+token, "", "")
	require.True(t, ok, "another /64")
	ok, _, _ = authorize(c, "GET", "127.0.0.1:1", "Bearer "+token, "", "")
	require.True(t, ok)

	clock.Advance(55 * time.Second) // the first failure drops out: one more try
	ok, _, _ = authorize(c, "GET", "[2001:db8::1]:1", "Bearer "+token, "", "")
	require.True(t, ok)
	_, status, _ := authorize(c, "GET", "[2001:db8::1]:1", "Bearer wrong", "", "")
	require.Equal(t, 401, status)
	_, status, _ = authorize(c, "GET", "[2001:db8::1]:1", "Bearer "+token, "", "")
	require.Equal(t, 429, status, "5 failures within the minute again")
}

// TestClientAddress: how a peer's address is read, and counted.
func TestClientAddress(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:80":          "192.0.2.7",
		"[::ffff:192.0.2.7]:80": "192.0.2.7",
		"[2001:db8::1%eth0]:80": "2001:db8::1",
		"@":                     "invalid IP",
		"":                      "invalid IP",
	} {
		require.Equal(t, want, parseAddr(remote).String(), remote)
	}
	require.Equal(t, "192.0.2.7", keyString(throttleKey(netip.MustParseAddr("192.0.2.7"))))
	require.Equal(t, "2001:db8::/64", keyString(throttleKey(netip.MustParseAddr("2001:db8::1"))))
	require.Equal(t, "unknown", keyString(throttleKey(netip.Addr{})), "a Unix socket's peers, together")
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.0/24")},
		prefixes([]netip.Prefix{netip.MustParsePrefix("10.1.2.3/8"), {}, netip.MustParsePrefix("::ffff:192.0.2.0/120")}))
}

// TestSessions: the cookie's attributes follow the TTL; sessions expire,
// the oldest is forgotten beyond MaxSessions, and a sign-in forgets the
// session it came with.
func TestSessions(t *testing.T) {
	clock := fakeclock.New(t0)
	var logs bytes.Buffer
	c := newConsole(t, Options{Now: clock.Now, SessionTTL: 90 * time.Second, MaxSessions: 3,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	w := call(c, "POST", "/admin/session", "127.0.0.1:1", `{"token":" `+token+`\n"}`, "", "")
	require.Equal(t, http.StatusOK, w.Code, "surrounding spaces are no part of the token")
	ck := w.Result().Cookies()[0]
	require.Equal(t, []any{"/admin", 90, true, http.SameSiteStrictMode, false}, []any{ck.Path, ck.MaxAge, ck.HttpOnly, ck.SameSite, ck.Secure})
	require.JSONEq(t, fmt.Sprintf(`{"csrf":%q,"expires_at":"2026-11-26T12:01:30Z","read_only":false}`, csrfOf(ck.Value)), w.Body.String())

	var cookies []string
	for range 3 {
		cookie, _ := signIn(t, c, "127.0.0.1:1")
		cookies = append(cookies, cookie)
	}
	require.Equal(t, 3, sessions(t, c))
	require.False(t, isLive(c, ck.Value), "the oldest, forgotten for the fourth")
	clock.Advance(89 * time.Second)
	ok, _, _ := authorize(c, "GET", "127.0.0.1:1", "", cookies[0], "")
	require.True(t, ok)
	clock.Advance(time.Second)
	ok, status, code := authorize(c, "GET", "127.0.0.1:1", "", cookies[0], "")
	require.Equal(t, []any{false, 401, codeNoSess}, []any{ok, status, code})
	require.Zero(t, sessions(t, c))

	cookie, _ := signIn(t, c, "127.0.0.1:1")
	w = call(c, "POST", "/admin/session", "127.0.0.1:1", `{"token":"`+token+`"}`, cookie, "")
	require.Equal(t, http.StatusOK, w.Code)
	require.False(t, isLive(c, cookie), "signing in again forgets the session it came with")
	require.Equal(t, 1, sessions(t, c))
	require.NotContains(t, logs.String(), token)
	require.NotContains(t, logs.String(), cookie)
}

// sessions is c.Sessions, required to work.
func sessions(t testing.TB, c *Console) int {
	t.Helper()
	n, err := c.Sessions(t.Context())
	require.NoError(t, err)
	return n
}

// isLive reports whether cookie opens a live session of c.
func isLive(c *Console, cookie string) bool {
	return call(c, "GET", "/admin/session", "127.0.0.1:1", "", cookie, "").Code == http.StatusOK
}

// TestAuthorize: bearer or session; CSRF for changes; a cookie from a
// page of another origin is refused, reads included, a bearer token
// is not; read-only refuses changes whoever asks, and serves reads and
// the session.
func TestAuthorize(t *testing.T) {
	for _, ro := range []bool{false, true} {
		c := newConsole(t, Options{ReadOnly: ro})
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
}

// TestCrossSite: which Sec-Fetch-Site and Origin are the console's own.
func TestCrossSite(t *testing.T) {
	c := newConsole(t, Options{})
	secure := newConsole(t, Options{SecureCookie: true})
	for _, tc := range []struct {
		site, origin, host string
		secure, cross      bool
	}{
		{"", "", "gw", false, false},
		{"same-origin", "", "gw", false, false},
		{"same-origin", "http://gw", "gw", false, false},
		{"", "http://GW:80", "gw", false, false},
		{"", "http://gw/", "gw:80", false, false},
		{"", "https://gw", "gw", true, false},
		{"", "https://gw:443", "gw", true, false},
		{"cross-site", "", "gw", false, true},
		{"same-site", "", "gw", false, true},
		{"none", "", "gw", false, true},
		{"same-origin", "https://evil.example", "gw", false, true},
		{"", "http://gw:8080", "gw", false, true},
		{"", "https://gw", "gw", false, true},
		{"", "http://gw", "gw", true, true},
		{"", "null", "gw", false, true},
		{"", "http://user@gw", "gw", false, true},
		{"", "http://gw/path", "gw", false, true},
	} {
		r := httptest.NewRequest("GET", "/admin/keys", nil)
		r.Host = tc.host
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		cc := c
		if tc.secure {
			cc = secure
		}
		require.Equal(t, tc.cross, cc.crossSite(r), "%+v", tc)
	}
}

// TestSessionRoute: the sign-in's bad bodies, media types and methods.
func TestSessionRoute(t *testing.T) {
	c := newConsole(t, Options{})
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
	for _, ctype := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "text/json"} {
		r := httptest.NewRequest("POST", "/admin/session", strings.NewReader(`{"token":"`+token+`"}`))
		r.Header.Set("Content-Type", ctype)
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		require.Equal(t, http.StatusUnsupportedMediaType, w.Code, ctype)
		require.Contains(t, w.Body.String(), `"code":"unsupported_media_type"`)
		require.Empty(t, w.Result().Cookies())
	}
	r := httptest.NewRequest("POST", "/admin/session", strings.NewReader(`{"token":"`+token+`"}`))
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code, "a charset is fine")

	w = call(c, "PUT", "/admin/session", "127.0.0.1:1", "", "", "")
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "GET, HEAD, POST, DELETE", w.Header().Get("Allow"))
	bare, err := New(Options{Token: token})
	require.NoError(t, err)
	w = call(bare, "GET", "/admin/other", "127.0.0.1:1", "", "", "")
	require.Equal(t, http.StatusNotFound, w.Code, "no API")
	require.True(t, Handles("/admin/session") && Handles("/admin") && Handles("/admin/") && Handles("/admin/assets/x.js"))
	require.False(t, Handles("/admin/keys") || Handles("/admin/live") || Handles("/metrics") || Handles("/admin/sessions"))
}

// TestTokenLength: a token of 31 bytes is refused, with how to make one;
// 32 are accepted.
func TestTokenLength(t *testing.T) {
	_, err := New(Options{Token: token[:31]})
	require.ErrorIs(t, err, ErrWeakToken)
	require.EqualError(t, err, "console: the admin token is 31 bytes: want at least 32 random bytes; make one with: openssl rand -hex 32")
	_, err = New(Options{})
	require.ErrorIs(t, err, ErrWeakToken, "no token at all")
	c, err := New(Options{Token: token[:32]})
	require.NoError(t, err)
	require.NotNil(t, c)
	require.NoError(t, CheckToken(strings.Repeat("x", 32)))
}

// TestAssets: gzipped for a client that takes it, identical once
// inflated; HEAD has no body; q=0 refuses gzip.
func TestAssets(t *testing.T) {
	c := newConsole(t, Options{})
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
