package admin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/keystore"
)

// auditToken is the admin token of the audit tests' consoles.
const auditToken = "audit-test-admin-token-0123456789abcdef"

var auditT0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// fakeGateway is the Gateway of the audit and upstreams tests: prices
// reload to models models, or fail with err; it has upstreams, and its
// configuration file (Reload) reloads to them and the prices, or is
// refused with err.
type fakeGateway struct {
	models    int
	err       error
	upstreams []admin.Upstream
	reloads   int // the calls of Reload
}

func (g *fakeGateway) Reserved(string) int64                      { return 0 }
func (g *fakeGateway) Traffic() (float64, float64, int64)         { return 0, 0, 0 }
func (g *fakeGateway) ReloadPrices() (int, error)                 { return g.models, g.err }
func (g *fakeGateway) Upstreams(context.Context) []admin.Upstream { return g.upstreams }
func (g *fakeGateway) Reload(context.Context) (admin.Reloaded, error) {
	g.reloads++
	if g.err != nil {
		return admin.Reloaded{}, g.err
	}
	return admin.Reloaded{Upstreams: len(g.upstreams), Models: g.models}, nil
}
func (g *fakeGateway) set(models int, err error) *fakeGateway {
	g.models, g.err = models, err
	return g
}

// syncBuffer is a log's output, written from the handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// auditEnv is an admin API with an audit log on a new database, behind a
// console, with a fake clock.
type auditEnv struct {
	t       *testing.T
	clock   *fakeclock.Clock
	db      *ratestore.DB
	api     *admin.API
	audit   *audit.Log
	keys    *keystore.Store
	gw      *fakeGateway
	logs    *syncBuffer
	console *console.Console
}

