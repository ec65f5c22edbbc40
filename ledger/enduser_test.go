package ledger_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// sumOf adds up the entries' requests, tokens and cost.
func sumOf(entries []ledger.Entry) ledger.Totals {
	var t ledger.Totals
	for _, e := range entries {
		t.Requests++
		t.Tokens.Input += e.Tokens.Input
		t.Tokens.Output += e.Tokens.Output
		t.Tokens.CacheRead += e.Tokens.CacheRead
		t.Tokens.CacheWrite += e.Tokens.CacheWrite
		t.Tokens.Reasoning += e.Tokens.Reasoning
		t.Cost += e.Cost
	}
	return t
}

// TestEndUserRollupBounded: a key's day with 10k end users, most seen
// once, costs at most 256 rows of end users a writer, which add up to the
// key's total exactly; a heavy end user keeps a row of its own, exact, and
// the requests that named none are the row of end user "".
func TestEndUserRollupBounded(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		r := rand.New(rand.NewPCG(3, 4))
		key, team := keys[0], teamOf[keys[0]]
		var es []ledger.Entry
		var at []time.Time
		for i := range 10_000 {
			en := ledger.Entry{RequestID: fmt.Sprintf("req_%016x", i), Key: key, Team: team, Model: models[i%3], Route: "/r", Status: 200,
				EndUser: fmt.Sprintf("u-%05d", r.IntN(9000)), Tokens: ledger.Tokens{Input: r.Int64N(100)}, Cost: pricing.USD(r.Int64N(1000))}
			switch i % 10 {
			case 0:
				en.EndUser, en.Cost = "whale", 1_000_000
			case 1:
				en.EndUser = ""
			}
			es, at = append(es, en), append(at, e.clock.Now())
			e.clock.Advance(time.Second)
		}
		var entries []ledger.Entry
		for i := 0; i < len(es); i += 1000 {
			entries = append(entries, e.recordAll(es[i:i+1000], at[i:i+1000])...)
		}
		from, to := t0.Truncate(24*time.Hour), e.clock.Now().Truncate(24*time.Hour).Add(24*time.Hour)
		keyTotal, err := e.led.Spend(ctx, ledger.SpendQuery{From: from, To: to, Key: key})
		require.NoError(t, err)
		require.Equal(t, sumOf(entries), keyTotal.Total)

		byUser, err := e.led.Spend(ctx, ledger.SpendQuery{From: from, To: to, Key: key, GroupBy: []string{ledger.ByEndUser, ledger.ByDay}, Limit: ledger.MaxLimit})
		require.NoError(t, err)
		require.Equal(t, keyTotal.Total, byUser.Total)
		days := map[time.Time]int{}
		var sum ledger.Totals
		for _, row := range byUser.Rows {
			days[row.Day]++
			sum = add(sum, row.Totals)
		}
		require.Equal(t, keyTotal.Total, sum, "the rows add up to the key's total")
		for d, n := range days {
			require.LessOrEqual(t, n, 256, "rows of end users on %s", d)
		}
		whale := slices.DeleteFunc(slices.Clone(entries), func(x ledger.Entry) bool { return x.EndUser != "whale" })
		none := slices.DeleteFunc(slices.Clone(entries), func(x ledger.Entry) bool { return x.EndUser != "" })
		for name, want := range map[string][]ledger.Entry{"whale": whale, "": none} {
			var got ledger.Totals
			for _, row := range byUser.Rows {
				if row.EndUser == name && !row.Other {
					got = add(got, row.Totals)
				}
			}
			require.Equal(t, sumOf(want), got, "end user %q", name)
		}
		one, err := e.led.Spend(ctx, ledger.SpendQuery{From: from, To: to, EndUser: "whale"})
		require.NoError(t, err)
		require.Equal(t, sumOf(whale), one.Total)

		top, err := e.led.Spend(ctx, ledger.SpendQuery{From: from, To: to, GroupBy: []string{ledger.ByEndUser}, Limit: 3})
		require.NoError(t, err)
		require.Len(t, top.Rows, 4)
		require.True(t, slices.ContainsFunc(top.Rows[:3], func(row ledger.Row) bool { return row.EndUser == "whale" }), "the top end user ranks")
		require.True(t, top.Rows[3].Other)
		require.Equal(t, ledger.OtherModel, top.Rows[3].EndUser)
		require.Equal(t, keyTotal.Total, top.Total)
	})
}

// add is a + b, requests, tokens and cost.
func add(a, b ledger.Totals) ledger.Totals {
	a.Requests += b.Requests
	a.Tokens.Input += b.Tokens.Input
	a.Tokens.Output += b.Tokens.Output
	a.Tokens.CacheRead += b.Tokens.CacheRead
	a.Tokens.CacheWrite += b.Tokens.CacheWrite
	a.Tokens.Reasoning += b.Tokens.Reasoning
	a.Cost += b.Cost
	return a
}

