package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/ledger"
)

// refusedIn returns the refusals l's rollups of the last days hold.
func refusedIn(t *testing.T, l *ledger.Ledger) ledger.Totals {
	t.Helper()
	s, err := l.Spend(ctx, ledger.SpendQuery{})
	require.NoError(t, err)
	return s.Total
}

// refuse counts n refusals of key keys[0] (in a team), each of model
// model(i), by reason "model".
func (e *env) refuse(n int, model func(i int) string) {
	e.t.Helper()
	for i := range n {
		require.NoError(e.t, e.led.Refused(ctx, ledger.Refusal{Key: keys[0], Team: teamOf[keys[0]], Model: model(i), Reason: "model"}))
	}
}

// TestRefusalsWrittenWithNextEntry: 300 refusals cost no write; on a DB
// the next entry's batch writes their counts (no commit of their own),
// and queries of the process that counted them see them before.
func TestRefusalsWrittenWithNextEntry(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		if e.be.IsRedis() {
			t.Skip("on a shared store the counts are written by Flush (TestRefusalsWrittenByTimer)")
		}
		e.refuse(300, func(i int) string { return fmt.Sprintf("junk-%d", i) })
		require.Zero(t, e.reads.updates.Load(), "a refusal wrote")
		require.Zero(t, refusedIn(t, e.stored).Refused)
		require.EqualValues(t, 300, refusedIn(t, e.led).Refused, "the counting process sees its counts")
		e.record(ledger.Entry{Key: keys[1], Model: models[0], Cost: 3})
		require.EqualValues(t, 1, e.reads.updates.Load(), "the entry's batch writes the counts")
		require.LessOrEqual(t, e.reads.rollups.Load(), int64(6), "each rollup the batch changed put once, not once per count")
		stored := refusedIn(t, e.stored)
		require.EqualValues(t, 300, stored.Refused)
		require.Equal(t, map[string]int64{"model": 300}, stored.Reasons)
		require.EqualValues(t, 1, stored.Requests)
		require.Equal(t, stored, refusedIn(t, e.led), "counted once")
	})
}

// TestRefusalsWrittenByTimer: with no entry written, the counts are
// written in one batch a second after the first refusal (on the
// ledger's clock), and by Close.
func TestRefusalsWrittenByTimer(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		e.refuse(50, func(i int) string { return models[i%2] })
		require.Eventually(t, func() bool { return e.clock.Timers() == 1 }, 10*time.Second, time.Millisecond, "the flush's timer")
		e.clock.Advance(999 * time.Millisecond)
		require.Zero(t, e.reads.updates.Load())
		e.clock.Advance(time.Millisecond)
		require.Eventually(t, func() bool { return refusedIn(t, e.stored).Refused == 50 }, 10*time.Second, time.Millisecond)
		require.EqualValues(t, 1, e.reads.updates.Load(), "one batch for 50 refusals")
		s, err := e.stored.Spend(ctx, ledger.SpendQuery{GroupBy: []string{ledger.ByModel}})
		require.NoError(t, err)
		require.Len(t, s.Rows, 2)
		require.EqualValues(t, 25, s.Rows[0].Refused)

		e.refuse(7, func(int) string { return models[2] })
		e.reopen() // Close writes what waits
		require.EqualValues(t, 57, refusedIn(t, e.led).Refused)
	})
}

// TestRefusalsBounded: the distinct counts waiting are bounded: the one
// past ledger.MaxRefusals writes those waiting first, in one batch.
func TestRefusalsBounded(t *testing.T) {
	forModes(t, true, func(t *testing.T, e *env) {
		e.refuse(ledger.MaxRefusals, func(i int) string { return fmt.Sprintf("m-%d", i) })
		e.refuse(ledger.MaxRefusals, func(i int) string { return fmt.Sprintf("m-%d", i) }) // the same tuples
		require.Zero(t, e.reads.updates.Load())
		e.refuse(1, func(int) string { return "one more" })
		require.EqualValues(t, 1, e.reads.updates.Load())
		require.EqualValues(t, 2*ledger.MaxRefusals, refusedIn(t, e.stored).Refused)
		require.EqualValues(t, 2*ledger.MaxRefusals+1, refusedIn(t, e.led).Refused)
	})
}
