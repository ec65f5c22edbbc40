package keystore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
)

func hour(limit int64) []keystore.Window {
	return []keystore.Window{{Limit: limit, Window: time.Hour}}
}

// TestModelLimits: a model limit counts the requests of its models only,
// in the same decision as the key's own windows; every matching entry
// applies; a refusal names the limit's models and takes nothing.
func TestModelLimits(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, s := e.createPolicy("m", keystore.Policy{
			Windows: hour(1000),
			ModelLimits: []keystore.ModelLimit{
				{Models: []string{"gpt-4o*"}, Windows: hour(100)},
				{Models: []string{"gpt-4o-mini"}, Windows: hour(500), MaxConcurrent: 1},
			},
		})
		a := e.admit(s, keystore.Request{Model: "gpt-4o", Reserve: 80})
		require.EqualValues(t, 20, a.Limits().Tokens.Remaining, "the model limit binds the headers")
		_, err := e.ks.Admit(ctx, s, keystore.Request{Model: "gpt-4o-mini", Reserve: 30})
		var d *keystore.Denial
		require.True(t, errors.As(err, &d), "%v", err)
		require.Equal(t, []string{"gpt-4o*"}, d.Models, "gpt-4o-mini matches both entries; the first refuses")
		require.Equal(t, "window", d.Reason)
		require.Contains(t, err.Error(), "limit of models gpt-4o*")
		require.EqualValues(t, 80, e.usage(k.ID).Used, "the refusal took nothing")

		// Another model counts in the key's window only.
		o := e.admit(s, keystore.Request{Model: "claude-3", Reserve: 800})
		e.finish(o, 800)
		e.finish(a, 10)
		m := e.admit(s, keystore.Request{Model: "gpt-4o-mini", Reserve: 50})
		_, err = e.ks.Admit(ctx, s, keystore.Request{Model: "gpt-4o-mini", Reserve: 1})
		require.ErrorAs(t, err, &d)
		require.Equal(t, "concurrency", d.Reason, "the mini entry's slot is taken")
		require.Equal(t, []string{"gpt-4o-mini"}, d.Models)
		e.finish(m, 50)
		e.finish(e.admit(s, keystore.Request{Model: "gpt-4o-mini", Reserve: 1}), 1)

		// Settled: 10 + 50 + 1 in the gpt-4o* entry, kept across a reopen.
		e.reopen()
		_, err = e.ks.Admit(ctx, s, keystore.Request{Model: "gpt-4o", Reserve: 40})
		require.ErrorAs(t, err, &d, "61 used, 40 more is over 100")
		e.admit(s, keystore.Request{Model: "gpt-4o", Reserve: 39})
		mu, err := e.ks.ModelUsage(ctx, k.ID)
		require.NoError(t, err)
		require.Len(t, mu, 2)
		require.EqualValues(t, 100, mu[0].Used, "61 charged and 39 held")
		require.Zero(t, mu[0].InFlight, "a limit without max_concurrent takes no slot: it counts none")
		require.EqualValues(t, 51, mu[1].Used, "the mini entry: 50 and 1")
	})
}

// TestEndUsers: each end user of a key has its own window, exact; the
// key's window counts them all; a refusal names the end user; a request
// without one is the key's own traffic; usage is read by name.
func TestEndUsers(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, s := e.createPolicy("eu", keystore.Policy{
			Windows:  hour(1000),
			EndUsers: keystore.EndUsers{Windows: hour(100), MaxConcurrent: 2},
		})
		for i := range 5 {
			a := e.admit(s, keystore.Request{EndUser: fmt.Sprintf("u-%d", i), Reserve: 100})
			require.EqualValues(t, 0, a.Limits().Tokens.Remaining, "each end user's own window binds")
			e.finish(a, 90)
		}
		_, err := e.ks.Admit(ctx, s, keystore.Request{EndUser: "u-3", Reserve: 11})
		var d *keystore.Denial
		require.ErrorAs(t, err, &d)
		require.Equal(t, "u-3", d.EndUser)
		require.Equal(t, "window", d.Reason)
		require.Contains(t, err.Error(), `end user "u-3" of key `+k.ID)
		require.Greater(t, d.RetryAfter, time.Duration(0))
		e.admit(s, keystore.Request{EndUser: "u-3", Reserve: 10})
		e.admit(s, keystore.Request{Reserve: 500}) // the key's own: no end user
		require.EqualValues(t, 450+10+500, e.usage(k.ID).Used)

		u, err := e.ks.EndUserUsage(ctx, k.ID, "u-3")
		require.NoError(t, err)
		require.EqualValues(t, 100, u.Used)
		require.Equal(t, 1, u.InFlight)
		u, err = e.ks.EndUserUsage(ctx, k.ID, "never-seen")
		require.NoError(t, err)
		require.Zero(t, u.Used)
		require.EqualValues(t, 100, u.Remaining)

		e.clock.Advance(time.Hour)
		e.admit(s, keystore.Request{EndUser: "u-3", Reserve: 100})
	})
}

