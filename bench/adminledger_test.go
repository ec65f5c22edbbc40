package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/redisstore"
)

// The operator's surface, spend: GET /admin/requests and /admin/spend
// with the worst parameters the admin API allows, on a ledger of many
// entries (ledgerEntries), on bolt and on Redis.

// The ledger of BenchmarkAdminLedger: the ledger package's
// BenchmarkAdminQueries' shape, 100k keys in 100 teams over 90 days, 50
// models, each key using 3 of them, its entries spread evenly over the
// days from ledgerStart.
const (
	ledgerKeys   = 100_000
	ledgerTeams  = 100
	ledgerModels = 50
	ledgerDays   = 90
)

var ledgerStart = time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)

// ledgerEnd is the end of the ledger's days: the clock of its queries.
var ledgerEnd = ledgerStart.Add(ledgerDays * 24 * time.Hour)

// ledgerEntries is BenchmarkAdminLedger's entry count: 10M with
// RATESTORE_BENCH_10M=1, 1M with RATESTORE_BENCH_FULL=1, else 20k.
func ledgerEntries() int {
	switch {
	case os.Getenv(scaleEnv) == "1":
		return 10_000_000
	case os.Getenv(fullEnv) == "1":
		return 1_000_000
	}
	return 20_000
}

// ledgerQuery is one request of BenchmarkAdminLedger.
type ledgerQuery struct{ name, target string }

// ledgerQueries are the worst requests the admin API allows on the
// ledger, at its end: 1000 entries a page (the most) over the whole
// retention to now + 1 day, of every key, of a key matching nothing, of a
// key and a team that have entries, of a model and a status matching
// nothing (filters no index serves: a page reads up to its read budget);
// spend over 3660 days (the most) to now + 1 day, 1000 groups (the most),
// by key, by key and day, by key, team and model, and by model; spend by
// hour, which reads the entries, over the last 24 hours of entries (the
// most), alone and by key.
func ledgerQueries() []ledgerQuery {
	to := ledgerEnd.Add(24 * time.Hour).Format(time.RFC3339)
	retention := ledgerEnd.Add(-ledger.DefaultRetention).Truncate(24 * time.Hour).Add(24 * time.Hour).Format(time.RFC3339)
	longest := ledgerEnd.Add(24*time.Hour - 3660*24*time.Hour).Truncate(24 * time.Hour).Add(24 * time.Hour).Format(time.RFC3339)
	requests := func(filter string) string {
		return "/admin/requests?limit=1000&from=" + retention + "&to=" + to + filter
	}
	spend := func(from, groupBy string) string {
		return "/admin/spend?limit=1000&from=" + from + "&to=" + to + "&group_by=" + groupBy
	}
	hourly := func(groupBy string) string {
		end := ledgerEnd.Truncate(time.Hour)
		return "/admin/spend?limit=1000&from=" + end.Add(-24*time.Hour).Format(time.RFC3339) + "&to=" + end.Format(time.RFC3339) + "&group_by=" + groupBy
	}
	return []ledgerQuery{
		{"requests-all", requests("")},
		{"requests-key-none", requests("&key=key_ffffffffffffffff")},
		{"requests-key", requests("&key=" + ledgerKey(4242))},
		{"requests-team", requests("&team=" + ledgerTeam(42))},
		{"requests-model-none", requests("&model=none")},
		{"requests-status-none", requests("&status=599")},
		{"spend-3660d-by-key", spend(longest, "key")},
		{"spend-3660d-by-key-day", spend(longest, "key,day")},
		{"spend-3660d-by-key-team-model", spend(longest, "key,team,model")},
		{"spend-3660d-by-model", spend(longest, "model")},
		{"spend-24h-by-hour", hourly("hour")},
		{"spend-24h-by-key-hour", hourly("key,hour")},
	}
}

func ledgerKey(k int) string  { return fmt.Sprintf("key_%016x", k) }
func ledgerTeam(t int) string { return fmt.Sprintf("team_%016x", t) }

