package ledger_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// The scale of the query benchmarks: the 10M entries over 90
// days, 10k keys in 100 teams, 50 models, each key using 3 of them (a
// key serves one application). RATESTORE_LEDGER_BENCH_ENTRIES scales the
// entries down for a quick run.
const (
	scaleKeys   = 10_000
	scaleTeams  = 100
	scaleModels = 50
	scaleDays   = 90
)

// benchFormat names the format of the records in the directory of a
// benchmark's database: a build that writes another format builds its
// own.
const benchFormat = "v12"

// scale is the shape of a benchmark's ledger.
type scale struct{ entries, keys int }

func scaleEntries() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("RATESTORE_LEDGER_BENCH_ENTRIES"), &n); err == nil && n > 0 {
		return n
	}
	return 10_000_000
}

// scaleEntry is an entry of one of keys keys.
func scaleEntry(r *rand.Rand, keys int) ledger.Entry {
	k := r.IntN(keys)
	return ledger.Entry{
		RequestID: fmt.Sprintf("req_%016x", r.Uint64()), Key: fmt.Sprintf("key_%016x", k), Team: fmt.Sprintf("team_%016x", k%scaleTeams),
		Model: fmt.Sprintf("model-%02d", (k*7+r.IntN(3))%scaleModels), Route: "chat completions", Status: 200,
		Latency: time.Duration(200+r.IntN(3000)) * time.Millisecond,
		Tokens:  ledger.Tokens{Input: r.Int64N(4000), Output: r.Int64N(800), CacheRead: r.Int64N(2) * r.Int64N(2000), Reasoning: r.Int64N(2) * r.Int64N(300)},
		Cost:    pricing.USD(r.Int64N(20_000_000)),
	}
}

// scaleDB returns a bolt database holding sc.entries entries of
// sc.keys keys over scaleDays, built once into the temporary directory
// and kept there for later runs, and the end of its days.
func scaleDB(b *testing.B, sc scale) (string, time.Time) {
	n := sc.entries
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("ratestore-ledger-bench-%s-%d-%d", benchFormat, n, sc.keys))
	path := filepath.Join(dir, "ledger.db")
	end := t0.Add(scaleDays * 24 * time.Hour)
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return path, end
	}
	require.NoError(b, os.RemoveAll(dir))
	require.NoError(b, os.MkdirAll(dir, 0o755))
	clock := fakeclock.New(t0)
	db, err := ratestore.Open(path, ratestore.Options{Durability: ratestore.Async, Now: clock.Now})
	require.NoError(b, err)
	led, err := ledger.Open(db, ledger.Options{Retention: 365 * 24 * time.Hour})
	require.NoError(b, err)
	r := rand.New(rand.NewPCG(1, 1))
	step := scaleDays * 24 * time.Hour / time.Duration(n)
	for i := 0; i < n; i += 10_000 {
		err := db.Update(ctx, nil, func(bt backend.Batch) error {
			for range min(n-i, 10_000) {
				note, err := led.Note(scaleEntry(r, sc.keys))
				if err != nil {
					return err
				}
				if err := note.Record(bt, clock.Now()); err != nil {
					return err
				}
				clock.Advance(step)
			}
			return nil
		})
		require.NoError(b, err)
		require.NoError(b, led.Compact(ctx))
	}
	require.NoError(b, led.Close(ctx))
	require.NoError(b, db.Close())
	require.NoError(b, os.WriteFile(filepath.Join(dir, "done"), nil, 0o644))
	return path, end
}

// BenchmarkQueries answers the operator's questions over the scale
// database (10M entries, 90 days): spend by key over 30 days, one key's
// day series over 90 days, the console's spend page over 14 days, and
// pages of 100 entries, newest first, of all keys and of one key.
func BenchmarkQueries(b *testing.B) {
	path, end := scaleDB(b, scale{scaleEntries(), scaleKeys})
	db, err := ratestore.Open(path, ratestore.Options{Durability: ratestore.Async, Now: fakeclock.New(end).Now})
	require.NoError(b, err)
	b.Cleanup(func() { db.Close() })
	led, err := ledger.Open(db, ledger.Options{ReadOnly: true})
	require.NoError(b, err)
	key := fmt.Sprintf("key_%016x", 4242)
	for _, c := range []struct {
		name string
		run  func() (int, error)
	}{
		{"spend-by-key-30d", func() (int, error) {
			s, err := led.Spend(ctx, ledger.SpendQuery{From: end.Add(-30 * 24 * time.Hour), To: end, GroupBy: []string{ledger.ByKey}})
			return len(s.Rows), err
		}},
		{"key-series-90d", func() (int, error) {
			s, err := led.Spend(ctx, ledger.SpendQuery{From: end.Add(-90 * 24 * time.Hour), To: end, Key: key, GroupBy: []string{ledger.ByDay}})
			return len(s.Rows), err
		}},
		{"spend-page-14d", func() (int, error) { // what the console's spend page asks: by day and model, by key, by model
			from, rows := end.Add(-14*24*time.Hour), 0
			for _, g := range [][]string{{ledger.ByDay, ledger.ByModel}, {ledger.ByKey}, {ledger.ByModel}} {
				s, err := led.Spend(ctx, ledger.SpendQuery{From: from, To: end, GroupBy: g})
				if err != nil {
					return 0, err
				}
				rows += len(s.Rows)
			}
			return rows, nil
		}},
		{"page-100", func() (int, error) {
			p, err := led.Requests(ctx, ledger.RequestQuery{Limit: 100})
			return len(p.Entries), err
		}},
		{"page-100-of-key", func() (int, error) {
			p, err := led.Requests(ctx, ledger.RequestQuery{Key: key, Limit: 100})
			return len(p.Entries), err
		}},
	} {
		b.Run(c.name, func(b *testing.B) { benchQuery(b, c.run) })
	}
	fi, err := os.Stat(path)
	require.NoError(b, err)
	b.Logf("database: %d entries, %d bytes: %.1f bytes per entry (rollups included)", scaleEntries(), fi.Size(), float64(fi.Size())/float64(scaleEntries()))
}

// benchQuery runs query in b's loop, and reports the rows it answered.
func benchQuery(b *testing.B, query func() (int, error)) {
	var rows int
	for b.Loop() {
		n, err := query()
		if err != nil {
			b.Fatal(err)
		}
		rows = n
	}
	b.ReportMetric(float64(rows), "rows")
}
