package httplimit_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/ratestore/ratestore/httplimit"
	"github.com/stretchr/testify/require"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// request returns a request from remote with the given header fields, as
// name, value pairs.
func request(remote string, fields ...string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(fields); i += 2 {
		req.Header.Add(fields[i], fields[i+1])
	}
	return req
}

func TestAPIKey(t *testing.T) {
	key := httplimit.APIKey()
	for _, c := range []struct {
		name   string
		fields []string
		secret string
	}{
		{"bearer", []string{"Authorization", "Bearer sk-1"}, "sk-1"},
		{"scheme in any case", []string{"Authorization", "bearer  sk-1 "}, "sk-1"},
		{"x-api-key", []string{"X-API-Key", "sk-2"}, "sk-2"},
		{"bearer first", []string{"Authorization", "Bearer sk-1", "X-API-Key", "sk-2"}, "sk-1"},
		{"another scheme is no key", []string{"Authorization", "Basic dTpw", "X-API-Key", "sk-2"}, "sk-2"},
		{"empty bearer", []string{"Authorization", "Bearer ", "X-API-Key", "sk-2"}, "sk-2"},
	} {
		got, err := key(request("192.0.2.1:1", c.fields...))
		require.NoError(t, err, c.name)
		require.Equal(t, httplimit.APIKeyHash(c.secret), got, c.name)
		require.NotContains(t, got, c.secret, c.name)
	}
	for _, fields := range [][]string{nil, {"Authorization", "Bearer"}, {"Authorization", "Basic dTpw"}, {"X-API-Key", "  "}} {
		_, err := key(request("192.0.2.1:1", fields...))
		require.ErrorIs(t, err, httplimit.ErrNoAPIKey, "%q", fields)
	}
	require.Len(t, httplimit.APIKeyHash("sk-1"), 22)
	require.NotEqual(t, httplimit.APIKeyHash("sk-1"), httplimit.APIKeyHash("sk-2"))
}

// TestAPIKeyNeverShown: neither the answer nor the log of any outcome
// holds the secret.
func TestAPIKeyNeverShown(t *testing.T) {
	const secret = "sk-live-abcdefghijklmnop"
	e := newEnv(t)
	var logs bytes.Buffer
	h, _ := served(t, httplimit.Options{
		Rules:  []httplimit.Rule{{Limiter: e.limiter("api", perMinute(1)), Key: httplimit.APIKey()}},
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	for _, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		rec := get(h, "/", "Authorization", "Bearer "+secret)
		require.Equal(t, want, rec.Code)
		require.NotContains(t, rec.Body.String(), secret)
		for _, vs := range rec.Header() {
			for _, v := range vs {
				require.NotContains(t, v, secret)
			}
		}
	}
	require.Equal(t, http.StatusUnauthorized, get(h, "/").Code)
	require.Contains(t, logs.String(), "no API key", "the refusal is logged at debug level")
	require.NotContains(t, logs.String(), secret)
}

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{mustPrefix("10.0.0.0/8"), mustPrefix("fd00::/8"), mustPrefix("::ffff:172.16.0.0/108")}
	for _, c := range []struct {
		name    string
		trusted bool // with the trusted prefixes, or none
		remote  string
		fields  []string
		want    string
	}{
		{"the peer by default", false, "203.0.113.7:5000", nil, "203.0.113.7"},
		{"no proxy trusted: X-Forwarded-For ignored", false, "203.0.113.7:5000", []string{"X-Forwarded-For", "198.51.100.1"}, "203.0.113.7"},
		{"no proxy trusted: X-Real-IP ignored", false, "203.0.113.7:5000", []string{"X-Real-IP", "198.51.100.1"}, "203.0.113.7"},
		{"spoofed by an untrusted peer", true, "203.0.113.7:5000", []string{"X-Forwarded-For", "10.0.0.1", "X-Real-IP", "10.0.0.2"}, "203.0.113.7"},
		{"one trusted proxy", true, "10.0.0.1:5000", []string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"rightmost untrusted, the client's own entries ignored", true, "10.0.0.1:5000", []string{"X-Forwarded-For", "1.1.1.1, 198.51.100.1, 10.0.0.3,10.0.0.2"}, "198.51.100.1"},
		{"field lines are one list", true, "10.0.0.1:5000", []string{"X-Forwarded-For", "1.1.1.1, 198.51.100.1", "X-Forwarded-For", "10.0.0.2"}, "198.51.100.1"},
		{"all trusted: the leftmost", true, "10.0.0.1:5000", []string{"X-Forwarded-For", "10.9.9.9, 10.0.0.2"}, "10.9.9.9"},
		{"empty elements", true, "10.0.0.1:5000", []string{"X-Forwarded-For", " , 198.51.100.1 ,,"}, "198.51.100.1"},
		{"with ports", true, "10.0.0.1:5000", []string{"X-Forwarded-For", "198.51.100.1:443, [2001:db8::9]:8080"}, "2001:db8::9"},
		{"IPv6 peer", false, "[2001:db8::1]:443", nil, "2001:db8::1"},
		{"IPv6 zone dropped", false, "[fe80::1%eth0]:443", nil, "fe80::1"},
		{"IPv6 proxy", true, "[fd00::1]:443", []string{"X-Forwarded-For", "2001:db8::5, fd00::2"}, "2001:db8::5"},
		{"bracketed IPv6 entry", true, "[fd00::1]:443", []string{"X-Forwarded-For", "[2001:db8::6]"}, "2001:db8::6"},
		{"IPv4 mapped into IPv6", false, "[::ffff:192.0.2.1]:443", nil, "192.0.2.1"},
		{"mapped prefix", true, "172.16.0.1:443", []string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"X-Real-IP from a trusted peer", true, "10.0.0.1:5000", []string{"X-Real-IP", "198.51.100.2"}, "198.51.100.2"},
		{"X-Forwarded-For before X-Real-IP", true, "10.0.0.1:5000", []string{"X-Real-IP", "198.51.100.2", "X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"trusted peer with no fields", true, "10.0.0.1:5000", nil, "10.0.0.1"},
		{"RemoteAddr without port", false, "192.0.2.9", nil, "192.0.2.9"},
	} {
		var key httplimit.KeyFunc
		if c.trusted {
			key = httplimit.ClientIP(trusted...)
		} else {
			key = httplimit.ClientIP()
		}
		got, err := key(request(c.remote, c.fields...))
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
	}

	key := httplimit.ClientIP(trusted...)
	for _, c := range []struct {
		name   string
		remote string
		fields []string
		status int
	}{
		{"garbage X-Forwarded-For", "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.1, unknown"}, http.StatusBadRequest},
		{"garbage X-Real-IP", "10.0.0.1:1", []string{"X-Real-IP", "nobody"}, http.StatusBadRequest},
		{"no address in RemoteAddr", "@", nil, http.StatusInternalServerError},
	} {
		_, err := key(request(c.remote, c.fields...))
		var se *httplimit.StatusError
		require.ErrorAs(t, err, &se, c.name)
		require.Equal(t, c.status, se.Status, c.name)
	}
	require.Panics(t, func() { httplimit.ClientIP(netip.Prefix{}) })
}

// TestClientIPSpoofingOverHTTP: through the middleware, a client that
// writes X-Forwarded-For cannot leave its own limit.
func TestClientIPSpoofingOverHTTP(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter("ip", perMinute(2))
	h, calls := served(t, httplimit.Options{Rules: []httplimit.Rule{{Limiter: lim, Key: httplimit.ClientIP(mustPrefix("10.0.0.0/8"))}}})
	for i, spoof := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
		rec := get(h, "/", "X-Forwarded-For", spoof, "X-Real-IP", spoof) // from 192.0.2.1, not trusted
		want := http.StatusOK
		if i == 2 {
			want = http.StatusTooManyRequests
		}
		require.Equal(t, want, rec.Code)
	}
	require.EqualValues(t, 2, calls.Load())
	require.EqualValues(t, 0, remaining(t, lim, "192.0.2.1"))
}

