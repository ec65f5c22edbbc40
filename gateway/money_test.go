package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
)

// scripted is an upstream that answers every request with body, as
// contentType.
func scripted(t *testing.T, contentType, body string) *url.URL {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("X-Ratelimit-Remaining-Tokens", "1") // the operator's account: never passed on
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return u
}

// sse is events as a text/event-stream body.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

// micro is n micro-dollars.
func micro(n int64) pricing.USD { return pricing.USD(n) * pricing.Micro }

// TestCostExact: the cost of each priced usage is the hand computation
// from the built-in table, each token type at its own price, plain and
// streamed: Anthropic with cache writes (five minutes and one hour) and
// reads, OpenAI with cached input and reasoning, Gemini above 200k tokens.
func TestCostExact(t *testing.T) {
	// claude-sonnet-4: input $3/M, output $15/M, cache write $3.75/M (one
	// hour $6/M), cache read $0.30/M. In micro-dollars: 100 input, 2000
	// written (500 for an hour), 10000 read, 50 output: 300 + 1500*3.75 +
	// 500*6 + 3000 + 750 = 300 + 5625 + 3000 + 3000 + 750 = 12675.
	anthropicUsage := `{"input_tokens":100,"cache_creation_input_tokens":2000,"cache_read_input_tokens":10000,` +
		`"cache_creation":{"ephemeral_5m_input_tokens":1500,"ephemeral_1h_input_tokens":500},"output_tokens":50}`
	// o4-mini: input $1.10/M, cached $0.275/M, output (reasoning too)
	// $4.40/M. In micro-dollars: 1000 prompt of which 600 cached, 300
	// completion of which 200 reasoning: 440 + 165 + 1320 = 1925.
	openaiUsage := `{"prompt_tokens":1000,"completion_tokens":300,"total_tokens":1300,` +
		`"prompt_tokens_details":{"cached_tokens":600},"completion_tokens_details":{"reasoning_tokens":200}}`
	// gemini-2.5-pro above 200k: input $2.50/M, output $15/M (thoughts
	// too). In micro-dollars: 250000 prompt, 1000 candidates and 500
	// thoughts: 625000 + 22500 = 647500.
	geminiUsage := `{"promptTokenCount":250000,"candidatesTokenCount":1000,"thoughtsTokenCount":500,"totalTokenCount":251500}`
	for _, c := range []struct {
		name, path, model, ctype, body string
		want                           pricing.USD
	}{
		{"anthropic", "/v1/messages", "claude-sonnet-4-20250514", "application/json",
			`{"type":"message","usage":` + anthropicUsage + `}`, micro(12675)},
		{"anthropic stream", "/v1/messages", "claude-sonnet-4-20250514", "text/event-stream", sse(
			`{"type":"message_start","message":{"usage":{"input_tokens":100,"cache_creation_input_tokens":2000,"cache_read_input_tokens":10000,"cache_creation":{"ephemeral_5m_input_tokens":1500,"ephemeral_1h_input_tokens":500},"output_tokens":1}}}`,
			`{"type":"message_delta","usage":{"output_tokens":50}}`), micro(12675)},
		{"openai", "/v1/chat/completions", "o4-mini", "application/json", `{"usage":` + openaiUsage + `}`, micro(1925)},
		{"openai stream", "/v1/chat/completions", "o4-mini", "text/event-stream",
			sse(`{"choices":[{"delta":{"content":"hi"}}]}`, `{"choices":[],"usage":`+openaiUsage+`}`, `[DONE]`), micro(1925)},
		{"gemini", "/v1beta/models/gemini-2.5-pro:generateContent", "gemini-2.5-pro", "application/json",
			`{"usageMetadata":` + geminiUsage + `}`, micro(647500)},
		{"gemini stream", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini-2.5-pro", "text/event-stream",
			sse(`{"usageMetadata":{"promptTokenCount":250000,"candidatesTokenCount":10}}`, `{"usageMetadata":`+geminiUsage+`}`), micro(647500)},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, Options{Upstream: scripted(t, c.ctype, c.body)})
			k, secret := e.key("k", 1e9)
			body := map[string]any{"model": c.model, "max_tokens": 100, "stream": c.ctype == "text/event-stream"}
			if strings.HasPrefix(c.path, "/v1beta") {
				body = map[string]any{"contents": []any{}}
			}
			resp, b := e.call("POST", c.path, secret, body)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
			got, err := e.keys().Get(context.Background(), k.ID)
			require.NoError(t, err)
			require.Equal(t, c.want, got.LifetimeSpend)
		})
	}
}

