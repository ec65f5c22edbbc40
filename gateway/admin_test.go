package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/stretchr/testify/require"
)

// adminToken is the admin token of the tests' gateways.
const adminToken = "test-admin-token-0123456789abcdef"

// newAdminEnv is an env whose gateway has the admin API open with
// adminToken.
func newAdminEnv(t testing.TB, opts Options) *env {
	return newEnvOp(t, opts, operator{token: adminToken})
}

// admin sends an admin request with token (none when ""): body is sent as
// it is when a string, else as JSON; nil sends no body.
func (e *env) admin(method, path, token string, body any) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(e.t, err)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return e.do(req)
}

// adminOK sends an admin request with the right token, requires status,
// and decodes the answer into a new T (strictly: the answer has no field T
// lacks).
func adminOK[T any](e *env, method, path string, body any, status int) T {
	e.t.Helper()
	resp, b := e.admin(method, path, adminToken, body)
	require.Equal(e.t, status, resp.StatusCode, string(b))
	require.Equal(e.t, "application/json", resp.Header.Get("Content-Type"))
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(e.t, dec.Decode(&v), string(b))
	return v
}

// adminFails sends an admin request with the right token and requires
// status and an error body whose message contains each of msgs.
func (e *env) adminFails(method, path string, body any, status int, code string, msgs ...string) map[string]any {
	e.t.Helper()
	resp, b := e.admin(method, path, adminToken, body)
	require.Equal(e.t, status, resp.StatusCode, string(b))
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "api_error"
	}
	m := apiError(e.t, b, typ)
	require.Equal(e.t, code, m["code"], string(b))
	for _, s := range msgs {
		require.Contains(e.t, m["message"], s)
	}
	return m
}

// TestAdminClosedWithoutToken: without Options.AdminToken, the admin API
// and the metrics do not exist: 404 with the error body, whatever the
// request bears, and nothing reaches the upstream.
func TestAdminClosedWithoutToken(t *testing.T) {
	e := newEnv(t, Options{})
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/admin/keys", ""},
		{"GET", "/admin/keys", adminToken},
		{"POST", "/admin/keys", "anything"},
		{"GET", "/admin", ""},
		{"DELETE", "/admin/keys/key_0123456789abcdef", adminToken},
		{"GET", "/metrics", ""},
		{"GET", "/metrics", adminToken},
	} {
		resp, body := e.admin(c.method, c.path, c.token, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%v", c)
		require.Equal(t, "not_found", apiError(t, body, "invalid_request_error")["code"], "%v", c)
	}
	require.Zero(t, e.up.hits.Load())
}

// TestAdminAuth: a missing or wrong admin token gets 401 with
// WWW-Authenticate: Bearer, on the admin API and the metrics alike; a
// ratestore secret is not an admin token.
func TestAdminAuth(t *testing.T) {
	e := newAdminEnv(t, Options{})
	_, secret := e.key("k", 100)
	for _, c := range []struct{ name, path, header, code string }{
		{"none", "/admin/keys", "", "missing_admin_token"},
		{"empty bearer", "/admin/keys", "Bearer  ", "missing_admin_token"},
		{"basic", "/admin/keys", "Basic " + adminToken, "missing_admin_token"},
		{"wrong", "/admin/keys", "Bearer wrong", "invalid_admin_token"},
		{"prefix of it", "/admin/keys", "Bearer " + adminToken[:len(adminToken)-1], "invalid_admin_token"},
		{"a key's secret", "/admin/keys", "Bearer " + secret, "invalid_admin_token"},
		{"metrics, none", "/metrics", "", "missing_admin_token"},
		{"metrics, wrong", "/metrics", "Bearer wrong", "invalid_admin_token"},
		{"unknown path, wrong", "/admin/nothing", "Bearer wrong", "invalid_admin_token"},
	} {
		req, err := http.NewRequest("GET", e.srv.URL+c.path, nil)
		require.NoError(t, err)
		if c.header != "" {
			req.Header.Set("Authorization", c.header)
		}
		resp, body := e.do(req)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, c.name)
		require.Equal(t, "Bearer", resp.Header.Get("WWW-Authenticate"), c.name)
		require.Equal(t, c.code, apiError(t, body, "authentication_error")["code"], c.name)
		require.NotContains(t, string(body), adminToken)
	}
	// The right token, lower-case scheme: the metrics' own answer, not a
	// refusal; and never the upstream's.
	req, err := http.NewRequest("GET", e.srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "bearer "+adminToken)
	resp, _ := e.do(req)
	require.NotEqual(t, http.StatusUnauthorized, resp.StatusCode)
	require.Zero(t, e.up.hits.Load())
}

