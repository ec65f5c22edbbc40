package console

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/fakeclock"
)

// listen serves h on a real loopback listener, 127.0.0.1, and returns its
// URL.
func listen(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// from returns a client whose connections come from ip, a loopback
// address (all of 127.0.0.0/8 is this host's).
func from(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// send sends a request with the fields given as name, value pairs and
// returns the answer, its body read.
func send(t *testing.T, client *http.Client, method, url, body string, fields ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(fields); i += 2 {
		req.Header.Add(fields[i], fields[i+1])
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// signInJSON is the body and media type of a sign-in with tok.
func signInJSON(tok string) (body string, fields []string) {
	return `{"token":"` + tok + `"}`, []string{"Content-Type", "application/json"}
}

// TestWrongTokensElsewhere: ten addresses send five wrong tokens each, as
// many as once slowed every address down for a minute; the right token
// from another address still opens the admin API, the metrics and the
// sign-in, and only the ten wait.
func TestWrongTokensElsewhere(t *testing.T) {
	clock := fakeclock.New(t0)
	base := listen(t, newConsole(t, Options{Now: clock.Now}))
	for i := 2; i <= 11; i++ {
		c := from(t, fmt.Sprintf("127.0.0.%d", i))
		for range MaxFailures {
			resp, body := send(t, c, "GET", base+"/admin/keys", "", "Authorization", "Bearer wrong")
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
		}
	}
	operator := from(t, "127.0.0.1")
	for _, path := range []string{"/admin/keys", "/metrics"} {
		resp, body := send(t, operator, "GET", base+path, "", "Authorization", "Bearer "+token)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		require.Contains(t, body, "admin-token 127.0.0.1")
	}
	body, fields := signInJSON(token)
	resp, _ := send(t, operator, "POST", base+"/admin/session", body, fields...)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	for i := 2; i <= 11; i++ {
		resp, _ := send(t, from(t, fmt.Sprintf("127.0.0.%d", i)), "GET", base+"/metrics", "", "Authorization", "Bearer "+token)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "127.0.0.%d waits", i)
		require.Equal(t, "60", resp.Header.Get("Retry-After"))
	}
}

// TestTrustedProxy: behind a trusted proxy, each client is counted by the
// address the proxy forwarded for, so the wrong tokens of one do not slow
// another down; entries the client wrote before the proxy's are ignored,
// and so is X-Forwarded-For from a peer that is not trusted.
func TestTrustedProxy(t *testing.T) {
	clock := fakeclock.New(t0)
	base := listen(t, newConsole(t, Options{Now: clock.Now,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}}))
	proxy, stranger := from(t, "127.0.0.1"), from(t, "127.0.0.2")
	guess := func(c *http.Client, tok, xff string) (int, string) {
		resp, body := send(t, c, "GET", base+"/admin/keys", "", "Authorization", "Bearer "+tok, "X-Forwarded-For", xff)
		return resp.StatusCode, body
	}
	for i := range MaxFailures {
		// The attacker writes a new address of its own each time; the
		// proxy appends the one it got the request from.
		status, _ := guess(proxy, "wrong", fmt.Sprintf("203.0.113.%d, 198.51.100.1", i))
		require.Equal(t, http.StatusUnauthorized, status)
	}
	status, _ := guess(proxy, token, "198.51.100.1")
	require.Equal(t, http.StatusTooManyRequests, status, "the attacker waits")
	status, body := guess(proxy, token, "198.51.100.2")
	require.Equal(t, http.StatusOK, status, "another client of the proxy does not")
	require.Equal(t, "api admin-token 198.51.100.2", body)
	status, body = guess(proxy, token, "203.0.113.9, 198.51.100.2, 10.0.0.5, 10.1.1.1")
	require.Equal(t, http.StatusOK, status, "two trusted hops")
	require.Equal(t, "api admin-token 198.51.100.2", body)
	status, body = guess(proxy, token, "10.0.0.7, 10.0.0.5")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "api admin-token 10.0.0.7", body, "every hop trusted: the first")
	status, body = guess(proxy, token, "198.51.100.2, junk")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "api admin-token 127.0.0.1", body, "an entry that is no address: the last trusted hop")

	status, body = guess(stranger, token, "198.51.100.1")
	require.Equal(t, http.StatusOK, status, "an untrusted peer's X-Forwarded-For is ignored")
	require.Equal(t, "api admin-token 127.0.0.2", body)
	for range MaxFailures {
		guess(stranger, "wrong", "198.51.100.3")
	}
	status, _ = guess(proxy, token, "198.51.100.3")
	require.Equal(t, http.StatusOK, status, "the stranger was counted as itself")

	plain := listen(t, newConsole(t, Options{Now: clock.Now}))
	resp, body := send(t, proxy, "GET", plain+"/admin/keys", "", "Authorization", "Bearer "+token, "X-Forwarded-For", "198.51.100.1")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "api admin-token 127.0.0.1", body, "no trusted proxy: X-Forwarded-For is ignored")
}

