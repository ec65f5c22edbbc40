package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
)

// TestKeysSubLimits: --model-limit, the --end-user-* flags and --policy
// set a key's model limits and end users; keys set-limit changes and
// drops them; a bad value is a usage error naming the flag (or the
// file's field) and creates nothing.
func TestKeysSubLimits(t *testing.T) {
	e := newEnv(t)
	k := jsonOf[admin.Created](e, "keys", "create", "--name", "app", "--window", "5h=100000",
		"--model-limit", "gpt-4o*:5h=10000", "--model-limit", "gpt-4o*:24h=50000/1h",
		"--end-user-window", "24h=20000", "--end-user-budget", "1=day", "--end-user-max-concurrent", "2", "--end-user-required", "true").Key
	require.Equal(t, []admin.ModelLimit{{Models: []string{"gpt-4o*"}, Budgets: []admin.BudgetRequest{},
		Windows: []admin.WindowRequest{{Limit: 10000, Window: "5h0m0s", Bucket: "5m0s"}, {Limit: 50000, Window: "24h0m0s", Bucket: "1h0m0s"}}}}, k.ModelLimits)
	require.Equal(t, &admin.EndUsers{Windows: []admin.WindowRequest{{Limit: 20000, Window: "24h0m0s", Bucket: "24m0s"}},
		Budgets: []admin.BudgetRequest{{LimitUSD: 1e9, Period: "day", Timezone: "UTC"}}, MaxConcurrent: 2, Required: true}, k.EndUsers)
	show := e.ok("keys", "show", k.ID).stdout
	require.Contains(t, show, "model limit:     gpt-4o*: 10000 tokens/5h, 50000 tokens/24h")
	require.Contains(t, show, "end users:       20000 tokens/24h, $1/day, 2 in flight each; required")

	k = jsonOf[admin.Key](e, "keys", "set-limit", k.ID, "--drop-model-limit", "gpt-4o*", "--model-limit", "o1:1h=5", "--end-user-rpm", "3")
	require.Len(t, k.ModelLimits, 1)
	require.Equal(t, []string{"o1"}, k.ModelLimits[0].Models)
	require.EqualValues(t, 3, k.EndUsers.RequestsPerMinute)
	require.Len(t, k.EndUsers.Windows, 1, "the rest of the end users' limits stay")
	k = jsonOf[admin.Key](e, "keys", "set-limit", k.ID, "--drop-end-users")
	require.Nil(t, k.EndUsers)
	require.Len(t, k.Windows, 1)

	file := filepath.Join(e.dir, "policy.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"windows":[{"limit":7,"window":"1h"}],"end_users":{"requests_per_minute":9}}`), 0o600))
	f := jsonOf[admin.Created](e, "keys", "create", "--name", "f", "--policy", file, "--end-user-max-concurrent", "1").Key
	require.EqualValues(t, 7, f.Windows[0].Limit)
	require.EqualValues(t, 9, f.EndUsers.RequestsPerMinute)
	require.Equal(t, 1, f.EndUsers.MaxConcurrent)

	require.NoError(t, os.WriteFile(file, []byte(`{"model_limits":[{"models":["a"],"windows":[{"limit":0,"window":"1h"}]}]}`), 0o600))
	for args, msg := range map[*[]string]string{
		{"--model-limit", "gpt-4o"}:                      "--model-limit",
		{"--model-limit", "a:5h"}:                        "want DURATION=LIMIT",
		{"--end-user-window", "24h=-1"}:                  "--end-user-window",
		{"--end-user-required", "maybe"}:                 "--end-user-required",
		{"--end-user-max-concurrent", "x"}:               "--end-user-max-concurrent",
		{"--policy", file}:                               "model_limits[0].windows[0].limit",
		{"--policy", filepath.Join(e.dir, "none.json")}:  "--policy",
		{"--model-limit", "a:1h=1", "--model-limit", ""}: "--model-limit",
	} {
		r := e.run(append([]string{"keys", "create", "--name", "bad"}, *args...)...)
		require.Equal(t, exitUsage, r.code, "%v", *args)
		require.Contains(t, r.stderr, msg, "%v", *args)
	}
	require.Len(t, jsonOf[admin.Keys](e, "keys", "list").Keys, 2, "nothing was created")
}

// TestEndUsersCommand: end-users lists a key's end users through a
// running gateway's admin API as the route answers, and the same on the
// closed database; with a NAME, one; --q searches by the name's start.
func TestEndUsersCommand(t *testing.T) {
	e := newEnv(t)
	k := jsonOf[admin.Created](e, "keys", "create", "--name", "app", "--window", "5h=1000000", "--end-user-window", "24h=20000")
	t.Setenv(adminTokenEnv, testAdminToken)
	g := e.startGateway("--upstream", spendUpstream(t))
	base := "http://" + g.out.Listen
	for _, user := range []string{"alice", "bob", "alice", "carol"} {
		body := `{"model":"o4-mini","max_tokens":10,"user":"` + user + `"}`
		resp, b := send(t, "POST", base+"/v1/chat/completions", body, k.Secret)
		require.Equal(t, http.StatusOK, resp.StatusCode, b)
	}
	viaAdmin := func(args ...string) []string { return append(args, "--admin", base) }
	page := e.ok(viaAdmin("end-users", k.Key.ID, "--json")...).stdout
	resp, body := send(t, "GET", base+"/admin/keys/"+k.Key.ID+"/end-users", "", testAdminToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.JSONEq(t, body, page)
	var p admin.EndUserPage
	require.NoError(t, json.Unmarshal([]byte(page), &p))
	require.Len(t, p.EndUsers, 3)
	require.Equal(t, "alice", p.EndUsers[0].ID)
	require.EqualValues(t, 2, p.EndUsers[0].Requests)
	require.EqualValues(t, 2600, p.EndUsers[0].Windows[0].Used)
	text := e.ok(viaAdmin("end-users", k.Key.ID, "--q", "b")...).stdout
	require.Contains(t, text, "bob")
	require.NotContains(t, text, "alice")
	one := e.ok(viaAdmin("end-users", k.Key.ID, "carol", "--json")...).stdout

	require.Equal(t, exitOK, g.stop(), g.stderr.String())
	require.JSONEq(t, page, e.ok("end-users", k.Key.ID, "--json").stdout)
	require.JSONEq(t, one, e.ok("end-users", k.Key.ID, "carol", "--json").stdout)
	all := e.ok("end-users", k.Key.ID, "--all", "--limit", "1").stdout
	for _, name := range []string{"alice", "bob", "carol"} {
		require.Contains(t, all, name)
	}
	r := e.run("end-users", k.Key.ID, "nobody")
	require.Equal(t, exitError, r.code)
}