// TestBudgetRefusal: a key's budget holds the worst case of each request
// while it runs and its real cost after; a request whose worst case does
// not fit is refused with 429 budget_exceeded, no retry advised, and a
// message naming the budget; the caller's headers say what is left.
func TestBudgetRefusal(t *testing.T) {
	// gpt-4o: $2.50/M input, $10/M output. 40 input and 10 output cost
	// 100 + 100 = 200 micro-dollars.
	up := scripted(t, "application/json", `{"usage":{"prompt_tokens":40,"completion_tokens":10}}`)
	e := newEnv(t, Options{Upstream: up})
	k, secret, err := e.keys().Create(context.Background(), keystore.Spec{Name: "b", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1e9, Window: 5 * 3600e9}},
		Budgets: []keystore.Budget{{Limit: micro(2000), Window: 3600e9}},
	}})
	require.NoError(t, err)
	req := map[string]any{"model": "gpt-4o", "max_tokens": 100, "messages": []any{}}
	// The worst case, the body's bytes/4 at the input price and 100 output
	// tokens at $10/M, is about 1030 micro-dollars: five requests of 200
	// fit in $0.002 (the fifth holds 800 + 1030), a sixth does not.
	for range 5 {
		resp, b := e.call("POST", "/v1/chat/completions", secret, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		require.NotEmpty(t, resp.Header.Get("X-Ratestore-Budget-Remaining"))
		require.NotEqual(t, "1", resp.Header.Get("X-Ratelimit-Remaining-Tokens"), "the upstream's header is not passed on")
		require.Equal(t, "1000000000", resp.Header.Get("X-Ratelimit-Limit-Tokens"))
	}
	got, err := e.keys().Get(context.Background(), k.ID)
	require.NoError(t, err)
	require.Equal(t, micro(1000), got.LifetimeSpend, "five requests at their real cost")
	m := e.scrape()
	require.InDelta(t, 0.001, m.series("ratestore_spend_usd_total")[`{gen_ai_request_model="other",key_id="`+k.ID+`",team=""}`], 1e-12)
	require.InDelta(t, 0.001, m.series("ratestore_budget_remaining_usd")[`{key_id="`+k.ID+`"}`], 1e-12, "$0.002 less $0.001")
	resp, b := e.call("POST", "/v1/chat/completions", secret, req)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
	require.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	msg := apiError(t, b, "rate_limit_error")
	require.Equal(t, "budget_exceeded", msg["code"])
	require.Contains(t, msg["message"], "over its budget of $0.002 per 1h0m0s")
}

