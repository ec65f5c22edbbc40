package keystore_test

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// dollarADay is a policy of budgets alone: $1 per rolling day, in hours.
var dollarADay = keystore.Policy{Budgets: []keystore.Budget{{Limit: pricing.Dollar, Window: 24 * time.Hour, Bucket: time.Hour}}}

// noWindowUsage is the Usage of a key without token windows: no binding
// window, zero figures, and the budgets given.
func noWindowUsage(inFlight int, budgets ...keystore.BudgetUsage) keystore.Usage {
	return keystore.Usage{Binding: -1, InFlight: inFlight, Budgets: budgets}
}

// windowState is what the engine holds of key id in the token window of 5
// hours, the default usage window's, with a limit of 1000.
func (e *env) windowState(id string) strategies.Result {
	e.t.Helper()
	return e.peek("keys:w:5h0m0s", strategies.RollingWindow{Limit: 1000, Window: 5 * time.Hour, Bucket: 5 * time.Minute}, id)
}

// TestNoWindowCreate: a key may have budgets and no token window, or no
// limit at all; its TokenLimit is 0, Check allows it with a zero Limit,
// its Usage has no binding window, and all of it survives a reopen.
func TestNoWindowCreate(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("budget only", dollarADay)
		require.Equal(t, dollarADay, k.Policy)
		require.Nil(t, k.Policy.Windows)
		require.Zero(t, k.TokenLimit)
		metered, meteredSecret := e.createSpec(keystore.Spec{Name: "metered", Policy: keystore.Policy{Windows: []keystore.Window{}}})
		require.Equal(t, keystore.Policy{}, metered.Policy, "no window is nil, however it is given")

		for _, s := range []string{secret, meteredSecret} {
			require.Equal(t, strategies.Result{Allowed: true}, e.check(s))
		}
		require.Equal(t, strategies.Result{Allowed: true}, e.record(k.ID, 1_000_000))
		budget := keystore.BudgetUsage{Budget: dollarADay.Budgets[0], Remaining: pricing.Dollar}
		require.Equal(t, noWindowUsage(0, budget), e.usage(k.ID))
		require.Equal(t, noWindowUsage(0), e.usage(metered.ID))
		k.LifetimeTokens, k.LastUsed = 1_000_000, t0

		e.reopen()
		require.Equal(t, k, e.get(k.ID))
		require.Equal(t, metered, e.get(metered.ID))
		require.Equal(t, strategies.Result{Allowed: true}, e.check(secret))
		require.Equal(t, strategies.Result{Limit: 1000, Remaining: 1000, Allowed: true}, e.windowState(k.ID), "nothing in a window")
	})
}

// TestNoWindowAdmit: a key without a token window reserves and charges
// nothing in windows, holds all its Optional tokens, counts its lifetime
// tokens and spend, and is held to its budget, request rate, concurrency
// cap and models.
func TestNoWindowAdmit(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		pol := dollarADay
		pol.RequestsPerMinute, pol.MaxConcurrent, pol.Models = 2, 1, []string{"gpt-*"}
		k, secret := e.createPolicy("k", pol)

		a := e.admit(secret, keystore.Request{Model: "gpt-4o", Reserve: 1000, Optional: 500, Cost: cents(60)})
		require.Equal(t, int64(1500), a.Reserved(), "no window limits the optional tokens")
		lim := a.Limits()
		require.False(t, lim.HasTokens)
		require.Zero(t, lim.Tokens)
		require.Equal(t, [2]any{true, cents(40)}, [2]any{lim.HasBudget, lim.Budget})
		require.Equal(t, [2]any{true, int64(1)}, [2]any{lim.HasRequests, lim.Requests.Remaining})
		_, err := e.ks.Admit(ctx, secret, keystore.Request{Model: "gpt-4o"})
		require.Equal(t, "concurrency", denial(t, err).Reason)

		u, err := a.FinishSpend(ctx, 700, cents(50))
		require.NoError(t, err)
		spent := keystore.BudgetUsage{Budget: pol.Budgets[0], Spent: cents(50), Remaining: cents(50), ResetsAt: t0.Add(24 * time.Hour)}
		want := noWindowUsage(0, spent)
		want.Requests = 1 // of its 2 a minute
		require.Equal(t, want, u)
		got := e.get(k.ID)
		require.Equal(t, [2]any{int64(700), cents(50)}, [2]any{got.LifetimeTokens, got.LifetimeSpend})
		require.Equal(t, int64(1000), e.windowState(k.ID).Remaining, "nothing reserved or charged in a window")

		_, err = e.ks.Admit(ctx, secret, keystore.Request{Model: "gpt-4o", Cost: cents(51)})
		d := denial(t, err)
		require.ErrorIs(t, err, keystore.ErrLimited)
		require.Equal(t, [2]string{"budget", "budget $1 per 24h0m0s"}, [2]string{d.Reason, d.Limit})
		_, err = e.ks.Admit(ctx, secret, keystore.Request{Model: "claude-x"})
		require.ErrorIs(t, err, keystore.ErrModel)
		e.finish(e.admit(secret, keystore.Request{Model: "gpt-4o", Cost: cents(50)}), 0)
		_, err = e.ks.Admit(ctx, secret, keystore.Request{Model: "gpt-4o"})
		require.Equal(t, "rate", denial(t, err).Reason, "two requests a minute")
		require.Equal(t, int64(700), e.get(k.ID).LifetimeTokens)
	})
}

