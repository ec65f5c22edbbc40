package ledger_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/ledger"
)

// TestRequestsReadOnlyDaysWithEntries: the widest range a query may ask
// for (the retention's start to a day past now) on a ledger of two days
// reads those two days' entries, not a scan per day of the range; a range
// past now + 1 day or before the retention is refused, naming its
// parameter, before anything is read.
func TestRequestsReadOnlyDaysWithEntries(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		e.record(ledger.Entry{Key: keys[0], Model: models[0]})
		e.clock.Advance(24 * time.Hour)
		e.record(ledger.Entry{Key: keys[1], Model: models[0]})
		now := e.clock.Now()
		start := now.Truncate(24 * time.Hour).Add(-90 * 24 * time.Hour)
		for _, q := range []ledger.RequestQuery{
			{From: start, To: now.Add(24 * time.Hour), Key: "key_00000000000000ff"}, // matches nothing
			{From: start, To: now.Add(24 * time.Hour), Model: "none"},
			{From: start, To: now.Add(24 * time.Hour), Key: keys[0]},
			{},
		} {
			e.reads.reset()
			p, err := e.led.Requests(ctx, q)
			require.NoError(t, err)
			require.LessOrEqual(t, len(p.Entries), 2)
			entryScans := int64(2)
			if q.Key != "" {
				entryScans = int64(len(p.Entries)) // the days the key has entries on
			}
			require.LessOrEqual(t, e.reads.scansOf('e'), entryScans, "scans of the entries of a day, for %+v", q)
			require.LessOrEqual(t, e.reads.records.Load(), int64(100), "records read for %+v", q)
		}
		for _, c := range []struct {
			q     ledger.RequestQuery
			param string
		}{
			{ledger.RequestQuery{To: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}, "to"},
			{ledger.RequestQuery{To: now.Add(24*time.Hour + time.Millisecond)}, "to"},
			{ledger.RequestQuery{From: start.Add(-time.Millisecond)}, "from"},
			{ledger.RequestQuery{From: time.Date(2, 1, 1, 0, 0, 0, 0, time.UTC)}, "from"},
			{ledger.RequestQuery{Limit: ledger.MaxLimit + 1}, "limit"},
			{ledger.RequestQuery{Cursor: "x"}, "cursor"},
		} {
			e.reads.reset()
			_, err := e.led.Requests(ctx, c.q)
			requireQueryError(t, err, c.param)
			require.Zero(t, e.reads.records.Load(), "a refused query reads nothing")
		}
	})
}