// TestNoWindowHeaders: a key with budgets and no token window is served
// and metered, held to its budget, and its answers carry no token
// headers, the request and budget headers staying; a key without a window
// in a team with one gets the team's; the stats path shows it.
func TestNoWindowHeaders(t *testing.T) {
	up := scripted(t, "application/json", `{"usage":{"prompt_tokens":40,"completion_tokens":10}}`)
	e := newEnv(t, Options{Upstream: up})
	ctx := context.Background()
	budget := func(usd pricing.USD) keystore.Policy {
		return keystore.Policy{RequestsPerMinute: 60, Budgets: []keystore.Budget{{Limit: usd, Window: 3600e9}}}
	}
	k, secret, err := e.keys().Create(ctx, keystore.Spec{Name: "budget only", Policy: budget(micro(10_000))})
	require.NoError(t, err)
	req := map[string]any{"model": "gpt-4o", "max_tokens": 100, "messages": []any{}}
	resp, b := e.call("POST", "/v1/chat/completions", secret, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	for _, h := range []string{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"} {
		require.NotContains(t, resp.Header, h)
	}
	require.Equal(t, []string{"60", "59"}, []string{resp.Header.Get("X-Ratelimit-Limit-Requests"), resp.Header.Get("X-Ratelimit-Remaining-Requests")})
	require.NotEmpty(t, resp.Header.Get("X-Ratestore-Budget-Remaining"))
	got, err := e.keys().Get(ctx, k.ID)
	require.NoError(t, err)
	require.Equal(t, [2]any{int64(50), micro(200)}, [2]any{got.LifetimeTokens, got.LifetimeSpend}, "metered")
	resp, b = e.call("GET", "/stats", secret, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Contains(t, string(b), `"windows":[]`)

	// The worst case, about 1030 micro-dollars, does not fit in 500.
	_, poor, err := e.keys().Create(ctx, keystore.Spec{Name: "poor", Policy: budget(micro(500))})
	require.NoError(t, err)
	resp, b = e.call("POST", "/v1/chat/completions", poor, req)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
	require.Equal(t, "budget_exceeded", apiError(t, b, "rate_limit_error")["code"])

	team, err := e.keys().CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1e6, Window: 3600e9}},
	}})
	require.NoError(t, err)
	_, member, err := e.keys().Create(ctx, keystore.Spec{Name: "member", Team: team.ID})
	require.NoError(t, err)
	resp, b = e.call("POST", "/v1/chat/completions", member, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Equal(t, "1000000", resp.Header.Get("X-Ratelimit-Limit-Tokens"), "the team's window")
	require.NotContains(t, resp.Header, "X-Ratelimit-Limit-Requests")
}

// TestUnpriced: a key with a budget asking for a model the table does not
// price is refused, or charged $0 or the default price, as the operator
// chose; a key without a budget is served either way.
func TestUnpriced(t *testing.T) {
	up := scripted(t, "application/json", `{"usage":{"prompt_tokens":1000,"completion_tokens":1000}}`)
	budget := keystore.Policy{Windows: []keystore.Window{{Limit: 1e9, Window: 3600e9}},
		Budgets: []keystore.Budget{{Limit: pricing.Dollar, Window: 3600e9}}}
	for _, c := range []struct {
		unpriced Unpriced
		status   int
		spend    pricing.USD
	}{
		{UnpricedRefuse, http.StatusForbidden, 0},
		{UnpricedZero, http.StatusOK, 0},
		{UnpricedDefault, http.StatusOK, micro(3000)}, // 1000 tokens each at $1/M and $2/M
	} {
		e := newEnv(t, Options{Upstream: up, Unpriced: c.unpriced, DefaultPrice: pricing.Price{Input: 1e6, Output: 2e6}})
		k, secret, err := e.keys().Create(context.Background(), keystore.Spec{Name: "u", Policy: budget})
		require.NoError(t, err)
		resp, b := e.call("POST", "/v1/chat/completions", secret, map[string]any{"model": "house-model", "messages": []any{}})
		require.Equal(t, c.status, resp.StatusCode, string(b))
		if c.status == http.StatusForbidden {
			require.Contains(t, apiError(t, b, "permission_error")["message"], `model "house-model" has no price`)
		}
		got, _ := e.keys().Get(context.Background(), k.ID)
		require.Equal(t, c.spend, got.LifetimeSpend)

		_, plain := e.key("plain", 1e9)
		resp, b = e.call("POST", "/v1/chat/completions", plain, map[string]any{"model": "house-model", "messages": []any{}})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	}
}

