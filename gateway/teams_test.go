package gateway

import (
	"context"
	"net/http"
	"testing"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/keystore"
	"github.com/stretchr/testify/require"
)

// TestAdminTeamLifecycle: a team through the admin API, created, listed,
// read, changed field by field and deleted; a key joins it and leaves it
// by its "team"; deleting a team with keys is refused with 409, naming
// a key.
func TestAdminTeamLifecycle(t *testing.T) {
	e := newAdminEnv(t, Options{})
	resp, body := e.admin("POST", "/admin/teams", adminToken, map[string]any{
		"name": "research", "models": []string{"gpt-*"}, "windows": []map[string]any{{"limit": 1000, "window": "5h"}},
		"budgets": []map[string]any{{"limit_usd": 5, "window": "24h"}}, "requests_per_minute": 60, "max_concurrent": 4,
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	team := adminOK[admin.Team](e, "GET", resp.Header.Get("Location"), nil, http.StatusOK)
	created := start
	require.Equal(t, admin.Team{
		ID: team.ID, Name: "research", Models: []string{"gpt-*"},
		Windows:           []admin.Window{{Limit: 1000, Window: "5h0m0s", Bucket: "5m0s", Remaining: 1000}},
		Budgets:           []admin.Budget{{LimitUSD: 5e9, Window: "24h0m0s", RemainingUSD: 5e9}},
		RequestsPerMinute: 60, MaxConcurrent: 4, CreatedAt: &created, KeyCount: 0,
	}, team)
	require.Equal(t, []admin.Team{team}, adminOK[admin.Teams](e, "GET", "/admin/teams", nil, http.StatusOK).Teams)

	// A key joins the team: the key says so, the team lists it, and the
	// team's windows count the key's tokens.
	k := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{
		"name": "k", "team": team.ID, "windows": []map[string]any{{"limit": 100000, "window": "5h"}},
	}, http.StatusCreated)
	require.Equal(t, team.ID, k.Key.Team)
	_, body = e.admin("GET", "/admin/keys/"+k.Key.ID, adminToken, nil)
	require.Equal(t, team.ID, decode(t, body, append(keyJSONFields, "team")...)["team"])
	resp, body = e.call("POST", "/v1/chat/completions", k.Secret, fakeReq{Model: "gpt-4o", Input: 30, Output: 12})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	got := adminOK[admin.Team](e, "GET", "/admin/teams/"+team.ID, nil, http.StatusOK)
	require.Equal(t, 1, got.KeyCount)
	require.EqualValues(t, 42, got.Windows[0].Used)

	// PATCH changes the fields given, and no other.
	got = adminOK[admin.Team](e, "PATCH", "/admin/teams/"+team.ID, map[string]any{
		"name": "research-2", "windows": []map[string]any{{"limit": 500, "window": "5h"}, {"limit": 100, "window": "1h"}},
	}, http.StatusOK)
	require.Equal(t, "research-2", got.Name)
	require.Equal(t, []int64{500, 100}, []int64{got.Windows[0].Limit, got.Windows[1].Limit})
	require.EqualValues(t, 42, got.Windows[0].Used, "a window whose length stays keeps its usage")
	require.Equal(t, []any{[]string{"gpt-*"}, int64(60), 4, 1}, []any{got.Models, got.RequestsPerMinute, got.MaxConcurrent, len(got.Budgets)})
	again := adminOK[admin.Team](e, "PATCH", "/admin/teams/"+team.ID, map[string]any{"budgets": []any{}}, http.StatusOK)
	got.Budgets = []admin.Budget{}
	require.Equal(t, got, again)

	// DELETE is refused while the key belongs; the key leaves by "team": "".
	e.adminFails("DELETE", "/admin/teams/"+team.ID, nil, http.StatusConflict, "team_has_keys", k.Key.ID)
	resp, body = e.admin("PATCH", "/admin/keys/"+k.Key.ID, adminToken, map[string]any{"team": ""})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.NotContains(t, decode(t, body, keyJSONFields...), "team", "left out for a key without a team")
	resp, body = e.admin("DELETE", "/admin/teams/"+team.ID, adminToken, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, string(body))
	e.adminFails("GET", "/admin/teams/"+team.ID, nil, http.StatusNotFound, "team_not_found", team.ID)
	e.adminFails("PATCH", "/admin/teams/"+team.ID, map[string]any{}, http.StatusNotFound, "team_not_found")
	e.adminFails("DELETE", "/admin/teams/"+team.ID, nil, http.StatusNotFound, "team_not_found")
	require.Empty(t, adminOK[admin.Teams](e, "GET", "/admin/teams", nil, http.StatusOK).Teams)
}

// TestAdminTeamBadRequests: a team's fields are checked as a key's, and a
// key's "team" must be a team's id.
func TestAdminTeamBadRequests(t *testing.T) {
	e := newAdminEnv(t, Options{})
	e.adminFails("POST", "/admin/teams", map[string]any{"windows": []map[string]any{{"limit": 1, "window": "5h"}}, "secret": "x"},
		http.StatusBadRequest, "invalid_field", `unknown field "secret"`)
	e.adminFails("POST", "/admin/teams", map[string]any{"windows": []map[string]any{{"limit": 0, "window": "5h"}}},
		http.StatusBadRequest, "invalid_field", "windows[0].limit")
	e.adminFails("POST", "/admin/keys", map[string]any{"team": "team_0123456789abcdef", "windows": []map[string]any{{"limit": 1, "window": "5h"}}},
		http.StatusBadRequest, "invalid_field", "team: no team has the id team_0123456789abcdef")
	k := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{"windows": []map[string]any{{"limit": 1, "window": "5h"}}}, http.StatusCreated)
	e.adminFails("PATCH", "/admin/keys/"+k.Key.ID, map[string]any{"team": "nope"}, http.StatusBadRequest, "invalid_field", "team: no team has the id nope")
}

