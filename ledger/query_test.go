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

// want is Spend computed from the entries themselves.
func want(entries []ledger.Entry, q ledger.SpendQuery) ([]ledger.Row, ledger.Totals) {
	type gk struct {
		key, team, model, endUser string
		day                       time.Time
	}
	groups := map[gk]*ledger.Totals{}
	var total ledger.Totals
	for _, e := range entries {
		if e.Time.Before(q.From) || !e.Time.Before(q.To) || q.Key != "" && e.Key != q.Key ||
			q.Team != "" && e.Team != q.Team || q.Model != "" && e.Model != q.Model || q.EndUser != "" && e.EndUser != q.EndUser {
			continue
		}
		var g gk
		for _, by := range q.GroupBy {
			switch by {
			case ledger.ByKey:
				g.key = e.Key
			case ledger.ByTeam:
				g.team = e.Team
			case ledger.ByModel:
				g.model = e.Model
			case ledger.ByEndUser:
				g.endUser = e.EndUser
			case ledger.ByDay:
				g.day = e.Time.Truncate(24 * time.Hour)
			case ledger.ByHour:
				g.day = e.Time.Truncate(time.Hour)
			}
		}
		t := groups[g]
		if t == nil {
			t = &ledger.Totals{}
			groups[g] = t
		}
		for _, s := range []*ledger.Totals{t, &total} {
			s.Requests++
			s.Tokens.Input += e.Tokens.Input
			s.Tokens.Output += e.Tokens.Output
			s.Tokens.CacheRead += e.Tokens.CacheRead
			s.Tokens.CacheWrite += e.Tokens.CacheWrite
			s.Tokens.Reasoning += e.Tokens.Reasoning
			s.Cost += e.Cost
		}
	}
	var rows []ledger.Row
	for g, t := range groups {
		rows = append(rows, ledger.Row{Key: g.key, Team: g.team, Model: g.model, EndUser: g.endUser, Day: g.day, Totals: *t})
	}
	slices.SortFunc(rows, func(a, b ledger.Row) int {
		return cmp.Or(a.Day.Compare(b.Day), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Team, b.Team), cmp.Compare(a.Model, b.Model), cmp.Compare(a.EndUser, b.EndUser))
	})
	return rows, total
}

// queries are the Spend queries every test checks, From and To set by
// the caller.
var queries = []ledger.SpendQuery{
	{},
	{GroupBy: []string{ledger.ByKey}},
	{GroupBy: []string{ledger.ByTeam}},
	{GroupBy: []string{ledger.ByModel}},
	{GroupBy: []string{ledger.ByDay}},
	{GroupBy: []string{ledger.ByHour, ledger.ByModel}},
	{GroupBy: []string{ledger.ByKey, ledger.ByModel, ledger.ByDay}},
	{GroupBy: []string{ledger.ByDay}, Key: keys[0]},
	{GroupBy: []string{ledger.ByModel}, Team: "team_000000000000000a"},
	{GroupBy: []string{ledger.ByDay, ledger.ByModel}, Team: "team_000000000000000b", Model: models[1]},
	{GroupBy: []string{ledger.ByTeam, ledger.ByKey}, Model: models[0]},
	{Key: keys[4], Team: "team_000000000000000a"},
	{GroupBy: []string{ledger.ByEndUser}},
	{GroupBy: []string{ledger.ByKey, ledger.ByEndUser, ledger.ByDay}},
	{GroupBy: []string{ledger.ByHour, ledger.ByEndUser}, Team: "team_000000000000000a"},
	{GroupBy: []string{ledger.ByTeam}, EndUser: endUsers[0]},
	{GroupBy: []string{ledger.ByEndUser, ledger.ByDay}, Key: keys[1]},
	{EndUser: endUsers[3], Key: keys[0]},
}

// check asserts that every query of queries, over the whole load and
// over its middle day, answers what the entries add up to.
func check(t *testing.T, e *env, entries []ledger.Entry) {
	t.Helper()
	first, last := entries[0].Time, entries[len(entries)-1].Time
	for _, span := range [][2]time.Time{{first.Truncate(24 * time.Hour), last.Add(time.Hour)}, {first.Add(24 * time.Hour).Truncate(24 * time.Hour), first.Add(48 * time.Hour).Truncate(24 * time.Hour)}} {
		for _, q := range queries {
			q.From, q.To = span[0], span[1].Truncate(time.Hour).Add(time.Hour)
			for _, q := range hourly(q) {
				got, err := e.led.Spend(ctx, q)
				require.NoError(t, err, "%+v", q)
				requireSpend(t, entries, got)
			}
		}
	}
}