// TestEndUsersConcurrency: an end user's max_concurrent caps its requests
// in flight, not the key's others.
func TestEndUsersConcurrency(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		_, s := e.createPolicy("c", keystore.Policy{EndUsers: keystore.EndUsers{MaxConcurrent: 1}})
		a := e.admit(s, keystore.Request{EndUser: "alice"})
		_, err := e.ks.Admit(ctx, s, keystore.Request{EndUser: "alice"})
		var d *keystore.Denial
		require.ErrorAs(t, err, &d)
		require.Equal(t, "concurrency", d.Reason)
		require.Equal(t, "alice", d.EndUser)
		e.admit(s, keystore.Request{EndUser: "bob"})
		e.admit(s, keystore.Request{})
		e.finish(a, 0)
		e.admit(s, keystore.Request{EndUser: "alice"})
	})
}

// TestEndUsersRequired: a policy that requires an end user refuses a
// request that names none, before any limit, and takes nothing.
func TestEndUsersRequired(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, s := e.createPolicy("r", keystore.Policy{Windows: hour(100), EndUsers: keystore.EndUsers{Required: true}})
		_, err := e.ks.Admit(ctx, s, keystore.Request{Reserve: 10})
		require.ErrorIs(t, err, keystore.ErrNoEndUser)
		var d *keystore.Denial
		require.ErrorAs(t, err, &d)
		require.Equal(t, "end_user", d.Reason)
		require.Negative(t, d.RetryAfter)
		require.Zero(t, e.usage(k.ID).Used)
		e.admit(s, keystore.Request{Reserve: 10, EndUser: "x"})
	})
}

// TestTeamEndUsers: a team's end-user limit counts an end user across
// the team's keys; a team's model limit counts its keys' requests
// together; refusals name the team.
func TestTeamEndUsers(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		tm, err := e.ks.CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: keystore.Policy{
			EndUsers:    keystore.EndUsers{Windows: hour(100)},
			ModelLimits: []keystore.ModelLimit{{Models: []string{"o1"}, RequestsPerMinute: 2}},
		}})
		require.NoError(t, err)
		_, s1 := e.createSpec(keystore.Spec{Name: "a", Team: tm.ID})
		k2, s2 := e.createSpec(keystore.Spec{Name: "b", Team: tm.ID})
		e.finish(e.admit(s1, keystore.Request{EndUser: "u", Reserve: 60}), 60)
		_, err = e.ks.Admit(ctx, s2, keystore.Request{EndUser: "u", Reserve: 41})
		var d *keystore.Denial
		require.ErrorAs(t, err, &d)
		require.Equal(t, tm.ID, d.Team)
		require.Equal(t, "u", d.EndUser)
		require.Contains(t, err.Error(), `end user "u" of team `+tm.ID)
		u, err := e.ks.EndUserUsage(ctx, k2.ID, "u")
		require.NoError(t, err)
		require.EqualValues(t, 60, u.Used, "the team's, read through a key without its own")

		e.admit(s1, keystore.Request{Model: "o1"})
		e.admit(s2, keystore.Request{Model: "o1"})
		_, err = e.ks.Admit(ctx, s1, keystore.Request{Model: "o1"})
		require.ErrorAs(t, err, &d)
		require.Equal(t, "rate", d.Reason)
		require.Equal(t, []string{"o1"}, d.Models)
		e.admit(s1, keystore.Request{Model: "o3"})
	})
}

// TestEndUserBudget: an end user's budget holds the request's cost and
// charges what it really cost.
func TestEndUserBudget(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		_, s := e.createPolicy("b", keystore.Policy{EndUsers: keystore.EndUsers{
			Budgets: []keystore.Budget{{Limit: pricing.USD(1e9), Window: 24 * time.Hour}}}})
		a := e.admit(s, keystore.Request{EndUser: "u", Cost: pricing.USD(8e8)})
		_, err := e.ks.Admit(ctx, s, keystore.Request{EndUser: "u", Cost: pricing.USD(3e8)})
		var d *keystore.Denial
		require.ErrorAs(t, err, &d)
		require.Equal(t, "budget", d.Reason)
		_, err = a.FinishSpend(ctx, 0, pricing.USD(5e8))
		require.NoError(t, err)
		e.admit(s, keystore.Request{EndUser: "u", Cost: pricing.USD(5e8)})
	})
}

