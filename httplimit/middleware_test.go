package httplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/strategies"
	"github.com/stretchr/testify/require"
)

var ctx = context.Background()

// env is a store on a fake clock, through the backend contract:
// backendtest.Single, a database in a temporary directory, or with
// RATESTORE_TEST_BACKEND=redis (which .ci/run sets for one more run of the
// suite) a redis-server of its own.
type env struct {
	t   testing.TB
	st  *backendtest.Store
	clk *fakeclock.Clock
}

func newEnv(t testing.TB) *env {
	t.Helper()
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &env{t: t, st: backendtest.Single().Open(t, clk), clk: clk}
}

// close closes the env's store, failing the test on an error.
func (e *env) close() { e.st.Close() }

func (e *env) limiter(name string, s strategies.Strategy) backend.Limiter {
	e.t.Helper()
	l, err := e.st.Handle(name, s)
	require.NoError(e.t, err)
	return l
}

// remaining is what l has left for key, by Peek.
func remaining(t testing.TB, l backend.Limiter, key string) int64 {
	t.Helper()
	r, err := l.Peek(ctx, key)
	require.NoError(t, err)
	return r.Remaining
}

func perMinute(limit int64) strategies.FixedWindow {
	return strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "minute", Limit: limit, Window: time.Minute}}}
}

// served wraps a handler that counts its calls with a Middleware of opts.
func served(t testing.TB, opts httplimit.Options) (http.Handler, *atomic.Int64) {
	t.Helper()
	m, err := httplimit.New(opts)
	require.NoError(t, err)
	var n atomic.Int64
	return m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusOK)
	})), &n
}

// get serves GET target from 192.0.2.1 with the given header fields, as
// name, value pairs.
func get(h http.Handler, target string, fields ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.RemoteAddr = "192.0.2.1:40000"
	for i := 0; i+1 < len(fields); i += 2 {
		req.Header.Add(fields[i], fields[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// body decodes a JSON response body.
func body(t testing.TB, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var m map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), rec.Body.String())
	return m
}

// TestGCRAExactThenRetryAfter: a burst of 3 at 1 per second allows exactly
// 3, then denies with the Retry-After, fields and body of the package
// documentation, without reaching the handler, until the clock moves.
func TestGCRAExactThenRetryAfter(t *testing.T) {
	e := newEnv(t)
	h, calls := served(t, httplimit.Options{Rules: []httplimit.Rule{
		{Limiter: e.limiter("api", strategies.GCRA{Rate: 1, Burst: 3}), Key: httplimit.ClientIP()},
	}})

	for i := range 3 {
		rec := get(h, "/")
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, `"api";q=3;w=3`, rec.Header().Get("RateLimit-Policy"))
		require.Equal(t, fmt.Sprintf(`"api";r=%d;t=%d`, 2-i, i+1), rec.Header().Get("RateLimit"))
		require.Equal(t, "3", rec.Header().Get("X-RateLimit-Limit"))
		require.Equal(t, strconv.Itoa(2-i), rec.Header().Get("X-RateLimit-Remaining"))
		require.Equal(t, strconv.Itoa(i+1), rec.Header().Get("X-RateLimit-Reset"))
		require.Empty(t, rec.Header().Values("Retry-After"))
		checkFields(t, rec.Header())
	}

	rec := get(h, "/")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Equal(t, `"api";r=0;t=1`, rec.Header().Get("RateLimit"))
	require.Equal(t, "3", rec.Header().Get("X-RateLimit-Reset"))
	checkFields(t, rec.Header())
	require.JSONEq(t, `{"error":"rate_limited","policy":"api","retry_after_seconds":1,"limit":3,"remaining":0,"reset_seconds":3}`, rec.Body.String())
	require.EqualValues(t, 3, calls.Load(), "a denied request never reaches the handler")

	e.clk.Advance(500 * time.Millisecond)
	rec = get(h, "/")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "1", rec.Header().Get("Retry-After"), "half a second rounds up to 1")

	e.clk.Advance(500 * time.Millisecond)
	require.Equal(t, http.StatusOK, get(h, "/").Code)
	require.Equal(t, http.StatusTooManyRequests, get(h, "/").Code)
	require.EqualValues(t, 4, calls.Load())
}

