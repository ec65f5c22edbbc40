package main

import (
	"testing"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/stretchr/testify/require"
)

// teamLifecycle runs the team commands, and keys create --team, with the
// flags extra (none: on the database; --admin URL: through a gateway),
// and checks what they print.
func teamLifecycle(t *testing.T, e *env, extra ...string) {
	with := func(args ...string) []string { return append(args, extra...) }
	team := jsonOf[admin.Team](e, with("teams", "create", "--name", "research", "--window", "5h=1000",
		"--budget", "5=24h", "--rpm", "10", "--models", "gpt-*")...)
	require.Equal(t, admin.Team{
		ID: team.ID, Name: "research", Models: []string{"gpt-*"},
		Windows:           []admin.Window{{Limit: 1000, Window: "5h0m0s", Bucket: "5m0s", Remaining: 1000}},
		Budgets:           []admin.Budget{{LimitUSD: 5e9, Window: "24h0m0s", RemainingUSD: 5e9}},
		RequestsPerMinute: 10, CreatedAt: timePtr(now),
	}, team)
	require.Equal(t, []admin.Team{team}, jsonOf[admin.Teams](e, with("teams", "list")...).Teams)
	require.Contains(t, e.ok(with("teams", "list")...).stdout, team.ID+"  research  1000/5h        $5/24h   0\n")

	k := jsonOf[admin.Created](e, with("keys", "create", "--name", "k", "--limit", "100", "--team", team.ID)...).Key
	require.Equal(t, team.ID, k.Team)
	require.Equal(t, 1, jsonOf[admin.Team](e, with("teams", "show", team.ID)...).KeyCount)
	r := e.ok(with("teams", "show", team.ID)...)
	require.Contains(t, r.stdout, "keys:           1 (ratestore keys list --team "+team.ID+")\n")
	require.Contains(t, r.stdout, "budgets:\n")
	require.Contains(t, e.ok(with("keys", "show", k.ID)...).stdout, "team:            "+team.ID+"\n")

	set := jsonOf[admin.Team](e, with("teams", "set", team.ID, "--name", "r2", "--window", "1h=100", "--drop-budget", "24h", "--max-concurrent", "3")...)
	require.Equal(t, "r2", set.Name)
	require.Equal(t, []int64{1000, 100}, []int64{set.Windows[0].Limit, set.Windows[1].Limit})
	require.Empty(t, set.Budgets)
	require.Equal(t, []any{int64(10), 3, []string{"gpt-*"}}, []any{set.RequestsPerMinute, set.MaxConcurrent, set.Models}, "the rest stays")
	r = e.ok(with("teams", "set", team.ID, "--rpm", "0")...)
	require.Contains(t, r.stdout, "changed "+team.ID+": set its request rate to no limit\n")
	r = e.run(with("teams", "set", team.ID, "--drop-window", "168h")...)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "team "+team.ID+" has no 168h window")

	// Delete is refused while the key belongs, and done once it has left.
	r = e.run(with("teams", "delete", team.ID)...)
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, k.ID)
	out := jsonOf[admin.Key](e, with("keys", "set-limit", k.ID, "--team", "")...)
	require.Empty(t, out.Team)
	require.Equal(t, deleteOut{team.ID, true}, jsonOf[deleteOut](e, with("teams", "delete", team.ID)...))
	r = e.run(with("teams", "show", team.ID)...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, team.ID)
	require.Equal(t, "no teams\n", e.ok(with("teams", "list")...).stdout)
	r = e.run(with("keys", "create", "--name", "x", "--limit", "1", "--team", team.ID)...)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "no team has the id "+team.ID)
}

// TestTeams: the team commands on a closed database.
func TestTeams(t *testing.T) {
	teamLifecycle(t, newEnv(t))
}

// TestTeamsThroughAdmin: the team commands through the admin API of a
// running gateway, which holds the database.
func TestTeamsThroughAdmin(t *testing.T) {
	e := newEnv(t)
	g := e.startAdminGateway(testAdminToken)
	t.Setenv(adminTokenEnv, testAdminToken)
	teamLifecycle(t, e, "--admin", g.url)
}

// TestTeamsRedis: the team commands on the key store in a Redis, making
// no database file.
func TestTeamsRedis(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t)
	teamLifecycle(t, e, "--redis", srv.URL())
	e.requireNoDB()
}

// TestTeamsUsage: the team commands' usage errors.
func TestTeamsUsage(t *testing.T) {
	e := newEnv(t)
	for args, msg := range map[string][]string{
		"teams: want a subcommand: create, list, show, set, delete": {"teams"},
		`unknown command "teams frob"`:                              {"teams", "frob"},
		"teams create: --name is required":                          {"teams", "create", "--window", "1h=5"},
		"teams set: nothing to set":                                 {"teams", "set", "team_0000000000000000"},
	} {
		r := e.run(msg...)
		require.Equal(t, exitUsage, r.code, args)
		require.Contains(t, r.stderr, args)
	}
	r := e.ok("help", "teams")
	require.Contains(t, r.stdout, "teams set ID")
}