// TestAdminKeyLifecycle: every route, in order: create, list, get, patch
// (each field, windows replaced, disabled and enabled), delete; the
// secret created authenticates at the proxy and is never shown again.
func TestAdminKeyLifecycle(t *testing.T) {
	e := newAdminEnv(t, Options{})
	resp, body := e.admin("POST", "/admin/keys", adminToken, map[string]any{
		"name": "team-a", "models": []string{"gpt-*"},
		"windows":             []map[string]any{{"limit": 100000, "window": "5h"}, {"limit": 1000000, "window": "168h", "bucket": "1h"}},
		"requests_per_minute": 60, "max_concurrent": 4, "expires_at": "2027-01-01T00:00:00Z",
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	var created admin.Created
	require.NoError(t, json.Unmarshal(body, &created))
	k := created.Key
	require.True(t, strings.HasPrefix(created.Secret, "rsk_"), created.Secret)
	require.Equal(t, "/admin/keys/"+k.ID, resp.Header.Get("Location"))
	expires := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	created0 := start
	require.Equal(t, admin.Key{
		ID: k.ID, Name: "team-a", Models: []string{"gpt-*"},
		Windows: []admin.Window{
			{Limit: 100000, Window: "5h0m0s", Bucket: "5m0s", Remaining: 100000},
			{Limit: 1000000, Window: "168h0m0s", Bucket: "1h0m0s", Remaining: 1000000},
		},
		Binding: 0, RequestsPerMinute: 60, MaxConcurrent: 4, ExpiresAt: &expires, CreatedAt: &created0, Budgets: []admin.Budget{},
	}, k)

	list := adminOK[admin.Keys](e, "GET", "/admin/keys", nil, http.StatusOK)
	require.Equal(t, []admin.Key{k}, list.Keys)
	got := adminOK[admin.Key](e, "GET", "/admin/keys/"+k.ID, nil, http.StatusOK)
	require.Equal(t, k, got)

	// The secret works at the proxy, for the models allowed.
	resp, body = e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Model: "gpt-4o", Input: 30, Output: 12})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, body = e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Model: "claude-x", Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, string(body))
	got = adminOK[admin.Key](e, "GET", "/admin/keys/"+k.ID, nil, http.StatusOK)
	require.EqualValues(t, 42, got.LifetimeTokens)
	require.Equal(t, []int64{42, 42}, []int64{got.Windows[0].Used, got.Windows[1].Used})
	require.Equal(t, []int64{100000 - 42, 1000000 - 42}, []int64{got.Windows[0].Remaining, got.Windows[1].Remaining})
	require.Equal(t, int64(5*3600), got.Windows[0].ResetAfterSeconds)
	require.Equal(t, start.Add(5*time.Hour), *got.Windows[0].WindowEnd)
	require.Equal(t, start, *got.LastUsed)
	require.Zero(t, got.InFlight)

	// PATCH: each field; the windows replace the list: the 5h window
	// keeps its usage, the 168h one is gone, a 1h one starts empty.
	got = adminOK[admin.Key](e, "PATCH", "/admin/keys/"+k.ID, map[string]any{
		"name": "team-b", "models": []string{}, "windows": []map[string]any{{"limit": 500, "window": "5h"}, {"limit": 100, "window": "1h"}},
		"requests_per_minute": 0, "max_concurrent": 1, "expires_at": nil,
	}, http.StatusOK)
	require.Equal(t, "team-b", got.Name)
	require.Equal(t, []string{}, got.Models)
	require.Equal(t, []admin.Window{
		{Limit: 500, Window: "5h0m0s", Bucket: "5m0s", Used: 42, Remaining: 458, ResetAfterSeconds: 5 * 3600, WindowEnd: got.Windows[0].WindowEnd},
		{Limit: 100, Window: "1h0m0s", Bucket: "1m0s", Remaining: 100},
	}, got.Windows)
	require.Equal(t, []int{1, 0, 1}, []int{got.Binding, int(got.RequestsPerMinute), got.MaxConcurrent}, "binding: the 1h window, with the least left")
	require.Nil(t, got.ExpiresAt)
	require.Equal(t, got, adminOK[admin.Key](e, "GET", "/admin/keys/"+k.ID, nil, http.StatusOK))

	// A subset changes that subset only.
	again := adminOK[admin.Key](e, "PATCH", "/admin/keys/"+k.ID, map[string]any{"max_concurrent": 2}, http.StatusOK)
	got.MaxConcurrent = 2
	require.Equal(t, got, again)

	// Disabled: 403 at the proxy; enabled: served again.
	got = adminOK[admin.Key](e, "PATCH", "/admin/keys/"+k.ID, map[string]any{"disabled": true}, http.StatusOK)
	require.True(t, got.Disabled)
	resp, body = e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "key_disabled", apiError(t, body, "permission_error")["code"])
	got = adminOK[admin.Key](e, "PATCH", "/admin/keys/"+k.ID, map[string]any{"disabled": false}, http.StatusOK)
	require.False(t, got.Disabled)
	resp, _ = e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// DELETE: 204, then the key is unknown everywhere.
	resp, body = e.admin("DELETE", "/admin/keys/"+k.ID, adminToken, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Empty(t, body)
	e.adminFails("GET", "/admin/keys/"+k.ID, nil, http.StatusNotFound, "key_not_found", k.ID)
	e.adminFails("DELETE", "/admin/keys/"+k.ID, nil, http.StatusNotFound, "key_not_found")
	require.Empty(t, adminOK[admin.Keys](e, "GET", "/admin/keys", nil, http.StatusOK).Keys)
	resp, _ = e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// TestAdminKeyJSON: the one JSON shape of a key (admin.Key), field by
// field as a client reads it: lengths as Go durations, waits in whole
// seconds, instants RFC 3339 in UTC, null when unset, the binding window
// by its index in "windows", and what the key spent in USD, exactly: 30
// input and 12 output tokens of gpt-4o at $2.50 and $10 per million.
func TestAdminKeyJSON(t *testing.T) {
	e := newAdminEnv(t, Options{})
	created := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{
		"name": "j", "windows": []map[string]any{{"limit": 1000, "window": "1h"}, {"limit": 100, "window": "30s"}},
		"expires_at": "2027-01-01T00:00:00Z",
	}, http.StatusCreated)
	resp, body := e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Model: "gpt-4o", Input: 30, Output: 12})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, body = e.admin("GET", "/admin/keys/"+created.Key.ID, adminToken, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got), string(body))
	require.Equal(t, map[string]any{
		"id": created.Key.ID, "name": "j", "model": "", "models": []any{},
		"windows": []any{
			map[string]any{"limit": 1000.0, "window": "1h0m0s", "bucket": "1m0s", "used": 42.0, "remaining": 958.0,
				"reset_after_seconds": 3600.0, "window_end": "2026-01-18T13:00:00Z"},
			map[string]any{"limit": 100.0, "window": "30s", "bucket": "500ms", "used": 42.0, "remaining": 58.0,
				"reset_after_seconds": 30.0, "window_end": "2026-01-18T12:00:30Z"},
		},
		"binding":             1.0, // the 30s window has the least left
		"requests_per_minute": 0.0, "max_concurrent": 0.0,
		"expires_at": "2027-01-01T00:00:00Z", "disabled": false, "lifetime_tokens": 42.0,
		"last_used": "2026-01-18T12:00:00Z", "created_at": "2026-01-18T12:00:00Z", "in_flight": 0.0, "reserved_tokens": 0.0,
		"budgets": []any{}, "lifetime_usd": 0.000195, "previous_secret_expires_at": nil,
	}, got)
}

