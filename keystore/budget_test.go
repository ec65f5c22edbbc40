package keystore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// cents is n cents in nano-dollars.
func cents(n int64) pricing.USD { return pricing.USD(n) * pricing.Dollar / 100 }

// budgetKey creates a key of a million tokens per 5 hours with budgets bs.
func (e *env) budgetKey(bs ...keystore.Budget) (keystore.Key, string) {
	e.t.Helper()
	return e.createSpec(keystore.Spec{Name: "spender", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1_000_000, Window: 5 * time.Hour}},
		Budgets: bs,
	}})
}

// TestBudgetRolling: Admit reserves the worst-case cost, Finish charges
// the real cost in its place, Usage reports what was spent, and a key
// whose budget has no room for a request's cost is refused with a Denial
// naming the budget until the spend leaves the window.
func TestBudgetRolling(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.budgetKey(keystore.Budget{Limit: pricing.Dollar, Window: time.Hour})
		a := e.admit(secret, keystore.Request{Reserve: 10, Cost: cents(30)})
		lim := a.Limits()
		require.True(t, lim.HasBudget)
		require.Equal(t, cents(70), lim.Budget, "what the budget has left once the cost is held")
		require.Equal(t, int64(1_000_000), lim.Tokens.Limit)
		require.Equal(t, int64(1_000_000-10), lim.Tokens.Remaining)
		require.False(t, lim.HasRequests)
		u := e.usage(k.ID)
		require.Len(t, u.Budgets, 1)
		require.Equal(t, cents(30), u.Budgets[0].Spent, "the reservation counts while in flight")
		require.Equal(t, cents(70), u.Budgets[0].Remaining)

		u, err := a.FinishSpend(ctx, 10, cents(12))
		require.NoError(t, err)
		require.Equal(t, cents(12), u.Budgets[0].Spent, "the real cost replaces the reservation")
		require.Equal(t, t0.Add(time.Hour), u.Budgets[0].ResetsAt)
		require.Equal(t, cents(12), e.get(k.ID).LifetimeSpend)

		// 88 cents left: a request of up to 90 is refused, one of 88 fits.
		_, err = e.ks.Admit(ctx, secret, keystore.Request{Cost: cents(90)})
		var d *keystore.Denial
		require.ErrorAs(t, err, &d)
		require.ErrorIs(t, err, keystore.ErrLimited)
		require.Equal(t, "budget", d.Reason)
		require.Equal(t, "budget $1 per 1h0m0s", d.Limit)
		require.Equal(t, time.Hour, d.RetryAfter)
		a = e.admit(secret, keystore.Request{Cost: cents(88)})
		_, err = a.FinishSpend(ctx, 0, cents(88))
		require.NoError(t, err)

		e.clock.Advance(time.Hour)
		require.Zero(t, e.usage(k.ID).Budgets[0].Spent, "the spend has left the window")
		e.admit(secret, keystore.Request{Cost: cents(90)})
	})
}

// TestBudgetCalendar: a monthly budget in a time zone resets at the zone's
// first of the month, and Finish without a cost charges the reservation.
func TestBudgetCalendar(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.budgetKey(keystore.Budget{Limit: 5 * pricing.Dollar, Period: strategies.Month, Location: paris})
		a := e.admit(secret, keystore.Request{Cost: 2 * pricing.Dollar})
		u := e.finish(a, 100)
		require.Equal(t, 2*pricing.Dollar, u.Budgets[0].Spent, "Finish charges the cost reserved")
		require.Equal(t, time.Date(2026, 2, 1, 0, 0, 0, 0, paris).UTC(), u.Budgets[0].ResetsAt)

		_, err := e.ks.Admit(ctx, secret, keystore.Request{Cost: 4 * pricing.Dollar})
		var d *keystore.Denial
		require.ErrorAs(t, err, &d)
		require.Equal(t, "budget $5 per month (Europe/Paris)", d.Limit)
		require.Equal(t, time.Date(2026, 2, 1, 0, 0, 0, 0, paris).Sub(t0), d.RetryAfter)

		e.clock.Set(time.Date(2026, 2, 1, 0, 0, 0, 0, paris))
		require.Zero(t, e.usage(k.ID).Budgets[0].Spent)
		e.admit(secret, keystore.Request{Cost: 4 * pricing.Dollar})

		// Kept across a restart, with the budget in the record.
		e.reopen()
		got := e.get(k.ID)
		require.Equal(t, []keystore.Budget{{Limit: 5 * pricing.Dollar, Period: strategies.Month, Location: paris}}, got.Policy.Budgets)
		require.Equal(t, 4*pricing.Dollar, e.usage(k.ID).Budgets[0].Spent)
	})
}

