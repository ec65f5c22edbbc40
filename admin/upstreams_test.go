package admin_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/internal/upstreamtest"
)

// testUpstreams are the fake gateway's upstreams (upstreamtest.Three).
func testUpstreams() []admin.Upstream {
	return upstreamtest.Three(auditT0.Add(42*time.Second), "anthropic")
}

// TestUpstreams: GET /admin/upstreams answers the gateway's upstreams as
// they are, an empty list (never null) when it has none, 404 with no
// gateway; a poll of it that finds nothing changed gets 304, and is
// logged at level Debug as a poll of /admin/live is; a read-only console
// shows it.
func TestUpstreams(t *testing.T) {
	e := newAuditEnv(t)
	get := func(tag string) *httptest.ResponseRecorder {
		r := request("GET", "/admin/upstreams", "")
		r.Header.Set("Authorization", "Bearer "+auditToken)
		r.Header.Set("If-None-Match", tag)
		return serve(e.console, r)
	}
	w := get("")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var got admin.Upstreams
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Equal(t, testUpstreams(), got.Upstreams)
	var raw struct{ Upstreams []map[string]json.RawMessage }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &raw))
	require.JSONEq(t, `"2026-11-28T09:00:42Z"`, string(raw.Upstreams[1]["cooling_down_until"]))
	require.JSONEq(t, `null`, string(raw.Upstreams[0]["cooling_down_until"]), "not cooling down: null, not left out")
	require.JSONEq(t, `{}`, string(raw.Upstreams[2]["limits"]), "no limits: none named")
	require.JSONEq(t, `{"requests_per_minute":7,"tokens_per_minute":0,"in_flight":0}`, string(raw.Upstreams[2]["used"]))
	require.NotContains(t, raw.Upstreams[0], "prefix")

	tag := w.Header().Get("ETag")
	require.Equal(t, http.StatusNotModified, get(tag).Code)
	e.gw.upstreams[0].Used.InFlight++
	require.Equal(t, http.StatusOK, get(tag).Code, "its use changed")
	require.Contains(t, e.logs.String(), "level=DEBUG msg=admin method=GET path=/admin/upstreams status=200")
	require.NotContains(t, e.logs.String(), "level=INFO msg=admin method=GET path=/admin/upstreams")

	e.gw.upstreams = nil
	w = get("")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"upstreams":[]}`, w.Body.String())

	ro, err := console.New(console.Options{Token: auditToken, API: e.api, ReadOnly: true})
	require.NoError(t, err)
	r := request("GET", "/admin/upstreams", "")
	r.Header.Set("Authorization", "Bearer "+auditToken)
	require.Equal(t, http.StatusOK, serve(ro, r).Code, "a viewer sees the upstreams")

	api, err := admin.New(admin.Options{Keys: e.keys})
	require.NoError(t, err)
	w = serve(api, request("GET", "/admin/upstreams", ""))
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Contains(t, w.Body.String(), `"code":"not_found"`)
	require.Contains(t, w.Body.String(), "no gateway serves here")
}

// TestUpstreamsClient: Client.Upstreams reads the list; with no gateway,
// its error is the API's 404.
func TestUpstreamsClient(t *testing.T) {
	e := newAuditEnv(t)
	list, err := admin.NewLocalClient(e.api, admin.ActorCLI).Upstreams(t.Context())
	require.NoError(t, err)
	require.Equal(t, testUpstreams(), list)
	e.gw.upstreams = nil
	list, err = admin.NewLocalClient(e.api, admin.ActorCLI).Upstreams(t.Context())
	require.NoError(t, err)
	require.Equal(t, []admin.Upstream{}, list)

	api, err := admin.New(admin.Options{Keys: e.keys})
	require.NoError(t, err)
	_, err = admin.NewLocalClient(api, admin.ActorCLI).Upstreams(t.Context())
	var ae *admin.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, []any{http.StatusNotFound, "not_found"}, []any{ae.Status, ae.Code})
}

// TestConfigReload: POST /admin/config/reload calls Options.Reload and
// answers what it reloaded, recording it in the audit log; a file refused
// is 400 invalid_config with its error, line and all, and records
// nothing; a read-only console, or a caller the API cannot name, does not
// reach it; with no Reload (a gateway started without --config) it is
// 404.
func TestConfigReload(t *testing.T) {
	e := newAuditEnv(t)
	w, _ := e.change(e.bearer(), "POST", "/admin/config/reload", "", http.StatusOK, admin.ActionConfigReload, admin.ConfigTarget,
		`{"upstreams":{"from":null,"to":3},"models":{"from":null,"to":3}}`)
	require.JSONEq(t, `{"upstreams":3,"models":3}`, w.Body.String())

	bad := errors.New(`ratestore.yaml: line 9: upstreams[0].api: "grpc": want openai, azure-openai, anthropic or gemini`)
	e.gw.set(3, bad)
	w = e.bearer().do("POST", "/admin/config/reload", "")
	require.Equal(t, http.StatusBadRequest, w.Code)
	var body struct {
		Error struct{ Code, Message string }
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	require.Equal(t, "invalid_config", body.Error.Code)
	require.Equal(t, bad.Error(), body.Error.Message)
	e.gw.set(3, nil)

	calls := e.gw.reloads
	ro, err := console.New(console.Options{Token: auditToken, API: e.api, ReadOnly: true})
	require.NoError(t, err)
	e.refused(caller{"read-only", "", func(method, path, body string) *httptest.ResponseRecorder {
		r := request(method, path, body)
		r.Header.Set("Authorization", "Bearer "+auditToken)
		return serve(ro, r)
	}}, "POST", "/admin/config/reload", "", http.StatusForbidden)
	w = serve(e.api, request("POST", "/admin/config/reload", ""))
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Contains(t, w.Body.String(), `"code":"no_actor"`)
	require.Equal(t, calls, e.gw.reloads, "refused before the file is read")

	api, err := admin.New(admin.Options{Keys: e.keys, Audit: e.audit, Gateway: e.gw})
	require.NoError(t, err)
	e.refused(caller{"no --config", "", func(method, path, body string) *httptest.ResponseRecorder {
		r := request(method, path, body)
		return serve(api, r.WithContext(admin.WithActor(r.Context(), admin.ActorCLI)))
	}}, "POST", "/admin/config/reload", "", http.StatusNotFound)
	w = serve(api, request("POST", "/admin/config/reload", ""))
	require.Contains(t, w.Body.String(), "started without --config")
}

// TestConfigReloadClient: Client.ReloadConfig answers Reloaded; a file
// refused is an error that matches backend.ErrInvalid and says why.
func TestConfigReloadClient(t *testing.T) {
	e := newAuditEnv(t)
	ac := admin.NewLocalClient(e.api, admin.ActorCLI)
	got, err := ac.ReloadConfig(t.Context())
	require.NoError(t, err)
	require.Equal(t, admin.Reloaded{Upstreams: 3, Models: 3}, got)
	e.gw.set(0, errors.New("ratestore.yaml: line 2: listen: not a setting"))
	_, err = ac.ReloadConfig(t.Context())
	require.ErrorIs(t, err, backend.ErrInvalid)
	require.True(t, strings.HasSuffix(err.Error(), "line 2: listen: not a setting"), err.Error())
}