// TestSignInMediaType: a sign-in that is not JSON gets 415, and is not
// counted as a guess: a page of any site may post text/plain or a form.
func TestSignInMediaType(t *testing.T) {
	clock := fakeclock.New(t0)
	base := listen(t, newConsole(t, Options{Now: clock.Now}))
	c := from(t, "127.0.0.2")
	for i := range 2 * MaxFailures {
		ctype := []string{"text/plain", "application/x-www-form-urlencoded", ""}[i%3]
		resp, body := send(t, c, "POST", base+"/admin/session", `{"token":"wrong"}`, "Content-Type", ctype)
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%q: %s", ctype, body)
	}
	body, fields := signInJSON("wrong")
	for range MaxFailures {
		resp, _ := send(t, c, "POST", base+"/admin/session", body, fields...)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the 415s were not counted")
	}
	resp, _ := send(t, c, "POST", base+"/admin/session", body, fields...)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
}

// TestCrossSiteCookie: a request with the session cookie from a page of
// another origin gets 403, GETs included, and changes nothing; the
// console's own page's requests and a script's bearer token pass.
func TestCrossSiteCookie(t *testing.T) {
	clock := fakeclock.New(t0)
	base := listen(t, newConsole(t, Options{Now: clock.Now}))
	c := from(t, "127.0.0.1")
	body, fields := signInJSON(token)
	resp, answer := send(t, c, "POST", base+"/admin/session", body, append(fields, "Sec-Fetch-Site", "same-origin", "Origin", base)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, answer)
	cookie := CookieName + "=" + resp.Cookies()[0].Value
	csrf := csrfOf(resp.Cookies()[0].Value)

	for _, f := range [][]string{
		{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-site"}, {"Sec-Fetch-Site", "none"},
		{"Origin", "http://evil.example"}, {"Origin", "null"}, {"Sec-Fetch-Site", "same-origin", "Origin", "http://evil.example"},
	} {
		for _, path := range []string{"/admin/keys?limit=1", "/metrics", "/admin/session"} {
			resp, answer := send(t, c, "GET", base+path, "", append([]string{"Cookie", cookie}, f...)...)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %v: %s", path, f, answer)
			require.Contains(t, answer, `"code":"cross_site"`)
		}
		resp, _ := send(t, c, "DELETE", base+"/admin/session", "", append([]string{"Cookie", cookie, CSRFHeader, csrf}, f...)...)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "no sign-out from another site")
		resp, _ = send(t, c, "POST", base+"/admin/session", body, append(fields, f...)...)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "no sign-in from another site")
		resp, answer = send(t, c, "GET", base+"/admin/keys", "", append([]string{"Authorization", "Bearer " + token}, f...)...)
		require.Equal(t, http.StatusOK, resp.StatusCode, "a bearer token is a script's: %s", answer)
	}
	for _, f := range [][]string{{"Sec-Fetch-Site", "same-origin"}, {"Origin", base}, {"Sec-Fetch-Site", "same-origin", "Origin", base}, nil} {
		resp, answer := send(t, c, "GET", base+"/admin/keys", "", append([]string{"Cookie", cookie}, f...)...)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%v: %s", f, answer)
		require.True(t, strings.HasPrefix(answer, "api session:"), answer)
	}
	resp, _ = send(t, c, "DELETE", base+"/admin/session", "", "Cookie", cookie, CSRFHeader, csrf, "Sec-Fetch-Site", "same-origin", "Origin", base)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
}

