package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// spendUpstream is an upstream that reports, for /v1/messages, 100 input
// tokens, 2000 written to the cache, 10000 read from it and 50 output
// (claude-sonnet-4: $0.012675); for any other path 1000 prompt tokens of
// which 600 cached and 300 completion of which 200 reasoning (o4-mini:
// $0.001925).
func spendUpstream(t *testing.T) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/messages" {
			io.WriteString(w, `{"type":"message","usage":{"input_tokens":100,"cache_creation_input_tokens":2000,"cache_read_input_tokens":10000,`+
				`"cache_creation":{"ephemeral_5m_input_tokens":1500,"ephemeral_1h_input_tokens":500},"output_tokens":50}}`)
			return
		}
		io.WriteString(w, `{"usage":{"prompt_tokens":1000,"completion_tokens":300,"total_tokens":1300,`+
			`"prompt_tokens_details":{"cached_tokens":600},"completion_tokens_details":{"reasoning_tokens":200}}}`)
	}))
	t.Cleanup(up.Close)
	return up.URL
}

// spendTraffic sends through the gateway at base: key a (in a team) two
// claude calls and an o4-mini one, key b one o4-mini call and a second,
// refused by its window (1000 tokens, charged 1300 by the first).
func spendTraffic(t *testing.T, base, secretA, secretB string) {
	for _, c := range []struct {
		path, secret, model string
		status              int
	}{
		{"/v1/messages", secretA, "claude-sonnet-4-20250514", http.StatusOK},
		{"/v1/messages", secretA, "claude-sonnet-4-20250514", http.StatusOK},
		{"/v1/chat/completions", secretA, "o4-mini", http.StatusOK},
		{"/v1/chat/completions", secretB, "o4-mini", http.StatusOK},
		{"/v1/chat/completions", secretB, "o4-mini", http.StatusTooManyRequests},
	} {
		resp, body := send(t, "POST", base+c.path, `{"model":"`+c.model+`","max_tokens":10}`, c.secret)
		require.Equal(t, c.status, resp.StatusCode, body)
	}
}

// spendKeys makes, on e's database, a team with key a in it and key b of
// 1000 tokens alone, and returns their ids and secrets.
func spendKeys(e *env, extra ...string) (team string, a, b admin.Created) {
	with := func(args ...string) []string { return append(args, extra...) }
	team = jsonOf[admin.Team](e, with("teams", "create", "--name", "t", "--window", "5h=1000000")...).ID
	a = jsonOf[admin.Created](e, with("keys", "create", "--name", "a", "--limit", "1000000", "--team", team)...)
	b = jsonOf[admin.Created](e, with("keys", "create", "--name", "b", "--limit", "1000")...)
	return team, a, b
}