// TestAdminSecretShownOnce: the secret is in the answer to POST only:
// never in a GET, a PATCH, nor the log, which has one line per admin call
// with its key id.
func TestAdminSecretShownOnce(t *testing.T) {
	var logs logbuf.Buffer
	e := newAdminEnv(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	created := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{"name": "s", "windows": []map[string]any{{"limit": 10, "window": "1h"}}}, http.StatusCreated)
	require.NotEmpty(t, created.Secret)
	_, secret := e.key("other", 10)
	for _, c := range []struct{ method, path string }{
		{"GET", "/admin/keys"}, {"GET", "/admin/keys/" + created.Key.ID}, {"PATCH", "/admin/keys/" + created.Key.ID},
	} {
		var body any
		if c.method == "PATCH" {
			body = map[string]any{"name": "t"}
		}
		resp, b := e.admin(c.method, c.path, adminToken, body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		require.NotContains(t, string(b), created.Secret)
		require.NotContains(t, string(b), secret)
		require.NotContains(t, string(b), "rsk_")
	}
	e.admin("GET", "/admin/keys", "wrong", nil)

	out := logs.String()
	require.NotContains(t, out, created.Secret)
	require.NotContains(t, out, adminToken)
	var lines []map[string]any
	wrong := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		switch m["msg"] {
		case "admin":
			lines = append(lines, m)
		case "console: wrong admin token":
			wrong++
		}
	}
	require.Len(t, lines, 4, out)
	require.Equal(t, 1, wrong, "the console logs the wrong token it refused: %s", out)
	require.Equal(t, map[string]any{"method": "POST", "path": "/admin/keys", "status": 201.0, "key_id": created.Key.ID, "level": "INFO"},
		map[string]any{"method": lines[0]["method"], "path": lines[0]["path"], "status": lines[0]["status"], "key_id": lines[0]["key_id"], "level": lines[0]["level"]})
	require.Equal(t, created.Key.ID, lines[2]["key_id"])
}

