package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/ratestore/ratestore/keystore"
)

// consoleTTL is the session length of the console tests' gateways.
const consoleTTL = time.Hour

// newConsoleEnv is an env whose gateway has the admin API and the console
// of op in front, with adminToken and sessions of consoleTTL, on the
// env's fake clock.
func newConsoleEnv(t testing.TB, op operator) *env {
	op.token = adminToken
	if op.ttl == 0 {
		op.ttl = consoleTTL
	}
	return newEnvOp(t, Options{}, op)
}

// signIn signs in to the console with token, requires 200, and returns
// the session cookie and the answer.
func (e *env) signIn(token string) (*http.Cookie, console.Session) {
	e.t.Helper()
	resp, body := e.admin("POST", "/admin/session", "", map[string]string{"token": token})
	require.Equal(e.t, http.StatusOK, resp.StatusCode, string(body))
	var s console.Session
	require.NoError(e.t, json.Unmarshal(body, &s))
	for _, ck := range resp.Cookies() {
		if ck.Name == console.CookieName {
			return ck, s
		}
	}
	e.t.Fatalf("no session cookie in %v", resp.Header)
	return nil, s
}

// inSession sends an admin request with the session cookie ck (none when
// nil) and X-CSRF-Token csrf (none when "").
func (e *env) inSession(method, path string, ck *http.Cookie, csrf string, body any) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(e.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ck != nil {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	if csrf != "" {
		req.Header.Set(console.CSRFHeader, csrf)
	}
	return e.do(req)
}

// sessions is the number of the console's live sessions.
func (e *env) sessions() int {
	e.t.Helper()
	n, err := e.console.Sessions(context.Background())
	require.NoError(e.t, err)
	return n
}

// adminRoute is a route of the admin API to try, with ids filled in.
type adminRoute struct{ method, path string }

// adminRouteList is every route of the gateway's admin mux, and the
// metrics, with unknown ids in their paths.
func (e *env) adminRouteList() []adminRoute {
	var routes []adminRoute
	api, err := admin.New(admin.Options{Keys: e.ks})
	require.NoError(e.t, err)
	for _, p := range append(api.Patterns(), "GET /metrics") {
		method, path, ok := strings.Cut(p, " ")
		require.True(e.t, ok, p)
		path = strings.NewReplacer("/keys/{id}", "/keys/key_0123456789abcdef", "/teams/{id}", "/teams/team_0123456789abcdef", "/end-users/{name}", "/end-users/u-1").Replace(path)
		require.NotContains(e.t, path, "{", p)
		routes = append(routes, adminRoute{method, path})
	}
	require.Contains(e.t, routes, adminRoute{"GET", "/admin/live"})
	require.Contains(e.t, routes, adminRoute{"PATCH", "/admin/keys/key_0123456789abcdef"})
	return routes
}

// authorized requires that an answer is the route's own, not a refusal
// of its caller.
func authorized(t *testing.T, r adminRoute, resp *http.Response, body []byte) {
	t.Helper()
	require.NotContains(t, []int{401, 403, 429}, resp.StatusCode, "%v: %s", r, body)
}

// TestConsoleSessionCookie: signing in sets a cookie that scripts cannot
// read, that no other site makes the browser send, for /admin only, that
// expires; Secure over TLS. GET /admin/session answers the same session.
func TestConsoleSessionCookie(t *testing.T) {
	e := newConsoleEnv(t, operator{})
	resp, body := e.admin("POST", "/admin/session", "", map[string]string{"token": adminToken})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	raw := resp.Header.Get("Set-Cookie")
	for _, attr := range []string{console.CookieName + "=", "Path=/admin", "Max-Age=3600", "HttpOnly", "SameSite=Strict"} {
		require.Contains(t, raw, attr)
	}
	require.NotContains(t, raw, "Secure", "not over plain http")
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	m := decode(t, body, "csrf", "expires_at", "read_only")
	require.Equal(t, start.Add(consoleTTL).Format(time.RFC3339), m["expires_at"])
	require.Equal(t, false, m["read_only"])
	ck := resp.Cookies()[0]
	require.Len(t, ck.Value, 43, "32 random bytes, base64url")
	require.NotEqual(t, ck.Value, m["csrf"])

	resp, body = e.inSession("GET", "/admin/session", ck, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, m, decode(t, body, "csrf", "expires_at", "read_only"))
	resp, body = e.inSession("GET", "/admin/session", nil, "", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "no_session", apiError(t, body, "authentication_error")["code"])

	tls := httptest.NewTLSServer(e.console)
	t.Cleanup(tls.Close)
	resp, err := tls.Client().Post(tls.URL+"/admin/session", "application/json", strings.NewReader(`{"token":"`+adminToken+`"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Set-Cookie"), "Secure")
	require.True(t, resp.Cookies()[0].Secure)
	require.Equal(t, 2, e.sessions())
}

// TestConsoleGuardsEveryRoute: every admin route and the metrics refuse a
// request without a session or token (401), a mutation with a session but
// a missing or forged CSRF token (403), and a session once it has expired
// (401); a session with its CSRF token works, and so does the bearer
// token, as before the console.
func TestConsoleGuardsEveryRoute(t *testing.T) {
	e := newConsoleEnv(t, operator{})
	routes := e.adminRouteList()
	ck, s := e.signIn(adminToken)
	for _, r := range routes {
		resp, body := e.inSession(r.method, r.path, nil, "", nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%v: %s", r, body)
		require.Equal(t, "missing_admin_token", apiError(t, body, "authentication_error")["code"], "%v", r)

		resp, body = e.inSession(r.method, r.path, &http.Cookie{Name: console.CookieName, Value: "forged-cookie"}, s.CSRF, nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%v: %s", r, body)
		require.Equal(t, "no_session", apiError(t, body, "authentication_error")["code"], "%v", r)

		if r.method != "GET" {
			for _, csrf := range []string{"", "forged", s.CSRF[:len(s.CSRF)-1], ck.Value} {
				resp, body = e.inSession(r.method, r.path, ck, csrf, nil)
				require.Equal(t, http.StatusForbidden, resp.StatusCode, "%v %q: %s", r, csrf, body)
				require.Equal(t, "csrf_failed", apiError(t, body, "permission_error")["code"], "%v", r)
			}
		}
		resp, body = e.inSession(r.method, r.path, ck, s.CSRF, nil)
		authorized(t, r, resp, body)
		resp, body = e.admin(r.method, r.path, adminToken, nil)
		authorized(t, r, resp, body)
	}

	e.clock.Advance(consoleTTL)
	for _, r := range routes {
		resp, body := e.inSession(r.method, r.path, ck, s.CSRF, nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%v: %s", r, body)
		require.Equal(t, "no_session", apiError(t, body, "authentication_error")["code"], "%v", r)
	}
	resp, body := e.inSession("GET", "/admin/session", ck, "", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, string(body))
	require.Zero(t, e.sessions())
	require.Zero(t, e.up.hits.Load())
}

// TestConsoleWrongTokens: a wrong token gets 401, at sign-in and as a
// bearer token alike; after console.MaxFailures in a minute every token
// from that address gets 429 with Retry-After, the right one too, until
// the first failure is a minute old.
func TestConsoleWrongTokens(t *testing.T) {
	e := newConsoleEnv(t, operator{})
	for i := range console.MaxFailures {
		var resp *http.Response
		var body []byte
		if i%2 == 0 {
			resp, body = e.admin("POST", "/admin/session", "", map[string]string{"token": "wrong"})
		} else {
			resp, body = e.admin("GET", "/admin/keys", "wrong", nil)
		}
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, string(body))
		require.Equal(t, "invalid_admin_token", apiError(t, body, "authentication_error")["code"])
		require.Empty(t, resp.Header.Values("Set-Cookie"))
		e.clock.Advance(time.Second)
	}
	// The first failure was 5 s ago: 55 s to wait.
	for _, token := range []string{"wrong", adminToken} {
		resp, body := e.admin("POST", "/admin/session", "", map[string]string{"token": token})
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
		require.Equal(t, "too_many_attempts", apiError(t, body, "rate_limit_error")["code"])
		require.Equal(t, "55", resp.Header.Get("Retry-After"))
		resp, body = e.admin("GET", "/admin/keys", token, nil)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
		require.Equal(t, "55", resp.Header.Get("Retry-After"))
	}
	resp, body := e.admin("POST", "/admin/session", "", map[string]string{"token": ""})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "an empty token is no guess: %s", body)

	e.clock.Advance(54 * time.Second)
	resp, _ = e.admin("GET", "/admin/keys", adminToken, nil)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	e.clock.Advance(time.Second) // the first failure drops out: one more try
	adminOK[admin.Keys](e, "GET", "/admin/keys", nil, http.StatusOK)
	e.signIn(adminToken)
	resp, _ = e.admin("GET", "/admin/keys", "wrong", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = e.admin("GET", "/admin/keys", adminToken, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "5 failures within the minute again")
}

// TestConsoleNeverShowsToken: the admin token is in no answer (body or
// field), no log line and no URL of any route, page or asset, whether it
// is sent right, wrong, in a URL or in a cookie.
func TestConsoleNeverShowsToken(t *testing.T) {
	var logs logbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newConsoleEnv(t, operator{log: log})
	var answers bytes.Buffer
	note := func(resp *http.Response, body []byte) {
		resp.Header.Write(&answers)
		answers.Write(body)
	}
	ck, s := e.signIn(adminToken)
	note(e.admin("POST", "/admin/session", "", map[string]string{"token": adminToken + "x"}))
	note(e.admin("POST", "/admin/session", "", `{"token":"`+adminToken+`"`))
	note(e.admin("GET", "/admin/keys?token="+adminToken+"&access_token="+adminToken, "", nil))
	note(e.inSession("GET", "/admin/keys", &http.Cookie{Name: console.CookieName, Value: adminToken}, "", nil))
	note(e.inSession("POST", "/admin/keys", ck, adminToken, map[string]any{"name": "k"}))
	for _, r := range e.adminRouteList() {
		note(e.inSession(r.method, r.path, ck, s.CSRF, nil))
		note(e.admin(r.method, r.path, adminToken, nil))
	}
	note(e.inSession("GET", "/admin", nil, "", nil))
	note(e.inSession("GET", "/admin/", nil, "", nil))
	for _, name := range console.Assets() {
		note(e.inSession("GET", "/admin/assets/"+name, nil, "", nil))
	}
	note(e.inSession("GET", "/admin/session", ck, "", nil))
	note(e.inSession("DELETE", "/admin/session", ck, s.CSRF, nil))
	require.NotContains(t, answers.String(), adminToken)
	require.NotContains(t, logs.String(), adminToken)
	require.NotContains(t, logs.String(), ck.Value, "nor the session cookie")
	require.Contains(t, logs.String(), "console: signed in")
	require.Contains(t, logs.String(), "console: wrong admin token")
	require.Contains(t, answers.String(), console.CookieName+"=;", "the sign-out's expired cookie")
}

// TestConsoleSignOut: DELETE /admin/session needs the CSRF token, forgets
// the session and expires the cookie; the cookie then opens nothing.
func TestConsoleSignOut(t *testing.T) {
	e := newConsoleEnv(t, operator{})
	ck, s := e.signIn(adminToken)
	other, _ := e.signIn(adminToken)
	resp, body := e.inSession("DELETE", "/admin/session", ck, "", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, string(body))
	require.Equal(t, "csrf_failed", apiError(t, body, "permission_error")["code"])
	resp, body = e.inSession("DELETE", "/admin/session", ck, s.CSRF, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, string(body))
	raw := resp.Header.Get("Set-Cookie")
	require.Contains(t, raw, console.CookieName+"=;")
	require.Contains(t, raw, "Max-Age=0")
	require.Contains(t, raw, "Path=/admin")
	for _, path := range []string{"/admin/keys", "/admin/session"} {
		resp, body = e.inSession("GET", path, ck, s.CSRF, nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, string(body))
		require.Equal(t, "no_session", apiError(t, body, "authentication_error")["code"])
	}
	resp, _ = e.inSession("DELETE", "/admin/session", ck, s.CSRF, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "signed out already: nothing to forget")
	resp, body = e.inSession("GET", "/admin/keys", other, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the other session stays: %s", body)
}

// TestConsoleReadOnly: a read-only console with no proxy behind it (the
// console command's) serves the GETs, refuses every change with 403
// read_only, bearer or session, and forwards nothing.
func TestConsoleReadOnly(t *testing.T) {
	e := newConsoleEnv(t, operator{alone: true, readOnly: true})
	k, secret := e.key("k", 100)
	ck, s := e.signIn(adminToken)
	require.True(t, s.ReadOnly)
	list := adminOK[admin.Keys](e, "GET", "/admin/keys", nil, http.StatusOK)
	require.Equal(t, k.ID, list.Keys[0].ID)
	for _, r := range e.adminRouteList() {
		resp, body := e.inSession(r.method, r.path, ck, s.CSRF, nil)
		bearer, bbody := e.admin(r.method, r.path, adminToken, nil)
		if r.method == "GET" {
			authorized(t, r, resp, body)
			authorized(t, r, bearer, bbody)
			continue
		}
		for _, b := range [][]byte{body, bbody} {
			require.Equal(t, "read_only", apiError(t, b, "permission_error")["code"], "%v", r)
		}
		require.Equal(t, []int{403, 403}, []int{resp.StatusCode, bearer.StatusCode})
	}
	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "not_found", apiError(t, body, "invalid_request_error")["code"])
	resp, _ = e.call("GET", "/stats", secret, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Zero(t, e.up.hits.Load())
	resp, _ = e.inSession("DELETE", "/admin/session", ck, s.CSRF, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "signing out changes no data")
}

// TestConsolePages: /admin redirects to /admin/, the page and every asset
// are served with the security fields, an ETag that revalidates, and
// gzipped when asked; an unknown asset is 404, a POST 405.
func TestConsolePages(t *testing.T) {
	e := newConsoleEnv(t, operator{})
	noFollow := &http.Client{Transport: e.client.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, header map[string]string) (*http.Response, []byte) {
		req, err := http.NewRequest("GET", e.srv.URL+path, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := noFollow.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		<-e.served
		return resp, body
	}
	resp, _ := get("/admin", nil)
	require.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	require.Equal(t, "/admin/", resp.Header.Get("Location"))

	paths := []string{"/admin/"}
	for _, name := range console.Assets() {
		paths = append(paths, "/admin/assets/"+name)
	}
	require.Contains(t, paths, "/admin/assets/index.html")
	for _, p := range paths {
		resp, body := get(p, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
		requireSecurityHeaders(t, resp.Header, p)
		require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"), p)
		require.NotEmpty(t, body, p)
		etag := resp.Header.Get("ETag")
		resp, body = get(p, map[string]string{"If-None-Match": etag})
		require.Equal(t, http.StatusNotModified, resp.StatusCode, p)
		require.Empty(t, body)
	}
	resp, body := get("/admin/", nil)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, string(body), "<html")

	for _, p := range []string{"/admin/assets/nothing.js", "/admin/assets/", "/admin/assets/../keys", "/admin/assets/%2e%2e/keys"} {
		resp, body := get(p, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, p)
		require.Equal(t, "not_found", apiError(t, body, "invalid_request_error")["code"], p)
		requireSecurityHeaders(t, resp.Header, p)
	}
	resp, body = e.inSession("POST", "/admin/", nil, "", nil)
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, string(body))
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
}

func requireSecurityHeaders(t *testing.T, h http.Header, path string) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, directive := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
		require.Contains(t, csp, directive, path)
	}
	require.NotContains(t, csp, "unsafe-inline", path)
	require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), path)
	require.Equal(t, "no-referrer", h.Get("Referrer-Policy"), path)
	require.Equal(t, "DENY", h.Get("X-Frame-Options"), path)
}

// TestConsoleLive: GET /admin/live averages the requests ended and the
// tokens charged over the last 10 seconds, and counts the requests in
// flight; the admin API's own requests are not counted.
func TestConsoleLive(t *testing.T) {
	e := newConsoleEnv(t, operator{})
	_, secret := e.key("k", 1<<30)
	live := func() admin.Live {
		t.Helper()
		return adminOK[admin.Live](e, "GET", "/admin/live", nil, http.StatusOK)
	}
	require.Equal(t, admin.Live{Time: start}, live())
	for range 3 {
		resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 10, Output: 5})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	resp, _ := e.call("POST", "/v1/chat/completions", "rsk_unknown", fakeReq{Input: 1})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, admin.Live{Time: start, RequestsPerSecond: 0.4, TokensPerSecond: 4.5}, live())

	e.clock.Advance(9 * time.Second)
	got := live()
	require.Equal(t, []float64{0.4, 4.5}, []float64{got.RequestsPerSecond, got.TokensPerSecond}, "still within the 10 s")

	q := fakeReq{Stream: true, Gate: true, Input: 7, Output: 3}
	stream, err := e.client.Do(e.request("POST", "/v1/chat/completions", secret, q))
	require.NoError(t, err)
	defer stream.Body.Close()
	br := bufio.NewReader(stream.Body)
	firstEvent(t, br)
	require.EqualValues(t, 1, live().InFlight)

	e.clock.Advance(time.Second) // the first 4 requests are 10 s old
	close(e.up.gate)
	_, err = io.ReadAll(br)
	require.NoError(t, err)
	<-e.served
	require.Equal(t, admin.Live{Time: start.Add(10 * time.Second), RequestsPerSecond: 0.1, TokensPerSecond: 1}, live())
	e.clock.Advance(10 * time.Second)
	require.Equal(t, admin.Live{Time: start.Add(20 * time.Second)}, live())
}

// TestConsoleLiveRing: the ring replaces a bucket a whole ring old, and
// ignores counts from before it.
func TestConsoleLiveRing(t *testing.T) {
	var l live
	t0 := time.Unix(1_000_000, 0)
	for i := range 40 {
		l.begin()
		l.end(t0.Add(time.Duration(i)*time.Second), 2)
	}
	r, tk := l.rates(t0.Add(39 * time.Second))
	require.Equal(t, []float64{1, 2}, []float64{r, tk})
	l.begin()
	l.end(t0, 100) // 39 s ago: its bucket is reused by a later second
	r, tk = l.rates(t0.Add(39 * time.Second))
	require.Equal(t, []float64{1, 2}, []float64{r, tk})
	require.Zero(t, l.inFlight.Load())
}

// TestConsoleKeyLifecycle: the console's own calls, in a session: create
// a key (the secret in that answer only), disable it, rotate it, delete
// it, as the page does.
func TestConsoleKeyLifecycle(t *testing.T) {
	e := newConsoleEnv(t, operator{})
	ck, s := e.signIn(adminToken)
	resp, body := e.inSession("POST", "/admin/keys", ck, s.CSRF, map[string]any{"name": "web", "windows": []map[string]any{{"limit": 1000, "window": "5h"}}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	var created admin.Created
	require.NoError(t, json.Unmarshal(body, &created))
	id := created.Key.ID
	resp, body = e.inSession("PATCH", "/admin/keys/"+id, ck, s.CSRF, map[string]any{"disabled": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	k, err := e.keys().Get(context.Background(), id)
	require.NoError(t, err)
	require.True(t, k.Disabled)
	resp, body = e.inSession("GET", "/admin/keys/"+id, ck, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, string(body), created.Secret)
	resp, body = e.inSession("POST", "/admin/keys/"+id+"/rotate", ck, s.CSRF, map[string]any{"grace": "1h"})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, _ = e.inSession("DELETE", "/admin/keys/"+id, ck, s.CSRF, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	_, err = e.keys().Get(context.Background(), id)
	require.ErrorIs(t, err, keystore.ErrNotFound)
}

// TestAdminStalledBody: a sign-in or admin request whose body never
// ends is answered within Options.BodyTimeout, as the API's requests
// are, instead of holding its connection for good.
func TestAdminStalledBody(t *testing.T) {
	e := newAdminEnv(t, Options{BodyTimeout: 200 * time.Millisecond})
	for _, c := range []struct{ path, auth string }{
		{"/admin/session", ""},
		{"/admin/keys", "Authorization: Bearer " + adminToken + "\r\n"},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "POST "+c.path+" HTTP/1.1\r\nHost: gateway\r\n"+c.auth+
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tok")
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "%s: no answer: the stalled body held the connection", c.path)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, c.path)
	}
}
