package sdktest

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
)

// Budgets in money and the caller's rate-limit headers, through the
// official clients (the budget_* and limit_headers* scenarios of sdk.mjs):
//
//   - a key whose budget ($0.01 per 24h) is spent, and one whose budget
//     ($0.000001 per 24h) is less than the worst case of one request
//     (max_tokens 1000), on priced models (gpt-4o, claude-sonnet-4-20250514,
//     gemini-2.5-flash): each client's call fails at once, after one
//     request, with the clients' default retries: the gateway answers 429
//     budget_exceeded with x-should-retry: false. openai and
//     @anthropic-ai/sdk raise RateLimitError, @google/genai an ApiError of
//     status 429, with the message naming the budget ("key key_… is over
//     its budget of $0.01 per 24h0m0s; it has room again in 24h0m0s", "key
//     key_…: this request may cost more than its budget of $0.000001 per
//     24h0m0s allows in all").
//   - openai's .withResponse() and .asResponse() on an admitted request show
//     the key's own x-ratelimit-* headers (the token window's limit and what
//     this request's reservation left of it, the request rate's) and
//     x-ratestore-budget-remaining, never the upstream's.

const (
	spentBudget = pricing.Dollar / 100 // the spent key's budget, all of it spent
	tinyBudget  = pricing.Micro        // less than any request's worst case
	budgetSpan  = 24 * time.Hour

	headersWindow = 100_000 // the headers key's token window
	headersRPM    = 60      // and its request rate
	headersBudget = pricing.Dollar
	headersMax    = 100 // the max_tokens of the limit_headers scenarios
	plainWindow   = 50_000
)

// budgetKeyset is the keys of the budget and header scenarios.
type budgetKeyset struct {
	spent, tiny, headers, plain                         keystore.Key
	spentSecret, tinySecret, headersSecret, plainSecret string
}

// budgetKeys creates the keys of the budget and header scenarios in ks,
// and spends the spent key's budget (an admission of its whole budget,
// finished at that cost).
func budgetKeys(t *testing.T, ks *keystore.Store) budgetKeyset {
	t.Helper()
	ctx := context.Background()
	create := func(name string, p keystore.Policy) (keystore.Key, string) {
		k, secret, err := ks.Create(ctx, keystore.Spec{Name: name, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		return k, secret
	}
	room := []keystore.Window{{Limit: 1 << 30, Window: 5 * time.Hour}}
	var b budgetKeyset
	b.spent, b.spentSecret = create("spent", keystore.Policy{Windows: room,
		Budgets: []keystore.Budget{{Limit: spentBudget, Window: budgetSpan}}})
	b.tiny, b.tinySecret = create("tiny", keystore.Policy{Windows: room,
		Budgets: []keystore.Budget{{Limit: tinyBudget, Window: budgetSpan}}})
	b.headers, b.headersSecret = create("headers", keystore.Policy{
		Windows:           []keystore.Window{{Limit: headersWindow, Window: 5 * time.Hour}},
		RequestsPerMinute: headersRPM,
		Budgets:           []keystore.Budget{{Limit: headersBudget, Window: budgetSpan}}})
	b.plain, b.plainSecret = create("plain", keystore.Policy{
		Windows: []keystore.Window{{Limit: plainWindow, Window: 5 * time.Hour}}})

	a, err := ks.Admit(ctx, b.spentSecret, keystore.Request{Cost: spentBudget})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.FinishSpend(ctx, 0, spentBudget); err != nil {
		t.Fatal(err)
	}
	return b
}

// tally counts the requests the gateway saw for each scenario that names
// itself (X-Sdktest-Scenario), and the size of the last one's body.
type tally struct {
	mu   sync.Mutex
	n    map[string]int
	body map[string]int
}

func (c *tally) add(name string, bodyLen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.body = map[string]int{}, map[string]int{}
	}
	c.n[name]++
	c.body[name] = bodyLen
}

func (c *tally) get(name string) (requests, bodyLen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name], c.body[name]
}