// TestAdminUsedCountsInFlight: a key's "used" includes the reservation of
// a request still streaming, and becomes the tokens charged once it ends.
func TestAdminUsedCountsInFlight(t *testing.T) {
	e := newAdminEnv(t, Options{})
	created := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{"name": "f", "windows": []map[string]any{{"limit": 100000, "window": "5h"}}}, http.StatusCreated)
	q := fakeReq{Model: "gpt-4o", MaxTokens: 100, Stream: true, Gate: true, Input: 11, Output: 29}
	resp, err := e.client.Do(e.request("POST", "/v1/chat/completions", created.Secret, q))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	firstEvent(t, br)

	k := adminOK[admin.Key](e, "GET", "/admin/keys/"+created.Key.ID, nil, http.StatusOK)
	require.Equal(t, reserveOf(t, q, 100), k.Windows[0].Used)
	require.Equal(t, 100000-reserveOf(t, q, 100), k.Windows[0].Remaining)
	require.Equal(t, 1, k.InFlight)
	require.Zero(t, k.LifetimeTokens)

	close(e.up.gate)
	_, err = io.ReadAll(br)
	require.NoError(t, err)
	<-e.served
	k = adminOK[admin.Key](e, "GET", "/admin/keys/"+created.Key.ID, nil, http.StatusOK)
	require.EqualValues(t, 40, k.Windows[0].Used)
	require.EqualValues(t, 40, k.LifetimeTokens)
	require.Zero(t, k.InFlight)
}

// TestAdminExpiry: expires_at is read against the gateway's clock: one in
// the past is refused at creation; a key patched to expire is refused at
// the proxy from then on, and served again once the expiry is lifted with
// null.
func TestAdminExpiry(t *testing.T) {
	e := newAdminEnv(t, Options{})
	win := []map[string]any{{"limit": 1000, "window": "5h"}}
	e.adminFails("POST", "/admin/keys", map[string]any{"name": "x", "windows": win, "expires_at": start.Add(-time.Second).Format(time.RFC3339)},
		http.StatusBadRequest, "invalid_field", "expires_at")
	created := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{"name": "x", "windows": win, "expires_at": start.Add(time.Hour).Format(time.RFC3339)}, http.StatusCreated)
	id := created.Key.ID
	require.Equal(t, start.Add(time.Hour), *created.Key.ExpiresAt)

	k := adminOK[admin.Key](e, "PATCH", "/admin/keys/"+id, map[string]any{"expires_at": start.Add(time.Minute).Format(time.RFC3339)}, http.StatusOK)
	require.Equal(t, start.Add(time.Minute), *k.ExpiresAt)
	resp, _ := e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	e.clock.Advance(time.Minute)
	resp, body := e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "key_expired", apiError(t, body, "permission_error")["code"])

	k = adminOK[admin.Key](e, "PATCH", "/admin/keys/"+id, map[string]any{"expires_at": nil}, http.StatusOK)
	require.Nil(t, k.ExpiresAt)
	resp, _ = e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestAdminCreateDisabled: a key created with "disabled": true never
