package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
)

// The page benchmarks measure keystore.Store.Keys, a page of keys searched,
// filtered and sorted on the key store's indexes, on a store of many keys
// built by pageStore: Async bbolt, the system clock.

// pageStore is a key store of n keys for the page benchmarks, and the ids
// of its two teams.
type pageStore struct {
	db           *ratestore.DB
	ks           *keystore.Store
	small, large string // a team of about 100 keys; one of n/20
}

// pageName is the name of key i of a pageStore: "Prod-API-…" for six keys in
// ten (a search for "prod" matches many), "Rare-…" for one in 20,000 (a
// search for "rare" matches few), "dev-…" for the others.
func pageName(i int) string {
	switch {
	case i%20_000 == 7:
		return fmt.Sprintf("Rare-%07d", i)
	case i%10 < 6:
		return fmt.Sprintf("Prod-API-%07d", i)
	}
	return fmt.Sprintf("dev-%07d", i)
}

// newPageStore builds a pageStore of n keys in dir: imported in batches of
// 100k, four in five with a last use within the last 30 days, one in ten
// with an expiry within 10 days either side of now (so about half of
// those have expired); then one in 20 in the large team and about 100 in
// the small one, one in 20 charged a random cost, one in 33 disabled.
func newPageStore(ctx context.Context, dir string, n int) (*pageStore, error) {
	db, ks, err := openKeyStore(dir, "pages", ratestore.Async)
	if err != nil {
		return nil, err
	}
	p := &pageStore{db: db, ks: ks}
	ids, err := importPageKeys(ctx, ks, n)
	if err == nil {
		err = p.shape(ctx, ids)
	}
	if err == nil {
		err = db.Flush(ctx)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return p, nil
}

// importPageKeys imports the n keys of a pageStore and returns their ids.
func importPageKeys(ctx context.Context, ks *keystore.Store, n int) ([]string, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now()
	ids := make([]string, 0, n)
	for start := 0; start < n; start += 100_000 {
		keys := make([]keystore.Imported, min(100_000, n-start))
		for j := range keys {
			i := start + j
			keys[j] = keystore.Imported{Secret: keysSecret(i), Name: pageName(i), TokenLimit: keysLimit}
			if rng.IntN(5) < 4 {
				keys[j].LastUsed = now.Add(-time.Duration(rng.Int64N(int64(30 * 24 * time.Hour))))
			}
			if rng.IntN(10) == 0 {
				keys[j].ExpiresAt = now.Add(time.Duration(rng.Int64N(int64(20*24*time.Hour))) - 10*24*time.Hour)
			}
		}
		res, err := ks.Import(ctx, keys)
		if err != nil {
			return nil, err
		}
		ids = append(ids, res.IDs...)
	}
	return ids, nil
}

// shape gives the keys ids their teams, spend and disabling (see
// newPageStore).
func (p *pageStore) shape(ctx context.Context, ids []string) error {
	pol := keystore.Policy{Windows: []keystore.Window{{Limit: keysLimit, Window: time.Hour}}}
	var teams [2]string
	for i, name := range []string{"Small team", "Large team"} {
		t, err := p.ks.CreateTeam(ctx, keystore.TeamSpec{Name: name, Policy: pol})
		if err != nil {
			return err
		}
		teams[i] = t.ID
	}
	p.small, p.large = teams[0], teams[1]
	rng := rand.New(rand.NewPCG(3, 4))
	smallEvery := max(1, len(ids)/100)
	for i, id := range ids {
		team := ""
		switch {
		case i%smallEvery == 3:
			team = p.small
		case i%20 == 1:
			team = p.large
		}
		if team != "" {
			if _, err := p.ks.Update(ctx, id, func(s *keystore.Spec) error { s.Team = team; return nil }); err != nil {
				return err
			}
		}
		if i%20 == 2 {
			if err := p.charge(ctx, i, pricing.USD(rng.Int64N(int64(50*pricing.Dollar)))); err != nil {
				return err
			}
		}
		if i%33 == 5 {
			if err := p.ks.Disable(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// charge makes one request of key i that costs cost; a key that has
// expired is charged by a RecordUsage instead, which costs nothing.
func (p *pageStore) charge(ctx context.Context, i int, cost pricing.USD) error {
	a, err := p.ks.Admit(ctx, keysSecret(i), keystore.Request{Reserve: keysReserve, Cost: cost})
	if err != nil {
		return nil // expired: it keeps no spend
	}
	_, err = a.FinishSpend(ctx, keysTokens, cost)
	return err
}

// pageKeys is BenchmarkKeysPage's key count: 1M with
// RATESTORE_BENCH_FULL=1, else 20k.
func pageKeys() int {
	if os.Getenv(fullEnv) == "1" {
		return 1_000_000
	}
	return 20_000
}

// BenchmarkKeysPage: one page of 100 keys (the first; the second, from a
// cursor, for sort=name/next) of keystore.Store.Keys over pageKeys() keys
// (see newPageStore), for each sort, searches that match many keys (six
// in ten), few (one in 20,000) and none, a team of about 100 keys and one
// of n/20, and each status, some with a sort. Every page is planned on the
// indexes and reads its keys' usage. The target is < 50 ms a page at 1M
// keys, any sort or search.
//
// impl=list+usage, the baseline, is what the admin API answered before
// pages: Store.List over every key, with Store.Usage of each.
func BenchmarkKeysPage(b *testing.B) {
	ctx := context.Background()
	n := pageKeys()
	p, err := newPageStore(ctx, b.TempDir(), n)
	if err != nil {
		b.Fatal(err)
	}
	defer p.db.Close()
	first, err := p.ks.Keys(ctx, keystore.KeyQuery{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		q    keystore.KeyQuery
	}{
		{"sort=name", keystore.KeyQuery{}}, {"sort=name/next", keystore.KeyQuery{Cursor: first.Next}},
		{"sort=-name", keystore.KeyQuery{Sort: "-name"}},
		{"sort=last_used", keystore.KeyQuery{Sort: "last_used"}}, {"sort=-last_used", keystore.KeyQuery{Sort: "-last_used"}},
		{"sort=spend", keystore.KeyQuery{Sort: "spend"}}, {"sort=-spend", keystore.KeyQuery{Sort: "-spend"}},
		{"q=many", keystore.KeyQuery{Q: "prod"}}, {"q=many/sort=-last_used", keystore.KeyQuery{Q: "prod", Sort: "-last_used"}},
		{"q=few", keystore.KeyQuery{Q: "rare"}}, {"q=few/sort=-spend", keystore.KeyQuery{Q: "rare", Sort: "-spend"}},
		{"q=none", keystore.KeyQuery{Q: "zzz"}},
		{"team=small", keystore.KeyQuery{Team: p.small}}, {"team=large", keystore.KeyQuery{Team: p.large}},
		{"team=large/sort=-last_used", keystore.KeyQuery{Team: p.large, Sort: "-last_used"}},
		{"status=active", keystore.KeyQuery{Status: keystore.StatusActive}},
		{"status=disabled", keystore.KeyQuery{Status: keystore.StatusDisabled}},
		{"status=expired", keystore.KeyQuery{Status: keystore.StatusExpired}},
		{"status=expired/sort=-spend", keystore.KeyQuery{Status: keystore.StatusExpired, Sort: "-spend"}},
	} {
		b.Run(fmt.Sprintf("keys=%d/impl=page/%s", n, c.name), func(b *testing.B) {
			b.ReportAllocs()
			got := 0
			for b.Loop() {
				pg, err := p.ks.Keys(ctx, c.q)
				if err != nil {
					b.Fatal(err)
				}
				got = len(pg.Keys)
			}
			b.ReportMetric(float64(got), "keys/page")
		})
	}
	b.Run(fmt.Sprintf("keys=%d/impl=list+usage", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			err := p.ks.List(ctx, func(k keystore.Key) error {
				_, err := p.ks.Usage(ctx, k.ID)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkKeysWalk walks every page of keystore.Store.Keys, 1000 keys a
// page, sort by name, over 10M keys (RATESTORE_BENCH_10M=1;
// RATESTORE_BENCH_10M_KEYS sets another count; skipped without it), built
// as BenchmarkKeysPage's, then closed and opened again. walk-heap-MiB is the most heap in use the walk
// added to the key store's own, measured after a garbage collection every
// 500 pages (the target is <= 64 MiB: a walk holds a page, never the
// keys); page-ms the mean time of a page; B/page what a page allocates;
// cached-states-added the engine states the walk brought into the
// engine's cache (bounded by ratestore.Options.MaxCachedKeys), reading
// every key's usage: part of walk-heap-MiB, the engine's and not the walk's.
func BenchmarkKeysWalk(b *testing.B) {
	if os.Getenv(scaleEnv) != "1" {
		b.Skip("10M keys need several GiB and minutes: set " + scaleEnv + "=1")
	}
	ctx := context.Background()
	n := envKeys(scaleKeysEnv, 10_000_000)
	dir := b.TempDir()
	p, err := newPageStore(ctx, dir, n)
	if err == nil {
		err = p.db.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	// Reopened: the heap holds what Open loads, not what building left.
	p.db, p.ks, err = openKeyStore(dir, "pages", ratestore.Async)
	if err != nil {
		b.Fatal(err)
	}
	defer p.db.Close()
	b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
		for b.Loop() {
			m := liveHeap()
			base, allocated, cached := m.HeapInuse, m.TotalAlloc, p.db.Stats().CachedKeys
			var peak uint64
			pages, keys := 0, 0
			start := time.Now()
			q := keystore.KeyQuery{Limit: keystore.MaxPageLimit}
			for {
				pg, err := p.ks.Keys(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				pages, keys = pages+1, keys+len(pg.Keys)
				if pages%500 == 0 {
					peak = max(peak, liveHeap().HeapInuse)
				}
				if pg.Next == "" {
					break
				}
				q.Cursor = pg.Next
			}
			elapsed := time.Since(start)
			runtime.ReadMemStats(&m)
			if keys != n {
				b.Fatalf("walked %d keys of %d", keys, n)
			}
			b.ReportMetric(float64(max(peak, base)-base)/(1<<20), "walk-heap-MiB")
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(pages), "page-ms")
			b.ReportMetric(float64(pages), "pages")
			b.ReportMetric(float64(m.TotalAlloc-allocated)/float64(pages), "B/page")
			b.ReportMetric(float64(p.db.Stats().CachedKeys-cached), "cached-states-added")
		}
	})
}
