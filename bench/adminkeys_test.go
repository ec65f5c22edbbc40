package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/keystore"
)

// The operator's surface, keys: GET /admin/keys through the admin API as
// it is served, on a key store of many keys built by newPageStore
// (keypages_test.go) and kept in a file between runs (keptPageStore).

// pageQueries are the queries of BenchmarkAdminKeysPage, by name: every
// sort, searches that match many keys (six in ten), few (one in 20,000)
// and none, the two teams and each status, some with a sort. small and
// large are the ids of a pageStore's teams.
func pageQueries(small, large string) []struct{ name, query string } {
	return []struct{ name, query string }{
		{"sort=name", "sort=name"}, {"sort=-name", "sort=-name"},
		{"sort=last_used", "sort=last_used"}, {"sort=-last_used", "sort=-last_used"},
		{"sort=spend", "sort=spend"}, {"sort=-spend", "sort=-spend"},
		{"q=many", "q=prod"}, {"q=many/sort=-last_used", "q=prod&sort=-last_used"},
		{"q=few", "q=rare"}, {"q=few/sort=-spend", "q=rare&sort=-spend"},
		{"q=none", "q=zzz"},
		{"team=small", "team=" + small}, {"team=large", "team=" + large},
		{"team=large/sort=-last_used", "team=" + large + "&sort=-last_used"},
		{"status=active", "status=active"}, {"status=disabled", "status=disabled"},
		{"status=expired", "status=expired"}, {"status=expired/sort=-spend", "status=expired&sort=-spend"},
	}
}