// TestSpendByEndUserRefused: end users with a model, grouped or
// filtered, are a QueryError naming the parameter.
func TestSpendByEndUserRefused(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		for param, q := range map[string]ledger.SpendQuery{
			"model":    {GroupBy: []string{ledger.ByEndUser}, Model: models[0]},
			"group_by": {GroupBy: []string{ledger.ByModel}, EndUser: "u-1"},
		} {
			_, err := e.led.Spend(ctx, q)
			var qe *ledger.QueryError
			require.ErrorAs(t, err, &qe)
			require.Equal(t, param, qe.Param)
			require.ErrorIs(t, err, ledger.ErrInvalid)
		}
	})
}

// TestEndUserDirectory: every end user of a key is listed once across
// the pages, by name, with its totals over all time equal to its
// entries', refusals included; q selects a prefix; a cursor edited or of
// another query is refused; an end user never seen is ErrNotFound.
func TestEndUserDirectory(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		e.close()
		e.open(flushOnCall)
		r := rand.New(rand.NewPCG(5, 6))
		names := []string{"a", "a/b", "ab", "b-1", "b-2", "b-10", "é", "u 17", strings.Repeat("z", 256)}
		var entries []ledger.Entry
		refused := map[string]int64{}
		for i := range 300 {
			en := randomEntry(r, i)
			en.Key, en.Team, en.EndUser = keys[i%2], teamOf[keys[i%2]], names[r.IntN(len(names))]
			if i%7 == 0 {
				en.EndUser = ""
			}
			entries = append(entries, e.record(en))
			if i%5 == 0 {
				require.NoError(t, e.led.Refused(ctx, ledger.Refusal{Key: keys[0], Team: teamOf[keys[0]], Model: models[0], EndUser: names[i%len(names)], Reason: "window"}))
				refused[names[i%len(names)]]++
			}
			e.clock.Advance(time.Duration(r.IntN(600)) * time.Second)
		}
		require.NoError(t, e.led.Flush(ctx))

		want := func(key, name string) ledger.EndUserTotals {
			var of []ledger.Entry
			var last time.Time
			for _, x := range entries {
				if x.Key == key && x.EndUser == name {
					of, last = append(of, x), x.Time
				}
			}
			u := ledger.EndUserTotals{Key: key, EndUser: name, Totals: sumOf(of), LastUsed: last}
			if key == keys[0] && refused[name] > 0 {
				u.Refused, u.Reasons = refused[name], map[string]int64{"window": refused[name]}
			}
			return u
		}
		sorted := slices.Sorted(slices.Values(names))
		for _, q := range []string{"", "b", "a", "zz", "é"} {
			var got []ledger.EndUserTotals
			cursor := ""
			for range 100 {
				p, err := e.led.EndUsers(ctx, ledger.EndUserQuery{Key: keys[0], Q: q, Limit: 2, Cursor: cursor})
				require.NoError(t, err)
				require.LessOrEqual(t, len(p.EndUsers), 2)
				got = append(got, p.EndUsers...)
				if cursor = p.Next; cursor == "" {
					break
				}
			}
			var wantAll []ledger.EndUserTotals
			for _, name := range sorted {
				if strings.HasPrefix(name, q) && want(keys[0], name).Requests+want(keys[0], name).Refused > 0 {
					wantAll = append(wantAll, want(keys[0], name))
				}
			}
			require.Equal(t, wantAll, got, "q %q", q)
		}
		for _, name := range names {
			for _, key := range keys[:2] {
				if w := want(key, name); w.Requests+w.Refused > 0 {
					got, err := e.led.EndUser(ctx, key, name)
					require.NoError(t, err)
					require.Equal(t, w, got)
				}
			}
		}
		_, err := e.led.EndUser(ctx, keys[0], "nobody")
		require.ErrorIs(t, err, ledger.ErrNotFound)
		_, err = e.led.EndUser(ctx, keys[3], "a")
		require.ErrorIs(t, err, ledger.ErrNotFound)

		p, err := e.led.EndUsers(ctx, ledger.EndUserQuery{Key: keys[0], Limit: 1})
		require.NoError(t, err)
		require.NotEmpty(t, p.Next)
		for _, q := range []ledger.EndUserQuery{
			{Key: keys[0], Cursor: p.Next[:2] + string('A'+'B'-p.Next[2]) + p.Next[3:]},
			{Key: keys[0], Cursor: "x" + p.Next},
			{Key: keys[0], Cursor: "!!"},
			{Key: keys[0], Cursor: ""},
			{Key: keys[1], Cursor: p.Next},
			{Key: keys[0], Q: "a", Cursor: p.Next},
		} {
			if q.Cursor == "" {
				q.Cursor = "AQ" // a version byte and nothing else
			}
			_, err := e.led.EndUsers(ctx, q)
			var qe *ledger.QueryError
			require.True(t, errors.As(err, &qe) && qe.Param == "cursor", "%+v: %v", q, err)
		}
		for _, q := range []ledger.EndUserQuery{{}, {Key: keys[0], Limit: -1}, {Key: keys[0], Limit: ledger.MaxLimit + 1}, {Key: keys[0], Q: "a\x00"}} {
			_, err := e.led.EndUsers(ctx, q)
			require.ErrorIs(t, err, ledger.ErrInvalid, "%+v", q)
		}
	})
}
