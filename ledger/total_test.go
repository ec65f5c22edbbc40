package ledger_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// manyKeysEntry is an entry of one of 40 keys in 4 teams, every fifth key
// without one, of one of 4 models; a key's cost grows with its number, so
// that the keys without a team rank high as a team.
func manyKeysEntry(r *rand.Rand, model func(k int) string) ledger.Entry {
	k := r.IntN(40)
	team := fmt.Sprintf("team_%016x", k%4)
	if k%5 == 0 {
		team = ""
	}
	return ledger.Entry{
		RequestID: fmt.Sprintf("req_%016x", r.Uint64()), Key: fmt.Sprintf("key_%016x", k), Team: team, Model: model(k),
		Status: 200, Tokens: ledger.Tokens{Input: r.Int64N(900), Output: r.Int64N(200)}, Cost: pricing.USD(r.Int64N(1000) * int64(k+1)),
	}
}

// refuseSome counts a refusal of e's ledger, of a key and reason drawn
// from r, one time in three, and writes those waiting one time in six:
// on a DB the next entry's batch writes the others.
func (e *env) refuseSome(r *rand.Rand) {
	if r.IntN(3) > 0 {
		return
	}
	en := manyKeysEntry(r, func(int) string { return models[r.IntN(len(models))] })
	reason := []string{"window", "budget"}[r.IntN(2)]
	require.NoError(e.t, e.led.Refused(ctx, ledger.Refusal{Key: en.Key, Team: en.Team, Model: en.Model, Reason: reason}))
	if r.IntN(2) == 0 {
		require.NoError(e.t, e.led.Flush(ctx))
	}
}

// flushOnCall is Options whose refusals are written only when Flush is
// called (or with an entry, on a DB): on a shared store a flush of its own
// may conflict with an entry's batch, which a test's record does not retry.
var flushOnCall = ledger.Options{After: func(time.Duration) <-chan time.Time { return nil }}

// requireAsBefore asserts that q answers on e's ledger what it answered
// before day totals, refusals included: the same rows, read from the
// summaries and rollups alone once the day totals are hidden; and, but
// for the rows of refusals alone, what the entries add up to (wantTop).
// It returns the answer.
func requireAsBefore(t *testing.T, e *env, entries []ledger.Entry, q ledger.SpendQuery) ledger.Spend {
	t.Helper()
	got, err := e.led.Spend(ctx, q)
	require.NoError(t, err, "%+v", q)
	restore := e.hide("L/T/")
	before, err := e.led.Spend(ctx, q)
	restore()
	require.NoError(t, err, "%+v", q)
	require.Equal(t, before, got, "%+v", q)
	var requested []ledger.Row // the rows of entries, not of refusals alone
	for _, row := range got.Rows {
		if row.Requests > 0 {
			row.Totals = stripReasons(row.Totals)
			requested = append(requested, row)
		}
	}
	require.Equal(t, wantTop(entries, got.SpendQuery()), requested, "%+v", q)
	_, total := want(entries, got.SpendQuery())
	require.Equal(t, total, stripReasons(got.Total), "%+v", q)
	return got
}

// TestSpendByDayFromTotals: a spend grouped by day whose groups are
// ranked reads each summarized day and writer from the top groups'
// rollups and the day's total, and answers what it answered reading
// every row of every day, refusals included, on every backend: over ten
// days of 40 keys, with a writer that crashed (no summary) and today
// (none yet). Over the whole month, it scans no summary nor key rollups
// but those of the crashed writer's day.
func TestSpendByDayFromTotals(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		e.close()
		e.open(flushOnCall)
		r := rand.New(rand.NewPCG(11, 12))
		model := func(k int) string { return models[(k+r.IntN(2))%len(models)] }
		crashed := e.another()
		var entries []ledger.Entry
		for i := range 300 { // ten days from March 1, 22:00
			entries = append(entries, e.record(manyKeysEntry(r, model)))
			if i == 160 || i == 161 {
				entries = append(entries, e.recordWith(crashed, manyKeysEntry(r, model))) // on March 7, then no more
			}
			e.refuseSome(r)
			e.clock.Advance(48 * time.Minute)
		}
		e.close() // the days and March summarized
		e.open(flushOnCall)
		e.clock.Set(time.Date(2026, 4, 2, 1, 0, 0, 0, time.UTC))
		for range 20 {
			entries = append(entries, e.record(manyKeysEntry(r, model)))
			e.refuseSome(r)
		}
		team1 := fmt.Sprintf("team_%016x", 1)
		march := [2]time.Time{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
		for _, c := range []struct {
			q    ledger.SpendQuery
			fast bool // read from the day totals
		}{
			{ledger.SpendQuery{GroupBy: []string{ledger.ByKey, ledger.ByDay}, Limit: 5}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByDay, ledger.ByKey, ledger.ByModel}, Limit: 7}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByKey, ledger.ByTeam, ledger.ByDay}, Limit: 6}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByTeam, ledger.ByDay}, Limit: 2}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByTeam, ledger.ByDay}, Limit: 4}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByModel, ledger.ByDay}, Limit: 1}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByDay}}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByDay}, Model: models[1]}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByKey, ledger.ByDay}, Team: team1, Limit: 3}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByKey, ledger.ByDay}, Model: models[2], Limit: 3}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByModel, ledger.ByDay}, Model: models[0], Limit: 1}, true},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByTeam, ledger.ByModel, ledger.ByDay}, Limit: 3}, false},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByTeam, ledger.ByDay}, Model: models[0], Limit: 2}, false},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByKey, ledger.ByDay}, Team: team1, Model: models[1], Limit: 2}, false},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByModel, ledger.ByDay}, Team: team1, Limit: 1}, false},
			{ledger.SpendQuery{GroupBy: []string{ledger.ByKey, ledger.ByDay}, Limit: 100}, true}, // every group a row
		} {
			q := c.q
			q.From, q.To = march[0], march[1]
			e.reads.reset()
			_, err := e.led.Spend(ctx, q)
			require.NoError(t, err)
			if c.fast {
				require.LessOrEqual(t, e.reads.scansOf('s')+e.reads.scansOf('m'), int64(2), "summaries scanned: the crashed writer's day, ranking and adding up, for %+v", q)
				require.LessOrEqual(t, e.reads.scansOf('k'), int64(2), "key rollups scanned, for %+v", q)
			}
			requireAsBefore(t, e, entries, q)
			q.From, q.To = time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 3, 0, 0, 0, 0, time.UTC)
			requireAsBefore(t, e, entries, q)
		}
	})
}