// TestAdminBudgets: budgets through the admin API, with what was spent in
// the key's JSON; a bad budget is refused with its field named.
func TestAdminBudgets(t *testing.T) {
	e := newAdminEnv(t, Options{})
	created := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{
		"name": "b", "windows": []map[string]any{{"limit": 1000, "window": "1h"}},
		"budgets": []map[string]any{{"limit_usd": 5.25, "window": "24h"}, {"limit_usd": 500, "period": "month", "timezone": "Europe/Paris"}},
	}, http.StatusCreated)
	raw, err := json.Marshal(created.Key.Budgets)
	require.NoError(t, err)
	require.JSONEq(t, `[{"limit_usd":5.25,"window":"24h0m0s","spent_usd":0,"remaining_usd":5.25,"resets_at":null},
		{"limit_usd":500,"period":"month","timezone":"Europe/Paris","spent_usd":0,"remaining_usd":500,"resets_at":null}]`, string(raw))

	for body, want := range map[string]string{
		`{"budgets":[{"limit_usd":1}]}`:                                  `budgets[0]: give "window"`,
		`{"budgets":[{"limit_usd":1,"period":"year"}]}`:                  `budgets[0].period: "year"`,
		`{"budgets":[{"limit_usd":1,"period":"day","timezone":"Mars"}]}`: `budgets[0].timezone: "Mars"`,
		`{"budgets":[{"limit_usd":0.0000000001,"window":"1h"}]}`:         `budgets[0].limit_usd`,
		`{"budgets":[{"limit_usd":0,"window":"1h"}]}`:                    `budgets[0].limit: must be positive`,
	} {
		resp, b := e.admin("PATCH", "/admin/keys/"+created.Key.ID, adminToken, body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		require.Contains(t, apiError(t, b, "invalid_request_error")["message"], want, body)
	}
	k := adminOK[admin.Key](e, "PATCH", "/admin/keys/"+created.Key.ID, map[string]any{"budgets": []any{}}, http.StatusOK)
	require.Empty(t, k.Budgets, "[] removes them")
}

// TestReloadPrices: the admin API reloads the price file; one that does
// not parse is refused with the entry named, and the running table stays.
func TestReloadPrices(t *testing.T) {
	file := t.TempDir() + "/prices.json"
	write := func(s string) { require.NoError(t, os.WriteFile(file, []byte(s), 0o600)) }
	write(`{"house-model":{"input_cost_per_token":1e-06,"output_cost_per_token":2e-06}}`)
	up := scripted(t, "application/json", `{"usage":{"prompt_tokens":1000,"completion_tokens":1000}}`)
	e := newAdminEnv(t, Options{Upstream: up, PricesFile: file})
	k, secret := e.key("k", 1e9)
	spent := func() pricing.USD {
		got, err := e.keys().Get(context.Background(), k.ID)
		require.NoError(t, err)
		return got.LifetimeSpend
	}
	call := func() {
		resp, b := e.call("POST", "/v1/chat/completions", secret, map[string]any{"model": "house-model", "messages": []any{}})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	}
	call()
	require.Equal(t, micro(3000), spent())

	write(`{"house-model":{"input_cost_per_token":2e-06,"output_cost_per_token":2e-06}}`)
	got := adminOK[admin.Prices](e, "POST", "/admin/prices/reload", nil, http.StatusOK)
	require.Greater(t, got.Models, 1, "the built-in table and the file")
	call()
	require.Equal(t, micro(3000+4000), spent())

	write(`{"house-model":{"input_cost_per_token":"cheap"}}`)
	resp, b := e.admin("POST", "/admin/prices/reload", adminToken, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, apiError(t, b, "invalid_request_error")["message"], "house-model")
	call()
	require.Equal(t, micro(3000+4000+4000), spent(), "the running table stays")
}

// TestSpendMetricTeam: what a key in a team spends is counted under its
// team in ratestore_spend_usd_total.
func TestSpendMetricTeam(t *testing.T) {
	up := scripted(t, "application/json", `{"usage":{"prompt_tokens":40,"completion_tokens":10}}`)
	e := newEnv(t, Options{Upstream: up})
	team, err := e.keys().CreateTeam(context.Background(), keystore.TeamSpec{Name: "t", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1e9, Window: 3600e9}},
	}})
	require.NoError(t, err)
	k, secret, err := e.keys().Create(context.Background(), keystore.Spec{Name: "k", Team: team.ID, TokenLimit: 1e9})
	require.NoError(t, err)
	resp, b := e.call("POST", "/v1/chat/completions", secret, map[string]any{"model": "gpt-4o", "messages": []any{}})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	series := e.scrape().series("ratestore_spend_usd_total")
	require.InDelta(t, 0.0002, series[`{gen_ai_request_model="other",key_id="`+k.ID+`",team="`+team.ID+`"}`], 1e-12, "%v", series)
}