// TestSpendReadsOnlyDaysWithWriters: a spend over the longest range
// allowed (3660 days; 24 hours by hour) of a ledger of two days reads the
// summaries or rollups of those days, not two scans per day of the range;
// longer, or past now + 1 day, it is refused naming its parameter.
func TestSpendReadsOnlyDaysWithWriters(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		e.record(ledger.Entry{Key: keys[0], Model: models[0], Cost: 5})
		e.clock.Advance(24 * time.Hour)
		e.record(ledger.Entry{Key: keys[1], Model: models[0], Cost: 7})
		to := e.clock.Now().Add(24 * time.Hour).Truncate(24 * time.Hour)
		from := to.Add(-3660 * 24 * time.Hour)
		for _, c := range []struct {
			q    ledger.SpendQuery
			want int64 // requests
		}{
			{ledger.SpendQuery{From: from, To: to, GroupBy: []string{ledger.ByKey}}, 2},
			{ledger.SpendQuery{From: from, To: to, GroupBy: []string{ledger.ByKey, ledger.ByDay}}, 2},
			{ledger.SpendQuery{From: from, To: to, GroupBy: []string{ledger.ByModel}}, 2},
			{ledger.SpendQuery{From: to.Add(-24 * time.Hour), To: to, GroupBy: []string{ledger.ByHour}}, 1},
			{ledger.SpendQuery{To: to, GroupBy: []string{ledger.ByHour}}, 1}, // the last 24 hours
			{ledger.SpendQuery{From: from, To: to, Key: keys[0], GroupBy: []string{ledger.ByDay}}, 1},
		} {
			q := c.q
			e.reads.reset()
			s, err := e.led.Spend(ctx, q)
			require.NoError(t, err)
			require.Equal(t, c.want, s.Total.Requests, "%+v", q)
			var scans int64
			for i := range e.reads.scans {
				scans += e.reads.scans[i].Load()
			}
			require.LessOrEqual(t, scans, int64(2*(1+2*2)), "scans for %+v: two passes at most, each of the writers' marks and two a day", q)
			require.LessOrEqual(t, e.reads.records.Load(), int64(100), "records read for %+v", q)
		}
		for _, c := range []struct {
			q     ledger.SpendQuery
			param string
		}{
			{ledger.SpendQuery{From: from.Add(-24 * time.Hour), To: to}, "from"},
			{ledger.SpendQuery{To: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}, "to"},
			{ledger.SpendQuery{To: e.clock.Now().Add(24*time.Hour + time.Second)}, "to"},
			{ledger.SpendQuery{GroupBy: []string{"week"}}, "group_by"},
			{ledger.SpendQuery{From: to.Add(-25 * time.Hour), To: to, GroupBy: []string{ledger.ByHour}}, "from"},
			{ledger.SpendQuery{From: to.Add(-24*time.Hour - time.Minute), To: to, GroupBy: []string{ledger.ByHour, ledger.ByKey}}, "from"},
		} {
			e.reads.reset()
			_, err := e.led.Spend(ctx, c.q)
			requireQueryError(t, err, c.param)
			require.Zero(t, e.reads.records.Load(), "a refused query reads nothing")
		}
	})
}

// requireQueryError asserts that err is a *ledger.QueryError naming
// param, matching ledger.ErrInvalid, and saying what is allowed.
func requireQueryError(t *testing.T, err error, param string) {
	t.Helper()
	var qe *ledger.QueryError
	require.ErrorAs(t, err, &qe)
	require.ErrorIs(t, err, ledger.ErrInvalid)
	require.Equal(t, param, qe.Param, "%v", err)
	require.True(t, strings.Contains(qe.Msg, "want") || strings.Contains(qe.Msg, "not one"), "%q says what is allowed", qe.Msg)
}

// TestRequestsReadBudget: a page reads a bounded number of bytes, a day at
// a time: a filter that matches nothing answers a page per day, each
// empty, reading that day only, with a cursor to the next; paging on
// with any filter yields every entry once, newest first.
func TestRequestsReadBudget(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		defer ledger.SetReadBudget(1)()
		r := rand.New(rand.NewPCG(5, 5))
		var entries []ledger.Entry
		for range 5 * 20 { // 5 days
			entries = append(entries, e.record(randomEntry(r, len(entries))))
			e.clock.Advance(72 * time.Minute)
		}
		q := ledger.RequestQuery{Model: "none", Limit: 10}
		for day := 0; ; day++ {
			e.reads.reset()
			p, err := e.led.Requests(ctx, q)
			require.NoError(t, err)
			require.Empty(t, p.Entries)
			require.EqualValues(t, 1, e.reads.scansOf('e'), "page %d reads one day", day)
			if p.Next == "" {
				require.Equal(t, 5, day, "a page for each of the 6 days the entries are on")
				break
			}
			q.Cursor = p.Next
		}
		for _, q := range []ledger.RequestQuery{{Limit: 7}, {Model: models[1], Limit: 3}, {Key: keys[2], Limit: 1000}} {
			got := pages(t, e, q)
			require.Equal(t, newestFirst(entries, func(x ledger.Entry) bool {
				return (q.Model == "" || x.Model == q.Model) && (q.Key == "" || x.Key == q.Key)
			}), got, "%+v", q)
		}
	})
}
