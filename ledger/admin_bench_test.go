package ledger_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/redisstore"
)

// adminScale is the ledger of BenchmarkAdminQueries: 100k keys in 100
// teams over 90 days, 1M entries, or 10M with RATESTORE_BENCH_10M=1 (or
// RATESTORE_LEDGER_BENCH_ENTRIES).
func adminScale() scale {
	switch {
	case os.Getenv("RATESTORE_LEDGER_BENCH_ENTRIES") != "":
		return scale{scaleEntries(), 100_000}
	case os.Getenv("RATESTORE_BENCH_10M") == "1":
		return scale{10_000_000, 100_000}
	}
	return scale{1_000_000, 100_000}
}

// BenchmarkAdminQueries answers the worst queries the admin API allows on
// a ledger of 100k keys (adminScale), on bolt and on Redis (the bolt
// ledger's records copied into a Redis): GET /admin/requests from the
// retention's start to now + 1 day with a key matching nothing, a key
// that has entries, and a model matching nothing; GET /admin/spend over
// 3660 days (to now + 1 day) by key, by key and day, and by model. It
// reports the rows answered, and the records the query read.
func BenchmarkAdminQueries(b *testing.B) {
	sc := adminScale()
	path, end := scaleDB(b, sc)
	db, err := ratestore.Open(path, ratestore.Options{Durability: ratestore.Async, Now: fakeclock.New(end).Now})
	require.NoError(b, err)
	b.Cleanup(func() { db.Close() })
	b.Run("bolt", func(b *testing.B) {
		n := &reads{}
		led, err := ledger.Open(count(db, n), ledger.Options{ReadOnly: true})
		require.NoError(b, err)
		adminQueries(b, led, n, end)
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: fakeclock.New(end).Now, Timeout: time.Minute})
		require.NoError(b, err)
		b.Cleanup(func() { rdb.Close() })
		start := time.Now()
		records := copyRecords(b, db, rdb)
		b.Logf("copied %d records of the ledger to Redis in %v", records, time.Since(start).Round(time.Second))
		n := &reads{}
		led, err := ledger.Open(count(rdb, n), ledger.Options{ReadOnly: true})
		require.NoError(b, err)
		adminQueries(b, led, n, end)
	})
}

// adminQueries runs BenchmarkAdminQueries' queries on led, whose reads
// n counts, at end.
func adminQueries(b *testing.B, led *ledger.Ledger, n *reads, end time.Time) {
	to := end.Add(24 * time.Hour)
	from := to.Add(-3660 * 24 * time.Hour).Add(24 * time.Hour).Truncate(24 * time.Hour)
	key := fmt.Sprintf("key_%016x", 4242)
	requests := func(q ledger.RequestQuery) func() (int, error) {
		q.To = to
		return func() (int, error) {
			p, err := led.Requests(ctx, q)
			return len(p.Entries), err
		}
	}
	spend := func(by ...string) func() (int, error) {
		return func() (int, error) {
			s, err := led.Spend(ctx, ledger.SpendQuery{From: from, To: to, GroupBy: by})
			return len(s.Rows), err
		}
	}
	for _, c := range []struct {
		name string
		run  func() (int, error)
	}{
		{"requests-key-none", requests(ledger.RequestQuery{Key: "key_ffffffffffffffff"})},
		{"requests-key", requests(ledger.RequestQuery{Key: key})},
		{"requests-model-none", requests(ledger.RequestQuery{Model: "none"})},
		{"spend-3660d-by-key", spend(ledger.ByKey)},
		{"spend-3660d-by-key-day", spend(ledger.ByKey, ledger.ByDay)},
		{"spend-3660d-by-model", spend(ledger.ByModel)},
	} {
		b.Run(c.name, func(b *testing.B) {
			n.reset()
			benchQuery(b, c.run)
			b.ReportMetric(float64(n.records.Load())/float64(b.N), "records/op")
			var scans int64
			for i := range n.scans {
				scans += n.scans[i].Load()
			}
			b.ReportMetric(float64(scans)/float64(b.N), "scans/op")
		})
	}
}

// copyRecords copies the ledger's records of db into rdb, a thousand a
// batch, and returns how many.
func copyRecords(b *testing.B, db *ratestore.DB, rdb *redisstore.DB) int {
	var keys, vals [][]byte
	flush := func() {
		err := rdb.Update(ctx, nil, func(bt backend.Batch) error {
			for i := range keys {
				if err := bt.Put(keys[i], vals[i]); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(b, err)
		keys, vals = keys[:0], vals[:0]
	}
	var records int
	err := db.Scan(ctx, []byte("L/"), func(k, v []byte) error {
		keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
		if records++; len(keys) == 1000 {
			flush()
		}
		return nil
	})
	require.NoError(b, err)
	flush()
	return records
}