// TestSpendCommands: spend and requests through a running gateway's admin
// API print what the routes answer (JSON and CSV alike), and the same on
// the database once the gateway has stopped; the gateway's ledger export
// holds a line per request.
func TestSpendCommands(t *testing.T) {
	e := newEnv(t)
	team, a, b := spendKeys(e)
	t.Setenv(adminTokenEnv, testAdminToken)
	export := filepath.Join(e.dir, "ledger.jsonl")
	g := e.startGateway("--upstream", spendUpstream(t), "--ledger-export", export, "--ledger-retention", "30d")
	base := "http://" + g.out.Listen
	spendTraffic(t, base, a.Secret, b.Secret)
	viaAdmin := func(args ...string) []string { return append(args, "--admin", base) }

	// Through the admin API: what the routes answer.
	byKeyModel := e.ok(viaAdmin("spend", "--group-by", "key", "--group-by", "model", "--json")...).stdout
	resp, body := send(t, "GET", base+"/admin/spend?group_by=key,model", "", testAdminToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.JSONEq(t, body, byKeyModel)
	var s admin.Spend
	require.NoError(t, json.Unmarshal([]byte(byKeyModel), &s))
	require.Equal(t, admin.Counters{Requests: 4, InputTokens: 200 + 800, OutputTokens: 100 + 200, CacheReadTokens: 20000 + 1200,
		CacheWriteTokens: 4000, ReasoningTokens: 400, CostUSD: 2*12675*pricing.Micro + 2*1925*pricing.Micro,
		Refused: 1, RefusedBy: map[string]int64{"window": 1}}, s.Total)
	require.Len(t, s.Rows, 3)
	byTeamCSV := e.ok(viaAdmin("spend", "--group-by", "team", "--csv")...).stdout
	resp, body = getAccept(t, base+"/admin/spend?group_by=team", "text/csv")
	require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, body, byTeamCSV)
	teamRows := [][]string{
		{"team", "requests", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd", "refused"},
		{"", "1", "400", "100", "600", "0", "200", "0.001925", "1"},
		{team, "3", "600", "200", "20600", "4000", "200", "0.027275", "0"},
	}
	require.Equal(t, teamRows, readCSV(t, byTeamCSV))
	allRequests := e.ok(viaAdmin("requests", "--json")...).stdout
	var page admin.Requests
	require.NoError(t, json.Unmarshal([]byte(allRequests), &page))
	require.Len(t, page.Requests, 4)
	require.Equal(t, b.Key.ID, page.Requests[0].Key, "newest first")
	firstTwo := e.ok(viaAdmin("requests", "--limit", "2", "--json")...).stdout
	var two admin.Requests
	require.NoError(t, json.Unmarshal([]byte(firstTwo), &two))
	require.Equal(t, page.Requests[:2], two.Requests)
	require.NotEmpty(t, two.NextCursor)
	requestsCSV := e.ok(viaAdmin("requests", "--csv", "--key", a.Key.ID)...).stdout
	text := e.ok(viaAdmin("spend", "--group-by", "model")...).stdout
	require.Contains(t, text, "claude-sonnet-4-20250514")
	require.Contains(t, text, "0.025350")
	require.Contains(t, text, "refused by: window 1\n")

	// Without --admin, the database is the gateway's.
	r := e.run("spend")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "use --admin")

	require.Equal(t, exitOK, g.stop(), g.stderr.String())
	require.Contains(t, g.stderr.String(), `"msg":"gateway: ledger export closed"`)
	require.Equal(t, entryIDs(page.Requests), exportIDs(t, export), "a line per request, in commit order")

	// On the closed database: the same.
	require.JSONEq(t, byKeyModel, e.ok("spend", "--group-by", "key,model", "--json").stdout)
	require.Equal(t, byTeamCSV, e.ok("spend", "--group-by", "team", "--csv").stdout)
	require.JSONEq(t, allRequests, e.ok("requests", "--json").stdout)
	require.JSONEq(t, firstTwo, e.ok("requests", "--json", "--limit", "2").stdout)
	var rest admin.Requests
	require.NoError(t, json.Unmarshal([]byte(e.ok("requests", "--json", "--cursor", two.NextCursor).stdout), &rest))
	require.Equal(t, page.Requests[2:], rest.Requests)
	require.Equal(t, requestsCSV, e.ok("requests", "--csv", "--key", a.Key.ID).stdout)
	require.Equal(t, text, e.ok("spend", "--group-by", "model").stdout)
	r = e.ok("requests", "--limit", "3")
	require.Contains(t, r.stdout, "more: add --cursor ")
	require.Contains(t, r.stdout, "o4-mini")
	r = e.ok("requests", "--csv", "--limit", "3")
	require.Contains(t, r.stderr, "more requests: add --cursor ")
	require.Len(t, readCSV(t, r.stdout), 4)
	// By end user: the gateway's requests named none, the row of end user "".
	var byUser admin.Spend
	require.NoError(t, json.Unmarshal([]byte(e.ok("spend", "--group-by", "end_user", "--json").stdout), &byUser))
	require.Len(t, byUser.Rows, 1)
	require.Equal(t, "", *byUser.Rows[0].EndUser)
	require.Equal(t, byUser.Total, byUser.Rows[0].Counters)
	require.Contains(t, e.ok("spend", "--end-user", "u-17").stdout, "no requests")
	require.Contains(t, e.ok("requests", "--end-user", "u-17").stdout, "no requests")
	require.Equal(t, "end_user", readCSV(t, requestsCSV)[0][len(admin.RequestColumns)-1])
	require.Equal(t, "spend from 2026-01-01T00:00:00Z to 2026-01-02T00:00:00Z\nno requests\n",
		e.ok("spend", "--from", "2026-01-01", "--to", "2026-01-02").stdout)
}

