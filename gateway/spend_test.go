package gateway

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// The usages the spend tests' upstreams report, and what they cost and
// enter in the ledger (see TestCostExact for the prices).
const (
	// claude-sonnet-4: 100 input, 2000 written to the cache (500 for an
	// hour), 10000 read from it, 50 output: 12675 micro-dollars.
	spendAnthropic = `{"type":"message","usage":{"input_tokens":100,"cache_creation_input_tokens":2000,"cache_read_input_tokens":10000,` +
		`"cache_creation":{"ephemeral_5m_input_tokens":1500,"ephemeral_1h_input_tokens":500},"output_tokens":50}}`
	// o4-mini: 1000 prompt of which 600 cached, 300 completion of which
	// 200 reasoning: 1925 micro-dollars.
	spendOpenAI = `{"usage":{"prompt_tokens":1000,"completion_tokens":300,"total_tokens":1300,` +
		`"prompt_tokens_details":{"cached_tokens":600},"completion_tokens_details":{"reasoning_tokens":200}}}`
	claudeModel = "claude-sonnet-4-20250514"
	openAIModel = "o4-mini"
)

var (
	claudeCounters = admin.Counters{Requests: 1, InputTokens: 100, OutputTokens: 50, CacheReadTokens: 10000, CacheWriteTokens: 2000, CostUSD: micro(12675)}
	openAICounters = admin.Counters{Requests: 1, InputTokens: 400, OutputTokens: 100, CacheReadTokens: 600, ReasoningTokens: 200, CostUSD: micro(1925)}
)

// plus is the sum of counters.
func plus(cs ...admin.Counters) admin.Counters {
	var s admin.Counters
	for _, c := range cs {
		s.Requests += c.Requests
		s.InputTokens += c.InputTokens
		s.OutputTokens += c.OutputTokens
		s.CacheReadTokens += c.CacheReadTokens
		s.CacheWriteTokens += c.CacheWriteTokens
		s.ReasoningTokens += c.ReasoningTokens
		s.CostUSD += c.CostUSD
		s.Refused += c.Refused
		for r, n := range c.RefusedBy {
			if s.RefusedBy == nil {
				s.RefusedBy = map[string]int64{}
			}
			s.RefusedBy[r] += n
		}
	}
	return s
}

// refusedWindow is the counters of one request refused by a token window.
var refusedWindow = admin.Counters{Refused: 1, RefusedBy: map[string]int64{"window": 1}}

func strp(s string) *string { return &s }

// spendEnv is an admin env whose gateway sends /v1/messages to an
// upstream reporting spendAnthropic, every other path to one reporting
// spendOpenAI.
func spendEnv(t *testing.T, opts Options) *env {
	opts.Upstream = scripted(t, "application/json", spendOpenAI)
	opts.Routes = []Route{{Prefix: "/v1/messages", Upstream: scripted(t, "application/json", spendAnthropic)}}
	return newAdminEnv(t, opts)
}

// spendFixture is what spendRequests did, for the tests to check.
type spendFixture struct {
	team    string
	a, b, c keystore.Key
	ids     []string // the request ids of the requests served, in order
}