// TestBudgetConcurrent: 40 requests at once against a $1.00 budget, each
// reserving up to $0.10 and costing that: no more than $1.00 is ever
// spent, since each admission reserves its worst case in the same decision
// that checks the budget.
func TestBudgetConcurrent(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.budgetKey(keystore.Budget{Limit: pricing.Dollar, Window: 24 * time.Hour})
		admitted := e.spendAtOnce(40, cents(10), secret)
		require.Equal(t, 10, admitted)
		require.Equal(t, pricing.Dollar, e.usage(k.ID).Budgets[0].Spent)
		require.Equal(t, pricing.Dollar, e.get(k.ID).LifetimeSpend)
	})
}

// TestBudgetInvalid: budgets a policy refuses, with the field named.
func TestBudgetInvalid(t *testing.T) {
	e := newEnv(t, backendtest.BoltSync, keystore.Options{})
	w := []keystore.Window{{Limit: 1, Window: time.Hour}}
	for name, c := range map[string]struct {
		b     keystore.Budget
		field string
	}{
		"no limit":        {keystore.Budget{Window: time.Hour}, "Policy.Budgets[0].Limit"},
		"window & period": {keystore.Budget{Limit: 1, Window: time.Hour, Period: strategies.Day}, "Policy.Budgets[0]"},
		"neither":         {keystore.Budget{Limit: 1}, "Policy.Budgets[0]"},
		"zone on window":  {keystore.Budget{Limit: 1, Window: time.Hour, Location: time.Local}, "Policy.Budgets[0].Location"},
		"bad bucket":      {keystore.Budget{Limit: 1, Window: time.Hour, Bucket: 7 * time.Minute}, "Policy.Budgets[0]"},
	} {
		_, _, err := e.ks.Create(ctx, keystore.Spec{Policy: keystore.Policy{Windows: w, Budgets: []keystore.Budget{c.b}}})
		var fe *keystore.FieldError
		require.ErrorAs(t, err, &fe, name)
		require.Equal(t, c.field, fe.Field, name)
		require.ErrorIs(t, err, keystore.ErrInvalid, name)
	}
	_, _, err := e.ks.Create(ctx, keystore.Spec{Policy: keystore.Policy{Windows: w, Budgets: []keystore.Budget{
		{Limit: 1, Window: time.Hour}, {Limit: 2, Window: time.Hour},
	}}})
	require.ErrorIs(t, err, keystore.ErrInvalid, "one window twice")
}

// TestUpdateBudgetsInPlace: an Update whose fn changes the budgets it is
// given in place changes only the key it updates, and nothing when it
// fails: its Spec does not share them with the policy, which other keys
// share.
func TestUpdateBudgetsInPlace(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		dollar := keystore.Budget{Limit: pricing.Dollar, Window: time.Hour}
		k, _ := e.budgetKey(dollar)
		other, otherSecret := e.budgetKey(dollar)
		_, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
			s.Policy.Budgets[0].Limit = cents(1)
			return errors.New("changed my mind")
		})
		require.ErrorContains(t, err, "changed my mind")
		got, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
			s.Policy.Budgets[0].Limit = cents(2)
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, cents(2), got.Policy.Budgets[0].Limit)
		require.Equal(t, pricing.Dollar, e.get(other.ID).Policy.Budgets[0].Limit)
		e.admit(otherSecret, keystore.Request{Cost: cents(50)})
	})
}

// spendAtOnce sends n requests at once, each costing cost, from the keys
// of secrets in turn, and returns how many were admitted (and finished at
// that cost); any error but a refusal fails the test.
func (e *env) spendAtOnce(n int, cost pricing.USD, secrets ...string) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for i := range n {
		wg.Go(func() {
			a, err := e.ks.Admit(ctx, secrets[i%len(secrets)], keystore.Request{Cost: cost})
			if errors.Is(err, keystore.ErrLimited) {
				return
			}
			if err != nil {
				e.t.Error(err)
				return
			}
			if _, err := a.FinishSpend(ctx, 1, cost); err != nil {
				e.t.Error(err)
			}
			mu.Lock()
			admitted++
			mu.Unlock()
		})
	}
	wg.Wait()
	return admitted
}
