package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/keystore"
)

// newAPI returns an API on the key store of a new database.
func newAPI(t *testing.T) (*admin.API, *keystore.Store) {
	t.Helper()
	db, err := ratestore.Open(filepath.Join(t.TempDir(), "admin.db"), ratestore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(t, err)
	api, err := admin.New(admin.Options{Keys: ks})
	require.NoError(t, err)
	return api, ks
}

// TestLongLists: a policy's lists longer than their bounds are refused
// before their elements are read, naming the field, and create nothing,
// however many elements the body holds within MaxBody.
func TestLongLists(t *testing.T) {
	api, ks := newAPI(t)
	n := (admin.MaxBody - 200) / 4
	for _, c := range []struct{ field, body, msg string }{
		{"models", `{"windows":[{"limit":1,"window":"1h"}],"models":[` + strings.Repeat(`"a",`, n) + `"a"]}`, "models: more than 256 elements"},
		{"windows", `{"windows":[` + strings.Repeat(`{},`, n) + `{}]}`, "windows: more than 16 elements"},
		{"budgets", `{"windows":[{"limit":1,"window":"1h"}],"budgets":[` + strings.Repeat(`1,`, n) + `1]}`, "budgets: more than 8 elements"},
	} {
		require.Less(t, len(c.body), admin.MaxBody, c.field)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest("POST", "/admin/keys", strings.NewReader(c.body)))
		require.Equal(t, http.StatusBadRequest, w.Code, c.field)
		var e struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
		require.Equal(t, "invalid_field", e.Error.Code, c.field)
		require.Contains(t, e.Error.Message, c.msg, c.field)
	}
	n = 0
	require.NoError(t, ks.List(t.Context(), func(keystore.Key) error { n++; return nil }))
	require.Zero(t, n, "nothing was created")
}

// TestRevalidate: a GET's answer has an ETag; the same GET with it in
// If-None-Match gets 304 and no body while nothing changed, and the new
// answer once something did.
func TestRevalidate(t *testing.T) {
	api, ks := newAPI(t)
	get := func(tag string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/admin/keys", nil)
		if tag != "" {
			r.Header.Set("If-None-Match", tag)
		}
		api.ServeHTTP(w, r)
		return w
	}
	first := get("")
	require.Equal(t, http.StatusOK, first.Code)
	tag := first.Header().Get("ETag")
	require.NotEmpty(t, tag)
	again := get(tag)
	require.Equal(t, http.StatusNotModified, again.Code)
	require.Empty(t, again.Body.Bytes())
	require.Equal(t, tag, again.Header().Get("ETag"))
	_, _, err := ks.Create(t.Context(), keystore.Spec{Name: "new", TokenLimit: 10})
	require.NoError(t, err)
	changed := get(tag)
	require.Equal(t, http.StatusOK, changed.Code)
	require.NotEqual(t, tag, changed.Header().Get("ETag"))
	require.Contains(t, changed.Body.String(), `"name":"new"`)
}