// works until enabled.
func TestAdminCreateDisabled(t *testing.T) {
	e := newAdminEnv(t, Options{})
	created := adminOK[admin.Created](e, "POST", "/admin/keys", map[string]any{"windows": []map[string]any{{"limit": 100, "window": "1h"}}, "disabled": true}, http.StatusCreated)
	require.True(t, created.Key.Disabled)
	resp, _ := e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	k := adminOK[admin.Key](e, "PATCH", "/admin/keys/"+created.Key.ID, map[string]any{"disabled": false}, http.StatusOK)
	require.False(t, k.Disabled)
	resp, _ = e.call("POST", "/v1/chat/completions", created.Secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestAdminBadRequests: every wrong body gets 400 (413 when too large)
// with a message that names the field, and changes nothing.
func TestAdminBadRequests(t *testing.T) {
	e := newAdminEnv(t, Options{})
	k, _ := e.key("k", 100)
	before := adminOK[admin.Keys](e, "GET", "/admin/keys", nil, http.StatusOK)
	win := []map[string]any{{"limit": 10, "window": "5h"}}
	outer := e.t
	for _, c := range []struct {
		name   string
		body   any
		status int
		code   string
		msg    string
	}{
		{"bad duration", map[string]any{"windows": []map[string]any{{"limit": 10, "window": "5h"}, {"limit": 10, "window": "5x"}}}, 400, "invalid_field", `windows[1].window: "5x": not a duration`},
		{"negative duration", map[string]any{"windows": []map[string]any{{"limit": 10, "window": "-5h"}}}, 400, "invalid_field", `windows[0].window: "-5h": want a positive duration`},
		{"zero limit", map[string]any{"windows": []map[string]any{{"limit": 0, "window": "5h"}}}, 400, "invalid_field", "windows[0].limit: want a positive number of tokens, got 0"},
		{"limit a string", map[string]any{"windows": []map[string]any{{"limit": "10", "window": "5h"}}}, 400, "invalid_field", "windows[0].limit: want a whole number, got a JSON string"},
		{"window not an object", map[string]any{"windows": []any{5}}, 400, "invalid_field", "windows[0]: want an object, got a JSON number"},
		{"bad bucket", map[string]any{"windows": []map[string]any{{"limit": 10, "window": "5h", "bucket": "7m"}}}, 400, "invalid_field", "windows[0]"},
		{"two of one length", map[string]any{"windows": []map[string]any{{"limit": 10, "window": "5h"}, {"limit": 10, "window": "300m"}}}, 400, "invalid_field", `windows[1].window: "300m": windows[0] is a 5h0m0s window already`},
		{"unknown window field", map[string]any{"windows": []map[string]any{{"limit": 10, "window": "5h", "size": 1}}}, 400, "invalid_field", `windows[0]: unknown field "size"`},
		{"unknown field", map[string]any{"windows": win, "token_limit": 5}, 400, "invalid_field", `unknown field "token_limit"`},
		{"rpm negative", map[string]any{"windows": win, "requests_per_minute": -1}, 400, "invalid_field", "requests_per_minute: want 0 (no limit) or more, got -1"},
		{"rpm a float", map[string]any{"windows": win, "requests_per_minute": 1.5}, 400, "invalid_field", "requests_per_minute: want a whole number"},
		{"max_concurrent negative", map[string]any{"windows": win, "max_concurrent": -2}, 400, "invalid_field", "max_concurrent: want 0 (no limit) or more, got -2"},
		{"max_concurrent too large", map[string]any{"windows": win, "max_concurrent": 1 << 30}, 400, "invalid_field", "max_concurrent: 1073741824 is out of range"},
		{"empty model", map[string]any{"windows": win, "models": []string{"gpt-4o", ""}}, 400, "invalid_field", "models[1]: empty"},
		{"bad glob", map[string]any{"windows": win, "models": []string{"gpt-["}}, 400, "invalid_field", `models[0]: "gpt-[" is not a valid pattern`},
		{"name with a control character", map[string]any{"windows": win, "name": "a\x01b"}, 400, "invalid_field", "name: holds the control character"},
		{"disabled a string", map[string]any{"windows": win, "disabled": "yes"}, 400, "invalid_field", "disabled: want true or false"},
		{"bad expiry", map[string]any{"windows": win, "expires_at": "tomorrow"}, 400, "invalid_field", `expires_at: "tomorrow": want an RFC 3339 instant`},
		{"expiry a number", map[string]any{"windows": win, "expires_at": 5}, 400, "invalid_field", "expires_at: want an RFC 3339 instant as a string"},
		{"not JSON", "{name: x}", 400, "invalid_json", "not valid JSON"},
		{"truncated", `{"name": "x"`, 400, "invalid_json", "ends too early"},
		{"two values", `{"windows":[{"limit":1,"window":"1h"}]} {}`, 400, "invalid_json", "more than one JSON value"},
		{"an array", `[]`, 400, "invalid_field", "the body: want an object, got a JSON array"},
		{"empty", "", 400, "invalid_json", "the body is empty"},
		{"too large", `{"name":"` + strings.Repeat("x", admin.MaxBody) + `"}`, 413, "request_too_large", "larger than 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			defer func() { e.t = outer }()
			for _, method := range []string{"POST", "PATCH"} {
				path := "/admin/keys"
				if method == "PATCH" {
					path += "/" + k.ID
				}
				e.adminFails(method, path, c.body, c.status, c.code, c.msg)
			}
		})
	}
	require.Equal(t, before, adminOK[admin.Keys](e, "GET", "/admin/keys", nil, http.StatusOK), "a refused request changed something")
}

// TestAdminRoutes: unknown ids get 404, unknown paths 404, wrong methods
// 405 with Allow, all with the error body.
func TestAdminRoutes(t *testing.T) {
	e := newAdminEnv(t, Options{})
	const unknown = "key_0123456789abcdef"
	e.adminFails("GET", "/admin/keys/"+unknown, nil, 404, "key_not_found", unknown)
	e.adminFails("PATCH", "/admin/keys/"+unknown, map[string]any{"name": "x"}, 404, "key_not_found", unknown)
	e.adminFails("PATCH", "/admin/keys/"+unknown, map[string]any{"disabled": true}, 404, "key_not_found", unknown)
	e.adminFails("DELETE", "/admin/keys/"+unknown, nil, 404, "key_not_found", unknown)
	e.adminFails("GET", "/admin/keys/not-an-id", nil, 404, "key_not_found")
	for _, path := range []string{"/admin/users", "/admin/keys/" + unknown + "/usage"} {
		e.adminFails("GET", path, nil, 404, "not_found")
	}
	for _, c := range []struct{ method, path, allow string }{
		{"PUT", "/admin/keys", "GET, HEAD, POST"},
		{"DELETE", "/admin/keys", "GET, HEAD, POST"},
		{"POST", "/admin/keys/" + unknown, "DELETE, GET, HEAD, PATCH"},
		{"PUT", "/admin/keys/" + unknown, "DELETE, GET, HEAD, PATCH"},
	} {
		resp, body := e.admin(c.method, c.path, adminToken, nil)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%v", c)
		require.Equal(t, c.allow, resp.Header.Get("Allow"), "%v", c)
		require.Equal(t, "method_not_allowed", apiError(t, body, "invalid_request_error")["code"])
	}
	require.Zero(t, e.up.hits.Load())
}

// TestAdminReservedTokens: a key's reserved_tokens are what its requests
// in flight through the gateway reserve, part of each window's used, and
// 0 once they finish.
func TestAdminReservedTokens(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"prompt_tokens":40,"completion_tokens":10}}`)
	}))
	t.Cleanup(up.Close)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	u, err := url.Parse(up.URL)
	require.NoError(t, err)
	e := newAdminEnv(t, Options{Upstream: u})
	// Registered last, run first: before the gateway's shutdown and
	// up.Close, which wait for the held request, so that a failure ends
	// the test rather than hang it.
	t.Cleanup(free)
	k, secret := e.key("r", 1_000_000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.try(e.request("POST", "/v1/chat/completions", secret, map[string]any{"model": "gpt-4o", "max_tokens": 100, "messages": []any{}}))
	}()
	var got admin.Key
	require.Eventually(t, func() bool {
		_, b := e.admin("GET", "/admin/keys/"+k.ID, adminToken, nil)
		got = admin.Key{}
		return json.Unmarshal(b, &got) == nil && got.ReservedTokens > 0
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, got.Windows[0].Used, got.ReservedTokens, "the reservation is all of used while nothing is charged")
	free()
	<-done
	_, b := e.admin("GET", "/admin/keys/"+k.ID, adminToken, nil)
	require.NoError(t, json.Unmarshal(b, &got))
	require.Zero(t, got.ReservedTokens)
	require.EqualValues(t, 50, got.Windows[0].Used)
}