// BenchmarkAdminLedger answers ledgerQueries through the admin API
// (admin.New over a ledger opened read-only, API.ServeHTTP in process,
// the JSON answer written to a writer that counts it), on a ledger of
// ledgerEntries() entries (keptLedger), at its end:
//
//   - backend=bolt: the ledger's database;
//   - backend=redis: its records copied into a redis-server started for
//     the run (redistest; no persistence), read through redisstore, which
//     scans the sorted set indexing its records, not the keyspace.
//
// ms/op is the time of one answer, rows the entries or rows it holds,
// reads/op the records it read (Get, Scan, ScanFrom, Reread: values
// handed to the ledger), B/answer the JSON answer's length. The target
// is < 1 s for each, at 10M entries, on both backends.
func BenchmarkAdminLedger(b *testing.B) {
	n := ledgerEntries()
	path := keptLedger(b, n)
	db, err := ratestore.Open(path, ratestore.Options{Durability: ratestore.Async, Now: fakeclock.New(ledgerEnd).Now})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.Run(fmt.Sprintf("entries=%d/backend=bolt", n), func(b *testing.B) {
		var reads atomic.Int64
		ledgerAnswers(b, db, &reads)
	})
	b.Run(fmt.Sprintf("entries=%d/backend=redis", n), func(b *testing.B) {
		srv := redistest.Start(b)
		rdb, err := redisstore.Open(context.Background(), srv.URL(), redisstore.Options{Now: fakeclock.New(ledgerEnd).Now, Timeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		defer rdb.Close()
		start := time.Now()
		records, err := copyLedger(db, rdb)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("copied %d records of the ledger to Redis in %v", records, time.Since(start).Round(time.Second))
		var reads atomic.Int64
		ledgerAnswers(b, rdb, &reads)
	})
}

// ledgerAnswers runs ledgerQueries on the ledger of st, its reads
// counted in reads, through an admin API over it and st's (empty) key
// store.
func ledgerAnswers(b *testing.B, st backend.Store, reads *atomic.Int64) {
	led, err := ledger.Open(countReads(st, reads), ledger.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer led.Close(context.Background())
	ks, err := keystore.Open(st, keystore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	api, err := admin.New(admin.Options{Keys: ks, Ledger: led})
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range ledgerQueries() {
		b.Run("q="+q.name, func(b *testing.B) {
			var w countingWriter
			reads.Store(0)
			for b.Loop() {
				w.reset()
				api.ServeHTTP(&w, httptest.NewRequest(http.MethodGet, q.target, nil))
				if w.status != http.StatusOK {
					b.Fatalf("GET %s: %d", q.target, w.status)
				}
			}
			b.ReportMetric(float64(reads.Load())/float64(b.N), "reads/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/op")
			b.ReportMetric(float64(w.n), "B/answer")
			rows, err := answerRows(api, q.target)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(rows), "rows")
		})
	}
}

// answerRows serves target once more and counts the entries or rows of
// its answer.
func answerRows(api http.Handler, target string) (int, error) {
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if rec.Code != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d %s", target, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	var out struct {
		Requests []json.RawMessage `json:"requests"`
		Rows     []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		return 0, fmt.Errorf("GET %s: %w", target, err)
	}
	return len(out.Requests) + len(out.Rows), nil
}

// ledgerFormat names the shape of the ledgers keptLedger keeps: a change
// to ledgerEntry, or to the ledger's records, wants a new name, so that
// no run reads a ledger built otherwise.
const ledgerFormat = "v1"

// keptLedger returns the path of a bolt database holding a ledger of n
// entries (ledgerEntry) over ledgerDays ending at ledgerEnd, built once
// into the temporary directory and kept there for later runs: 10M
// entries take minutes to build.
func keptLedger(b *testing.B, n int) string {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("ratestore-bench-ledger-%s-%d", ledgerFormat, n))
	path := filepath.Join(dir, "ledger.db")
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return path
	}
	start := time.Now()
	err := os.RemoveAll(dir)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = buildLedger(path, n)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "done"), nil, 0o644)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("built a ledger of %d entries in %s in %v", n, dir, time.Since(start).Round(time.Second))
	return path
}