// TestFixedWindowRetryAfterRoundsUp: Retry-After and the reset are whole
// seconds rounded up, and follow the clock.
func TestFixedWindowRetryAfterRoundsUp(t *testing.T) {
	e := newEnv(t)
	h, calls := served(t, httplimit.Options{Rules: []httplimit.Rule{
		{Limiter: e.limiter("fw", perMinute(5)), Key: httplimit.ClientIP()},
	}})
	for range 5 {
		require.Equal(t, http.StatusOK, get(h, "/").Code)
	}
	rec := get(h, "/")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, `"fw";q=5;w=60`, rec.Header().Get("RateLimit-Policy"))
	require.Equal(t, "60", rec.Header().Get("Retry-After"))

	e.clk.Advance(29*time.Second + 500*time.Millisecond)
	rec = get(h, "/")
	require.Equal(t, "31", rec.Header().Get("Retry-After"))
	require.Equal(t, `"fw";r=0;t=31`, rec.Header().Get("RateLimit"))
	require.Equal(t, "31", rec.Header().Get("X-RateLimit-Reset"))
	require.Equal(t, map[string]any{"error": "rate_limited", "policy": "fw", "retry_after_seconds": 31.0,
		"limit": 5.0, "remaining": 0.0, "reset_seconds": 31.0}, body(t, rec))
	checkFields(t, rec.Header())

	e.clk.Advance(31 * time.Second)
	require.Equal(t, http.StatusOK, get(h, "/").Code)
	require.EqualValues(t, 6, calls.Load())
}

// TestSeveralRulesOneDecision: a request denied by one rule takes nothing
// from the others, and the fields report the binding rule.
func TestSeveralRulesOneDecision(t *testing.T) {
	e := newEnv(t)
	perIP := e.limiter("ip", strategies.GCRA{Rate: 1, Burst: 10})
	route := e.limiter("route", strategies.FixedWindow{Quotas: []strategies.Quota{
		{Name: "minute", Limit: 2, Window: time.Minute},
		{Name: "day", Limit: 100, Window: 24 * time.Hour},
	}})
	h, calls := served(t, httplimit.Options{Rules: []httplimit.Rule{
		{Limiter: perIP, Key: httplimit.ClientIP()},
		{Limiter: route, Key: httplimit.Route()},
	}})

	rec := get(h, "/a")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, `"ip";q=10;w=10, "route.minute";q=2;w=60, "route.day";q=100;w=86400`, rec.Header().Get("RateLimit-Policy"))
	// The smallest Remaining binds: the minute. t is the rule's ResetAfter,
	// which waits for the day as well.
	require.Equal(t, `"route.minute";r=1;t=86400`, rec.Header().Get("RateLimit"))
	checkFields(t, rec.Header())
	require.Equal(t, http.StatusOK, get(h, "/a").Code)

	rec = get(h, "/a") // the route's minute is spent
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "60", rec.Header().Get("Retry-After"))
	require.Equal(t, `"route.minute";r=0;t=60`, rec.Header().Get("RateLimit"))
	checkFields(t, rec.Header())
	require.EqualValues(t, 8, remaining(t, perIP, "192.0.2.1"), "the denied request took nothing from the IP rule")

	// The other way round: the IP rule denies, the route keeps its count.
	ipOnly := e.limiter("ip1", strategies.GCRA{Rate: 1, Burst: 1})
	route2 := e.limiter("route2", perMinute(3))
	h2, _ := served(t, httplimit.Options{Rules: []httplimit.Rule{
		{Limiter: ipOnly, Key: httplimit.ClientIP()},
		{Limiter: route2, Key: httplimit.Route()},
	}})
	require.Equal(t, http.StatusOK, get(h2, "/b").Code)
	rec = get(h2, "/b")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, `"ip1";r=0;t=1`, rec.Header().Get("RateLimit"))
	require.EqualValues(t, 2, remaining(t, route2, "GET /b"), "the denied request took nothing from the route rule")
	require.EqualValues(t, 2, calls.Load())
}

