package keystore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

// benchStore returns a key store on bolt in mode d with one key that has
// usage in its windows.
func benchStore(b *testing.B, d ratestore.Durability) (*keystore.Store, keystore.Key, string) {
	c := fakeclock.New(t0)
	db, err := ratestore.Open(filepath.Join(b.TempDir(), "k.db"), ratestore.Options{Durability: d, Now: c.Now})
	require.NoError(b, err)
	b.Cleanup(func() { db.Close() })
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(b, err)
	k, secret := benchKey(b, ks)
	return ks, k, secret
}

// benchRedis is benchStore on a redis-server started for the benchmark,
// and a function that reports the round trips to Redis so far.
func benchRedis(b *testing.B) (*keystore.Store, string, func() int64) {
	srv := redistest.Start(b)
	rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: fakeclock.New(t0).Now})
	require.NoError(b, err)
	b.Cleanup(func() { rdb.Close() })
	ks, err := keystore.Open(rdb, keystore.Options{})
	require.NoError(b, err)
	_, secret := benchKey(b, ks)
	return ks, secret, redistest.CountTrips(rdb.Client())
}

// benchKey creates the benchmarks' key in ks, with usage in its windows.
func benchKey(b *testing.B, ks *keystore.Store) (keystore.Key, string) {
	k, secret, err := ks.Create(ctx, keystore.Spec{Name: "bench", Policy: keystore.Policy{
		Windows:           []keystore.Window{{Limit: 1 << 40, Window: 5 * time.Hour}, {Limit: 1 << 41, Window: 7 * 24 * time.Hour}},
		RequestsPerMinute: 1 << 40,
	}})
	require.NoError(b, err)
	_, err = ks.RecordUsage(ctx, k.ID, 100)
	require.NoError(b, err)
	return k, secret
}

func BenchmarkCheck(b *testing.B) {
	ks, _, secret := benchStore(b, ratestore.Sync)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ks.Check(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckRedis is BenchmarkCheck on Redis (Open on a redisstore.DB), with the
// round trips a Check costs.
func BenchmarkCheckRedis(b *testing.B) {
	ks, secret, trips := benchRedis(b)
	b.ReportAllocs()
	before := trips()
	for b.Loop() {
		if _, _, err := ks.Check(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(trips()-before)/float64(b.N), "round-trips/op")
}

func BenchmarkRecordUsage(b *testing.B) {
	for _, d := range []ratestore.Durability{ratestore.Sync, ratestore.Async} {
		b.Run(d.String(), func(b *testing.B) {
			ks, k, _ := benchStore(b, d)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ks.RecordUsage(ctx, k.ID, 7); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAdmitFinish(b *testing.B) {
	for _, d := range []ratestore.Durability{ratestore.Sync, ratestore.Async} {
		b.Run(d.String(), func(b *testing.B) {
			ks, _, secret := benchStore(b, d)
			b.ReportAllocs()
			for b.Loop() {
				admitFinish(b, ks, secret)
			}
		})
	}
	// On Redis (Open on a redisstore.DB), with the round trips each pair costs.
	b.Run("redis", func(b *testing.B) {
		ks, secret, trips := benchRedis(b)
		b.ReportAllocs()
		before := trips()
		for b.Loop() {
			admitFinish(b, ks, secret)
		}
		b.ReportMetric(float64(trips()-before)/float64(b.N), "round-trips/op")
	})
}

// admitFinish admits a request of secret and finishes it.
func admitFinish(b *testing.B, ks *keystore.Store, secret string) {
	a, err := ks.Admit(ctx, secret, keystore.Request{Reserve: 100})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.Finish(ctx, 42); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAdmitFinishBudget is BenchmarkAdmitFinish/async for a key that
// also has two budgets, a rolling day and a calendar month, each request
// reserving a worst-case cost and settling its real cost: beside
// BenchmarkAdmitFinish/async in the same run, what money adds to a
// request.
func BenchmarkAdmitFinishBudget(b *testing.B) { benchBudgets(b, true) }

// BenchmarkAdmitFinishNoWindow is BenchmarkAdmitFinishBudget for a key of
// the same budgets and no token window: what a request costs when only
// money limits it.
func BenchmarkAdmitFinishNoWindow(b *testing.B) { benchBudgets(b, false) }

// benchBudgets runs admitFinishSpend on the benchmarks' key given two
// budgets, its token windows kept or dropped.
func benchBudgets(b *testing.B, windows bool) {
	ks, k, secret := benchStore(b, ratestore.Async)
	_, err := ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
		if !windows {
			s.Policy.Windows = nil
		}
		s.Policy.Budgets = []keystore.Budget{
			{Limit: 1_000_000 * pricing.Dollar, Window: 24 * time.Hour},
			{Limit: 1_000_000 * pricing.Dollar, Period: strategies.Month},
		}
		return nil
	})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		admitFinishSpend(b, ks, secret)
	}
}

// BenchmarkAdmitFinishTeam is BenchmarkAdmitFinishBudget for a key in a
// team that has its own token window and budget: the key and the team
// checked and charged in one decision.
func BenchmarkAdmitFinishTeam(b *testing.B) {
	ks, k, secret := benchStore(b, ratestore.Async)
	budgets := []keystore.Budget{{Limit: 1_000_000 * pricing.Dollar, Window: 24 * time.Hour}}
	team, err := ks.CreateTeam(ctx, keystore.TeamSpec{Name: "bench", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1e12, Window: 5 * time.Hour}},
		Budgets: budgets,
	}})
	require.NoError(b, err)
	_, err = ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
		s.Team, s.Policy.Budgets = team.ID, budgets
		return nil
	})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		admitFinishSpend(b, ks, secret)
	}
}

// admitFinishSpend is admitFinish with money: the request reserves $0.000003
// and costs $0.000001.
func admitFinishSpend(b *testing.B, ks *keystore.Store, secret string) {
	a, err := ks.Admit(ctx, secret, keystore.Request{Reserve: 100, Cost: 3 * pricing.Micro})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.FinishSpend(ctx, 42, pricing.Micro); err != nil {
		b.Fatal(err)
	}
}