func newAuditEnv(t *testing.T) *auditEnv {
	e := &auditEnv{t: t, clock: fakeclock.New(auditT0), gw: &fakeGateway{models: 3, upstreams: testUpstreams()}, logs: &syncBuffer{}}
	var err error
	e.db, err = ratestore.Open(filepath.Join(t.TempDir(), "audit.db"), ratestore.Options{Now: e.clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { e.db.Close() })
	e.keys, err = keystore.Open(e.db, keystore.Options{})
	require.NoError(t, err)
	e.audit, err = audit.Open(e.db, audit.Options{SweepInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { e.audit.Close(context.Background()) })
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.api, err = admin.New(admin.Options{Keys: e.keys, Audit: e.audit, Gateway: e.gw, Reload: e.gw.Reload, Now: e.clock.Now, Log: log})
	require.NoError(t, err)
	e.console, err = console.New(console.Options{Token: auditToken, API: e.api, Now: e.clock.Now, Log: log})
	require.NoError(t, err)
	return e
}

// caller calls the API as one actor.
type caller struct {
	name  string
	actor string
	do    func(method, path, body string) *httptest.ResponseRecorder
}

// request is a request to the API of method, path and body (none when
// "").
func request(method, path, body string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// serve serves r on h and returns the answer.
func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// bearer calls through the console with the admin token.
func (e *auditEnv) bearer() caller {
	return caller{"bearer", admin.ActorToken, func(method, path, body string) *httptest.ResponseRecorder {
		r := request(method, path, body)
		r.Header.Set("Authorization", "Bearer "+auditToken)
		return serve(e.console, r)
	}}
}

// session signs in to the console and calls with its cookie and CSRF
// token, as the page does.
func (e *auditEnv) session() (caller, string, string) {
	w := serve(e.console, request("POST", "/admin/session", `{"token":"`+auditToken+`"}`))
	require.Equal(e.t, http.StatusOK, w.Code, w.Body.String())
	var s console.Session
	require.NoError(e.t, json.Unmarshal(w.Body.Bytes(), &s))
	cookie := w.Result().Cookies()[0].Value
	id := sha256.Sum256([]byte(cookie))
	return caller{"session", "session:" + hex.EncodeToString(id[:])[:8], func(method, path, body string) *httptest.ResponseRecorder {
		r := request(method, path, body)
		r.AddCookie(&http.Cookie{Name: console.CookieName, Value: cookie})
		r.Header.Set(console.CSRFHeader, s.CSRF)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		r.Header.Set("Origin", "http://example.com")
		return serve(e.console, r)
	}}, cookie, s.CSRF
}

// cli calls the API in this process as the command line does
// (admin.NewLocalClient): with the actor cli.
func (e *auditEnv) cli() caller {
	return caller{"cli", admin.ActorCLI, func(method, path, body string) *httptest.ResponseRecorder {
		r := request(method, path, body)
		return serve(e.api, r.WithContext(admin.WithActor(r.Context(), admin.ActorCLI)))
	}}
}

// events returns every event of the log, newest first, as GET
// /admin/audit answers them.
func (e *auditEnv) events() []audit.Event {
	e.t.Helper()
	p := e.page("limit=1000")
	require.Empty(e.t, p.NextCursor)
	return p.Events
}

// page is GET /admin/audit?query, which must answer 200.
func (e *auditEnv) page(query string) admin.AuditPage {
	e.t.Helper()
	w := e.bearer().do("GET", "/admin/audit?"+query, "")
	require.Equal(e.t, http.StatusOK, w.Code, w.Body.String())
	var p admin.AuditPage
	require.NoError(e.t, json.Unmarshal(w.Body.Bytes(), &p))
	return p
}

// change makes a change as c, which must answer want, and returns the
// answer and the one event it recorded, of action and target ("": any),
// which it checks; changes, if not "", is the JSON its changes must be.
func (e *auditEnv) change(c caller, method, path, body string, want int, action, target, changes string) (*httptest.ResponseRecorder, audit.Event) {
	e.t.Helper()
	before := len(e.events())
	e.clock.Advance(time.Second)
	w := c.do(method, path, body)
	require.Equal(e.t, want, w.Code, "%s %s %s: %s", c.name, method, path, w.Body.String())
	evs := e.events()
	require.Len(e.t, evs, before+1, "%s %s: one event", method, path)
	ev := evs[0]
	if target == "" {
		target = ev.Target // made by the change: the caller checks it
	}
	require.Equal(e.t, []string{c.actor, action, target}, []string{ev.Actor, ev.Action, ev.Target}, "%s %s", method, path)
	require.Equal(e.t, e.clock.Now(), ev.Time)
	if changes != "" {
		b, err := json.Marshal(ev.Changes)
		require.NoError(e.t, err)
		require.JSONEq(e.t, changes, string(b), "%s %s", method, path)
	}
	return w, ev
}

// refused makes a change as c that must be refused with want, and
// checks that it recorded nothing.
func (e *auditEnv) refused(c caller, method, path, body string, want int) {
	e.t.Helper()
	before := e.events()
	w := c.do(method, path, body)
	require.Equal(e.t, want, w.Code, "%s %s %s: %s", c.name, method, path, w.Body.String())
	require.Equal(e.t, before, e.events(), "%s %s %s: refused, nothing recorded", c.name, method, path)
}

// TestAuditEveryChange: every route that changes something records one
// event, of its caller's actor (the admin token, a console session, the
// command line), naming what changed field by field; a change refused
// records none; no secret, secret's hash, cookie or CSRF token is in any
// event or in the log.
func TestAuditEveryChange(t *testing.T) {
	e := newAuditEnv(t)
	s, cookie, csrf := e.session()
	var secrets []string
	for _, c := range []caller{e.bearer(), s, e.cli()} {
		secrets = append(secrets, e.changeAll(c)...)
	}
	id := sha256.Sum256([]byte(cookie))
	secrets = append(secrets, auditToken, cookie, csrf, hex.EncodeToString(id[:]))
	evs, err := json.Marshal(e.events())
	require.NoError(t, err)
	require.Len(t, e.events(), 3*13)
	for _, secret := range secrets {
		require.NotContains(t, string(evs), secret)
		require.NotContains(t, e.logs.String(), secret)
	}
}

// changeAll makes every change there is as c, and the refused ones, and
// returns the secrets it saw, with their hashes.
func (e *auditEnv) changeAll(c caller) (secrets []string) {
	e.t.Helper()
	_, ev := e.change(c, "POST", "/admin/teams", `{"name":"t1","windows":[{"limit":5000,"window":"1h"}]}`, http.StatusCreated, admin.ActionTeamCreate, "", `{
		"name":{"from":null,"to":"t1"},"models":{"from":null,"to":[]},"windows":{"from":null,"to":[{"limit":5000,"window":"1h0m0s","bucket":"1m0s"}]},
		"budgets":{"from":null,"to":[]},"requests_per_minute":{"from":null,"to":0},"max_concurrent":{"from":null,"to":0}}`)
	team := ev.Target
	require.True(e.t, strings.HasPrefix(team, "team_"), team)
	w, ev := e.change(c, "POST", "/admin/keys", `{"name":"k1","windows":[{"limit":1000,"window":"5h"}],"team":"`+team+`","disabled":true}`,
		http.StatusCreated, admin.ActionKeyCreate, "", fmt.Sprintf(`{
		"name":{"from":null,"to":"k1"},"model":{"from":null,"to":""},"team":{"from":null,"to":%q},"models":{"from":null,"to":[]},
		"windows":{"from":null,"to":[{"limit":1000,"window":"5h0m0s","bucket":"5m0s"}]},"budgets":{"from":null,"to":[]},
		"requests_per_minute":{"from":null,"to":0},"max_concurrent":{"from":null,"to":0},"disabled":{"from":null,"to":true}}`, team))
	var created admin.Created
	require.NoError(e.t, json.Unmarshal(w.Body.Bytes(), &created))
	key := created.Key.ID
	require.Equal(e.t, key, ev.Target)
	secrets = append(secrets, created.Secret)
	kp := "/admin/keys/" + key
	e.change(c, "PATCH", kp, `{"disabled":false}`, http.StatusOK, admin.ActionKeyEnable, key, `{"disabled":{"from":true,"to":false}}`)
	e.change(c, "PATCH", kp, `{"name":"k2","windows":[{"limit":2000,"window":"5h"}],"expires_at":"2027-01-01T00:00:00Z","models":["gpt-*"]}`,
		http.StatusOK, admin.ActionKeyUpdate, key, `{"name":{"from":"k1","to":"k2"},
		"windows":{"from":[{"limit":1000,"window":"5h0m0s","bucket":"5m0s"}],"to":[{"limit":2000,"window":"5h0m0s","bucket":"5m0s"}]},
		"expires_at":{"from":null,"to":"2027-01-01T00:00:00Z"},"models":{"from":[],"to":["gpt-*"]}}`)
	e.change(c, "PATCH", kp, `{"disabled":true,"requests_per_minute":60}`, http.StatusOK, admin.ActionKeyUpdate, key,
		`{"disabled":{"from":false,"to":true},"requests_per_minute":{"from":0,"to":60}}`)
	e.change(c, "PATCH", kp, `{"disabled":false}`, http.StatusOK, admin.ActionKeyEnable, key, `{"disabled":{"from":true,"to":false}}`)
	e.change(c, "PATCH", kp, `{"disabled":true}`, http.StatusOK, admin.ActionKeyDisable, key, `{"disabled":{"from":false,"to":true}}`)
	w, _ = e.change(c, "POST", kp+"/rotate", `{"grace":"1h"}`, http.StatusOK, admin.ActionKeyRotate, key,
		fmt.Sprintf(`{"previous_secret_expires_at":{"from":null,"to":%q}}`, e.clock.Now().Add(time.Second+time.Hour).Format(time.RFC3339))) // change advances the clock a second
	require.NoError(e.t, json.Unmarshal(w.Body.Bytes(), &created))
	secrets = append(secrets, created.Secret)
	e.change(c, "PATCH", "/admin/teams/"+team, `{"max_concurrent":4,"name":"t1"}`, http.StatusOK, admin.ActionTeamUpdate, team,
		`{"max_concurrent":{"from":0,"to":4}}`)
	e.change(c, "POST", "/admin/prices/reload", "", http.StatusOK, admin.ActionPricesReload, admin.PricesTarget, `{"models":{"from":null,"to":3}}`)
	e.change(c, "POST", "/admin/config/reload", "", http.StatusOK, admin.ActionConfigReload, admin.ConfigTarget,
		`{"upstreams":{"from":null,"to":3},"models":{"from":null,"to":3}}`)
	e.refusals(c, key, team)
	_, ev = e.change(c, "DELETE", kp, "", http.StatusNoContent, admin.ActionKeyDelete, key, "")
	require.Equal(e.t, json.RawMessage(`"k2"`), ev.Changes["name"].From)
	require.Equal(e.t, json.RawMessage(`true`), ev.Changes["disabled"].From)
	require.Len(e.t, ev.Changes, 11, "every field of the key")
	for name, ch := range ev.Changes {
		require.Equal(e.t, json.RawMessage(`null`), ch.To, name)
	}
	e.change(c, "DELETE", "/admin/teams/"+team, "", http.StatusNoContent, admin.ActionTeamDelete, team, `{
		"name":{"from":"t1","to":null},"models":{"from":[],"to":null},"windows":{"from":[{"limit":5000,"window":"1h0m0s","bucket":"1m0s"}],"to":null},
		"budgets":{"from":[],"to":null},"requests_per_minute":{"from":0,"to":null},"max_concurrent":{"from":4,"to":null}}`)
	for _, s := range secrets[:len(secrets):len(secrets)] {
		h := sha256.Sum256([]byte(s))
		secrets = append(secrets, hex.EncodeToString(h[:]))
	}
	return secrets
}

// refusals tries changes of key and team that are refused, or change
// nothing: none records an event.
func (e *auditEnv) refusals(c caller, key, team string) {
	e.t.Helper()
	kp := "/admin/keys/" + key
	e.refused(c, "POST", "/admin/keys", `{"name":"x","windows":[{"limit":1,"window":"nope"}]}`, http.StatusBadRequest)
	e.refused(c, "POST", "/admin/keys", `{"windows":[{"limit":0,"window":"1h"}]}`, http.StatusBadRequest)
	e.refused(c, "PATCH", kp, `{"windows":[{"limit":1,"window":"5x"}],"name":"no"}`, http.StatusBadRequest)
	e.refused(c, "PATCH", kp, `{"name":"k2","disabled":true}`, http.StatusOK) // as it is: nothing changed
	e.refused(c, "PATCH", kp, `{}`, http.StatusOK)
	e.refused(c, "PATCH", "/admin/keys/key_0123456789abcdef", `{"name":"x"}`, http.StatusNotFound)
	e.refused(c, "DELETE", "/admin/keys/key_0123456789abcdef", "", http.StatusNotFound)
	e.refused(c, "POST", "/admin/keys/key_0123456789abcdef/rotate", "", http.StatusNotFound)
	e.refused(c, "POST", kp+"/rotate", `{"grace":"9999h"}`, http.StatusBadRequest)
	e.refused(c, "POST", "/admin/teams", `{"name":"t","windows":[{"limit":-1,"window":"1h"}]}`, http.StatusBadRequest)
	e.refused(c, "PATCH", "/admin/teams/"+team, `{"name":"t1"}`, http.StatusOK)
	e.refused(c, "PATCH", "/admin/teams/team_0123456789abcdef", `{"name":"x"}`, http.StatusNotFound)
	e.refused(c, "DELETE", "/admin/teams/"+team, "", http.StatusConflict) // the key belongs to it
	e.gw.set(0, errors.New("prices.json: line 3: not a price"))
	e.refused(c, "POST", "/admin/prices/reload", "", http.StatusBadRequest)
	e.gw.set(0, errors.New("ratestore.yaml: line 9: upstreams[0].api: \"grpc\": not an api"))
	e.refused(c, "POST", "/admin/config/reload", "", http.StatusBadRequest)
	e.gw.set(3, nil)
}

// TestAuditRefusedByConsole: what the console refuses (no token, a wrong
// one, no CSRF token, a read-only console) reaches no route and records
// nothing.
func TestAuditRefusedByConsole(t *testing.T) {
	e := newAuditEnv(t)
	s, cookie, _ := e.session()
	for _, c := range []caller{
		{"no token", "", func(method, path, body string) *httptest.ResponseRecorder {
			return serve(e.console, request(method, path, body))
		}},
		{"wrong token", "", func(method, path, body string) *httptest.ResponseRecorder {
			r := request(method, path, body)
			r.Header.Set("Authorization", "Bearer wrong-token-wrong-token-wrong-token")
			return serve(e.console, r)
		}},
		{"no csrf", "", func(method, path, body string) *httptest.ResponseRecorder {
			r := request(method, path, body)
			r.AddCookie(&http.Cookie{Name: console.CookieName, Value: cookie})
			r.Header.Set("Sec-Fetch-Site", "same-origin")
			return serve(e.console, r)
		}},
	} {
		want := http.StatusUnauthorized
		if c.name == "no csrf" {
			want = http.StatusForbidden
		}
		e.refused(c, "POST", "/admin/teams", `{"name":"t1","windows":[{"limit":5000,"window":"1h"}]}`, want)
	}
	ro, err := console.New(console.Options{Token: auditToken, API: e.api, Now: e.clock.Now, ReadOnly: true})
	require.NoError(t, err)
	e.refused(caller{"read-only", "", func(method, path, body string) *httptest.ResponseRecorder {
		r := request(method, path, body)
		r.Header.Set("Authorization", "Bearer "+auditToken)
		return serve(ro, r)
	}}, "POST", "/admin/teams", `{"name":"t1","windows":[{"limit":5000,"window":"1h"}]}`, http.StatusForbidden)
	e.change(s, "POST", "/admin/teams", `{"name":"t1","windows":[{"limit":5000,"window":"1h"}]}`, http.StatusCreated, admin.ActionTeamCreate, "", "")
}

// TestAuditNoActor: with an audit log, a change whose caller is not named
// (an API mounted without WithActor) is refused before it is made.
func TestAuditNoActor(t *testing.T) {
	e := newAuditEnv(t)
	w := serve(e.api, request("POST", "/admin/keys", `{"name":"k","windows":[{"limit":1,"window":"1h"}]}`))
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Contains(t, w.Body.String(), `"code":"no_actor"`)
	n := 0
	require.NoError(t, e.keys.List(t.Context(), func(keystore.Key) error { n++; return nil }))
	require.Zero(t, n, "nothing created")
	require.Empty(t, e.events())
}

// TestAuditAddress: the caller's address, when the context has one,
// is recorded with the actor.
func TestAuditAddress(t *testing.T) {
	e := newAuditEnv(t)
	r := request("POST", "/admin/teams", `{"name":"t","windows":[{"limit":1,"window":"1h"}]}`)
	ctx := admin.WithClient(admin.WithActor(r.Context(), admin.ActorToken), netip.MustParseAddr("203.0.113.7"))
	require.Equal(t, http.StatusCreated, serve(e.api, r.WithContext(ctx)).Code)
	require.Equal(t, "203.0.113.7", e.events()[0].Address)
}

// TestAuditNotRecorded: a change made whose event cannot be recorded is
// not acknowledged: 500 audit_failed, saying it was made.
func TestAuditNotRecorded(t *testing.T) {
	e := newAuditEnv(t)
	other, err := ratestore.Open(filepath.Join(t.TempDir(), "other.db"), ratestore.Options{})
	require.NoError(t, err)
	broken, err := audit.Open(other, audit.Options{SweepInterval: -1})
	require.NoError(t, err)
	require.NoError(t, other.Close())
	api, err := admin.New(admin.Options{Keys: e.keys, Audit: broken})
	require.NoError(t, err)
	r := request("POST", "/admin/teams", `{"name":"t","windows":[{"limit":1,"window":"1h"}]}`)
	w := serve(api, r.WithContext(admin.WithActor(r.Context(), admin.ActorCLI)))
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Contains(t, w.Body.String(), `"code":"audit_failed"`)
	require.Contains(t, w.Body.String(), "team.create of team_")
	require.Contains(t, w.Body.String(), "was made")
}

// TestAuditQuery: GET /admin/audit pages, filters by target and range,
// and refuses a parameter out of range with 400 naming it.
func TestAuditQuery(t *testing.T) {
	e := newAuditEnv(t)
	c := e.cli()
	var teams []string
	for i := range 5 {
		_, ev := e.change(c, "POST", "/admin/teams", fmt.Sprintf(`{"name":"t%d","windows":[{"limit":1,"window":"1h"}]}`, i), http.StatusCreated, admin.ActionTeamCreate, "", "")
		teams = append(teams, ev.Target)
		e.change(c, "PATCH", "/admin/teams/"+ev.Target, `{"max_concurrent":1}`, http.StatusOK, admin.ActionTeamUpdate, ev.Target, "")
	}
	all := e.events()
	var paged []audit.Event
	q := url.Values{"limit": {"3"}}
	for {
		p := e.page(q.Encode())
		paged = append(paged, p.Events...)
		if p.NextCursor == "" {
			break
		}
		q.Set("cursor", p.NextCursor)
	}
	require.Equal(t, all, paged)
	p := e.page("target=" + teams[2])
	require.Len(t, p.Events, 2)
	require.Equal(t, []string{admin.ActionTeamUpdate, admin.ActionTeamCreate}, []string{p.Events[0].Action, p.Events[1].Action})
	p = e.page(url.Values{"from": {all[3].Time.Format(time.RFC3339)}, "to": {all[1].Time.Format(time.RFC3339)}}.Encode())
	require.Equal(t, all[2:4], p.Events)

	now := e.clock.Now()
	for query, param := range map[string]string{
		"limit=0": "limit", "limit=1001": "limit", "limit=x": "limit", "from=yesterday": "from",
		"to=" + now.Add(49*time.Hour).Format(time.RFC3339):      "to",
		"from=" + now.AddDate(0, 0, -401).Format(time.DateOnly): "from",
		"to=" + now.AddDate(0, 0, -401).Format(time.DateOnly):   "to",
		"from=2026-11-28&to=2026-11-27":                         "from",
		"target=key_a%2Fb":                                      "target",
		"cursor=zz":                                             "cursor",
		"cursor=1&cursor=2":                                     "cursor",
		"key=key_a":                                             "",
	} {
		w := c.do("GET", "/admin/audit?"+query, "")
		require.Equal(t, http.StatusBadRequest, w.Code, query)
		var body struct {
			Error struct{ Code, Param, Message string }
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
		require.Equal(t, []string{"invalid_parameter", param}, []string{body.Error.Code, body.Error.Param}, "%s: %s", query, body.Error.Message)
		if param != "" {
			require.True(t, strings.HasPrefix(body.Error.Message, param+": "), body.Error.Message)
		}
	}

	require.NoError(t, e.db.Update(t.Context(), nil, func(b backend.Batch) error {
		return b.Put([]byte(fmt.Sprintf("A/e/%016x0123456789abcdef00000000", ^uint64(auditT0.UnixNano()))), []byte("{"))
	}))
	w := c.do("GET", "/admin/audit", "")
	require.Equal(t, http.StatusInternalServerError, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"code":"audit_corrupt"`)
	require.Contains(t, e.logs.String(), "the audit log failed")

	api, err := admin.New(admin.Options{Keys: e.keys})
	require.NoError(t, err)
	w = serve(api, request("GET", "/admin/audit", ""))
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Contains(t, w.Body.String(), `"code":"no_audit"`)
}

// TestAuditClient: Client.Audit reads the log, and a local client's
// changes are the command line's.
func TestAuditClient(t *testing.T) {
	e := newAuditEnv(t)
	ac := admin.NewLocalClient(e.api, admin.ActorCLI)
	name := "t"
	tm, err := ac.CreateTeam(t.Context(), admin.TeamRequest{Name: &name, Windows: &[]admin.WindowRequest{{Limit: 1, Window: "1h"}}})
	require.NoError(t, err)
	p, err := ac.Audit(t.Context(), url.Values{"target": {tm.ID}})
	require.NoError(t, err)
	require.Len(t, p.Events, 1)
	require.Equal(t, []string{"cli", admin.ActionTeamCreate, tm.ID}, []string{p.Events[0].Actor, p.Events[0].Action, p.Events[0].Target})
	_, err = ac.Audit(t.Context(), url.Values{"limit": {"0"}})
	var ae *admin.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "limit", ae.Param)
	require.ErrorIs(t, err, ratestore.ErrInvalid)
}

// TestAuditSubLimits: a change of a key's model limits or end users'
// limits is an event naming them, from and to; their removal reads as a
// change to null.
func TestAuditSubLimits(t *testing.T) {
	e := newAuditEnv(t)
	c := e.bearer()
	_, ev := e.change(c, "POST", "/admin/keys", `{"name":"k","windows":[{"limit":1000,"window":"5h"}]}`, http.StatusCreated, admin.ActionKeyCreate, "", "")
	id := ev.Target
	e.change(c, "PATCH", "/admin/keys/"+id, `{"end_users":{"windows":[{"limit":20,"window":"24h"}],"required":true},
		"model_limits":[{"models":["gpt-4o*"],"requests_per_minute":5}]}`, http.StatusOK, admin.ActionKeyUpdate, id, `{
		"end_users":{"from":null,"to":{"windows":[{"limit":20,"window":"24h0m0s","bucket":"24m0s"}],"budgets":[],"requests_per_minute":0,"max_concurrent":0,"required":true}},
		"model_limits":{"from":null,"to":[{"models":["gpt-4o*"],"windows":[],"budgets":[],"requests_per_minute":5,"max_concurrent":0}]}}`)
	e.change(c, "PATCH", "/admin/keys/"+id, `{"end_users":null}`, http.StatusOK, admin.ActionKeyUpdate, id, `{
		"end_users":{"from":{"windows":[{"limit":20,"window":"24h0m0s","bucket":"24m0s"}],"budgets":[],"requests_per_minute":0,"max_concurrent":0,"required":true},"to":null}}`)
}