// TestSeveralRulesLongestDenialBinds: when several rules deny, the one
// that denies the longest speaks, and a cost that can never fit any of
// them wins over any wait.
func TestSeveralRulesLongestDenialBinds(t *testing.T) {
	e := newEnv(t)
	var got httplimit.Decision
	short := e.limiter("short", strategies.GCRA{Rate: 1, Burst: 1})
	long := e.limiter("long", perMinute(2))
	h, _ := served(t, httplimit.Options{
		Rules: []httplimit.Rule{
			{Limiter: short, Key: httplimit.ClientIP()},
			{Limiter: long, Key: httplimit.ClientIP(), Cost: costHeader},
		},
		Deny: func(w http.ResponseWriter, r *http.Request, d httplimit.Decision) {
			got = d
			httplimit.DefaultDeny(w, r, d)
		},
	})
	require.Equal(t, http.StatusOK, get(h, "/", "X-Cost", "2").Code)
	rec := get(h, "/", "X-Cost", "1")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "60", rec.Header().Get("Retry-After"))
	require.Equal(t, 1, got.Rule)
	require.Equal(t, "long", got.Policy)
	require.Len(t, got.Results, 2)
	require.False(t, got.Results[0].Allowed || got.Results[1].Allowed)

	e.clk.Advance(time.Second)       // short fits again
	rec = get(h, "/", "X-Cost", "3") // more than long's limit of 2: never
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Empty(t, rec.Header().Values("Retry-After"))
	require.Equal(t, time.Duration(-1), got.Result.RetryAfter)
	require.EqualValues(t, 1, remaining(t, short, "192.0.2.1"), "nothing taken")
}

// costHeader is a CostFunc that reads X-Cost.
func costHeader(r *http.Request) (int64, error) {
	return strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
}

// TestCost: the cost is what a request spends; a cost above the limit is
// 413 without Retry-After; a cost error is 400, a negative cost 500.
func TestCost(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter("tokens", perMinute(10))
	h, calls := served(t, httplimit.Options{Rules: []httplimit.Rule{
		{Limiter: lim, Key: httplimit.ClientIP(), Cost: costHeader},
	}})

	rec := get(h, "/", "X-Cost", "4")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "6", rec.Header().Get("X-RateLimit-Remaining"))
	require.Equal(t, http.StatusOK, get(h, "/", "X-Cost", "4").Code)
	rec = get(h, "/", "X-Cost", "4")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, `"tokens";r=2;t=60`, rec.Header().Get("RateLimit"), "what is left, though too little")
	require.Equal(t, http.StatusOK, get(h, "/", "X-Cost", "0").Code, "a cost of 0 asks")
	require.Equal(t, http.StatusOK, get(h, "/", "X-Cost", "2").Code)

	rec = get(h, "/", "X-Cost", "11")
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Empty(t, rec.Header().Values("Retry-After"), "a retry can never pass")
	require.Equal(t, `"tokens";r=0;t=60`, rec.Header().Get("RateLimit"))
	require.Equal(t, map[string]any{"error": "cost_exceeds_limit", "policy": "tokens", "cost": 11.0,
		"limit": 10.0, "remaining": 0.0, "reset_seconds": 60.0}, body(t, rec))
	checkFields(t, rec.Header())

	rec = get(h, "/", "X-Cost", "many")
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Equal(t, map[string]any{"error": "bad_request"}, body(t, rec))
	require.Empty(t, rec.Header().Values("RateLimit"), "nothing was decided")

	require.Equal(t, http.StatusInternalServerError, get(h, "/", "X-Cost", "-1").Code)
	require.EqualValues(t, 4, calls.Load())
	require.EqualValues(t, 0, remaining(t, lim, "192.0.2.1"))
}