// TestRevalidateCountdown: a key's countdown (reset_after_seconds) going
// down as time passes does not change the tag, a poll gets 304; its
// usage changing does.
func TestRevalidateCountdown(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	db, err := ratestore.Open(filepath.Join(t.TempDir(), "admin.db"), ratestore.Options{Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(t, err)
	api, err := admin.New(admin.Options{Keys: ks, Now: clock.Now})
	require.NoError(t, err)
	k, _, err := ks.Create(t.Context(), keystore.Spec{Name: "used", TokenLimit: 1000})
	require.NoError(t, err)
	_, err = ks.RecordUsage(t.Context(), k.ID, 10)
	require.NoError(t, err)
	get := func(tag string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/admin/keys/"+k.ID, nil)
		r.Header.Set("If-None-Match", tag)
		api.ServeHTTP(w, r)
		return w
	}
	first := get("")
	require.Equal(t, http.StatusOK, first.Code)
	require.Contains(t, first.Body.String(), `"reset_after_seconds":18000`)
	clock.Advance(7 * time.Second)
	require.Equal(t, http.StatusNotModified, get(first.Header().Get("ETag")).Code)
	_, err = ks.RecordUsage(t.Context(), k.ID, 5)
	require.NoError(t, err)
	changed := get(first.Header().Get("ETag"))
	require.Equal(t, http.StatusOK, changed.Code)
	require.Contains(t, changed.Body.String(), `"used":15`)
}

// TestNoWindows: a key or team may be created without a token window
// (budgets alone, or metered only), and a PATCH of "windows": [] drops
// every window.
func TestNoWindows(t *testing.T) {
	api, _ := newAPI(t)
	call := func(method, path, body string, want int) map[string]any {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		api.ServeHTTP(w, r.WithContext(admin.WithActor(r.Context(), admin.ActorCLI)))
		require.Equal(t, want, w.Code, w.Body.String())
		var m map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m))
		return m
	}
	created := call("POST", "/admin/keys", `{"name":"metered"}`, http.StatusCreated)["key"].(map[string]any)
	require.Equal(t, []any{}, created["windows"])
	require.EqualValues(t, -1, created["binding"])
	k := call("POST", "/admin/keys", `{"name":"w","windows":[{"limit":10,"window":"1h"}],"budgets":[{"limit_usd":1,"window":"24h"}]}`, http.StatusCreated)["key"].(map[string]any)
	patched := call("PATCH", "/admin/keys/"+k["id"].(string), `{"windows":[]}`, http.StatusOK)
	require.Equal(t, []any{}, patched["windows"])
	require.Len(t, patched["budgets"], 1, "the budget stays")
	team := call("POST", "/admin/teams", `{"name":"money","budgets":[{"limit_usd":50,"period":"month"}]}`, http.StatusCreated)
	require.Equal(t, []any{}, team["windows"])
}

// TestKeysPages: GET /admin/keys answers pages, searched and sorted on
// the server, with the next page's cursor; a wrong parameter is 400
// naming it.
func TestKeysPages(t *testing.T) {
	api, ks := newAPI(t)
	for _, name := range []string{"beta", "Alpha", "alpine", "gamma"} {
		_, _, err := ks.Create(t.Context(), keystore.Spec{Name: name, TokenLimit: 10})
		require.NoError(t, err)
	}
	get := func(query string, want int) (admin.Keys, map[string]any) {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest("GET", "/admin/keys?"+query, nil))
		require.Equal(t, want, w.Code, w.Body.String())
		var page admin.Keys
		var e map[string]any
		if want == http.StatusOK {
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &page))
		} else {
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
			e = e["error"].(map[string]any)
		}
		return page, e
	}
	names := func(p admin.Keys) []string {
		var out []string
		for _, k := range p.Keys {
			out = append(out, k.Name)
		}
		return out
	}
	first, _ := get("limit=2", http.StatusOK)
	require.Equal(t, []string{"Alpha", "alpine"}, names(first))
	require.NotEmpty(t, first.NextCursor)
	second, _ := get("limit=2&cursor="+first.NextCursor, http.StatusOK)
	require.Equal(t, []string{"beta", "gamma"}, names(second))
	require.Empty(t, second.NextCursor)
	found, _ := get("q=ALP&sort=-name", http.StatusOK)
	require.Equal(t, []string{"alpine", "Alpha"}, names(found))
	for query, param := range map[string]string{
		"limit=0": "limit", "limit=1001": "limit", "sort=size": "sort", "status=gone": "status",
		"cursor=zzz": "cursor", "color=red": "", "limit=1&limit=2": "limit",
	} {
		_, e := get(query, http.StatusBadRequest)
		require.Equal(t, "invalid_parameter", e["code"], query)
		if param != "" {
			require.Equal(t, param, e["param"], query)
		}
	}
}
