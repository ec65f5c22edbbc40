package gateway

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ratestore/ratestore"
	"github.com/stretchr/testify/require"
)

// TestRoutes: each request goes to the upstream of the longest prefix that
// matches its path on segment boundaries, with that route's credential
// only; the rest goes to the default route; the usage of each is metered.
func TestRoutes(t *testing.T) {
	e := newEnv(t, Options{})
	def, anthropic, counts := newRecorder(t), newRecorder(t), newRecorder(t)
	g, err := e.newGateway(Options{
		Upstream: def.url(t), UpstreamKey: "sk-default",
		Routes: []Route{
			{Prefix: "/v1/messages", Upstream: anthropic.url(t), UpstreamKey: "sk-ant", UpstreamKeyHeader: "x-api-key"},
			{Prefix: "/v1/messages/count_tokens/", Upstream: counts.url(t)}, // no credential
		},
	})
	require.NoError(t, err)
	e.gw = g
	k, secret := e.key("k", 1e6)

	for i, c := range []struct {
		path      string
		to        *recorder
		auth, xak string
	}{
		{"/v1/messages", anthropic, "", "sk-ant"},
		{"/v1/messages/count_tokens", counts, "", ""},
		{"/v1/chat/completions", def, "Bearer sk-default", ""},
		{"/v1/responses", def, "Bearer sk-default", ""},
	} {
		req := e.request("POST", "/", "", fakeReq{Input: 1})
		req.URL.Opaque = c.path // sent as it is, dot segments included
		req.Header.Set("X-Api-Key", secret)
		resp, body := e.do(req)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", c.path, body)
		got := c.to.last()
		require.Equal(t, c.path, got.path)
		require.Equal(t, c.auth, got.header.Get("Authorization"), c.path)
		require.Equal(t, c.xak, got.header.Get("X-Api-Key"), c.path)
		require.EqualValues(t, i+1, def.hits.Load()+anthropic.hits.Load()+counts.hits.Load(), "%s: one upstream request", c.path)
	}
	// Each reported 10 tokens, metered whatever the route.
	require.EqualValues(t, 4*10, e.usage(k.ID).Used)
}

// recorder is an upstream that notes the path and header of the last
// request it got and reports 10 tokens.
type recorder struct {
	srv  *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	got  recorded
}

type recorded struct {
	path   string
	header http.Header
}

func newRecorder(t testing.TB) *recorder {
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.hits.Add(1)
		rec.mu.Lock()
		rec.got = recorded{r.URL.Path, r.Header.Clone()}
		rec.mu.Unlock()
		writeBody(w, "application/json", `{"usage":{"total_tokens":10}}`)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) last() recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.got
}

func (rec *recorder) url(t testing.TB) *url.URL {
	u, err := url.Parse(rec.srv.URL)
	require.NoError(t, err)
	return u
}

// TestNoRoute: without a default route, a path no route matches is
// answered 404 with the gateway's error body, after the key is checked,
// and never forwarded; the stats path is the gateway's own.
func TestNoRoute(t *testing.T) {
	e := newEnv(t, Options{})
	g, err := e.newGateway(Options{Routes: []Route{{Prefix: "/v1/messages", Upstream: e.up.url(t)}}})
	require.NoError(t, err)
	e.gw = g
	k, secret := e.key("k", 1e6)

	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", Input: 5, Output: 5})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "no_route", apiError(t, body, "invalid_request_error")["code"])
	resp, _ = e.call("POST", "/v1/chat/completions", "rsk_unknown", fakeReq{})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the key is checked first")
	resp, _ = e.call("GET", "/stats", secret, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Zero(t, e.up.hits.Load())
	u := e.usage(k.ID)
	require.Zero(t, u.Used)
	require.Zero(t, u.InFlight)

	resp, body = e.call("POST", "/v1/messages", secret, fakeReq{Input: 5, Output: 5})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.EqualValues(t, 10, e.usage(k.ID).Used)
}

func TestRouteErrors(t *testing.T) {
	e := newEnv(t, Options{})
	up := e.up.url(t)
	for _, c := range []struct {
		opts Options
		msg  string
	}{
		{Options{}, "default route"},
		{Options{Upstream: up, Routes: []Route{{Prefix: "v1", Upstream: up}}}, `route "v1": want a path prefix starting with /`},
		{Options{Upstream: up, Routes: []Route{{Prefix: "", Upstream: up}}}, `route "": want a path prefix`},
		{Options{Upstream: up, Routes: []Route{{Prefix: "/v1/messages"}}}, `route "/v1/messages": upstream (none)`},
		{Options{Upstream: up, Routes: []Route{{Prefix: "/v1", Upstream: &url.URL{Scheme: "ftp", Host: "x"}}}}, `route "/v1": upstream`},
		{Options{Upstream: up, Routes: []Route{{Prefix: "/v1", Upstream: up}, {Prefix: "/v1/", Upstream: up}}}, `route "/v1/": another route has the same prefix`},
		{Options{Upstream: up, Routes: []Route{{Prefix: "/", Upstream: up}}}, `route "/": another route has the same prefix`},
		{Options{Routes: []Route{{Prefix: "/a/../b", Upstream: up}}}, "want a clean path"},
		{Options{Routes: []Route{{Prefix: "/a//b", Upstream: up}}}, "want a clean path"},
	} {
		_, err := e.newGateway(c.opts)
		require.ErrorIs(t, err, ratestore.ErrInvalid, "%+v", c.opts)
		require.ErrorContains(t, err, c.msg)
	}
	// "/" alone is a default route.
	_, err := e.newGateway(Options{Routes: []Route{{Prefix: "/", Upstream: up}}})
	require.NoError(t, err)
	_, err = e.newGateway(Options{Routes: []Route{{Prefix: "/v1", Upstream: &url.URL{Scheme: "https", User: url.UserPassword("u", "hunter2")}}}})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	require.NotContains(t, err.Error(), "hunter2")
}

func TestMatch(t *testing.T) {
	up := &url.URL{Scheme: "http", Host: "x"}
	routes, err := newRoutes(Options{Routes: []Route{
		{Prefix: "/v1", Upstream: up}, {Prefix: "/v1/messages", Upstream: up}, {Prefix: "/v1beta/models", Upstream: up},
	}})
	require.NoError(t, err)
	for p, want := range map[string]string{
		"/v1":                       "/v1",
		"/v1/chat/completions":      "/v1",
		"/v1/messages":              "/v1/messages",
		"/v1/messages/count_tokens": "/v1/messages",
		"/v1/messagesX":             "/v1",
		"/v1beta/models/gemini:x":   "/v1beta/models",
		"/v1beta":                   "(none)",
		"/v2/messages":              "(none)",
		"/":                         "(none)",
		"/v1x":                      "(none)",
	} {
		got := "(none)"
		if rt := match(routes, p); rt != nil {
			got = rt.prefix
		}
		require.Equal(t, want, got, p)
	}
	routes, err = newRoutes(Options{Upstream: up, Routes: []Route{{Prefix: "/v1/", Upstream: up}}})
	require.NoError(t, err)
	require.Equal(t, "/v1", match(routes, "/v1/x").prefix)
	require.Equal(t, "", match(routes, "/v2").prefix, "the default route")
	require.Equal(t, "", match(routes, "/v1x").prefix)
}