// newTeamKey makes a team of policy and a key in it whose own limits are
// far away, and returns the team's id, the key and its secret.
func newTeamKey(t *testing.T, e *env, pol keystore.Policy) (string, keystore.Key, string) {
	ctx := context.Background()
	team, err := e.keys().CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: pol})
	require.NoError(t, err)
	k, secret, err := e.keys().Create(ctx, keystore.Spec{Name: "k", Team: team.ID, TokenLimit: 1e9})
	require.NoError(t, err)
	return team.ID, k, secret
}

// TestTeamRefusals: a key within its own limits is refused by its team's
// window, budget and models, with the same status and code as by its
// own, and a message that names the team.
func TestTeamRefusals(t *testing.T) {
	e := newEnv(t, Options{})
	team, k, secret := newTeamKey(t, e, keystore.Policy{Windows: []keystore.Window{{Limit: 100, Window: 5 * 3600e9}}, Models: []string{"gpt-*"}})
	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", Input: 100, Output: 50})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, body = e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", Input: 1})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
	m := apiError(t, body, "rate_limit_error")
	require.Equal(t, "rate_limit_exceeded", m["code"])
	require.Equal(t, "key "+k.ID+"'s team "+team+" is over its 5h0m0s token window: 100 tokens; retry after 5h0m0s", m["message"])

	resp, body = e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "claude-x", Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, string(body))
	m = apiError(t, body, "permission_error")
	require.Equal(t, "model_not_allowed", m["code"])
	require.Equal(t, "key "+k.ID+"'s team "+team+` may not use model "claude-x"; it may use gpt-*`, m["message"])
}

// TestTeamBudgetRefusal: a team's budget counts the cost of its keys'
// requests, and refuses one whose worst case does not fit, naming the
// team (see TestBudgetRefusal for the figures).
func TestTeamBudgetRefusal(t *testing.T) {
	up := scripted(t, "application/json", `{"usage":{"prompt_tokens":40,"completion_tokens":10}}`)
	e := newEnv(t, Options{Upstream: up})
	team, k, secret := newTeamKey(t, e, keystore.Policy{
		Windows: []keystore.Window{{Limit: 1e9, Window: 5 * 3600e9}},
		Budgets: []keystore.Budget{{Limit: micro(2000), Window: 3600e9}},
	})
	req := map[string]any{"model": "gpt-4o", "max_tokens": 100, "messages": []any{}}
	for range 5 {
		resp, b := e.call("POST", "/v1/chat/completions", secret, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	}
	resp, b := e.call("POST", "/v1/chat/completions", secret, req)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
	require.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	m := apiError(t, b, "rate_limit_error")
	require.Equal(t, "budget_exceeded", m["code"])
	require.Contains(t, m["message"], "key "+k.ID+"'s team "+team+" is over its budget of $0.002 per 1h0m0s")
}
