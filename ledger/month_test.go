package ledger_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/ledger"
)

// TestMonthSummaries: over 70 days from March to May, with a writer that
// closes in March, one that stops in April without closing (it crashed:
// no month summary, its last day not summarized), and one that
// writes on and closes, every spend adds up to the entries; a spend of
// April by key reads the month summaries of the writers that wrote them,
// and only the other writer's days.
func TestMonthSummaries(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		r := rand.New(rand.NewPCG(7, 7))
		var entries []ledger.Entry
		step := func(l *ledger.Ledger, days int) {
			for range 3 * days {
				entries = append(entries, e.recordWith(l, randomEntry(r, len(entries))))
				e.clock.Advance(8 * time.Hour)
			}
		}
		step(e.led, 10)
		e.reopen() // the first writer closes in March
		step(e.led, 30)
		crashed := e.another()
		step(crashed, 5) // in April, and never again
		require.NoError(t, crashed.Compact(ctx))
		step(e.led, 25)
		e.reopen()
		check(t, e, entries)

		april := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
		q := ledger.SpendQuery{From: april, To: april.AddDate(0, 1, 0), GroupBy: []string{ledger.ByKey}}
		e.reads.reset()
		got, err := e.led.Spend(ctx, q)
		require.NoError(t, err)
		requireSpend(t, entries, got)
		require.EqualValues(t, 1, e.reads.scansOf('S'), "April's month summaries")
		require.LessOrEqual(t, e.reads.scansOf('s'), int64(6), "the crashed writer's days of April")
		require.EqualValues(t, 1, e.reads.scansOf('k'), "the rollups of the crashed writer's last day, which it did not summarize")
	})
}