// TestSubLimitsInvalid: bad sub-limits and bad end user names are
// refused with the field named, and change nothing.
func TestSubLimitsInvalid(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		for _, c := range []struct {
			p     keystore.Policy
			field string
		}{
			{keystore.Policy{ModelLimits: []keystore.ModelLimit{{Windows: hour(1)}}}, "Policy.ModelLimits[0].Models"},
			{keystore.Policy{ModelLimits: []keystore.ModelLimit{{Models: []string{"a"}}}}, "Policy.ModelLimits[0]"},
			{keystore.Policy{ModelLimits: []keystore.ModelLimit{{Models: []string{"a", "[x"}, Windows: hour(1)}}}, "Policy.ModelLimits[0].Models[1]"},
			{keystore.Policy{ModelLimits: []keystore.ModelLimit{{Models: []string{"a"}, Windows: hour(0)}}}, "Policy.ModelLimits[0].Windows[0].Limit"},
			{keystore.Policy{EndUsers: keystore.EndUsers{RequestsPerMinute: -1}}, "Policy.EndUsers.RequestsPerMinute"},
			{keystore.Policy{ModelLimits: make([]keystore.ModelLimit, 65)}, "Policy.ModelLimits"},
		} {
			_, _, err := e.ks.Create(ctx, keystore.Spec{Policy: c.p})
			var fe *keystore.FieldError
			require.ErrorAs(t, err, &fe, "%+v", c.p)
			require.Equal(t, c.field, fe.Field)
			require.ErrorIs(t, err, keystore.ErrInvalid)
		}
		_, s := e.createPolicy("ok", keystore.Policy{EndUsers: keystore.EndUsers{Windows: hour(5)}})
		for _, name := range []string{strings.Repeat("x", 257), "a\x00b", "bad\xff", "rtl\u202e"} {
			_, err := e.ks.Admit(ctx, s, keystore.Request{EndUser: name})
			require.ErrorIs(t, err, keystore.ErrInvalid, "%q", name)
		}
	})
}

// TestSubLimitsStored: a policy's sub-limits are stored with it and read
// back whole, for keys and teams.
func TestSubLimitsStored(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		p := keystore.Policy{
			Windows:     hour(1000),
			ModelLimits: []keystore.ModelLimit{{Models: []string{"gpt-4o", "gpt-4o-*"}, Windows: hour(10), RequestsPerMinute: 3, MaxConcurrent: 2}},
			EndUsers:    keystore.EndUsers{Windows: hour(5), Required: true, Budgets: []keystore.Budget{{Limit: 100, Window: time.Hour}}},
		}
		k, _ := e.createPolicy("s", p)
		tm, err := e.ks.CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: p})
		require.NoError(t, err)
		e.reopen()
		got := e.get(k.ID).Policy
		require.Equal(t, p.ModelLimits[0].Models, got.ModelLimits[0].Models)
		require.Equal(t, int64(10), got.ModelLimits[0].Windows[0].Limit)
		require.Equal(t, 2, got.ModelLimits[0].MaxConcurrent)
		require.True(t, got.EndUsers.Required)
		require.Len(t, got.EndUsers.Budgets, 1)
		gt, err := e.ks.GetTeam(ctx, tm.ID)
		require.NoError(t, err)
		require.Equal(t, got, gt.Policy)
	})
}

// TestTeamEndUserConcurrent: one end user of a team, hammered through two
// of its keys at once, is never overrun, and its window holds exactly
// what was charged. (Its Finishes once waited out the Redis locks' TTL:
// a read under the team's lock took the locks an Admit held while it
// waited for the team's lock.) On Redis, a batch that outlives its locks'
// TTL (a machine starved under -race) fails with ErrConflict, storing
// nothing: a Finish that fails so leaves its reservation held, which the
// test allows for, as the caller would see it.
func TestTeamEndUserConcurrent(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		tm, err := e.ks.CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: keystore.Policy{EndUsers: keystore.EndUsers{Windows: hour(1000)}}})
		require.NoError(t, err)
		_, s1 := e.createSpec(keystore.Spec{Name: "a", Team: tm.ID})
		k2, s2 := e.createSpec(keystore.Spec{Name: "b", Team: tm.ID})
		var charged, stuck atomic.Int64
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				s := []string{s1, s2}[g%2]
				for i := range 20 {
					a, err := e.ks.Admit(ctx, s, keystore.Request{EndUser: "shared", Reserve: 30})
					if errors.Is(err, keystore.ErrLimited) || errors.Is(err, backend.ErrConflict) && a == nil {
						continue
					}
					if err != nil && (a == nil || !errors.Is(err, backend.ErrConflict)) {
						t.Error(err)
						return
					}
					n := int64(1 + (g*7+i)%30)
					switch _, err := a.Finish(ctx, n); {
					case errors.Is(err, backend.ErrConflict):
						stuck.Add(30)
					case err != nil:
						t.Error(err)
						return
					default:
						charged.Add(n)
					}
				}
			})
		}
		wg.Wait()
		u, err := e.ks.EndUserUsage(ctx, k2.ID, "shared")
		require.NoError(t, err)
		require.GreaterOrEqual(t, u.Used, charged.Load())
		require.LessOrEqual(t, u.Used, charged.Load()+stuck.Load())
		require.LessOrEqual(t, u.Used, int64(1000))
	})
}