// TestStoreFailure: a limiter that fails (here: its database is closed)
// refuses with 503 or, with FailOpen, serves; both log the rule, the
// limiter and a hash of the key, never the key.
func TestStoreFailure(t *testing.T) {
	const secret = "sk-live-0123456789"
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("FailOpen=%v", failOpen), func(t *testing.T) {
			e := newEnv(t)
			good := e.limiter("good", perMinute(10))
			broken := newEnv(t)
			bad := broken.limiter("bad", perMinute(10))
			broken.close()

			var logs bytes.Buffer
			h, calls := served(t, httplimit.Options{
				Rules: []httplimit.Rule{
					{Limiter: good, Key: httplimit.APIKey()},
					{Limiter: bad, Key: func(*http.Request) (string, error) { return secret, nil }},
				},
				FailOpen: failOpen,
				Logger:   slog.New(slog.NewJSONHandler(&logs, nil)),
			})
			rec := get(h, "/", "Authorization", "Bearer "+secret)
			if failOpen {
				require.Equal(t, http.StatusOK, rec.Code)
				require.EqualValues(t, 1, calls.Load())
				require.Empty(t, rec.Header().Values("RateLimit"))
			} else {
				require.Equal(t, http.StatusServiceUnavailable, rec.Code)
				require.Equal(t, map[string]any{"error": "service_unavailable"}, body(t, rec))
				require.EqualValues(t, 0, calls.Load())
			}
			require.EqualValues(t, 10, remaining(t, good, httplimit.APIKeyHash(secret)), "the other rule took nothing")

			require.Contains(t, logs.String(), `"level":"ERROR"`)
			require.Contains(t, logs.String(), `"limiter":"bad"`)
			require.Contains(t, logs.String(), `"key_hash":"`)
			require.Contains(t, logs.String(), ratestore.ErrClosed.Error())
			require.NotContains(t, logs.String(), secret)
			require.NotContains(t, rec.Body.String(), secret)
		})
	}
}

// TestSingleRuleStoreFailure: the same with one rule, whose AllowN fails.
func TestSingleRuleStoreFailure(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter("l", perMinute(1))
	e.close()
	h, calls := served(t, httplimit.Options{Rules: []httplimit.Rule{{Limiter: lim, Key: httplimit.ClientIP()}}})
	require.Equal(t, http.StatusServiceUnavailable, get(h, "/").Code)
	require.Zero(t, calls.Load())
	h, calls = served(t, httplimit.Options{Rules: []httplimit.Rule{{Limiter: lim, Key: httplimit.ClientIP()}}, FailOpen: true})
	require.Equal(t, http.StatusOK, get(h, "/").Code)
	require.EqualValues(t, 1, calls.Load())
}

