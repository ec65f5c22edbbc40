package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/stretchr/testify/require"
)

// TestAdminRotate: POST /admin/keys/{id}/rotate answers the key with a
// new secret, which the gateway takes at once, while the old one works
// until its grace ends; no body is a grace of 0; the secrets are never in
// the log, whose line names the key.
func TestAdminRotate(t *testing.T) {
	var logs logbuf.Buffer
	e := newAdminEnv(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	created := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{"name": "r", "windows": []map[string]any{{"limit": 1000, "window": "5h"}}}, http.StatusCreated)
	id, old := created.Key.ID, created.Secret
	proxy := func(secret string) int {
		t.Helper()
		resp, _ := e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 1})
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, proxy(old))
	before := adminOK[admin.Key](e, "GET", "/admin/keys/"+id, nil, http.StatusOK)
	require.NotZero(t, before.LifetimeTokens)

	rotated := adminOK[admin.Created](e, "POST", "/admin/keys/"+id+"/rotate", map[string]any{"grace": "1h"}, http.StatusOK)
	secret := rotated.Secret
	require.True(t, strings.HasPrefix(secret, "rsk_"), secret)
	require.NotEqual(t, old, secret)
	require.Equal(t, id, rotated.Key.ID)
	require.Equal(t, start.Add(time.Hour), *rotated.Key.PreviousSecretExpiresAt)
	want := before
	want.PreviousSecretExpiresAt = rotated.Key.PreviousSecretExpiresAt
	require.Equal(t, want, rotated.Key, "the same key and usage: they are the key's, not the secret's")
	got := adminOK[admin.Key](e, "GET", "/admin/keys/"+id, nil, http.StatusOK)
	require.Equal(t, rotated.Key, got)

	require.Equal(t, http.StatusOK, proxy(secret))
	require.Equal(t, http.StatusOK, proxy(old), "during the grace")
	e.clock.Advance(time.Hour)
	require.Equal(t, http.StatusUnauthorized, proxy(old), "after the grace")
	require.Equal(t, http.StatusOK, proxy(secret))

	// No body, or {}: the secret replaced stops at once.
	for _, body := range []any{nil, "{}"} {
		next := adminOK[admin.Created](e, "POST", "/admin/keys/"+id+"/rotate", body, http.StatusOK)
		require.Nil(t, next.Key.PreviousSecretExpiresAt)
		require.Equal(t, http.StatusUnauthorized, proxy(secret))
		require.Equal(t, http.StatusOK, proxy(next.Secret))
		secret = next.Secret
	}

	out := logs.String()
	for _, s := range []string{old, rotated.Secret, secret} {
		require.NotContains(t, out, s)
	}
	var rotations int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if m["msg"] == "admin" && m["path"] == "/admin/keys/"+id+"/rotate" {
			rotations++
			require.Equal(t, id, m["key_id"])
			require.Equal(t, 200.0, m["status"])
		}
	}
	require.Equal(t, 3, rotations, out)
}

// TestAdminRotateErrors: an unknown key is 404; a grace that is not a
// duration, out of range, or of the wrong type is 400 naming "grace" and
// changes nothing.
func TestAdminRotateErrors(t *testing.T) {
	e := newAdminEnv(t, Options{})
	k, secret := e.key("r", 1000)
	path := "/admin/keys/" + k.ID + "/rotate"
	e.adminFails("POST", "/admin/keys/key_0123456789abcdef/rotate", map[string]any{"grace": "1h"}, http.StatusNotFound,
		"key_not_found", "no key has the id key_0123456789abcdef")
	for _, c := range []struct {
		body any
		msg  string
	}{
		{map[string]any{"grace": "-1h"}, "grace: -1h0m0s is out of range [0, 720h0m0s]"},
		{map[string]any{"grace": "721h"}, "grace: 721h0m0s is out of range"},
		{map[string]any{"grace": "soon"}, `grace: "soon": not a duration`},
		{map[string]any{"grace": 3600}, "grace: want a string, got a JSON number"},
		{map[string]any{"graec": "1h"}, `unknown field "graec"`},
		{`{"grace": "1h"`, "not valid JSON"},
	} {
		code := "invalid_field"
		if s, ok := c.body.(string); ok && strings.HasPrefix(s, "{") {
			code = "invalid_json"
		}
		e.adminFails("POST", path, c.body, http.StatusBadRequest, code, c.msg)
	}
	resp, body := e.admin("GET", path, adminToken, nil)
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, string(body))
	require.Equal(t, "POST", resp.Header.Get("Allow"))

	resp, body = e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Nil(t, adminOK[admin.Key](e, "GET", "/admin/keys/"+k.ID, nil, http.StatusOK).PreviousSecretExpiresAt)
}