func TestRoute(t *testing.T) {
	key := httplimit.Route()
	req := httptest.NewRequest(http.MethodHead, "/items/7", nil)
	got, err := key(req)
	require.NoError(t, err)
	require.Equal(t, "HEAD /items/7", got, "no pattern: the path")
	req.Pattern = "GET /items/{id}"
	got, _ = key(req)
	require.Equal(t, "HEAD /items/{id}", got, "the request's method with the pattern's path")
	req.Pattern = "example.com/static/"
	got, _ = key(req)
	require.Equal(t, "HEAD example.com/static/", got)
}

func TestCombine(t *testing.T) {
	fixed := func(s string) httplimit.KeyFunc {
		return func(*http.Request) (string, error) { return s, nil }
	}
	key := func(fns ...httplimit.KeyFunc) string {
		k, err := httplimit.Combine(fns...)(request("192.0.2.1:1"))
		require.NoError(t, err)
		return k
	}
	require.Equal(t, "3:a:b1:c", key(fixed("a:b"), fixed("c")))
	require.Equal(t, "1:a3:b:c", key(fixed("a"), fixed("b:c")))
	require.Equal(t, "0:2:ab", key(fixed(""), fixed("ab")))
	require.NotEqual(t, key(fixed("1:a"), fixed("")), key(fixed(""), fixed("1:a")))
	require.Equal(t, "9:192.0.2.112:GET /items/1", key(httplimit.ClientIP(), func(r *http.Request) (string, error) {
		return "GET /items/1", nil
	}))

	boom := errors.New("boom")
	_, err := httplimit.Combine(fixed("a"), func(*http.Request) (string, error) { return "", boom })(request("192.0.2.1:1"))
	require.ErrorIs(t, err, boom)
	_, err = httplimit.Combine(httplimit.APIKey(), httplimit.ClientIP())(request("192.0.2.1:1"))
	require.ErrorIs(t, err, httplimit.ErrNoAPIKey)
}