// TestEndedContext: a request whose context has ended is refused with
// 503, even with FailOpen: there is no one left to serve.
func TestEndedContext(t *testing.T) {
	e := newEnv(t)
	for _, rules := range [][]httplimit.Rule{
		{{Limiter: e.limiter("one", perMinute(5)), Key: httplimit.ClientIP()}},
		{{Limiter: e.limiter("a", perMinute(5)), Key: httplimit.ClientIP()}, {Limiter: e.limiter("b", perMinute(5)), Key: httplimit.Route()}},
	} {
		h, calls := served(t, httplimit.Options{Rules: rules, FailOpen: true})
		c, cancel := context.WithCancel(ctx)
		cancel()
		req := httptest.NewRequestWithContext(c, http.MethodGet, "/", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		require.EqualValues(t, 0, calls.Load())
	}
}

// TestCustomDeny: Deny gets the decision with the fields already set,
// for denials and for key errors alike.
func TestCustomDeny(t *testing.T) {
	e := newEnv(t)
	var got []httplimit.Decision
	h, calls := served(t, httplimit.Options{
		Rules: []httplimit.Rule{{Limiter: e.limiter("api", strategies.GCRA{Rate: 1, Burst: 1}), Key: httplimit.APIKey(), Policy: "per key"}},
		Deny: func(w http.ResponseWriter, r *http.Request, d httplimit.Decision) {
			got = append(got, d)
			w.WriteHeader(http.StatusTeapot)
			fmt.Fprint(w, "slow down")
		},
	})
	require.Equal(t, http.StatusOK, get(h, "/", "X-API-Key", "k1").Code)
	rec := get(h, "/", "X-API-Key", "k1")
	require.Equal(t, http.StatusTeapot, rec.Code)
	require.Equal(t, "slow down", rec.Body.String())
	require.Equal(t, "1", rec.Header().Get("Retry-After"), "set before Deny")
	require.Equal(t, `"per key";r=0;t=1`, rec.Header().Get("RateLimit"))
	require.Equal(t, http.StatusTooManyRequests, got[0].Status)
	require.NoError(t, got[0].Err)
	require.Equal(t, "per key", got[0].Policy)
	require.EqualValues(t, 1, got[0].Cost)
	require.Equal(t, time.Second, got[0].Result.RetryAfter)

	require.Equal(t, http.StatusTeapot, get(h, "/").Code)
	require.Equal(t, http.StatusUnauthorized, got[1].Status)
	require.ErrorIs(t, got[1].Err, httplimit.ErrNoAPIKey)
	require.EqualValues(t, 1, calls.Load())
}

// TestKeyErrors: a missing API key is 401 with WWW-Authenticate, a
// StatusError chooses its status, other errors and keys the store cannot
// hold are 400; none reaches the handler, and the body echoes nothing.
func TestKeyErrors(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter("api", perMinute(5))
	keyed := func(k httplimit.KeyFunc) http.Handler {
		h, _ := served(t, httplimit.Options{Rules: []httplimit.Rule{{Limiter: lim, Key: k}}})
		return h
	}

	rec := get(keyed(httplimit.APIKey()), "/", "Authorization", "Basic dTpw")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Equal(t, "Bearer", rec.Header().Get("WWW-Authenticate"))
	require.Equal(t, map[string]any{"error": "unauthorized"}, body(t, rec))

	rec = get(keyed(func(*http.Request) (string, error) {
		return "", &httplimit.StatusError{Status: http.StatusServiceUnavailable, Err: errors.New("key store down")}
	}), "/")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NotContains(t, rec.Body.String(), "key store down")

	rec = get(keyed(func(*http.Request) (string, error) { return "", errors.New("no tenant") }), "/")
	require.Equal(t, http.StatusBadRequest, rec.Code)

	for _, k := range []string{"", string(make([]byte, ratestore.MaxKeyLen+1))} {
		rec = get(keyed(func(*http.Request) (string, error) { return k, nil }), "/")
		require.Equal(t, http.StatusBadRequest, rec.Code, "key of %d bytes", len(k))
	}
	rec = get(keyed(httplimit.ClientIP(mustPrefix("192.0.2.0/24"))), "/", "X-Forwarded-For", "not-an-ip")
	require.Equal(t, http.StatusBadRequest, rec.Code)
}

// TestNewChecksOptions: New refuses what cannot work, with errors that
// match ratestore.ErrInvalid.
func TestNewChecksOptions(t *testing.T) {
	e := newEnv(t)
	a := e.limiter("a", perMinute(1))
	b := e.limiter("b", perMinute(1))
	a2 := e.limiter("a", perMinute(2))
	hourAndMinute := strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "minute", Limit: 5, Window: time.Minute}, {Name: "hour", Limit: 50, Window: time.Hour}}}
	fw2 := e.limiter("fw2", strategies.Composite{Primary: hourAndMinute, Secondary: hourAndMinute})
	key := httplimit.ClientIP()
	for name, opts := range map[string]httplimit.Options{
		"no rules":                   {},
		"nil limiter":                {Rules: []httplimit.Rule{{Key: key}}},
		"nil *ratestore.Limiter":     {Rules: []httplimit.Rule{{Limiter: (*ratestore.Limiter)(nil), Key: key}}},
		"nil key":                    {Rules: []httplimit.Rule{{Limiter: a}}},
		"one limiter twice":          {Rules: []httplimit.Rule{{Limiter: a, Key: key}, {Limiter: a2, Key: key}}},
		"one policy twice":           {Rules: []httplimit.Rule{{Limiter: a, Key: key, Policy: "p"}, {Limiter: b, Key: key, Policy: "p"}}},
		"policy not printable":       {Rules: []httplimit.Rule{{Limiter: a, Key: key, Policy: "é"}}},
		"negative quota":             {Rules: []httplimit.Rule{{Limiter: a, Key: key, Quota: -1}}},
		"window without quota":       {Rules: []httplimit.Rule{{Limiter: a, Key: key, Window: time.Second}}},
		"quota names of parts clash": {Rules: []httplimit.Rule{{Limiter: fw2, Key: key}}},
	} {
		_, err := httplimit.New(opts)
		require.ErrorIs(t, err, ratestore.ErrInvalid, name)
	}
	_, err := httplimit.New(httplimit.Options{Rules: []httplimit.Rule{{Limiter: fw2, Key: key, Quota: 1}}})
	require.NoError(t, err, "an explicit quota replaces the clashing ones")
	require.Panics(t, func() { httplimit.Combine() })
	require.Panics(t, func() { httplimit.Combine(key, nil) })
	m, err := httplimit.New(httplimit.Options{Rules: []httplimit.Rule{{Limiter: a, Key: key}}})
	require.NoError(t, err)
	require.Panics(t, func() { m.Wrap(nil) })
}