// BenchmarkAdminKeysPage is GET /admin/keys?limit=100&<query> for each of
// pageQueries over pageKeys() keys (1M with RATESTORE_BENCH_FULL=1, else
// 20k), the first page, answered by the admin API (admin.New over the key
// store, no gateway):
//
//   - via=serve: API.ServeHTTP called in process, the JSON answer written
//     to a writer that counts it: the server's whole work;
//   - via=client: admin.Client.Keys over a loopback httptest server: the
//     request, the answer's transfer and its decoding added.
//
// ms/page is the time of one page, keys/page the keys it holds, B/answer
// the JSON answer's length. The target is < 50 ms a page at 1M keys, any
// sort or search.
//
// impl=list+usage, the baseline, is what GET /admin/keys answered before
// pages (786b47c): keystore.Store.List over every key with Store.Usage of
// each, every key converted (admin.NewKey) and the whole list encoded as
// one JSON answer.
func BenchmarkAdminKeysPage(b *testing.B) {
	ctx := context.Background()
	n := pageKeys()
	p := keptPageStore(b, n, ratestore.Options{Durability: ratestore.Async})
	defer p.db.Close()
	api, err := admin.New(admin.Options{Keys: p.ks})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client, err := admin.NewClient(srv.URL, "bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range pageQueries(p.small, p.large) {
		b.Run(fmt.Sprintf("keys=%d/via=serve/%s", n, c.name), func(b *testing.B) {
			var w countingWriter
			for b.Loop() {
				w.reset()
				api.ServeHTTP(&w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/admin/keys?limit=100&"+c.query, nil))
				if w.status != http.StatusOK {
					b.Fatalf("GET /admin/keys?%s: %d", c.query, w.status)
				}
			}
			pg, err := servePage(api, "limit=100&"+c.query)
			if err != nil {
				b.Fatal(err)
			}
			reportPage(b, pg.keys, w.n)
		})
		b.Run(fmt.Sprintf("keys=%d/via=client/%s", n, c.name), func(b *testing.B) {
			q, err := url.ParseQuery("limit=100&" + c.query)
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for b.Loop() {
				pg, err := client.Keys(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				got = len(pg.Keys)
			}
			reportPage(b, got, -1)
		})
	}
	b.Run(fmt.Sprintf("keys=%d/impl=list+usage", n), func(b *testing.B) {
		var w countingWriter
		got := 0
		for b.Loop() {
			w.reset()
			var err error
			if got, err = listAll(ctx, p.ks, &w); err != nil {
				b.Fatal(err)
			}
		}
		reportPage(b, got, w.n)
	})
}

// reportPage reports ms/page, and keys/page and B/answer unless negative.
func reportPage(b *testing.B, keys int, answer int64) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/page")
	if keys >= 0 {
		b.ReportMetric(float64(keys), "keys/page")
	}
	if answer >= 0 {
		b.ReportMetric(float64(answer), "B/answer")
	}
}

// listAll is the admin API's GET /admin/keys before pages: every key with
// its usage, converted and encoded as one answer into w. It returns how
// many keys it listed.
func listAll(ctx context.Context, ks *keystore.Store, w io.Writer) (int, error) {
	out := admin.Keys{Keys: []admin.Key{}}
	err := ks.List(ctx, func(k keystore.Key) error {
		u, err := ks.Usage(ctx, k.ID)
		switch {
		case errors.Is(err, keystore.ErrNotFound):
			return nil // deleted meanwhile
		case err != nil:
			return err
		}
		out.Keys = append(out.Keys, admin.NewKey(k, u))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(out.Keys), json.NewEncoder(w).Encode(out)
}

// countingWriter is an http.ResponseWriter that keeps the status and
// counts the body's bytes, as a connection would send them.
type countingWriter struct {
	header http.Header
	status int
	n      int64
}

func (w *countingWriter) reset() { w.header, w.status, w.n = http.Header{}, 0, 0 }

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += int64(len(p))
	return len(p), nil
}

// BenchmarkAdminKeysWalk walks every page of GET /admin/keys, 1000 keys a
// page, sort by name, following next_cursor, through API.ServeHTTP with
// the JSON answer, over 10M keys (RATESTORE_BENCH_10M=1;
// RATESTORE_BENCH_10M_KEYS sets another count; skipped without it): the
// store of keptPageStore, opened again for each side:
//
//   - cache=default: the engine's MaxCachedKeys as a gateway has it
//     (ratestore.DefaultMaxCachedKeys);
//   - cache=1024: MaxCachedKeys 1024, so that the states reading every
//     key's usage brings into the engine's cache hardly count.
//
// walk-heap-MiB is the most heap in use the walk added to what it started
// from (the key store's own, open), measured after a garbage collection
// every 500 pages: the target is <= 64 MiB, a walk holding a page, never
// the keys. Its difference between the sides is the engine's bounded
// cache, which cached-states-added counts (the states the walk brought
// into it). store-heap-MiB is the heap the open key store holds before the
// walk; rss-MiB the process's VmRSS after the walk, hwm-MiB its peak since
// the side began (the first side's includes building the store, on the run
// that builds it); page-ms the mean time of a page, the collections left
// out; B/page what a page allocates (the decoding of the answer's cursor
// and ids included).
func BenchmarkAdminKeysWalk(b *testing.B) {
	if os.Getenv(scaleEnv) != "1" {
		b.Skip("10M keys need several GiB and minutes: set " + scaleEnv + "=1")
	}
	n := envKeys(scaleKeysEnv, 10_000_000)
	for _, cache := range []int{0, 1024} {
		name := "default"
		if cache > 0 {
			name = fmt.Sprint(cache)
		}
		b.Run(fmt.Sprintf("keys=%d/cache=%s", n, name), func(b *testing.B) {
			resetPeakRSS()
			before := liveHeap().HeapInuse
			p := keptPageStore(b, n, ratestore.Options{Durability: ratestore.Async, MaxCachedKeys: cache})
			defer p.db.Close()
			api, err := admin.New(admin.Options{Keys: p.ks})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				walkKeys(b, api, p.db, n, before)
			}
		})
	}
}

// walkStep is how many pages a walk reads between two measures of its
// heap.
const walkStep = 500

// walkQuery is a walk's query: the largest page.
var walkQuery = fmt.Sprintf("limit=%d", keystore.MaxPageLimit)

// walkKeys walks every page of api's GET /admin/keys?limit=1000 and
// reports BenchmarkAdminKeysWalk's metrics; before is the heap in use
// before the key store was opened.
func walkKeys(b *testing.B, api http.Handler, db *ratestore.DB, n int, before uint64) {
	m := liveHeap()
	base, allocated, cached := m.HeapInuse, m.TotalAlloc, db.Stats().CachedKeys
	var peak uint64
	var paused time.Duration
	pages, keys, cursor, q := 0, 0, "", walkQuery
	start := time.Now()
	for {
		pg, err := servePage(api, q)
		if err != nil {
			b.Fatal(err)
		}
		pages, keys, cursor = pages+1, keys+pg.keys, pg.next
		q = walkQuery + "&cursor=" + url.QueryEscape(cursor)
		if pages%walkStep == 0 {
			t := time.Now()
			runtime.GC()
			runtime.ReadMemStats(&m)
			peak, paused = max(peak, m.HeapInuse), paused+time.Since(t)
		}
		if cursor == "" {
			break
		}
	}
	elapsed := time.Since(start) - paused
	runtime.ReadMemStats(&m)
	if keys != n {
		b.Fatalf("walked %d keys of %d", keys, n)
	}
	b.ReportMetric(float64(max(peak, base)-base)/(1<<20), "walk-heap-MiB")
	b.ReportMetric(float64(base-min(base, before))/(1<<20), "store-heap-MiB")
	b.ReportMetric(float64(elapsed.Microseconds())/1e3/float64(pages), "page-ms")
	b.ReportMetric(float64(pages), "pages")
	b.ReportMetric(float64(m.TotalAlloc-allocated)/float64(pages), "B/page")
	b.ReportMetric(float64(db.Stats().CachedKeys-cached), "cached-states-added")
	b.ReportMetric(procStatusMB("VmRSS"), "rss-MiB")
	b.ReportMetric(procStatusMB("VmHWM"), "hwm-MiB")
}

// walked is what a walk reads of a page: its keys and the next cursor.
type walked struct {
	keys int
	next string
}

// servePage serves GET /admin/keys?query and reads its answer's key
// count and next cursor.
func servePage(api http.Handler, query string) (walked, error) {
	target := "/admin/keys?" + query
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if rec.Code != http.StatusOK {
		return walked{}, fmt.Errorf("GET %s: %d %s", target, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	var pg struct {
		Keys []struct {
			ID string `json:"id"`
		} `json:"keys"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &pg); err != nil {
		return walked{}, fmt.Errorf("GET %s: %w", target, err)
	}
	return walked{len(pg.Keys), pg.NextCursor}, nil
}

// pageStoreFormat names the shape of the stores keptPageStore keeps: a
// change to newPageStore, or to the key store's records, wants a new
// name, so that no run reads a store built otherwise.
const pageStoreFormat = "v1"

// keptPageStore returns a pageStore of n keys opened with opts: the store
// that newPageStore builds, built once into the temporary directory and
// kept there for later runs (10M keys take minutes to build), and opened
// again for each use. Its last uses and expiries are relative to when it
// was built.
func keptPageStore(b *testing.B, n int, opts ratestore.Options) *pageStore {
	ctx := context.Background()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("ratestore-bench-pages-%s-%d", pageStoreFormat, n))
	teams, err := os.ReadFile(filepath.Join(dir, "teams"))
	if err != nil {
		start := time.Now()
		if teams, err = buildPageStore(ctx, dir, n); err != nil {
			b.Fatal(err)
		}
		b.Logf("built a store of %d keys in %s in %v", n, dir, time.Since(start).Round(time.Second))
	}
	small, large, ok := strings.Cut(string(teams), "\n")
	if !ok {
		b.Fatalf("%s: no team ids: delete the directory to build it again", dir)
	}
	db, err := ratestore.Open(filepath.Join(dir, "pages"), opts)
	if err != nil {
		b.Fatal(err)
	}
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		db.Close()
		b.Fatal(err)
	}
	return &pageStore{db: db, ks: ks, small: small, large: large}
}

// buildPageStore builds newPageStore's store of n keys in dir, and writes
// its team ids ("small\nlarge") to dir/teams last, which says it is whole.
func buildPageStore(ctx context.Context, dir string, n int) ([]byte, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, err := newPageStore(ctx, dir, n)
	if err != nil {
		return nil, err
	}
	if err := p.db.Close(); err != nil {
		return nil, err
	}
	teams := []byte(p.small + "\n" + p.large)
	return teams, os.WriteFile(filepath.Join(dir, "teams"), teams, 0o644)
}
