package ledger_test

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/ledger"
)

// wantTop is want with q's Limit: the groups of key, team and model
// ranked by cost over the range (then requests, then values), the first
// Limit kept, the others added up into one Other row per time.
func wantTop(entries []ledger.Entry, q ledger.SpendQuery) []ledger.Row {
	rows, _ := want(entries, q)
	ranking := q
	ranking.GroupBy = slices.DeleteFunc(slices.Clone(q.GroupBy), func(by string) bool { return by == ledger.ByDay || by == ledger.ByHour })
	groups, _ := want(entries, ranking)
	if len(ranking.GroupBy) == 0 || len(groups) <= q.Limit {
		return rows
	}
	slices.SortFunc(groups, func(a, b ledger.Row) int {
		return cmp.Or(cmp.Compare(b.Cost, a.Cost), cmp.Compare(b.Requests, a.Requests),
			cmp.Compare(a.Key, b.Key), cmp.Compare(a.Team, b.Team), cmp.Compare(a.Model, b.Model))
	})
	top := map[[3]string]bool{}
	for _, g := range groups[:q.Limit] {
		top[[3]string{g.Key, g.Team, g.Model}] = true
	}
	other := func(by string) string {
		if slices.Contains(q.GroupBy, by) {
			return ledger.OtherModel
		}
		return ""
	}
	var out []ledger.Row
	others := map[time.Time]*ledger.Row{}
	for _, r := range rows {
		if top[[3]string{r.Key, r.Team, r.Model}] {
			out = append(out, r)
			continue
		}
		o := others[r.Day]
		if o == nil {
			o = &ledger.Row{Key: other(ledger.ByKey), Team: other(ledger.ByTeam), Model: other(ledger.ByModel), Day: r.Day, Other: true}
			others[r.Day] = o
		}
		o.Requests += r.Requests
		o.Tokens.Input += r.Tokens.Input
		o.Tokens.Output += r.Tokens.Output
		o.Tokens.CacheRead += r.Tokens.CacheRead
		o.Tokens.CacheWrite += r.Tokens.CacheWrite
		o.Tokens.Reasoning += r.Tokens.Reasoning
		o.Cost += r.Cost
	}
	for _, o := range others {
		out = append(out, *o)
	}
	slices.SortStableFunc(out, func(a, b ledger.Row) int {
		if c := a.Day.Compare(b.Day); c != 0 {
			return c
		}
		if a.Other != b.Other {
			if a.Other {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Team, b.Team), cmp.Compare(a.Model, b.Model))
	})
	return out
}

// TestSpendTop: a report keeps the Limit groups of the highest cost over
// the range and adds up the others into one Other row, per day or hour
// when grouped by time (the same groups every day), on every backend.
func TestSpendTop(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		entries := e.loadBatched(rand.New(rand.NewPCG(3, 4)), 3000) // about 2 days
		from, to := entries[0].Time.Truncate(24*time.Hour), entries[len(entries)-1].Time.Add(time.Hour)
		for _, q := range []ledger.SpendQuery{
			{GroupBy: []string{ledger.ByKey}, Limit: 2},
			{GroupBy: []string{ledger.ByModel}, Limit: 1},
			{GroupBy: []string{ledger.ByTeam, ledger.ByModel}, Limit: 4},
			{GroupBy: []string{ledger.ByKey, ledger.ByDay}, Limit: 2},
			{GroupBy: []string{ledger.ByDay, ledger.ByModel}, Limit: 1, Team: teamOf[keys[0]]},
			{GroupBy: []string{ledger.ByHour, ledger.ByKey}, Limit: 3},
			{GroupBy: []string{ledger.ByKey, ledger.ByModel}, Limit: 100}, // 15 groups: all kept
			{GroupBy: []string{ledger.ByDay}, Limit: 1},                   // no group but time: nothing to rank
		} {
			q.From, q.To = from, to.Truncate(time.Hour).Add(time.Hour)
			for _, q := range hourly(q) {
				got, err := e.led.Spend(ctx, q)
				require.NoError(t, err, "%+v", q)
				for i := range got.Rows {
					got.Rows[i].Totals = stripReasons(got.Rows[i].Totals)
				}
				require.Equal(t, wantTop(entries, got.SpendQuery()), got.Rows, "%+v", q)
				_, total := want(entries, got.SpendQuery())
				require.Equal(t, total, stripReasons(got.Total), "%+v", q)
			}
		}
		for _, limit := range []int{-1, ledger.MaxLimit + 1} {
			_, err := e.led.Spend(ctx, ledger.SpendQuery{GroupBy: []string{ledger.ByKey}, Limit: limit})
			requireQueryError(t, err, "limit")
		}
	})
}