// TestPolicies: what RateLimit-Policy says of each strategy, and of an
// explicit policy.
func TestPolicies(t *testing.T) {
	for _, c := range []struct {
		s    strategies.Strategy
		rule httplimit.Rule
		want string
	}{
		{s: strategies.GCRA{Rate: 2, Burst: 5}, want: `"p";q=5;w=3`},
		{s: &strategies.GCRA{Rate: 100, Burst: 5}, want: `"p";q=5;w=1`},
		{s: strategies.TokenBucket{Rate: 0.5, Burst: 10}, want: `"p";q=10;w=20`},
		{s: strategies.LeakyBucket{Rate: 1, Capacity: 30}, want: `"p";q=30;w=30`},
		{s: strategies.SlidingWindow{Limit: 100, Window: time.Hour}, want: `"p";q=100;w=3600`},
		{s: strategies.RollingWindow{Limit: 1000, Window: 5 * time.Hour, Bucket: 5 * time.Minute}, want: `"p";q=1000;w=18000`},
		{s: strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "s", Limit: 1, Window: 1500 * time.Millisecond}}}, want: `"p";q=1;w=2`},
		{
			s:    strategies.Composite{Primary: strategies.GCRA{Rate: 10, Burst: 10}, Secondary: strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "min", Limit: 100, Window: time.Minute}, {Name: "day", Limit: 1000, Window: 24 * time.Hour}}}},
			want: `"p.primary";q=10;w=1, "p.min";q=100;w=60, "p.day";q=1000;w=86400`,
		},
		{s: strategies.GCRA{Rate: 1, Burst: 1}, rule: httplimit.Rule{Policy: `say "hi"\`, Quota: 60, Window: time.Minute}, want: `"say \"hi\"\\";q=60;w=60`},
		{s: strategies.GCRA{Rate: 1, Burst: 1}, rule: httplimit.Rule{Quota: 7}, want: `"p";q=7`},
	} {
		e := newEnv(t)
		r := c.rule
		r.Limiter, r.Key = e.limiter("p", c.s), httplimit.ClientIP()
		h, _ := served(t, httplimit.Options{Rules: []httplimit.Rule{r}})
		rec := get(h, "/")
		require.Equal(t, c.want, rec.Header().Get("RateLimit-Policy"), "%#v", c.s)
		checkFields(t, rec.Header())
	}
}

func TestRouteKeysShareAPattern(t *testing.T) {
	e := newEnv(t)
	m, err := httplimit.New(httplimit.Options{Rules: []httplimit.Rule{{Limiter: e.limiter("route", perMinute(2)), Key: httplimit.Route()}}})
	require.NoError(t, err)
	var keys []string
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := httplimit.Route()(r)
		keys = append(keys, k)
	})))
	require.Equal(t, http.StatusOK, get(mux, "/items/1").Code)
	require.Equal(t, http.StatusOK, get(mux, "/items/2").Code)
	require.Equal(t, http.StatusTooManyRequests, get(mux, "/items/3").Code, "one pattern, one key")
	require.Equal(t, []string{"GET /items/{id}", "GET /items/{id}"}, keys)
}