// spendRequests sends, a minute apart from 13:00 (an hour after the first):
// key a (in a team) two claude calls (12:00 and 13:00) and one o4-mini;
// key b (no team) one o4-mini; key c, whose window holds 1000 tokens, one
// o4-mini, charged 1300, and one more, refused by its window.
func spendRequests(t *testing.T, e *env) spendFixture {
	var f spendFixture
	var secretA string
	f.team, f.a, secretA = newTeamKey(t, e, keystore.Policy{Windows: []keystore.Window{{Limit: 1e9, Window: 5 * time.Hour}}})
	var secretB, secretC string
	f.b, secretB = e.key("b", 1e9)
	f.c, secretC = e.key("c", 1000)
	call := func(path, secret, model string, status int) {
		t.Helper()
		resp, body := e.call("POST", path, secret, map[string]any{"model": model, "max_tokens": 10, "messages": []any{}})
		require.Equal(t, status, resp.StatusCode, string(body))
		if status == http.StatusOK {
			f.ids = append(f.ids, resp.Header.Get(RequestIDHeader))
		}
	}
	call("/v1/messages", secretA, claudeModel, http.StatusOK)
	e.clock.Advance(time.Hour)
	call("/v1/messages", secretA, claudeModel, http.StatusOK)
	for _, c := range []struct {
		secret string
		status int
	}{{secretA, http.StatusOK}, {secretB, http.StatusOK}, {secretC, http.StatusOK}, {secretC, http.StatusTooManyRequests}} {
		e.clock.Advance(time.Minute)
		call("/v1/chat/completions", c.secret, openAIModel, c.status)
	}
	return f
}

