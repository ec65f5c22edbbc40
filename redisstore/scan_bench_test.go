package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
)

// BenchmarkScanFrom reads a page of 100 records from a random start, as
// the console lists keys, from a store of n records under "k/" (written
// as layout 2 and indexed by Open, whose time is logged). index is
// ScanFrom; scan is the ScanFrom before the index, which listed the
// keyspace with SCAN, sorted it and read the records from the first
// (scanFromKeyspace), measured on the same Redis as the baseline.
func BenchmarkScanFrom(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		srv := redistest.Start(b)
		raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer raw.Close()
		loadLayout2(b, raw, n)
		start := time.Now()
		db, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Timeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%d records: Open indexed them in %v", n, time.Since(start))
		r := rand.New(rand.NewPCG(1, 2))
		for _, how := range []string{"index", "scan"} {
			if how == "scan" && n > 100_000 && testing.Short() {
				continue
			}
			b.Run(fmt.Sprintf("%s/n=%d", how, n), func(b *testing.B) {
				for b.Loop() {
					from := []byte(fmt.Sprintf("k/key_%07d", r.IntN(n)))
					if got := benchPage(b, db, raw, how, from); got != 100 && string(from) < fmt.Sprintf("k/key_%07d", n-100) {
						b.Fatalf("%d records from %s", got, from)
					}
				}
				b.ReportMetric(100, "records/op")
			})
		}
		db.Close()
		srv.Stop()
	}
}

var errStop = errors.New("stop")

// BenchmarkScanFromCluster is BenchmarkScanFrom's index on a 3-node
// Cluster, where the records of a page are in as many slots.
func BenchmarkScanFromCluster(b *testing.B) {
	const n = 100_000
	url := redistest.StartCluster(b, 3)
	o, err := redis.ParseClusterURL(url)
	if err != nil {
		b.Fatal(err)
	}
	raw := redis.NewClusterClient(o)
	defer raw.Close()
	loadLayout2(b, raw, n)
	start := time.Now()
	db, err := redisstore.Open(ctx, url, redisstore.Options{Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.Logf("%d records: Open indexed them in %v", n, time.Since(start))
	r := rand.New(rand.NewPCG(1, 2))
	b.Run(fmt.Sprintf("index/n=%d", n), func(b *testing.B) {
		for b.Loop() {
			benchPage(b, db, nil, "index", []byte(fmt.Sprintf("k/key_%07d", r.IntN(n-100))))
		}
		b.ReportMetric(100, "records/op")
	})
}

// benchPage reads a page of 100 records from start, by how, and returns
// how many it read.
func benchPage(b *testing.B, db *redisstore.DB, raw *redis.Client, how string, start []byte) int {
	n := 0
	fn := func(k, v []byte) error {
		if n++; n == 100 {
			return errStop
		}
		return nil
	}
	var err error
	if how == "index" {
		err = db.ScanFrom(ctx, []byte("k/"), start, fn)
	} else {
		err = scanFromKeyspace(ctx, raw, "ratestore:", []byte("k/"), start, fn)
	}
	if err != nil && !errors.Is(err, errStop) {
		b.Fatal(err)
	}
	return n
}

// loadLayout2 stores n records of 100 bytes, "k/key_0000000" on, as layout
// 2 did: at P{tag}/r/key, with no index.
func loadLayout2(b testing.TB, raw redis.UniversalClient, n int) {
	val := strings.Repeat("v", 100)
	for lo := 0; lo < n; lo += 10_000 {
		_, err := raw.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := lo; i < min(n, lo+10_000); i++ {
				id := fmt.Sprintf("key_%07d", i)
				p.Set(ctx, "ratestore:{"+id+"}/r/k/"+id, val, 0)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := raw.Set(ctx, "ratestore:layout", "2", 0).Err(); err != nil {
		b.Fatal(err)
	}
}

// scanFromKeyspace is ScanFrom as redisstore had it before the index, on
// one Redis: every record key under prefix listed by SCAN, sorted, and the
// records read from the first, a thousand at a time (MGET), those before
// start skipped. (It leaves out the old check that each key is a record's
// as the DB names it, which only cost more.)
func scanFromKeyspace(ctx context.Context, c *redis.Client, p string, prefix, start []byte, fn func(k, v []byte) error) error {
	var rks []string
	for cursor := uint64(0); ; {
		keys, next, err := c.Scan(ctx, cursor, p+"{*}/r/"+string(prefix)+"*", 1000).Result()
		if err != nil {
			return err
		}
		rks = append(rks, keys...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	slices.Sort(rks)
	rks = slices.Compact(rks)
	type found struct{ key, rk string }
	var recs []found
	for _, rk := range rks {
		_, k, _ := strings.Cut(rk, "}/r/")
		if strings.HasPrefix(k, string(prefix)) {
			recs = append(recs, found{k, rk})
		}
	}
	slices.SortFunc(recs, func(a, b found) int { return strings.Compare(a.key, b.key) })
	for chunk := range slices.Chunk(recs, 1000) {
		keys := make([]string, len(chunk))
		for i, r := range chunk {
			keys[i] = r.rk
		}
		vals, err := c.MGet(ctx, keys...).Result()
		if err != nil {
			return err
		}
		for i, r := range chunk {
			v, _ := vals[i].(string)
			if v == "" || r.key < string(start) {
				continue
			}
			if err := fn([]byte(r.key), []byte(v)); err != nil {
				return err
			}
		}
	}
	return nil
}
