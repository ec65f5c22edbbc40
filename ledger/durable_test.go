package ledger_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/ledger"
)

// records counts the entry records under L/e/ by kind: chunks of entries
// as written, blocks of compacted ones.
func (e *env) records() (chunks, blocks int) {
	e.scan("L/e/", func(k, _ []byte) {
		switch k[len(k)-1] {
		case 'c':
			chunks++
		case 'b':
			blocks++
		}
	})
	return chunks, blocks
}

func TestCompactionKeepsEveryEntry(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		entries := e.loadBatched(rand.New(rand.NewPCG(3, 4)), 2*ledger.BlockSize+10)
		chunks, blocks := e.records()
		require.Positive(t, chunks)
		require.Zero(t, blocks)
		require.NoError(t, e.led.Compact(ctx))
		chunks, blocks = e.records()
		require.Positive(t, chunks, "the open span stays in chunks")
		require.LessOrEqual(t, chunks, 10)
		require.GreaterOrEqual(t, blocks, 2, "a block per full span and day")
		check(t, e, entries)
		require.NoError(t, e.led.Compact(ctx), "nothing left to compact")
		e.reopen() // Close compacts the open span too
		chunks, _ = e.records()
		require.Zero(t, chunks)
		check(t, e, entries)
		all := pages(t, e, ledger.RequestQuery{From: entries[0].Time, To: entries[len(entries)-1].Time.Add(time.Second), Limit: 1000})
		require.Equal(t, newestFirst(entries, func(ledger.Entry) bool { return true }), all)
	})
}

func TestReopenAddsWriters(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		r := rand.New(rand.NewPCG(5, 6))
		entries := e.load(r, 100)
		e.reopen()
		entries = append(entries, e.load(r, 100)...)
		check(t, e, entries)
	})
}

func TestRetentionDropsEntriesNotRollups(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		old := e.load(rand.New(rand.NewPCG(7, 8)), 50)
		e.clock.Advance(40 * 24 * time.Hour)
		recent := e.load(rand.New(rand.NewPCG(9, 10)), 50)
		e.close()
		e.open(ledger.Options{Retention: 30 * 24 * time.Hour}) // the sweep at Open runs in the background
		require.NoError(t, e.led.DropExpired(ctx))
		got := pages(t, e, ledger.RequestQuery{Limit: 1000})
		require.Equal(t, newestFirst(recent, func(ledger.Entry) bool { return true }), got)
		_, err := e.led.Requests(ctx, ledger.RequestQuery{From: old[0].Time})
		var qe *ledger.QueryError
		require.ErrorAs(t, err, &qe, "a range before the retention's start")
		require.Equal(t, "from", qe.Param)
		e.scan("L/x/", func(k, _ []byte) {
			require.False(t, strings.HasPrefix(string(k), "L/x/"+old[0].Time.Format("20060102")), "the old day's mark is dropped")
		})
		// The rollups are kept for good.
		s, err := e.led.Spend(ctx, ledger.SpendQuery{From: old[0].Time, To: e.clock.Now().Add(time.Hour)})
		require.NoError(t, err)
		_, total := want(append(old, recent...), s.SpendQuery())
		require.Equal(t, total, stripReasons(s.Total))
	})
}

func TestRefusalsCountedByReason(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		for _, reason := range []string{"window", "window", "budget", "model"} {
			require.NoError(t, e.led.Refused(ctx, ledger.Refusal{Key: keys[0], Team: teamOf[keys[0]], Model: "gpt-4o", Reason: reason}))
		}
		require.NoError(t, e.led.Refused(ctx, ledger.Refusal{Key: keys[4], Model: "x", Reason: "rate"}))
		s, err := e.led.Spend(ctx, ledger.SpendQuery{GroupBy: []string{ledger.ByKey}})
		require.NoError(t, err)
		require.Len(t, s.Rows, 2)
		require.Equal(t, int64(4), s.Rows[0].Refused)
		require.Equal(t, map[string]int64{"window": 2, "budget": 1, "model": 1}, s.Rows[0].Reasons)
		require.Equal(t, map[string]int64{"window": 2, "budget": 1, "model": 1, "rate": 1}, s.Total.Reasons)
		team, err := e.led.Spend(ctx, ledger.SpendQuery{Team: teamOf[keys[0]]})
		require.NoError(t, err)
		require.Equal(t, int64(4), team.Total.Refused)
		require.Zero(t, team.Total.Requests)
	})
}

func TestBadInputChangesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		for _, en := range []ledger.Entry{{}, {Key: "a/b"}, {Key: keys[0], Team: "t/x"}, {Key: strings.Repeat("k", 200)}} {
			_, err := e.led.Note(en)
			require.ErrorIs(t, err, ledger.ErrInvalid, "%+v", en)
		}
		require.ErrorIs(t, e.led.Refused(ctx, ledger.Refusal{Reason: "window"}), ledger.ErrInvalid)
		for _, q := range []ledger.SpendQuery{
			{GroupBy: []string{"week"}}, {GroupBy: []string{"key", "key"}}, {GroupBy: []string{"day", "hour"}},
			{From: t0, To: t0.Add(-time.Hour)}, {From: t0.Add(-20 * 365 * 24 * time.Hour), To: t0},
		} {
			_, err := e.led.Spend(ctx, q)
			require.ErrorIs(t, err, ledger.ErrInvalid, "%+v", q)
		}
		for _, q := range []ledger.RequestQuery{{Limit: -1}, {Limit: ledger.MaxLimit + 1}, {Cursor: "nope"}, {Cursor: "1.zz.3"}, {Status: 1000}, {From: t0, To: t0}} {
			_, err := e.led.Requests(ctx, q)
			require.ErrorIs(t, err, ledger.ErrInvalid, "%+v", q)
		}
		chunks, blocks := e.records()
		require.Zero(t, chunks+blocks)
	})
}

func TestModelNamesAreBounded(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		for i := range 300 {
			en := ledger.Entry{Key: keys[0], Model: "m" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Tokens: ledger.Tokens{Input: 1}}
			e.record(en)
		}
		e.record(ledger.Entry{Key: keys[0], Model: strings.Repeat("y", 300), Tokens: ledger.Tokens{Input: 1}})
		s, err := e.led.Spend(ctx, ledger.SpendQuery{GroupBy: []string{ledger.ByModel}})
		require.NoError(t, err)
		require.LessOrEqual(t, len(s.Rows), 256)
		require.Equal(t, int64(301), s.Total.Requests)
		other := s.Rows[0]
		require.Equal(t, ledger.OtherModel, other.Model)
		require.Equal(t, int64(301-255), other.Requests)
	})
}

func TestReadOnly(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		e.load(rand.New(rand.NewPCG(1, 1)), 5)
		e.close()
		e.open(ledger.Options{ReadOnly: true})
		_, err := e.led.Note(ledger.Entry{Key: keys[0]})
		require.True(t, errors.Is(err, ledger.ErrReadOnly))
		require.ErrorIs(t, e.led.DropExpired(ctx), ledger.ErrReadOnly)
		p, err := e.led.Requests(ctx, ledger.RequestQuery{})
		require.NoError(t, err)
		require.Len(t, p.Entries, 5)
	})
}