// TestNoWindowUpdate: Update takes a key to no token window and back;
// TokenLimit left as it was is no shorthand, so that clearing the windows
// clears them; an admission in flight across either change finishes in
// the windows of the policy it finishes in.
func TestNoWindowUpdate(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("k", 1000)
		a := e.admit(secret, keystore.Request{Reserve: 100})
		got, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
			s.Policy.Windows = nil
			s.Policy.Budgets = dollarADay.Budgets
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, [2]any{dollarADay, int64(0)}, [2]any{got.Policy, got.TokenLimit})
		e.finish(a, 30)
		require.Equal(t, int64(900), e.windowState(k.ID).Remaining, "a window the policy lost is left as it was")
		require.Equal(t, strategies.Result{Allowed: true}, e.record(k.ID, 5000))
		require.Equal(t, strategies.Result{Allowed: true}, e.check(secret))

		a = e.admit(secret, keystore.Request{Reserve: 400, Optional: 10_000})
		require.Equal(t, int64(10_400), a.Reserved())
		got, err = e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error { s.TokenLimit = 2000; return nil })
		require.NoError(t, err)
		require.Equal(t, keystore.Policy{Windows: []keystore.Window{usageWindow(2000)}, Budgets: dollarADay.Budgets}, got.Policy)
		require.Equal(t, int64(2000), got.TokenLimit)
		u := e.finish(a, 300)
		require.Equal(t, int64(100+300), u.Windows[0].Used, "the window of 5 hours, back, holds what it held when it was dropped, and the tokens")
		require.Equal(t, 0, u.Binding)

		e.reopen()
		got.LifetimeTokens, got.LastUsed = 30+5000+300, t0
		require.Equal(t, got, e.get(k.ID))
		got, err = e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error { s.Policy = keystore.Policy{}; return nil })
		require.NoError(t, err)
		require.Equal(t, keystore.Policy{}, got.Policy)
		e.reopen()
		require.Equal(t, noWindowUsage(0), e.usage(k.ID))
	})
}

