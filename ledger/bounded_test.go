package ledger_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/ledger"
)

// reads counts what a ledger reads of its store: the scans of each
// prefix of its records ("L/e/", "L/s/", ...), and the records read by
// them and by direct reads.
type reads struct {
	scans   [256]atomic.Int64 // by the letter after "L/"
	records atomic.Int64
	updates atomic.Int64 // batches written
}

func (r *reads) scan(prefix []byte) {
	if len(prefix) > 2 {
		r.scans[prefix[2]].Add(1)
	}
}

// scansOf returns the scans of prefix "L/c/".
func (r *reads) scansOf(c byte) int64 { return r.scans[c].Load() }

func (r *reads) reset() {
	for i := range r.scans {
		r.scans[i].Store(0)
	}
	r.records.Store(0)
	r.updates.Store(0)
}

// counted is a store whose reads are counted in n.
type counted[L ratestore.StoreLimiter, B ratestore.StoreBatch[L]] struct {
	ratestore.Store[L, B]
	n *reads
}

// count returns db, its reads counted in n when n is not nil.
func count[L ratestore.StoreLimiter, B ratestore.StoreBatch[L]](db ratestore.Store[L, B], n *reads) ratestore.Store[L, B] {
	if n == nil {
		return db
	}
	return counted[L, B]{db, n}
}

func (c counted[L, B]) each(fn func(k, v []byte) error) func(k, v []byte) error {
	return func(k, v []byte) error {
		c.n.records.Add(1)
		return fn(k, v)
	}
}

func (c counted[L, B]) Scan(ctx context.Context, prefix []byte, fn func(k, v []byte) error) error {
	c.n.scan(prefix)
	return c.Store.Scan(ctx, prefix, c.each(fn))
}

func (c counted[L, B]) ScanFrom(ctx context.Context, prefix, start []byte, fn func(k, v []byte) error) error {
	c.n.scan(prefix)
	return c.Store.ScanFrom(ctx, prefix, start, c.each(fn))
}

func (c counted[L, B]) Update(ctx context.Context, locks []string, fn func(B) error) error {
	c.n.updates.Add(1)
	return c.Store.Update(ctx, locks, fn)
}

func (c counted[L, B]) Get(ctx context.Context, key []byte) ([]byte, error) {
	c.n.records.Add(1)
	return c.Store.Get(ctx, key)
}

func (c counted[L, B]) Reread(ctx context.Context, keys [][]byte) ([][]byte, error) {
	vals, err := c.Store.Reread(ctx, keys)
	c.n.records.Add(int64(len(vals)))
	return vals, err
}

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
			require.LessOrEqual(t, e.reads.scansOf('e'), int64(2), "scans of the entries of a day, for %+v", q)
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
// allowed (3660 days) of a ledger of two days reads the summaries or
// rollups of those days, not two scans per day of the range; longer, or
// past now + 1 day, it is refused naming its parameter.
func TestSpendReadsOnlyDaysWithWriters(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		e.record(ledger.Entry{Key: keys[0], Model: models[0], Cost: 5})
		e.clock.Advance(24 * time.Hour)
		e.record(ledger.Entry{Key: keys[1], Model: models[0], Cost: 7})
		to := e.clock.Now().Add(24 * time.Hour).Truncate(24 * time.Hour)
		from := to.Add(-3660 * 24 * time.Hour)
		for _, q := range []ledger.SpendQuery{
			{From: from, To: to, GroupBy: []string{ledger.ByKey}},
			{From: from, To: to, GroupBy: []string{ledger.ByKey, ledger.ByDay}},
			{From: from, To: to, GroupBy: []string{ledger.ByModel}},
			{From: from, To: to, GroupBy: []string{ledger.ByHour}},
			{From: from, To: to, Key: keys[0], GroupBy: []string{ledger.ByDay}},
		} {
			e.reads.reset()
			s, err := e.led.Spend(ctx, q)
			require.NoError(t, err)
			require.Equal(t, int64(2)-min(int64(len(q.Key)), 1), s.Total.Requests, "%+v", q)
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