// TestDayTotalRefusalAfterSummary: refusals of a day written into its
// rollups after its summary and total (on a shared store, by the flush
// once the writer has moved to the next day) delete its total, so that
// the day is read from its summary as before, until it is summarized
// again, with them. Without that, the top key's rollup would hold a
// refusal its day's total does not, and the other row one less.
func TestDayTotalRefusalAfterSummary(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		e.close()
		e.open(flushOnCall)
		var entries []ledger.Entry
		refuse := func(key string, n int) {
			for range n {
				require.NoError(t, e.led.Refused(ctx, ledger.Refusal{Key: key, Model: models[0], Reason: "window"}))
			}
		}
		for i, cost := range []pricing.USD{90, 50, 10} {
			entries = append(entries, e.record(ledger.Entry{Key: keys[i], Model: models[0], Cost: cost}))
		}
		refuse(keys[0], 2)
		refuse(keys[2], 3)
		require.NoError(t, e.led.Flush(ctx))
		refuse(keys[0], 1) // counted before midnight, written after
		e.clock.Advance(3 * time.Hour)
		entries = append(entries, e.record(ledger.Entry{Key: keys[1], Model: models[0], Cost: 5}))
		require.NoError(t, e.led.Compact(ctx)) // the first day's summary and total
		require.NoError(t, e.led.Flush(ctx))   // on Redis, the refusal waiting
		q := ledger.SpendQuery{From: t0.Truncate(24 * time.Hour), To: t0.Add(48 * time.Hour).Truncate(24 * time.Hour), GroupBy: []string{ledger.ByKey, ledger.ByDay}, Limit: 1}
		requireAsBefore(t, e, entries, q)
		require.NoError(t, e.led.Compact(ctx)) // summarized again
		s := requireAsBefore(t, e, entries, q)
		require.EqualValues(t, 3, s.Rows[0].Refused, "the top key's refusals")
		require.EqualValues(t, 3, s.Rows[1].Refused, "the other row's")
	})
}

// TestDayTotalManyModels: a day of more than 256 models has a total
// without rows by model, and a spend by model and day reads it from its
// summary; by key, from its total.
func TestDayTotalManyModels(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		r := rand.New(rand.NewPCG(13, 14))
		var entries []ledger.Entry
		for i := range 300 {
			entries = append(entries, e.record(manyKeysEntry(r, func(int) string { return fmt.Sprintf("model-%03d", i) })))
		}
		e.reopen()
		from, to := t0.Truncate(24*time.Hour), t0.Add(24*time.Hour).Truncate(24*time.Hour)
		for _, q := range []ledger.SpendQuery{
			{From: from, To: to, GroupBy: []string{ledger.ByModel, ledger.ByDay}, Limit: 5},
			{From: from, To: to, GroupBy: []string{ledger.ByDay}, Model: "model-007"},
			{From: from, To: to, GroupBy: []string{ledger.ByKey, ledger.ByDay}, Limit: 5},
			{From: from, To: to, GroupBy: []string{ledger.ByKey, ledger.ByModel, ledger.ByDay}, Limit: 5},
		} {
			requireAsBefore(t, e, entries, q)
		}
	})
}

// TestDayTotalLessThanRollups: a day total that holds less than its top
// key's rollup (here, another day's) is not read: the day is read from
// its summary, as before day totals.
func TestDayTotalLessThanRollups(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		var entries []ledger.Entry
		for i, cost := range []pricing.USD{90, 50, 10} { // a day of three entries
			entries = append(entries, e.record(ledger.Entry{Key: keys[i], Model: models[0], Cost: cost}))
		}
		e.clock.Advance(3 * time.Hour)
		entries = append(entries, e.record(ledger.Entry{Key: keys[1], Model: models[0], Cost: 5})) // and a day of one
		e.reopen()
		var totals [][2][]byte
		e.scan("L/T/", func(k, v []byte) { totals = append(totals, [2][]byte{bytes.Clone(k), bytes.Clone(v)}) })
		require.Len(t, totals, 2)
		e.put(totals[0][0], totals[1][1]) // the first day's total is the second's
		q := ledger.SpendQuery{From: t0.Truncate(24 * time.Hour), To: t0.Add(24 * time.Hour).Truncate(24 * time.Hour), GroupBy: []string{ledger.ByKey, ledger.ByDay}, Limit: 1}
		s := requireAsBefore(t, e, entries, q)
		require.EqualValues(t, 60, s.Rows[1].Cost, "the other row, from the summary")
	})
}