// TestAdminSpend: /admin/spend adds up what the requests of two keys on two
// models used and cost, token type by type, exactly, and what was refused
// by reason; grouped by each dimension, filtered by each.
func TestAdminSpend(t *testing.T) {
	e := spendEnv(t, Options{})
	f := spendRequests(t, e)
	a, b, c := f.a.ID, f.b.ID, f.c.ID
	day := func(d string) time.Time { tm, _ := time.Parse(time.DateOnly, d); return tm }
	spend := func(query string) admin.Spend {
		t.Helper()
		return adminOK[admin.Spend](e, "GET", "/admin/spend"+query, nil, http.StatusOK)
	}
	total := plus(claudeCounters, claudeCounters, openAICounters, openAICounters, openAICounters, refusedWindow)
	require.Equal(t, admin.Counters{Requests: 5, InputTokens: 1400, OutputTokens: 400, CacheReadTokens: 21800, CacheWriteTokens: 4000,
		ReasoningTokens: 600, CostUSD: micro(31125), Refused: 1, RefusedBy: map[string]int64{"window": 1}}, total)

	got := spend("")
	require.Equal(t, admin.Spend{From: day("2025-12-19"), To: day("2026-01-19"), GroupBy: []string{},
		Rows: []admin.SpendRow{{Counters: total}}, Total: total}, got, "the last 30 days, in one total")
	resp, body := e.admin("GET", "/admin/spend?from=2026-01-18&to=2026-01-19", adminToken, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.JSONEq(t, `{"from":"2026-01-18T00:00:00Z","to":"2026-01-19T00:00:00Z","group_by":[],"rows":[
		{"requests":5,"input_tokens":1400,"output_tokens":400,"cache_read_tokens":21800,"cache_write_tokens":4000,
		 "reasoning_tokens":600,"cost_usd":0.031125,"refused":1,"refused_by":{"window":1}}],
		"total":{"requests":5,"input_tokens":1400,"output_tokens":400,"cache_read_tokens":21800,"cache_write_tokens":4000,
		 "reasoning_tokens":600,"cost_usd":0.031125,"refused":1,"refused_by":{"window":1}}}`, string(body))

	byKeyModel := []admin.SpendRow{
		{Key: &a, Model: strp(claudeModel), Counters: plus(claudeCounters, claudeCounters)},
		{Key: &a, Model: strp(openAIModel), Counters: openAICounters},
		{Key: &b, Model: strp(openAIModel), Counters: openAICounters},
		{Key: &c, Model: strp(openAIModel), Counters: plus(openAICounters, refusedWindow)},
	}
	slices.SortStableFunc(byKeyModel, func(x, y admin.SpendRow) int { return strings.Compare(*x.Key, *y.Key) })
	got = spend("?group_by=key,model&from=2026-01-18T12:00:00Z&to=2026-01-18T14:00:00Z")
	require.Equal(t, []string{"key", "model"}, got.GroupBy)
	require.Equal(t, byKeyModel, got.Rows)
	require.Equal(t, total, got.Total)
	require.Equal(t, got, spend("?group_by=key&group_by=model&from=2026-01-18&to=2026-01-19"), "repeated, and a range rounded out to whole days")

	got = spend("?group_by=team")
	require.Equal(t, []admin.SpendRow{
		{Team: strp(""), Counters: plus(openAICounters, openAICounters, refusedWindow)},
		{Team: &f.team, Counters: plus(claudeCounters, claudeCounters, openAICounters)},
	}, got.Rows, "the keys in no team are a group of team \"\"")
	resp, body = e.admin("GET", "/admin/spend?group_by=team", adminToken, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `"rows":[{"team":"","requests":2,`)

	got = spend("?group_by=day")
	require.Equal(t, []admin.SpendRow{{Day: strp("2026-01-18"), Counters: total}}, got.Rows)
	got = spend("?group_by=hour&from=2026-01-18T12:30:00Z")
	require.Equal(t, day("2026-01-18").Add(12*time.Hour), got.From, "rounded down to the hour")
	require.Equal(t, day("2026-01-18").Add(14*time.Hour), got.To, "now, rounded up to the hour")
	require.Equal(t, []admin.SpendRow{
		{Hour: strp("2026-01-18T12:00:00Z"), Counters: claudeCounters},
		{Hour: strp("2026-01-18T13:00:00Z"), Counters: plus(claudeCounters, openAICounters, openAICounters, openAICounters)},
	}, got.Rows, "by hour, from the entries, which hold no refusals")

	// Filters.
	require.Equal(t, plus(claudeCounters, claudeCounters, openAICounters), spend("?key="+a).Total)
	require.Equal(t, plus(openAICounters, refusedWindow), spend("?key="+c+"&model="+openAIModel).Total)
	require.Equal(t, plus(claudeCounters, claudeCounters, openAICounters), spend("?team="+f.team).Total)
	require.Equal(t, plus(openAICounters, openAICounters, openAICounters, refusedWindow), spend("?model="+openAIModel).Total)
	require.Equal(t, []admin.SpendRow{{Key: &a, Counters: openAICounters}}, spend("?team="+f.team+"&model="+openAIModel+"&group_by=key").Rows)
	require.Empty(t, spend("?from=2026-01-01&to=2026-01-18").Rows, "the day before")
}

// TestAdminSpendRequests: /admin/requests pages through the entries newest
// first with a cursor, filtered by key, team, model and status, each entry
// in ledger.Entry's JSON.
func TestAdminSpendRequests(t *testing.T) {
	e := spendEnv(t, Options{})
	f := spendRequests(t, e)
	page := func(query string) admin.Requests {
		t.Helper()
		return adminOK[admin.Requests](e, "GET", "/admin/requests"+query, nil, http.StatusOK)
	}
	ids := func(p admin.Requests) []string {
		var out []string
		for _, en := range p.Requests {
			out = append(out, en.RequestID)
		}
		return out
	}
	newest := slices.Clone(f.ids)
	slices.Reverse(newest)

	var all []string
	cursor := ""
	for i := 0; ; i++ {
		q := "?limit=2"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		p := page(q)
		require.LessOrEqual(t, len(p.Requests), 2)
		all = append(all, ids(p)...)
		if cursor = p.NextCursor; cursor == "" {
			require.Equal(t, 2, i, "three pages: 2, 2, 1")
			break
		}
	}
	require.Equal(t, newest, all)

	first := page("")
	require.Len(t, first.Requests, 5)
	require.Empty(t, first.NextCursor)
	require.Equal(t, ledger.Entry{
		Time: start.Add(time.Hour + 3*time.Minute), RequestID: f.ids[4], Key: f.c.ID, Model: openAIModel, Route: first.Requests[0].Route, Upstream: "/",
		Tokens: ledger.Tokens{Input: 400, Output: 100, CacheRead: 600, Reasoning: 200}, Cost: micro(1925), Status: http.StatusOK,
		Latency: first.Requests[0].Latency,
	}, first.Requests[0])
	requireRoute(t, "/v1/chat/completions", first.Requests[0].Route)
	last := first.Requests[4]
	requireRoute(t, "/v1/messages", last.Route)
	require.Equal(t, []any{start, f.a.ID, f.team, claudeModel, ledger.Tokens{Input: 100, Output: 50, CacheRead: 10000, CacheWrite: 2000}},
		[]any{last.Time, last.Key, last.Team, last.Model, last.Tokens})

	resp, body := e.admin("GET", "/admin/requests?key="+f.b.ID, adminToken, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"requests":[{"time":"2026-01-18T13:02:00.000Z","request_id":"`+f.ids[3]+`","key":"`+f.b.ID+`",
		"model":"o4-mini","route":"`+first.Requests[0].Route+`","upstream":"/","status":200,"latency_ms":`+jsonInt(page("?key=" + f.b.ID).Requests[0].Latency.Milliseconds())+`,
		"input_tokens":400,"output_tokens":100,"cache_read_tokens":600,"cache_write_tokens":0,"reasoning_tokens":200,
		"cost_usd":0.001925,"estimated":false}]}`, string(body), "no team, no next_cursor: both left out")

	require.Equal(t, []string{f.ids[2], f.ids[1], f.ids[0]}, ids(page("?key="+f.a.ID)))
	require.Equal(t, []string{f.ids[2], f.ids[1], f.ids[0]}, ids(page("?team="+f.team)))
	require.Equal(t, []string{f.ids[1], f.ids[0]}, ids(page("?model="+claudeModel)))
	require.Equal(t, []string{f.ids[2]}, ids(page("?model="+openAIModel+"&team="+f.team)))
	require.Equal(t, newest, ids(page("?status=200")))
	require.Empty(t, page("?status=429").Requests, "refusals are counted, not entered")
	require.Equal(t, []string{f.ids[1]}, ids(page("?from=2026-01-18T13:00:00Z&to=2026-01-18T13:01:00Z")))
	resp, body = e.admin("GET", "/admin/requests?to=2026-01-18T12:00:00Z", adminToken, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"requests":[]}`, string(body))
}

