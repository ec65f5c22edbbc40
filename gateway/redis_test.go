package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/redisstore"
)

// newRedisEnvs starts n gateways (New on a redisstore.DB) on one redis-server, each on
// its own redisstore.DB as a process of its own would be, in front of one
// fake upstream, on one fake clock; their admin API is open.
func newRedisEnvs(t *testing.T, n int, opts Options) []*env {
	envs, _ := newRedisEnvsOn(t, n, opts)
	return envs
}

// newRedisEnvsOn is newRedisEnvs, with the redis-server.
func newRedisEnvsOn(t *testing.T, n int, opts Options) ([]*env, *redistest.Server) {
	srv := redistest.Start(t)
	clock := fakeclock.New(start)
	up := newUpstream(t)
	if opts.Upstream == nil {
		opts.Upstream = up.url(t)
	}
	var envs []*env
	for range n {
		rdb, err := redisstore.Open(context.Background(), srv.URL(), redisstore.Options{Now: clock.Now, Timeout: 10 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { rdb.Close() })
		e := &env{t: t, clock: clock, up: up, served: make(chan struct{}, 1<<12), op: operator{token: adminToken}}
		e.gw, err = New(rdb, opts)
		require.NoError(t, err)
		e.ks, err = keystore.Open(rdb, keystore.Options{})
		require.NoError(t, err)
		e.serve()
		envs = append(envs, e)
	}
	return envs, srv
}

// TestRedisGatewaysShareKeys: two gateways on one Redis share a key: one's
// admin API creates, changes and deletes it, the other meters it at once,
// and the usage either records is the other's too.
func TestRedisGatewaysShareKeys(t *testing.T) {
	gws := newRedisEnvs(t, 2, Options{})
	a, b := gws[0], gws[1]
	created := adminOK[admin.Created](a, "POST", "/admin/keys", map[string]any{
		"name": "shared", "windows": []map[string]any{{"limit": 1000, "window": "5h"}}, "models": []string{"gpt-4o"},
	}, http.StatusCreated)
	secret, id := created.Secret, created.Key.ID

	resp, body := b.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", MaxTokens: 100, Input: 100, Output: 50})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, body = b.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-3.5", Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, string(body))
	got := adminOK[admin.Key](a, "GET", "/admin/keys/"+id, nil, http.StatusOK)
	require.EqualValues(t, 150, got.Windows[0].Used)
	require.EqualValues(t, 150, got.LifetimeTokens)

	adminOK[admin.Key](a, "PATCH", "/admin/keys/"+id, map[string]any{"disabled": true}, http.StatusOK)
	resp, _ = b.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	adminOK[admin.Key](b, "PATCH", "/admin/keys/"+id, map[string]any{"disabled": false, "windows": []map[string]any{{"limit": 200, "window": "5h"}}}, http.StatusOK)
	resp, body = a.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", MaxTokens: 100, Input: 1, Output: 1})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "50 left of the limit b set, 100 and more asked: %s", body)

	resp, _ = a.admin("DELETE", "/admin/keys/"+id, adminToken, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = b.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// TestRedisGatewaysWindow is the target of two gateway instances on one
// Redis: clients hammering one key through both never overrun its window
// by more than one request's tokens. Each request reserves its input and
// max_tokens, which bound what the upstream reports (as a model API's
// do), so here the window is never overrun at all; and it is filled:
// requests are refused only when less than one request's reservation is
// left. The usage is exactly what the upstream reported, and the
// request rate of RPS is shared too.
func TestRedisGatewaysWindow(t *testing.T) {
	gws := newRedisEnvs(t, 2, Options{})
	const limit, maxTokens = 20000, 400
	created := adminOK[admin.Created](gws[0], "POST", "/admin/keys", map[string]any{
		"name": "hammered", "windows": []map[string]any{{"limit": limit, "window": "5h"}},
	}, http.StatusCreated)
	var (
		wg               sync.WaitGroup
		ok, limited      atomic.Int64
		served           [2]atomic.Int64
		mu               sync.Mutex
		maxReserve       int64
		unexpectedStatus []int
	)
	for c := range 16 {
		wg.Go(func() {
			e := gws[c%2]
			for i := range 40 {
				q := fakeReq{Model: "gpt-4o", MaxTokens: maxTokens, Input: int64(1 + (c+i)%10), Output: int64(1 + (c*7+i*13)%maxTokens)}
				body, err := json.Marshal(q)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				maxReserve = max(maxReserve, maxTokens+int64(len(body))/4) // as the gateway reserves
				mu.Unlock()
				resp, _, err := e.try(e.request("POST", "/v1/chat/completions", created.Secret, q))
				if err != nil {
					t.Error(err)
					return
				}
				switch resp.StatusCode {
				case http.StatusOK:
					ok.Add(1)
					served[c%2].Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					mu.Lock()
					unexpectedStatus = append(unexpectedStatus, resp.StatusCode)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, unexpectedStatus)
	require.Positive(t, served[0].Load())
	require.Positive(t, served[1].Load())
	require.Positive(t, limited.Load(), "the window was reached")
	got := adminOK[admin.Key](gws[1], "GET", "/admin/keys/"+created.Key.ID, nil, http.StatusOK)
	used := got.Windows[0].Used
	t.Logf("%d served, %d refused; %d of %d tokens used", ok.Load(), limited.Load(), used, limit)
	require.Equal(t, gws[0].up.reported.Load(), used, "every token reported is charged, once")
	require.LessOrEqual(t, used, int64(limit), "the window is never overrun")
	require.Greater(t, used, int64(limit)-maxReserve, "refused only when one more request might not fit")
	require.Zero(t, got.InFlight)
}

// TestRedisGatewaysRequestRate: Options.RPS is one allowance per key
// across the gateways.
func TestRedisGatewaysRequestRate(t *testing.T) {
	gws := newRedisEnvs(t, 2, Options{RPS: 1, Burst: 3})
	created := adminOK[admin.Created](gws[0], "POST", "/admin/keys", map[string]any{
		"name": "rate", "windows": []map[string]any{{"limit": 1000, "window": "5h"}},
	}, http.StatusCreated)
	var codes []int
	for i := range 6 {
		resp, _ := gws[i%2].call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
		codes = append(codes, resp.StatusCode)
	}
	require.Equal(t, []int{200, 200, 200, 429, 429, 429}, codes)
	gws[0].clock.Advance(time.Second)
	resp, _ := gws[1].call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestRedisDown: a gateway whose Redis is gone fails closed: 503
// store_unavailable, which the SDKs retry, for a key it knows and for one
// it does not, and nothing reaches the upstream.
func TestRedisDown(t *testing.T) {
	gws, srv := newRedisEnvsOn(t, 1, Options{})
	e := gws[0]
	created := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{
		"name": "k", "windows": []map[string]any{{"limit": 1000, "window": "5h"}},
	}, http.StatusCreated)
	srv.Stop()
	for _, secret := range []string{created.Secret, "rsk_unknown"} {
		resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", Input: 1})
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
		require.Equal(t, "store_unavailable", apiError(t, body, "api_error")["code"])
	}
	require.Zero(t, e.up.hits.Load())
}

// TestRedisGatewaysBudget: 40 requests at once through two gateways on one
// Redis against a $1.00 budget, each costing at most $0.10: the spend ends
// at no more than $1.00, since each admission reserves its worst case in
// Redis in the same decision that checks the budget.
func TestRedisGatewaysBudget(t *testing.T) {
	envs := newRedisEnvs(t, 2, Options{Upstream: budgetUpstream(t)})
	budgetRace(t, envs)
}

// TestGatewayBudgetRace is TestRedisGatewaysBudget on the embedded store.
func TestGatewayBudgetRace(t *testing.T) {
	budgetRace(t, []*env{newEnv(t, Options{Upstream: budgetUpstream(t)})})
}

// budgetUpstream reports 10 input and 9000 output tokens: at gpt-4o's
// $2.50/M and $10/M, $0.090025; the worst case of max_tokens 9000 is a
// little more (its prompt estimated from the body), under $0.10.
func budgetUpstream(t *testing.T) *url.URL {
	return scripted(t, "application/json", `{"usage":{"prompt_tokens":10,"completion_tokens":9000}}`)
}

// budgetRace sends 40 requests at once through envs, in turn, for a key
// with a $1.00 budget, and checks that no more than $1.00 was spent.
func budgetRace(t *testing.T, envs []*env) {
	k, secret, err := envs[0].keys().Create(context.Background(), keystore.Spec{Name: "b", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1e9, Window: time.Hour}},
		Budgets: []keystore.Budget{{Limit: pricing.Dollar, Window: 24 * time.Hour}},
	}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := range 40 {
		wg.Go(func() {
			e := envs[i%len(envs)]
			resp, b, err := e.try(e.request("POST", "/v1/chat/completions", secret,
				map[string]any{"model": "gpt-4o", "max_tokens": 9000, "messages": []any{}}))
			if err != nil {
				t.Error(err)
				return
			}
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				if !strings.Contains(string(b), "budget_exceeded") {
					t.Errorf("a refusal not for the budget: %s", b)
				}
				refused.Add(1)
			default:
				t.Errorf("status %d: %s", resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	got, err := envs[len(envs)-1].keys().Get(context.Background(), k.ID)
	require.NoError(t, err)
	require.Equal(t, int64(40), ok.Load()+refused.Load())
	require.Positive(t, ok.Load())
	require.Equal(t, pricing.USD(ok.Load())*90_025*pricing.Micro, got.LifetimeSpend)
	require.LessOrEqual(t, got.LifetimeSpend, pricing.Dollar, "never over the budget")
	t.Logf("%d admitted, $%s spent of $1", ok.Load(), got.LifetimeSpend)
}

// TestRedisGatewaysEndUsers: an end user's window is exact across two
// gateways on one Redis, as a key's is: clients of four end users of one
// key hammer it through both; each end user's window is never overrun,
// is filled, and holds exactly what the upstream reported for it.
func TestRedisGatewaysEndUsers(t *testing.T) {
	gws := newRedisEnvs(t, 2, Options{})
	const limit, maxTokens = 3000, 300
	created := adminOK[admin.Created](gws[0], "POST", "/admin/keys", map[string]any{
		"name": "product", "windows": []map[string]any{{"limit": 1 << 40, "window": "5h"}},
		"end_users": map[string]any{"windows": []map[string]any{{"limit": limit, "window": "5h"}}},
	}, http.StatusCreated)
	users := []string{"u-1", "u-2", "u-3", "u-4"}
	var (
		wg       sync.WaitGroup
		reported [4]atomic.Int64
		limited  [4]atomic.Int64
	)
	for c := range 16 {
		wg.Go(func() {
			e, u := gws[c%2], c%len(users)
			for i := range 30 {
				q := fakeReq{Model: "gpt-4o", MaxTokens: maxTokens, Input: int64(1 + (c+i)%10), Output: int64(1 + (c*7+i*13)%maxTokens)}
				req := e.request("POST", "/v1/chat/completions", created.Secret, q)
				req.Header.Set(EndUserHeader, users[u])
				resp, body, err := e.try(req)
				if err != nil {
					t.Error(err)
					return
				}
				switch resp.StatusCode {
				case http.StatusOK:
					reported[u].Add(q.Input + q.Output)
				case http.StatusTooManyRequests:
					limited[u].Add(1)
					if !strings.Contains(string(body), `end user \"`+users[u]+`\"`) {
						t.Errorf("a refusal that does not name %s: %s", users[u], body)
					}
				default:
					t.Errorf("status %d: %s", resp.StatusCode, body)
				}
			}
		})
	}
	wg.Wait()
	// Filled: one at a time, each end user is refused only when its
	// next request might not fit (while others were in flight, their
	// reservations refused requests that then had room).
	for i, name := range users {
		for {
			q := fakeReq{Model: "gpt-4o", MaxTokens: maxTokens, Input: 1, Output: maxTokens}
			req := gws[i%2].request("POST", "/v1/chat/completions", created.Secret, q)
			req.Header.Set(EndUserHeader, name)
			resp, _ := gws[i%2].do(req)
			if resp.StatusCode != http.StatusOK {
				require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
				break
			}
			reported[i].Add(q.Input + q.Output)
		}
	}
	var total int64
	for i, name := range users {
		u, err := gws[1].keys().EndUserUsage(context.Background(), created.Key.ID, name)
		require.NoError(t, err)
		t.Logf("%s: %d of %d tokens, %d refused", name, u.Used, limit, limited[i].Load())
		require.Equal(t, reported[i].Load(), u.Used, "%s: every token reported is charged to it, once", name)
		require.LessOrEqual(t, u.Used, int64(limit), "%s: its window is never overrun", name)
		require.Positive(t, limited[i].Load(), "%s: its window was reached", name)
		require.Greater(t, u.Used, int64(limit-maxTokens-50), "%s: refused only when one more request might not fit", name)
		total += u.Used
	}
	got := adminOK[admin.Key](gws[0], "GET", "/admin/keys/"+created.Key.ID, nil, http.StatusOK)
	require.Equal(t, total, got.Windows[0].Used, "the key's window counts every end user's")
}
