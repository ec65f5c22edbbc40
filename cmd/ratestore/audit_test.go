package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/internal/redistest"
)

// auditTestToken is the admin token of the audit command's gateways.
const auditTestToken = "audit-command-token-0123456789abcdef"

// at runs the command line with --db at the clock instant t (each
// command of the CLI opens the database anew, as a separate process
// would, at its own instant), and requires it to succeed.
func (e *env) at(t time.Time, args ...string) result {
	e.t.Helper()
	var stdout, stderr bytes.Buffer
	cfg := config{Now: func() time.Time { return t }, Terminal: func(io.Writer) bool { return false }}
	code := run(context.Background(), append([]string{"--db", e.db}, args...), strings.NewReader(""), &stdout, &stderr, cfg)
	require.Equal(e.t, exitOK, code, "%v: %s", args, stderr.String())
	return result{code, stdout.String(), stderr.String()}
}

// jsonAt is at with --json, decoding the output into a new T.
func jsonAt[T any](e *env, t time.Time, args ...string) T {
	e.t.Helper()
	r := e.at(t, append(args, "--json")...)
	var v T
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(e.t, dec.Decode(&v), r.stdout)
	return v
}

// TestAuditCommand: each command that changes a key or team records one
// event of the command line ("cli"), which the audit command prints,
// newest first, a page at a time, by target; reads record nothing, and no
// secret is printed.
func TestAuditCommand(t *testing.T) {
	e := newEnv(t)
	clock := now
	step := func() time.Time { clock = clock.Add(time.Second); return clock }
	team := jsonAt[admin.Team](e, step(), "teams", "create", "--name", "t1", "--window", "1h=5000").ID
	created := jsonAt[admin.Created](e, step(), "keys", "create", "--name", "k1", "--limit", "1000", "--team", team)
	key := created.Key.ID
	secrets := []string{created.Secret}
	e.at(step(), "keys", "set-limit", key, "2000")
	e.at(step(), "keys", "set-expiry", key, "720h")
	e.at(step(), "keys", "disable", key)
	e.at(step(), "keys", "enable", key)
	secrets = append(secrets, jsonAt[admin.Created](e, step(), "keys", "rotate", key, "--grace", "1h").Secret)
	e.at(step(), "teams", "set", team, "--rpm", "10")
	e.at(step(), "keys", "list")
	e.at(step(), "keys", "show", key)
	e.at(step(), "keys", "set-limit", key, "--team", "")
	e.at(step(), "keys", "delete", key)
	e.at(step(), "teams", "delete", team)

	p := jsonAt[admin.AuditPage](e, step(), "audit")
	require.Empty(t, p.NextCursor)
	var got []string
	for _, ev := range p.Events {
		require.Equal(t, admin.ActorCLI, ev.Actor)
		require.Empty(t, ev.Address)
		got = append(got, ev.Action+" "+ev.Target)
	}
	require.Equal(t, []string{
		"team.delete " + team, "key.delete " + key, "key.update " + key, "team.update " + team, "key.rotate " + key,
		"key.enable " + key, "key.disable " + key, "key.update " + key, "key.update " + key, "key.create " + key, "team.create " + team,
	}, got)
	require.JSONEq(t, `{"windows":{"from":[{"limit":1000,"window":"5h0m0s","bucket":"5m0s"}],"to":[{"limit":2000,"window":"5h0m0s","bucket":"5m0s"}]}}`,
		string(must(json.Marshal(p.Events[8].Changes))))
	require.JSONEq(t, `{"expires_at":{"from":null,"to":"2026-02-17T12:00:04Z"}}`, string(must(json.Marshal(p.Events[7].Changes))))

	byKey := jsonAt[admin.AuditPage](e, step(), "audit", "--target", key)
	require.Len(t, byKey.Events, 8)
	first := jsonAt[admin.AuditPage](e, step(), "audit", "--limit", "4")
	require.Equal(t, p.Events[:4], first.Events)
	next := jsonAt[admin.AuditPage](e, step(), "audit", "--limit", "4", "--cursor", first.NextCursor)
	require.Equal(t, p.Events[4:8], next.Events)

	text := e.at(step(), "audit", "--limit", "4").stdout
	require.Contains(t, text, "TIME                  ACTOR  ADDRESS  ACTION")
	require.Contains(t, text, "key.update   "+key+"   team \"team_")
	require.Contains(t, text, "more: add --cursor "+first.NextCursor)
	all := e.at(step(), "audit").stdout + string(must(json.Marshal(p)))
	for _, s := range secrets {
		require.NotContains(t, all, s)
	}
	require.Equal(t, "no changes\n", e.at(step(), "audit", "--target", "key_0123456789abcdef").stdout)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestAuditCommandErrors: a parameter out of range is a usage error naming
// the flag.
func TestAuditCommandErrors(t *testing.T) {
	e := newEnv(t)
	e.ok("teams", "create", "--name", "t1", "--window", "1h=5000")
	for _, c := range []struct{ args, msg string }{
		{"--limit 0", "audit: --limit: \"0\": want a number of events, 1 to 1000"},
		{"--from 2020-01-01", "audit: --from: 2020-01-01T00:00:00Z is before the retention's start: want 2024-12-14T12:00:00Z or later (events are kept 400 days)"},
		{"--to 2026-01-20", "audit: --to: 2026-01-20T00:00:00Z is past now + 1 day"},
		{"--from 2026-01-18 --to 2026-01-17", "audit: --from: 2026-01-18T00:00:00Z is not before to"},
		{"--target a/b", "audit: --target: \"a/b\": want a key's or team's id"},
		{"--cursor x", "audit: --cursor: \"x\": not one this log gave"},
	} {
		r := e.run(append([]string{"audit"}, strings.Fields(c.args)...)...)
		require.Equal(t, exitUsage, r.code, "%s: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg)
	}
}

// TestAuditGateway: changes through a gateway's admin API are the admin
// token's, which the audit command reads through it; the gateway keeps
// events for --audit-retention, which bounds a query's range.
func TestAuditGateway(t *testing.T) {
	t.Setenv(adminTokenEnv, auditTestToken)
	e := newEnv(t)
	e.at(now.Add(-time.Hour), "keys", "create", "--name", "before", "--limit", "10")
	g := e.startGateway("--upstream", "http://127.0.0.1:1", "--audit-retention", "2d")
	base := "http://" + g.out.Listen
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "k", "--limit", "10", "--admin", base)
	p := jsonOf[admin.AuditPage](e, "audit", "--admin", base)
	require.Len(t, p.Events, 2)
	require.Equal(t, []string{admin.ActorToken, admin.ActionKeyCreate, created.Key.ID}, []string{p.Events[0].Actor, p.Events[0].Action, p.Events[0].Target})
	require.Equal(t, admin.ActorCLI, p.Events[1].Actor, "the command line's, before the gateway held the database")
	r := e.run("audit", "--admin", base, "--from", now.Add(-72*time.Hour).Format(time.RFC3339))
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "(events are kept 2 days)")
	resp, body := send(t, "GET", base+"/admin/audit?"+url.Values{"target": {created.Key.ID}}.Encode(), "", auditTestToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"actor":"admin-token"`)
	require.NotContains(t, body, created.Secret)
	require.Equal(t, exitOK, g.stop())
	require.NotContains(t, g.stderr.String(), created.Secret)
	require.NotContains(t, g.stderr.String(), auditTestToken)

	r = e.run("gateway", "--upstream", "http://127.0.0.1:1", "--audit-retention", "0d")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `-audit-retention: "0d": want a whole number of days`)
}

// TestAuditConsole: the read-only console command shows the audit log and
// writes nothing to it, nor drops the events past its retention.
func TestAuditConsole(t *testing.T) {
	e := newEnv(t)
	e.at(now.AddDate(-2, 0, 0), "teams", "create", "--name", "old", "--window", "1h=5000")
	e.ok("teams", "create", "--name", "new", "--window", "1h=5000")
	records := func() int {
		n := 0
		for _, r := range e.records() {
			if strings.HasPrefix(string(r.Key), "A/") {
				n++
			}
		}
		return n
	}
	require.Equal(t, 4, records())
	t.Setenv(adminTokenEnv, auditTestToken)
	g := e.startCommand("console", "--listen", "127.0.0.1:0")
	var out consoleOut
	require.NoError(t, json.Unmarshal([]byte(g.stdout.String()), &out))
	resp, body := send(t, "GET", "http://"+out.Listen+"/admin/audit", "", auditTestToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var p admin.AuditPage
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Len(t, p.Events, 1, "the old one is past the retention")
	require.Equal(t, admin.ActionTeamCreate, p.Events[0].Action)
	require.Equal(t, exitOK, g.stop())
	require.Equal(t, 4, records(), "nothing recorded, nothing swept")
}

// TestAuditRedis: the command line's changes to the keys in a Redis are
// recorded there, and read from there.
func TestAuditRedis(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "k", "--limit", "10", "--redis", srv.URL())
	e.ok("keys", "disable", created.Key.ID, "--redis", srv.URL())
	p := jsonOf[admin.AuditPage](e, "audit", "--redis", srv.URL(), "--target", created.Key.ID)
	require.Len(t, p.Events, 2)
	// The two commands ran at the tests' one instant, as writers of their
	// own: their order is the writers', not theirs.
	i := slices.IndexFunc(p.Events, func(e audit.Event) bool { return e.Action == admin.ActionKeyDisable })
	require.GreaterOrEqual(t, i, 0, "%+v", p.Events)
	require.Equal(t, []audit.Change{{From: json.RawMessage("false"), To: json.RawMessage("true")}}, []audit.Change{p.Events[i].Changes["disabled"]})
	e.requireNoDB()
}