// getAccept is a GET of the admin API asking for accept.
func getAccept(t *testing.T, url, accept string) (*http.Response, string) {
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func readCSV(t *testing.T, s string) [][]string {
	recs, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	require.NoError(t, err, s)
	return recs
}

func entryIDs(es []ledger.Entry) map[string]bool {
	ids := map[string]bool{}
	for _, e := range es {
		ids[e.RequestID] = true
	}
	return ids
}

// exportIDs are the request ids of the lines of an export file.
func exportIDs(t *testing.T, path string) map[string]bool {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	ids := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e ledger.Entry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), sc.Text())
		ids[e.RequestID] = true
	}
	require.NoError(t, sc.Err())
	return ids
}

// TestSpendRedis: spend and requests read the ledger of gateways sharing a
// Redis.
func TestSpendRedis(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t)
	_, a, b := spendKeys(e, "--redis", srv.URL())
	g := e.startGateway("--upstream", spendUpstream(t), "--redis", srv.URL())
	spendTraffic(t, "http://"+g.out.Listen, a.Secret, b.Secret)
	require.Equal(t, exitOK, g.stop(), g.stderr.String())
	s := jsonOf[admin.Spend](e, "spend", "--redis", srv.URL(), "--group-by", "day")
	require.Equal(t, []string{"day"}, s.GroupBy)
	require.Len(t, s.Rows, 1)
	require.Equal(t, "2026-01-18", *s.Rows[0].Day)
	require.EqualValues(t, 4, s.Total.Requests)
	require.EqualValues(t, 1, s.Total.Refused)
	p := jsonOf[admin.Requests](e, "requests", "--redis", srv.URL(), "--model", "claude-sonnet-4-20250514")
	require.Len(t, p.Requests, 2)
	e.requireNoDB()
}

// TestSpendErrors: a wrong flag names itself, on the database and through
// the admin API alike; a gateway without a ledger says so.
func TestSpendErrors(t *testing.T) {
	e := newEnv(t)
	spendKeys(e)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"spend", "--from", "yesterday"}, `spend: --from: "yesterday": want an RFC 3339 instant`},
		{[]string{"spend", "--group-by", "week"}, `spend: --group-by: "week": want key, team, model, end_user, day or hour`},
		{[]string{"spend", "--group-by", "day", "--group-by", "hour"}, "spend: --group-by: day and hour: choose one"},
		{[]string{"spend", "--from", "2026-01-02", "--to", "2026-01-01"}, "spend: --from: 2026-01-02T00:00:00Z is not before to"},
		{[]string{"spend", "--csv", "--json"}, "spend: --csv and --json: give one"},
		{[]string{"requests", "--limit", "0"}, `requests: --limit: "0": want a number of requests, 1 to 1000`},
		{[]string{"requests", "--status", "x"}, `requests: --status: "x"`},
		{[]string{"requests", "--cursor", "bogus"}, `requests: --cursor: "bogus": not one this ledger gave`},
		{[]string{"requests", "--admin-token-file", "f"}, "--admin-token-file without --admin"},
		{[]string{"spend", "extra"}, "want no arguments"},
	} {
		r := e.run(c.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
	}

	t.Setenv(adminTokenEnv, testAdminToken)
	g := e.startGateway("--upstream", spendUpstream(t))
	r := e.run("spend", "--group-by", "week", "--admin", "http://"+g.out.Listen)
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `spend: --group-by: "week": want key, team, model, end_user, day or hour`)
	require.Equal(t, exitOK, g.stop())

	off := e.startGateway("--upstream", spendUpstream(t), "--no-ledger")
	r = e.run("requests", "--admin", "http://"+off.out.Listen)
	require.Equal(t, exitError, r.code, r.stderr)
	require.Contains(t, r.stderr, "404 Not Found: the gateway runs without a spend ledger")
	require.Equal(t, exitOK, off.stop())
}