// buildLedger writes n entries into a ledger at path, 10k a batch, their
// times spread evenly over ledgerDays from ledgerStart, with the clock
// of a gateway that records each as it ends; the ledger keeps them a
// year, so that none is dropped while it is built.
func buildLedger(path string, n int) error {
	ctx := context.Background()
	clock := fakeclock.New(ledgerStart)
	db, err := ratestore.Open(path, ratestore.Options{Durability: ratestore.Async, Now: clock.Now})
	if err != nil {
		return err
	}
	defer db.Close()
	led, err := ledger.Open(db, ledger.Options{Retention: 365 * 24 * time.Hour})
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 1))
	step := ledgerDays * 24 * time.Hour / time.Duration(n)
	for i := 0; i < n && err == nil; i += 10_000 {
		err = db.Update(ctx, nil, func(bt backend.Batch) error {
			for range min(n-i, 10_000) {
				note, err := led.Note(ledgerEntry(r))
				if err == nil {
					err = note.Record(bt, clock.Now())
				}
				if err != nil {
					return err
				}
				clock.Advance(step)
			}
			return nil
		})
		if err == nil {
			err = led.Compact(ctx)
		}
	}
	if err != nil {
		led.Close(ctx)
		return err
	}
	return led.Close(ctx)
}

// ledgerEntry is an entry of one of ledgerKeys keys, drawn from r.
func ledgerEntry(r *rand.Rand) ledger.Entry {
	k := r.IntN(ledgerKeys)
	return ledger.Entry{
		RequestID: fmt.Sprintf("req_%016x", r.Uint64()), Key: ledgerKey(k), Team: ledgerTeam(k % ledgerTeams),
		Model: fmt.Sprintf("model-%02d", (k*7+r.IntN(3))%ledgerModels), Route: "chat completions", Status: 200,
		Latency: time.Duration(200+r.IntN(3000)) * time.Millisecond,
		Tokens: ledger.Tokens{Input: r.Int64N(4000), Output: r.Int64N(800), CacheRead: r.Int64N(2) * r.Int64N(2000),
			Reasoning: r.Int64N(2) * r.Int64N(300)},
		Cost: pricing.USD(r.Int64N(20_000_000)),
	}
}

// copyLedger copies the ledger's records of db into rdb, a thousand a
// batch, and returns how many.
func copyLedger(db *ratestore.DB, rdb *redisstore.DB) (int, error) {
	ctx := context.Background()
	var keys, vals [][]byte
	flush := func() error {
		err := rdb.Update(ctx, nil, func(bt backend.Batch) error {
			for i := range keys {
				if err := bt.Put(keys[i], vals[i]); err != nil {
					return err
				}
			}
			return nil
		})
		keys, vals = keys[:0], vals[:0]
		return err
	}
	records := 0
	err := db.Scan(ctx, []byte("L/"), func(k, v []byte) error {
		keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
		if records++; len(keys) == 1000 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return records, err
}

// readCounter is a store whose reads are counted: every record it hands
// to its caller.
type readCounter struct {
	backend.Store
	n *atomic.Int64
}

// countReads returns st with its reads counted in n.
func countReads(st backend.Store, n *atomic.Int64) backend.Store {
	return readCounter{st, n}
}

func (c readCounter) each(fn func(k, v []byte) error) func(k, v []byte) error {
	return func(k, v []byte) error {
		c.n.Add(1)
		return fn(k, v)
	}
}

func (c readCounter) Get(ctx context.Context, key []byte) ([]byte, error) {
	c.n.Add(1)
	return c.Store.Get(ctx, key)
}

func (c readCounter) Scan(ctx context.Context, prefix []byte, fn func(k, v []byte) error) error {
	return c.Store.Scan(ctx, prefix, c.each(fn))
}

func (c readCounter) ScanFrom(ctx context.Context, prefix, start []byte, fn func(k, v []byte) error) error {
	return c.Store.ScanFrom(ctx, prefix, start, c.each(fn))
}

func (c readCounter) Reread(ctx context.Context, keys [][]byte) ([][]byte, error) {
	vals, err := c.Store.Reread(ctx, keys)
	c.n.Add(int64(len(vals)))
	return vals, err
}
