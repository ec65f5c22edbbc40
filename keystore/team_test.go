package keystore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
)

// teamOf creates a team of pol and n keys in it, each of a million tokens
// per 5 hours, and returns the team and the keys' ids and secrets.
func (e *env) teamOf(pol keystore.Policy, n int) (keystore.Team, []string, []string) {
	e.t.Helper()
	t, err := e.ks.CreateTeam(ctx, keystore.TeamSpec{Name: "team-a", Policy: pol})
	require.NoError(e.t, err)
	var ids, secrets []string
	for range n {
		k, secret := e.createSpec(keystore.Spec{Name: "member", Team: t.ID, Policy: keystore.Policy{
			Windows: []keystore.Window{{Limit: 1_000_000, Window: 5 * time.Hour}},
		}})
		require.Equal(e.t, t.ID, k.Team)
		ids, secrets = append(ids, k.ID), append(secrets, secret)
	}
	return t, ids, secrets
}

// TestTeamWindow: a team's token window counts the requests of all its
// keys; a request that it has no room for is refused naming the team, and
// takes nothing from its key; Finish charges the key and the team.
func TestTeamWindow(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		team, ids, secrets := e.teamOf(keystore.Policy{
			Windows:           []keystore.Window{{Limit: 100, Window: time.Hour}},
			RequestsPerMinute: 1000,
		}, 2)
		a := e.admit(secrets[0], keystore.Request{Reserve: 80})
		e.finish(a, 70)

		_, err := e.ks.Admit(ctx, secrets[1], keystore.Request{Reserve: 31})
		var d *keystore.Denial
		require.ErrorAs(t, err, &d)
		require.Equal(t, "window", d.Reason)
		require.Equal(t, team.ID, d.Team)
		require.ErrorContains(t, err, "team "+team.ID)
		require.Zero(t, e.usage(ids[1]).Used, "a refusal by the team takes nothing from the key")

		a = e.admit(secrets[1], keystore.Request{Reserve: 30})
		require.Equal(t, int64(0), a.Limits().Tokens.Remaining, "the team's room, the tighter")
		e.finish(a, 30)
		u, err := e.ks.TeamUsage(ctx, team.ID)
		require.NoError(t, err)
		require.Equal(t, int64(100), u.Windows[0].Used)
		require.Equal(t, []int64{70, 30}, []int64{e.usage(ids[0]).Used, e.usage(ids[1]).Used})

		e.reopen()
		got, err := e.ks.GetTeam(ctx, team.ID)
		require.NoError(t, err)
		require.Equal(t, team, got)
		u, err = e.ks.TeamUsage(ctx, team.ID)
		require.NoError(t, err)
		require.Equal(t, int64(100), u.Windows[0].Used, "kept across a restart")
		require.Equal(t, team.ID, e.get(ids[0]).Team)
	})
}

// TestTeamBudgetConcurrent: 40 requests at once from 4 keys of a team with
// a $1.00 budget, each costing $0.10: exactly 10 are admitted.
func TestTeamBudgetConcurrent(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		team, _, secrets := e.teamOf(keystore.Policy{
			Windows: []keystore.Window{{Limit: 1e9, Window: time.Hour}},
			Budgets: []keystore.Budget{{Limit: pricing.Dollar, Window: 24 * time.Hour}},
		}, 4)
		admitted := e.spendAtOnce(40, cents(10), secrets...)
		require.Equal(t, 10, admitted)
		u, err := e.ks.TeamUsage(ctx, team.ID)
		require.NoError(t, err)
		require.Equal(t, pricing.Dollar, u.Budgets[0].Spent)
	})
}

// TestTeamChanges: a team's models refuse a model its key allows; a
// change of the team's policy, and moving a key out of its team, take
// effect on the next request; a team with keys cannot be deleted.
func TestTeamChanges(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		team, ids, secrets := e.teamOf(keystore.Policy{
			Windows: []keystore.Window{{Limit: 10, Window: time.Hour}},
			Models:  []string{"gpt-*"},
		}, 1)
		_, err := e.ks.Admit(ctx, secrets[0], keystore.Request{Model: "claude-x"})
		require.ErrorIs(t, err, keystore.ErrModel)
		_, err = e.ks.Admit(ctx, secrets[0], keystore.Request{Model: "gpt-4o", Reserve: 11})
		require.ErrorIs(t, err, keystore.ErrLimited)

		_, err = e.ks.UpdateTeam(ctx, team.ID, func(s *keystore.TeamSpec) error {
			s.Policy.Windows[0].Limit = 20
			return nil
		})
		require.NoError(t, err)
		e.finish(e.admit(secrets[0], keystore.Request{Model: "gpt-4o", Reserve: 11}), 11)

		err = e.ks.DeleteTeam(ctx, team.ID)
		require.ErrorIs(t, err, keystore.ErrInvalid)
		require.ErrorContains(t, err, ids[0])
		var inUse *keystore.TeamInUseError
		require.ErrorAs(t, err, &inUse)
		require.Equal(t, keystore.TeamInUseError{Team: team.ID, Keys: 1, Example: ids[0]}, *inUse)

		_, err = e.ks.Update(ctx, ids[0], func(s *keystore.Spec) error { s.Team = ""; return nil })
		require.NoError(t, err)
		e.admit(secrets[0], keystore.Request{Model: "claude-x", Reserve: 100})
		require.NoError(t, e.ks.DeleteTeam(ctx, team.ID))
		_, err = e.ks.GetTeam(ctx, team.ID)
		require.ErrorIs(t, err, keystore.ErrNotFound)

		_, _, err = e.ks.Create(ctx, keystore.Spec{Team: team.ID, TokenLimit: 1})
		var fe *keystore.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "Team", fe.Field)
	})
}