// requireRoute requires that route, an entry's, is that of a request to
// path: the path itself, or the name of its endpoint.
func requireRoute(t *testing.T, path, route string) {
	t.Helper()
	names := map[string]string{"/v1/chat/completions": "chat completions", "/v1/messages": "messages"}
	require.Contains(t, []string{path, names[path]}, route)
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// getCSV sends an admin GET asking for CSV and returns the response and
// its records.
func getCSV(t *testing.T, e *env, path string) (*http.Response, [][]string) {
	t.Helper()
	req, err := http.NewRequest("GET", e.srv.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Accept", "text/csv, application/json;q=0.5")
	resp, body := e.do(req)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
	recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	require.NoError(t, err, string(body))
	return resp, recs
}

// TestAdminSpendCSV: with Accept: text/csv both routes answer CSV, with
// the grouped columns then the counters, or the entries' JSON fields in
// their order; the next page's cursor in X-Next-Cursor; a model name a
// spreadsheet would run as a formula is made text.
func TestAdminSpendCSV(t *testing.T) {
	e := spendEnv(t, Options{})
	_, secret := e.key("k", 1e9)
	const evil = "=cmd|' /c calc'!A1"
	for _, model := range []string{openAIModel, "@SUM(A1)", evil} {
		resp, body := e.call("POST", "/v1/chat/completions", secret, map[string]any{"model": model, "max_tokens": 10})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		e.clock.Advance(time.Second)
	}
	k := adminOK[admin.Spend](e, "GET", "/admin/spend?group_by=key", nil, http.StatusOK).Rows[0].Key

	_, recs := getCSV(t, e, "/admin/spend?group_by=model,day")
	require.Equal(t, [][]string{
		{"model", "day", "requests", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd", "refused"},
		{"'" + evil, "2026-01-18", "1", "400", "100", "600", "0", "200", "0", "0"},
		{"'@SUM(A1)", "2026-01-18", "1", "400", "100", "600", "0", "200", "0", "0"},
		{openAIModel, "2026-01-18", "1", "400", "100", "600", "0", "200", "0.001925", "0"},
	}, recs, "the unpriced models cost nothing (no budget)")
	_, recs = getCSV(t, e, "/admin/spend")
	require.Equal(t, [][]string{{"requests", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd", "refused"}, {"3", "1200", "300", "1800", "0", "600", "0.001925", "0"}}, recs)

	resp, recs := getCSV(t, e, "/admin/requests?limit=2")
	require.Equal(t, admin.RequestColumns, recs[0])
	require.Len(t, recs, 3)
	p := adminOK[admin.Requests](e, "GET", "/admin/requests?limit=2", nil, http.StatusOK)
	require.Equal(t, p.NextCursor, resp.Header.Get(admin.NextCursorHeader))
	require.NotEmpty(t, p.NextCursor)
	require.Equal(t, []string{"2026-01-18T12:00:02.000Z", p.Requests[0].RequestID, *k, "", "'" + evil, p.Requests[0].Route, "/", "200",
		jsonInt(p.Requests[0].Latency.Milliseconds()), "400", "100", "600", "0", "200", "0", "false", ""}, recs[1])
	_, recs = getCSV(t, e, "/admin/requests?cursor="+url.QueryEscape(p.NextCursor))
	require.Len(t, recs, 2)
	require.Equal(t, "0.001925", recs[1][14])

	// The columns are the JSON's fields, in order.
	b, err := json.Marshal(ledger.Entry{Team: "t", Upstream: "u", EndUser: "e"})
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	_, err = dec.Token() // {
	require.NoError(t, err)
	var fields []string
	for dec.More() {
		name, err := dec.Token()
		require.NoError(t, err)
		fields = append(fields, name.(string))
		var value json.RawMessage
		require.NoError(t, dec.Decode(&value))
	}
	require.Equal(t, admin.RequestColumns, fields)
}

// TestAdminSpendBadParams: every wrong parameter gets 400 naming it, an
// unknown one too; no admin token 401; no ledger 404.
func TestAdminSpendBadParams(t *testing.T) {
	e := spendEnv(t, Options{})
	for query, want := range map[string]string{
		"/admin/spend?from=yesterday":                   `from: "yesterday": want an RFC 3339 instant`,
		"/admin/spend?to=2026-13-01":                    `to: "2026-13-01"`,
		"/admin/spend?from=2026-01-19&to=2026-01-18":    "from: 2026-01-19T00:00:00Z is not before to 2026-01-18T00:00:00Z",
		"/admin/spend?from=1990-01-01":                  "from: 1990-01-01T00:00:00Z: a range of",
		"/admin/spend?from=2027-01-01":                  "from: 2027-01-01T00:00:00Z is not before to",
		"/admin/spend?group_by=week":                    `group_by: "week": want key, team, model, end_user, day or hour`,
		"/admin/spend?group_by=key,":                    `group_by: "": want key`,
		"/admin/spend?group_by=key&group_by=key":        `group_by: "key" given twice`,
		"/admin/spend?group_by=day,hour":                "group_by: day and hour: choose one",
		"/admin/spend?key=a&key=b":                      "key: given more than once",
		"/admin/spend?frm=2026-01-01":                   `unknown parameter "frm": the parameters are from, to, group_by, key, team, model, end_user`,
		"/admin/spend?limit=0":                          `limit: "0": want a number of groups, 1 to 1000`,
		"/admin/spend?limit=1&cursor=x":                 `unknown parameter "cursor"`,
		"/admin/spend?a=%zz":                            "the query does not parse",
		"/admin/requests?limit=0":                       `limit: "0": want a number of requests, 1 to 1000`,
		"/admin/requests?limit=1001":                    `limit: "1001"`,
		"/admin/requests?limit=ten":                     `limit: "ten"`,
		"/admin/requests?status=42":                     `status: "42": want an HTTP status, 100 to 999`,
		"/admin/requests?status=ok":                     `status: "ok"`,
		"/admin/requests?cursor=bogus":                  `cursor: "bogus": not one this ledger gave`,
		"/admin/requests?from=2026-01-18T25:00:00Z":     `from: "2026-01-18T25:00:00Z"`,
		"/admin/requests?to=2026-01-18&from=2026-01-18": "from: 2026-01-18T00:00:00Z is not before to",
		"/admin/requests?group_by=key":                  `unknown parameter "group_by": the parameters are key, team, model, end_user, status, from, to, limit, cursor`,
		"/admin/requests?model=a&model=b":               "model: given more than once",
	} {
		m := e.adminFails("GET", query, nil, http.StatusBadRequest, "invalid_parameter", want)
		require.NotContains(t, m["message"], "invalid argument", query)
		require.NotContains(t, m["message"], "ledger:", query)
	}
	// A "+" of an offset that was not escaped reads as a space: taken as "+".
	got := adminOK[admin.Spend](e, "GET", "/admin/spend?from=2026-01-18T01:00:00+01:00&group_by=hour", nil, http.StatusOK)
	require.Equal(t, start.Add(-12*time.Hour), got.From)

	for _, path := range []string{"/admin/spend", "/admin/requests"} {
		resp, body := e.admin("GET", path, "", nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
		require.Equal(t, "missing_admin_token", apiError(t, body, "authentication_error")["code"])
		resp, body = e.admin("GET", path, "wrong", nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
		require.Equal(t, "invalid_admin_token", apiError(t, body, "authentication_error")["code"])
		e.adminFails("POST", path, nil, http.StatusMethodNotAllowed, "method_not_allowed", "allowed: GET, HEAD")
	}

	off := spendEnv(t, Options{NoLedger: true})
	require.Nil(t, off.gw.Ledger())
	for _, path := range []string{"/admin/spend", "/admin/requests?limit=5", "/admin/spend?bogus=1"} {
		off.adminFails("GET", path, nil, http.StatusNotFound, "no_ledger", "the gateway runs without a spend ledger")
	}
	require.NoError(t, off.gw.Close(context.Background()))
}

// TestNewAdminSpendJSON: a row shows the dimensions grouped by and no
// other, money as a decimal number.
func TestNewAdminSpendJSON(t *testing.T) {
	at := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	s := ledger.Spend{From: at, To: at.Add(time.Hour), GroupBy: []string{"hour", "team"}, Rows: []ledger.Row{
		{Key: "ignored", Team: "", Model: "m", Day: at, Totals: ledger.Totals{Requests: 2, Cost: pricing.USD(125_000_000)}},
	}}
	b, err := json.Marshal(admin.NewSpend(s))
	require.NoError(t, err)
	require.JSONEq(t, `{"from":"2026-11-26T14:00:00Z","to":"2026-11-26T15:00:00Z","group_by":["hour","team"],
		"rows":[{"team":"","hour":"2026-11-26T14:00:00Z","requests":2,"input_tokens":0,"output_tokens":0,"cache_read_tokens":0,
		"cache_write_tokens":0,"reasoning_tokens":0,"cost_usd":0.125,"refused":0}],
		"total":{"requests":0,"input_tokens":0,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"reasoning_tokens":0,"cost_usd":0,"refused":0}}`,
		string(b))
	s.GroupBy = []string{"day", "model", "key"}
	a := admin.NewSpend(s)
	require.Equal(t, admin.SpendRow{Key: strp("ignored"), Model: strp("m"), Day: strp("2026-11-26"),
		Counters: admin.Counters{Requests: 2, CostUSD: pricing.USD(125_000_000)}}, a.Rows[0])
}