// TestGatewayLedgerFlags: the gateway command's ledger flags that are
// wrong are refused before it starts.
func TestGatewayLedgerFlags(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--no-ledger", "--ledger-export", "x.jsonl"}, "--no-ledger keeps no ledger"},
		{[]string{"--no-ledger", "--ledger-retention", "30d"}, "--no-ledger keeps no ledger"},
		{[]string{"--ledger-retention", "0d"}, `"0d": want a whole number of days`},
		{[]string{"--ledger-retention", "soon"}, `invalid value "soon" for flag -ledger-retention`},
		{[]string{"--ledger-export-max-bytes", "0", "--ledger-export", "x"}, "--ledger-export-max-bytes 0: want a positive number"},
		{[]string{"--alert-thresholds", "0.5"}, "--alert-thresholds needs --alert-webhook"},
		{[]string{"--alert-webhook", "ftp://example.com/hook"}, "--alert-webhook"},
		{[]string{"--alert-webhook", "http://127.0.0.1:9/hook", "--alert-thresholds", "0.5,x"}, `"x": want a number`},
		{[]string{"--alert-webhook", "http://127.0.0.1:9/hook", "--alert-thresholds", "0"}, "--alert-webhook"},
		{[]string{"--redis-clock"}, "--redis-clock needs --redis"},
	} {
		r := e.run(append([]string{"gateway", "--upstream", "http://127.0.0.1:1"}, c.args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
	}
	r := e.run("gateway", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:-1", "--ledger-export", filepath.Join(e.dir, "x.jsonl"))
	require.Equal(t, exitError, r.code, r.stderr)
	e.requireNoDB() // a start that fails leaves neither database nor export behind

	for v, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "1d": 24 * time.Hour, "36h": 36 * time.Hour, "2160h": 2160 * time.Hour} {
		got, err := parseRetention(v)
		require.NoError(t, err, v)
		require.Equal(t, want, got, v)
	}
	for _, v := range []string{"", "d", "-1d", "1.5d", "0", "-1h", "36501d", "1e3d", "1w"} {
		_, err := parseRetention(v)
		require.Error(t, err, v)
	}
}

// TestSpendJSONDocumented: every field of the JSON output of spend and
// requests is named in its help.
func TestSpendJSONDocumented(t *testing.T) {
	k := "k"
	outputs := map[string]any{
		"spend": admin.Spend{Rows: []admin.SpendRow{{Key: &k, Team: &k, Model: &k, Day: &k, Hour: &k,
			Counters: admin.Counters{RefusedBy: map[string]int64{"window": 1}}}}},
		"requests": admin.Requests{Requests: []ledger.Entry{{Team: "t"}}, NextCursor: "c"},
	}
	for _, cmd := range commands {
		v, ok := outputs[cmd.name]
		if !ok {
			continue
		}
		b, err := json.Marshal(v)
		require.NoError(t, err)
		for _, name := range jsonNames(t, b) {
			require.Contains(t, cmd.json, `"`+name+`"`, cmd.name)
		}
	}
}

// jsonNames are the names of the fields of the JSON objects in b, at any
// depth.
func jsonNames(t *testing.T, b []byte) []string {
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	var names []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for name, sub := range v {
				if name != "window" { // a reason, in refused_by: an example
					names = append(names, name)
				}
				walk(sub)
			}
		case []any:
			for _, sub := range v {
				walk(sub)
			}
		}
	}
	walk(v)
	return names
}