// TestNoWindowTeam: a team may have budgets and no token window; its
// key's admission then reports the key's window, a key without one its
// team's, and neither when neither has one; the team's budget refuses
// across its keys.
func TestNoWindowTeam(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		team, err := e.ks.CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: dollarADay})
		require.NoError(t, err)
		require.Equal(t, dollarADay, team.Policy)
		windowed, ws := e.createSpec(keystore.Spec{Name: "w", Team: team.ID, TokenLimit: 1000})
		bare, bs := e.createSpec(keystore.Spec{Name: "b", Team: team.ID})

		a := e.admit(ws, keystore.Request{Reserve: 100, Cost: cents(30)})
		require.True(t, a.Limits().HasTokens, "the key's window")
		require.Equal(t, [2]int64{1000, 900}, [2]int64{a.Limits().Tokens.Limit, a.Limits().Tokens.Remaining})
		e.finish(a, 100)
		a = e.admit(bs, keystore.Request{Reserve: 100, Optional: 50, Cost: cents(30)})
		require.False(t, a.Limits().HasTokens)
		require.Equal(t, int64(150), a.Reserved())
		require.Equal(t, cents(40), a.Limits().Budget, "the team's: $1 less 60 cents held")
		_, err = e.ks.Admit(ctx, ws, keystore.Request{Cost: cents(41)})
		require.Equal(t, team.ID, denial(t, err).Team)
		require.Equal(t, "budget", denial(t, err).Reason)
		e.finish(a, 150)

		team, err = e.ks.UpdateTeam(ctx, team.ID, func(s *keystore.TeamSpec) error {
			s.Policy.Windows = []keystore.Window{{Limit: 500, Window: time.Hour}}
			return nil
		})
		require.NoError(t, err)
		a = e.admit(bs, keystore.Request{Reserve: 100, Optional: 1000})
		require.True(t, a.Limits().HasTokens, "the team's window")
		require.Equal(t, [2]int64{500, 0}, [2]int64{a.Limits().Tokens.Limit, a.Limits().Tokens.Remaining},
			"it held what fitted of the optional tokens")
		require.Equal(t, int64(500), a.Reserved())
		e.finish(a, 0)

		_, err = e.ks.UpdateTeam(ctx, team.ID, func(s *keystore.TeamSpec) error { s.Policy = keystore.Policy{}; return nil })
		require.NoError(t, err)
		e.reopen()
		team, err = e.ks.GetTeam(ctx, team.ID)
		require.NoError(t, err)
		require.Equal(t, keystore.Policy{}, team.Policy)
		u, err := e.ks.TeamUsage(ctx, team.ID)
		require.NoError(t, err)
		require.Equal(t, noWindowUsage(0), u)
		require.Equal(t, [2]int64{100, 150}, [2]int64{e.get(windowed.ID).LifetimeTokens, e.get(bare.ID).LifetimeTokens})
	})
}

// TestRecordsBeforeNoWindow: records written before policies without
// token windows were allowed (version 2, and version 3 with a window)
// read as they did.
func TestRecordsBeforeNoWindow(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		v3 := rawKey{id: "key_00000000000000c3", secret: "rsk_v3", name: "v3", models: []string{"gpt-*"}}
		const v2ID, v2Secret = "key_00000000000000c2", "rsk_v2"
		// Version 2: version, flags, hash, lifetime (7), name, model, and
		// a policy without the budget count.
		h := sha256.Sum256([]byte(v2Secret))
		pol := policyBytes(usageWindow(300))
		v2 := append(append([]byte{2, 0}, h[:]...), 7)
		v2 = appendText(appendText(appendText(v2, "v2"), ""), string(pol[:len(pol)-1]))
		e.close()
		e.openDB()
		e.rawPut("k/"+v3.id, v3.encode())
		e.rawPut(hashKey(v3.secret), []byte(v3.id))
		e.rawPut("k/"+v2ID, v2)
		e.rawPut(hashKey(v2Secret), []byte(v2ID))
		e.close()
		e.openDB()
		e.openStore()

		require.Equal(t, keystore.Key{ID: v2ID, Name: "v2", Policy: onePolicy(300), TokenLimit: 300, LifetimeTokens: 7}, e.get(v2ID))
		require.Equal(t, keystore.Key{ID: v3.id, Name: "v3", TokenLimit: 1000,
			Policy: keystore.Policy{Windows: []keystore.Window{usageWindow(1000)}, Models: []string{"gpt-*"}}}, e.get(v3.id))
		require.Equal(t, strategies.Result{Allowed: true, Limit: 300, Remaining: 300}, e.check(v2Secret))
		e.finish(e.admit(v3.secret, keystore.Request{Model: "gpt-4o", Reserve: 10}), 10)
		require.Equal(t, int64(990), e.usage(v3.id).Remaining)
	})
}