// TestTLSFields: answers over TLS, the proxy's included, carry
// Strict-Transport-Security, and the cookie is Secure; over plain HTTP
// neither, unless Options.SecureCookie says a TLS proxy is in front.
func TestTLSFields(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "proxied") })
	c := newConsole(t, Options{Next: next})
	srv := httptest.NewTLSServer(c)
	t.Cleanup(srv.Close)
	body, fields := signInJSON(token)
	for _, path := range []string{"/admin/", "/v1/models", "/admin/session"} {
		resp, _ := send(t, srv.Client(), "GET", srv.URL+path, "")
		require.Equal(t, hsts, resp.Header.Get("Strict-Transport-Security"), path)
	}
	resp, _ := send(t, srv.Client(), "POST", srv.URL+"/admin/session", body, fields...)
	require.Equal(t, hsts, resp.Header.Get("Strict-Transport-Security"))
	require.True(t, resp.Cookies()[0].Secure)

	plain := listen(t, c)
	resp, _ = send(t, http.DefaultClient, "POST", plain+"/admin/session", body, fields...)
	require.Empty(t, resp.Header.Get("Strict-Transport-Security"))
	require.False(t, resp.Cookies()[0].Secure)
	behind := listen(t, newConsole(t, Options{SecureCookie: true}))
	resp, _ = send(t, http.DefaultClient, "POST", behind+"/admin/session", body, fields...)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, resp.Cookies()[0].Secure, "--secure-cookie")
	resp, _ = send(t, http.DefaultClient, "POST", behind+"/admin/session", body, append(fields, "Origin", "https://"+strings.TrimPrefix(behind, "http://"))...)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the browser's origin is https")
}

// TestThrottleFull: when the table is full of addresses within their
// window, a wrong token from another address is checked and not counted:
// the right token from it is accepted, the addresses in the table stay
// slowed down (none is forgotten early to make room), and once they are
// due the table counts again.
func TestThrottleFull(t *testing.T) {
	clock := fakeclock.New(t0)
	c := newConsole(t, Options{Now: clock.Now, MaxAddresses: 3})
	for i := range 3 {
		for range MaxFailures {
			_, status, _ := authorize(c, "GET", fmt.Sprintf("192.0.2.%d:1", i), "Bearer wrong", "", "")
			require.Equal(t, 401, status)
		}
	}
	clock.Advance(30 * time.Second)
	for range 3 * MaxFailures {
		_, status, _ := authorize(c, "GET", "198.51.100.1:1", "Bearer wrong", "", "")
		require.Equal(t, 401, status, "checked, not counted")
	}
	ok, _, _ := authorize(c, "GET", "198.51.100.1:1", "Bearer "+token, "", "")
	require.True(t, ok)
	for i := range 3 {
		_, status, _ := authorize(c, "GET", fmt.Sprintf("192.0.2.%d:1", i), "Bearer "+token, "", "")
		require.Equal(t, 429, status, "192.0.2.%d still waits", i)
	}
	require.Len(t, c.fails.byKey, 3)

	clock.Advance(30 * time.Second)
	for range MaxFailures {
		_, status, _ := authorize(c, "GET", "198.51.100.1:1", "Bearer wrong", "", "")
		require.Equal(t, 401, status)
	}
	_, status, _ := authorize(c, "GET", "198.51.100.1:1", "Bearer "+token, "", "")
	require.Equal(t, 429, status, "counted again once the table had room")
	require.Len(t, c.fails.byKey, 1, "the others were forgotten")
}