// hourly returns q, or q grouped by hour cut into ranges of 24 hours, the
// longest such a query may have.
func hourly(q ledger.SpendQuery) []ledger.SpendQuery {
	if !slices.Contains(q.GroupBy, ledger.ByHour) {
		return []ledger.SpendQuery{q}
	}
	var out []ledger.SpendQuery
	for from := q.From; from.Before(q.To); from = from.Add(24 * time.Hour) {
		part := q
		part.From, part.To = from, from.Add(24*time.Hour)
		if part.To.After(q.To) {
			part.To = q.To
		}
		out = append(out, part)
	}
	return out
}

// requireSpend asserts that s is what its query adds up to over entries,
// refusals aside.
func requireSpend(t *testing.T, entries []ledger.Entry, s ledger.Spend) {
	t.Helper()
	rows, total := want(entries, s.SpendQuery())
	require.Equal(t, total, stripReasons(s.Total), "%+v", s.SpendQuery())
	for i := range s.Rows {
		s.Rows[i].Totals = stripReasons(s.Rows[i].Totals)
	}
	require.Equal(t, rows, s.Rows, "%+v", s.SpendQuery())
}

func stripReasons(t ledger.Totals) ledger.Totals {
	t.Refused, t.Reasons = 0, nil
	return t
}

// newestFirst is entries as Requests pages them, filtered by f.
func newestFirst(entries []ledger.Entry, f func(ledger.Entry) bool) []ledger.Entry {
	var out []ledger.Entry
	for _, e := range slices.Backward(entries) {
		if f(e) {
			out = append(out, e)
		}
	}
	return out
}

// pages reads every page of q.
func pages(t *testing.T, e *env, q ledger.RequestQuery) []ledger.Entry {
	t.Helper()
	var all []ledger.Entry
	for range 1000 {
		p, err := e.led.Requests(ctx, q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Entries), q.Limit)
		all = append(all, p.Entries...)
		if p.Next == "" {
			return all
		}
		q.Cursor = p.Next
	}
	t.Fatal("more than 1000 pages")
	return nil
}

func TestSpendAndRequests(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		r := rand.New(rand.NewPCG(1, 2))
		entries := e.load(r, 300)
		require.NoError(t, e.led.Compact(ctx))
		entries = append(entries, e.load(r, 400)...) // 700 over about 2.4 days: spans of singles and blocks
		check(t, e, entries)

		to := entries[len(entries)-1].Time.Add(time.Second)
		all := pages(t, e, ledger.RequestQuery{From: entries[0].Time, To: to, Limit: 37})
		require.Equal(t, newestFirst(entries, func(ledger.Entry) bool { return true }), all)
		byKey := pages(t, e, ledger.RequestQuery{Key: keys[2], Status: 500, From: entries[0].Time, To: to, Limit: 5})
		require.Equal(t, newestFirst(entries, func(x ledger.Entry) bool { return x.Key == keys[2] && x.Status == 500 }), byKey)
		mid := entries[350].Time
		byTeam := pages(t, e, ledger.RequestQuery{Team: "team_000000000000000a", Model: models[2], From: entries[0].Time, To: mid, Limit: 1000})
		require.Equal(t, newestFirst(entries, func(x ledger.Entry) bool {
			return x.Team == "team_000000000000000a" && x.Model == models[2] && x.Time.Before(mid)
		}), byTeam)
		for _, u := range endUsers[2:] {
			byUser := pages(t, e, ledger.RequestQuery{EndUser: u, From: entries[0].Time, To: to, Limit: 7})
			require.Equal(t, newestFirst(entries, func(x ledger.Entry) bool { return x.EndUser == u }), byUser, u)
			require.NotEmpty(t, byUser)
			byKeyUser := pages(t, e, ledger.RequestQuery{Key: keys[1], EndUser: u, Model: models[0], From: entries[0].Time, To: to, Limit: 1000})
			require.Equal(t, newestFirst(entries, func(x ledger.Entry) bool { return x.EndUser == u && x.Key == keys[1] && x.Model == models[0] }), byKeyUser, u)
		}
	})
}