// checkBudgets checks the budget_* scenarios: each client's call fails at
// once, after one request, with the client's rate-limit error and a
// message naming the budget; and refusals change no budget.
func checkBudgets(t *testing.T, ks *keystore.Store, b budgetKeyset, got map[string]result, seen *tally) {
	budget := func(limit pricing.USD) string {
		return keystore.Budget{Limit: limit, Window: budgetSpan}.String()
	}
	scenarios := []struct {
		name, message string
	}{
		{"budget_spent", "key " + b.spent.ID + " is over its budget of " + budget(spentBudget) + "; it has room again in "},
		{"budget_too_small", "key " + b.tiny.ID + ": this request may cost more than its budget of " + budget(tinyBudget) + " allows in all"},
	}
	errorClass := map[string]string{"openai": "RateLimitError", "anthropic": "RateLimitError", "gemini": "ApiError"}
	for _, sdk := range []string{"openai", "anthropic", "gemini"} {
		for _, sc := range scenarios {
			name := sdk + "/" + sc.name
			t.Run(name, func(t *testing.T) {
				r, ok := got[name]
				if !ok {
					t.Fatal("no result")
				}
				t.Logf("%s %d in %dms: %s", r.ErrorName, r.Status, r.ElapsedMS, deref(r.APIMessage))
				if r.OK || r.Status != 429 {
					t.Fatalf("ok %v status %d (%q), want 429", r.OK, r.Status, r.ErrorMessage)
				}
				if r.ErrorName != errorClass[sdk] {
					t.Errorf("the client raised %q, want %s", r.ErrorName, errorClass[sdk])
				}
				if !strings.Contains(r.ErrorMessage, "budget of $") {
					t.Errorf("the error's message %q does not name the budget", r.ErrorMessage)
				}
				if m := deref(r.APIMessage); !strings.HasPrefix(m, sc.message) {
					t.Errorf("api message %q, want it to start %q", m, sc.message)
				}
				if c := deref(r.Code); c != "budget_exceeded" {
					t.Errorf("code %q, want budget_exceeded", c)
				}
				// @google/genai's ApiError keeps no headers.
				if sdk != "gemini" && deref(r.ShouldRetry) != "false" {
					t.Errorf("x-should-retry %q, want false", deref(r.ShouldRetry))
				}
				// Default client settings: no retry, so one request, at once.
				if n, _ := seen.get(name); n != 1 {
					t.Errorf("the gateway saw %d requests for the call, want 1 (the client retried)", n)
				}
				if r.ElapsedMS >= 5000 {
					t.Errorf("took %v, want < 5s", time.Duration(r.ElapsedMS)*time.Millisecond)
				}
			})
		}
	}
	// A refusal holds nothing: the spent key has spent its budget exactly,
	// the tiny one nothing; the headers key the real cost of its request,
	// the upstream's usage at gpt-4o's prices, not its worst case.
	p, _, _ := pricing.Default().Lookup("gpt-4o")
	for _, c := range []struct {
		k    keystore.Key
		want pricing.USD
	}{{b.spent, spentBudget}, {b.tiny, 0}, {b.headers, p.Cost(pricing.Usage{Input: inTokens, Output: outTokens})}} {
		u, err := ks.Usage(context.Background(), c.k.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(u.Budgets) != 1 || u.Budgets[0].Spent != c.want || u.InFlight != 0 {
			t.Errorf("key %s: budgets %+v, %d in flight; want $%s spent, none in flight", c.k.Name, u.Budgets, u.InFlight, c.want)
		}
	}
}

// checkLimitHeaders checks the limit_headers scenarios: the headers
// openai's .withResponse() and .asResponse() show are the key's, what its
// admission left of its limits, and never the upstream's.
func checkLimitHeaders(t *testing.T, b budgetKeyset, got map[string]result, seen *tally) {
	headersOf := func(t *testing.T, name string) (map[string]string, int) {
		t.Helper()
		r, ok := got[name]
		if !ok || !r.OK {
			t.Fatalf("no successful result: %+v", r)
		}
		var d struct {
			Headers map[string]string `json:"headers"`
		}
		if err := json.Unmarshal(r.Detail, &d); err != nil {
			t.Fatal(err)
		}
		n, bodyLen := seen.get(name)
		if n != 1 {
			t.Fatalf("the gateway saw %d requests, want 1", n)
		}
		t.Logf("headers: %v (request body %d bytes)", d.Headers, bodyLen)
		for h, v := range upstreamLimits {
			if got, ok := d.Headers[strings.ToLower(h)]; ok && got == v {
				t.Errorf("%s: %q, the upstream's own", h, got)
			}
		}
		return d.Headers, bodyLen
	}
	resetOK := func(t *testing.T, h map[string]string, name string) {
		t.Helper()
		if d, err := time.ParseDuration(h[name]); err != nil || d <= 0 {
			t.Errorf("%s %q, want a positive duration", name, h[name])
		}
	}

	t.Run("openai/limit_headers/headers", func(t *testing.T) {
		h, bodyLen := headersOf(t, "openai/limit_headers")
		// The request reserves its bytes/4 and its max_tokens: what remains
		// of the window once that is held.
		prompt := int64(bodyLen) / 4
		reserve := prompt + headersMax
		want := map[string]string{
			"x-ratelimit-limit-tokens":       strconv.Itoa(headersWindow),
			"x-ratelimit-remaining-tokens":   strconv.FormatInt(headersWindow-reserve, 10),
			"x-ratelimit-limit-requests":     strconv.Itoa(headersRPM),
			"x-ratelimit-remaining-requests": strconv.Itoa(headersRPM - 1),
		}
		// And its worst-case cost, held in the budget: the prompt at the
		// input price, max_tokens at the dearer of output and reasoning.
		p, _, ok := pricing.Default().Lookup("gpt-4o")
		if !ok {
			t.Fatal("gpt-4o has no price")
		}
		cost := max(p.Cost(pricing.Usage{Input: prompt, Output: headersMax}), p.Cost(pricing.Usage{Input: prompt, Reasoning: headersMax}))
		want["x-ratestore-budget-remaining"] = (headersBudget - cost).String()
		for name, v := range want {
			if h[name] != v {
				t.Errorf("%s %q, want %q", name, h[name], v)
			}
		}
		resetOK(t, h, "x-ratelimit-reset-tokens")
		resetOK(t, h, "x-ratelimit-reset-requests")
		if r, _ := strconv.ParseInt(h["x-ratelimit-remaining-tokens"], 10, 64); r >= headersWindow {
			t.Errorf("remaining %d tokens: the request reserved none of the window", r)
		}
	})
	t.Run("openai/limit_headers_plain/headers", func(t *testing.T) {
		h, bodyLen := headersOf(t, "openai/limit_headers_plain")
		want := map[string]string{
			"x-ratelimit-limit-tokens":     strconv.Itoa(plainWindow),
			"x-ratelimit-remaining-tokens": strconv.FormatInt(plainWindow-int64(bodyLen)/4-headersMax, 10),
		}
		for name, v := range want {
			if h[name] != v {
				t.Errorf("%s %q, want %q", name, h[name], v)
			}
		}
		resetOK(t, h, "x-ratelimit-reset-tokens")
		// No request rate and no budget: no such headers, the upstream's
		// request headers not passed on either.
		for _, name := range []string{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests", "x-ratestore-budget-remaining"} {
			if v, ok := h[name]; ok {
				t.Errorf("%s %q on a key without one", name, v)
			}
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
