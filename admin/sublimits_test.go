package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSubLimitsAPI: model_limits and end_users are set by POST and PATCH,
// shown by GET, and refused with the field named when wrong, changing
// nothing.
func TestSubLimitsAPI(t *testing.T) {
	api, ks := newAPI(t)
	do := func(method, path, body string) (int, map[string]any) {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		var v map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v), w.Body.String())
		return w.Code, v
	}
	code, v := do("POST", "/admin/keys", `{"name":"app","windows":[{"limit":1000,"window":"24h"}],
		"model_limits":[{"models":["gpt-4o*"],"windows":[{"limit":100,"window":"5h"}],"max_concurrent":2}],
		"end_users":{"windows":[{"limit":20,"window":"24h"}],"budgets":[{"limit_usd":1,"period":"day"}],"required":true}}`)
	require.Equal(t, http.StatusCreated, code, v)
	key := v["key"].(map[string]any)
	id := key["id"].(string)
	k, err := ks.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, []string{"gpt-4o*"}, k.Policy.ModelLimits[0].Models)
	require.EqualValues(t, 100, k.Policy.ModelLimits[0].Windows[0].Limit)
	require.True(t, k.Policy.EndUsers.Required)
	require.Len(t, k.Policy.EndUsers.Budgets, 1)
	ml := key["model_limits"].([]any)[0].(map[string]any)
	require.Equal(t, "5h0m0s", ml["windows"].([]any)[0].(map[string]any)["window"])
	require.Equal(t, true, key["end_users"].(map[string]any)["required"])
	mu := key["model_usage"].([]any)[0].(map[string]any)
	require.Equal(t, []any{"gpt-4o*"}, mu["models"])
	require.EqualValues(t, 100, mu["windows"].([]any)[0].(map[string]any)["remaining"])

	for _, c := range []struct{ body, msg string }{
		{`{"model_limits":[{"windows":[{"limit":1,"window":"1h"}]}]}`, "model_limits[0].models: empty"},
		{`{"model_limits":[{"models":["a"],"windows":[{"limit":0,"window":"1h"}]}]}`, "model_limits[0].windows[0].limit"},
		{`{"model_limits":[{"models":["a"],"budgets":[{"limit_usd":1}]}]}`, "model_limits[0].budgets[0]"},
		{`{"model_limits":[{"models":["a"],"bogus":1}]}`, "model_limits[0]: unknown field"},
		{`{"model_limits":[{"models":["a"]}]}`, "model_limits[0]: limits nothing"},
		{`{"end_users":{"requests_per_minute":-1}}`, "end_users.requests_per_minute"},
		{`{"end_users":{"windows":[{"limit":5,"window":"soon"}]}}`, "end_users.windows[0].window"},
		{`{"end_users":[1]}`, "end_users"},
		{`{"model_limits":[` + strings.Repeat(`{},`, 64) + `{}]}`, "model_limits: more than 64 elements"},
	} {
		code, v := do("PATCH", "/admin/keys/"+id, c.body)
		require.Equal(t, http.StatusBadRequest, code, c.body)
		require.Contains(t, v["error"].(map[string]any)["message"], c.msg, c.body)
	}
	after, err := ks.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, k.Policy, after.Policy, "nothing changed")

	code, v = do("PATCH", "/admin/keys/"+id, `{"end_users":null,"model_limits":[]}`)
	require.Equal(t, http.StatusOK, code, v)
	require.Nil(t, v["end_users"])
	require.Empty(t, v["model_limits"])
	k, err = ks.Get(t.Context(), id)
	require.NoError(t, err)
	require.True(t, k.Policy.EndUsers.IsZero())
	require.Empty(t, k.Policy.ModelLimits)

	code, v = do("POST", "/admin/teams", `{"name":"t","end_users":{"max_concurrent":3}}`)
	require.Equal(t, http.StatusCreated, code, v)
	require.EqualValues(t, 3, v["end_users"].(map[string]any)["max_concurrent"])
}
