package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// The key-store benchmarks measure package keystore against the baselines
// DESIGN.md states its targets against ("Targets added with the key store"),
// each side by side with its baseline in the same run:
//
//   - BenchmarkKeysCheck: the per-request check of an LLM gateway
//     (authenticate the secret, then "is this key within its token
//     window?") against the legacy O(n) scan and against the least a
//     persistent check can do, one hash and one Peek.
//   - BenchmarkKeysAdmitFinish: a request's whole life with a reservation
//     (Admit, Finish) against a check and a record of the same tokens.
//   - BenchmarkKeysSyncRecord: fsynced usage records by 64 callers against
//     the engine's own Record of the same rolling window.
//   - BenchmarkKeysMemory: the heap a loaded key costs.
//
// Every database is bbolt in b.TempDir(). Keys have one token window, the
// legacy one (keystore.DefaultWindow in keystore.DefaultBucket buckets),
// with a limit no benchmark reaches, so every call is allowed and every
// record counts.

// keysLimit is the token limit of every key: never reached.
const keysLimit = 1 << 40

// keysStrategy is the rolling window of every key's token window, for the
// baselines that use the engine directly: the same strategy the key store
// applies.
var keysStrategy = strategies.RollingWindow{Limit: keysLimit, Window: keystore.DefaultWindow, Bucket: keystore.DefaultBucket}

// The tokens of one request: reserved at Admit, charged at Finish or
// RecordUsage.
const (
	keysReserve = 100
	keysTokens  = 37
	keysCost    = 150 * pricing.Micro // about 1000 tokens of a small model
)

// keysWindowCounts are the legacy histories of BenchmarkKeysCheck: 10k for
// the target against the legacy scan, 10 and 100k for flatness.
var keysWindowCounts = []int{10, 10_000, 100_000}

// keysHistory returns n legacy usage windows of 900 tokens each, oldest
// first: the newest min(n, 5) one hour apart within the last five hours
// before now, so that the migrated window has usage in several buckets, and
// the others one per five hours before them, as a long-lived key
// accumulated them without pruning.
func keysHistory(n int, now int64) []legacyWindowRec {
	ws := make([]legacyWindowRec, n)
	at := now - int64(time.Minute)
	for i := n - 1; i >= 0; i-- {
		ws[i] = legacyWindowRec{start: at, tokens: 900}
		if n-1-i < 4 {
			at -= int64(time.Hour)
		} else {
			at -= int64(legacyWindow)
		}
	}
	return ws
}

// keysSecret is the secret of key i of a benchmark: a legacy-style secret
// of the length of a new one.
func keysSecret(i int) string { return fmt.Sprintf("sk-legacy-%037d", i) }

// openKeyStore opens an Async (or Sync) bbolt database at dir/name with the
// system clock and returns its key store.
func openKeyStore(dir, name string, d ratestore.Durability) (*ratestore.DB, *keystore.Store, error) {
	db, err := ratestore.Open(filepath.Join(dir, name), ratestore.Options{Durability: d})
	if err != nil {
		return nil, nil, err
	}
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, ks, nil
}

// importKeys imports n keys (secrets keysSecret(0..n-1), names user:000000
// ...) in one commit, key 0 with windows as its legacy usage, and returns
// their ids.
func importKeys(ctx context.Context, ks *keystore.Store, n int, windows []legacyWindowRec) ([]string, error) {
	keys := make([]keystore.Imported, n)
	for i := range keys {
		keys[i] = keystore.Imported{Secret: keysSecret(i), Name: keyAt(i), TokenLimit: keysLimit}
	}
	if n > 0 && len(windows) > 0 {
		lw := make([]keystore.LegacyWindow, len(windows))
		for i, w := range windows {
			lw[i] = keystore.LegacyWindow{Start: time.Unix(0, w.start), Tokens: w.tokens}
		}
		keys[0].Windows = lw
	}
	res, err := ks.Import(ctx, keys)
	if err != nil {
		return nil, err
	}
	if res.Imported != n {
		return nil, fmt.Errorf("imported %d keys of %d", res.Imported, n)
	}
	return res.IDs, nil
}

// BenchmarkKeysCheck: keystore.Store.Check on one key whose n legacy usage
// windows were imported and then migrated (by one Check before timing),
// against two baselines, for each n, in this order so that the ratios
// compare runs made moments apart:
//
//   - impl=legacy is the code the key store replaces: the filter-and-sum
//     over the key's n windows (legacyUsage, as in BenchmarkRollingWindow),
//     O(n), and nothing else (no authentication: flattering it).
//   - impl=sha256+peek is the least a persistent check does: sha256.Sum256
//     of the secret (the key store's index is by hash) and one
//     Limiter.Peek of a key, in memory, whose rolling window holds the same
//     history merged the same way. It is what Check costs without the key
//     store around it.
//   - impl=keystore is Check: hash, index lookup, the key's lock, its
//     Key, the disabled and expiry checks, and a PeekN of its window.
//
// x-vs-legacy is legacy's ns/op over keystore's (target >= 100 at 10k
// windows); ratio-vs-sha256-peek is keystore's over sha256+peek's (target
// <= 2). Flatness (target: 100k windows over 10 <= 1.2) and allocs (<= 2)
// are read from the keystore rows. Async bbolt, the system clock.
func BenchmarkKeysCheck(b *testing.B) {
	ctx := context.Background()
	for _, n := range keysWindowCounts {
		var legacyNs, peekNs float64
		b.Run(fmt.Sprintf("impl=legacy/windows=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now().UnixNano()
			u := &legacyUsage{windows: keysHistory(n, start)}
			now := start
			var sink int64
			for b.Loop() {
				now += int64(time.Second)
				sink += u.used(now)
			}
			_ = sink
			legacyNs = nsPerOp(b)
		})
		b.Run(fmt.Sprintf("impl=sha256+peek/windows=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			db, l, err := openLimiter(b.TempDir(), "peek", ratestore.Options{Durability: ratestore.Async}, keysStrategy)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			const key = "key_0123456789abcdef"
			hist := keysHistory(n, db.Now().UnixNano())
			err = db.Update(ctx, nil, func(bt backend.Batch) error {
				_, err := bt.Modify(l, key, func(st strategies.State, now int64) (strategies.State, error) {
					for _, w := range hist {
						if err := keysStrategy.Merge(st, now, w.start, w.tokens); err != nil {
							return nil, err
						}
					}
					return st, nil
				})
				return err
			})
			if err == nil {
				err = db.Flush(ctx)
			}
			if err != nil {
				b.Fatal(err)
			}
			secret := keysSecret(0)
			var sink byte
			for b.Loop() {
				h := sha256.Sum256([]byte(secret))
				sink ^= h[0]
				r, err := l.Peek(ctx, key)
				if err != nil || !r.Allowed {
					b.Fatal("peek:", r, err)
				}
			}
			_ = sink
			peekNs = nsPerOp(b)
		})
		b.Run(fmt.Sprintf("impl=keystore/windows=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			db, ks, err := openKeyStore(b.TempDir(), "keys", ratestore.Async)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			if _, err := importKeys(ctx, ks, 1, keysHistory(n, db.Now().UnixNano())); err != nil {
				b.Fatal(err)
			}
			secret := keysSecret(0)
			// The first Check migrates the legacy windows; then nothing is
			// pending, in memory or on disk.
			if _, _, err := ks.Check(ctx, secret); err != nil {
				b.Fatal(err)
			}
			if err := db.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			if p, err := ks.PendingLegacy(ctx); err != nil || p != 0 {
				b.Fatalf("%d keys still pending migration (%v)", p, err)
			}
			for b.Loop() {
				_, r, err := ks.Check(ctx, secret)
				if err != nil || !r.Allowed {
					b.Fatal("check:", r, err)
				}
			}
			if ns := nsPerOp(b); ns > 0 {
				if legacyNs > 0 {
					b.ReportMetric(legacyNs/ns, "x-vs-legacy")
				}
				if peekNs > 0 {
					b.ReportMetric(ns/peekNs, "ratio-vs-sha256-peek")
				}
			}
		})
	}
}

// BenchmarkKeysAdmitFinish: one request's life on one key, Async bbolt,
// the system clock, one goroutine.
//
//   - impl=check+record, the baseline, is what a gateway without
//     reservations does: Check the secret before the request, RecordUsage
//     of its tokens after it.
//   - impl=admit+finish is Admit with a reservation (keysReserve tokens
//     held in the window and a concurrency slot) and Finish charging the
//     same tokens in its place, which also returns the key's usage.
//
// ratio-vs-check-record is admit+finish's ns/op over check+record's, run
// just before it (target <= 2): what holding the reservation costs.
func BenchmarkKeysAdmitFinish(b *testing.B) {
	ctx := context.Background()
	var baseNs float64
	setup := func(b *testing.B) (*keystore.Store, string, string) {
		db, ks, err := openKeyStore(b.TempDir(), "keys", ratestore.Async)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		ids, err := importKeys(ctx, ks, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		// One request before timing: the key's window has a state.
		if _, err := ks.RecordUsage(ctx, ids[0], keysTokens); err != nil {
			b.Fatal(err)
		}
		return ks, ids[0], keysSecret(0)
	}
	b.Run("impl=check+record", func(b *testing.B) {
		b.ReportAllocs()
		ks, id, secret := setup(b)
		for b.Loop() {
			if _, r, err := ks.Check(ctx, secret); err != nil || !r.Allowed {
				b.Fatal("check:", r, err)
			}
			if _, err := ks.RecordUsage(ctx, id, keysTokens); err != nil {
				b.Fatal(err)
			}
		}
		baseNs = nsPerOp(b)
	})
	b.Run("impl=admit+finish", func(b *testing.B) {
		b.ReportAllocs()
		ks, _, secret := setup(b)
		for b.Loop() {
			a, err := ks.Admit(ctx, secret, keystore.Request{Reserve: keysReserve})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := a.Finish(ctx, keysTokens); err != nil {
				b.Fatal(err)
			}
		}
		if ns := nsPerOp(b); ns > 0 && baseNs > 0 {
			b.ReportMetric(ns/baseNs, "ratio-vs-check-record")
		}
	})
}

// keysParallelKeys are the key counts of BenchmarkKeysAdmitFinishParallel:
// a few busy keys, and many keys each used about once a second.
var keysParallelKeys = []int{64, 100_000}

// BenchmarkKeysAdmitFinishParallel is BenchmarkKeysAdmitFinish's
// impl=admit+finish under b.RunParallel (GOMAXPROCS goroutines), over n
// keys, goroutine g starting at key g·n/GOMAXPROCS and walking them in
// order, Async bbolt, the system clock. With 100k keys most requests land
// on a key whose last use was a second or more ago: the case where the key
// store's indexes of last use and spend move on the request path.
func BenchmarkKeysAdmitFinishParallel(b *testing.B) {
	ctx := context.Background()
	for _, n := range keysParallelKeys {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			db, ks, err := openKeyStore(b.TempDir(), "keys", ratestore.Async)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			ids, err := importKeys(ctx, ks, n, nil)
			if err != nil {
				b.Fatal(err)
			}
			secrets := make([]string, n)
			for i, id := range ids {
				secrets[i] = keysSecret(i)
				// One request before timing: every window has a state.
				if _, err := ks.RecordUsage(ctx, id, keysTokens); err != nil {
					b.Fatal(err)
				}
			}
			runParallel(b, secrets, nil, func(secret string) (bool, error) {
				a, err := ks.Admit(ctx, secret, keystore.Request{Reserve: keysReserve, Cost: keysCost})
				if err != nil {
					return false, err
				}
				_, err = a.FinishSpend(ctx, keysTokens, keysCost)
				return true, err
			})
		})
	}
}

// keysSyncCallers is the concurrency of BenchmarkKeysSyncRecord, and its
// number of keys: one per caller.
const keysSyncCallers = 64

// BenchmarkKeysSyncRecord: fsynced usage records, Sync bbolt, exactly 64
// goroutines each recording one call at a time (runCallers, as
// BenchmarkSync), over 64 keys, goroutine g starting at key g.
//
//   - impl=limiter-record, the baseline, is the engine alone:
//     Limiter.Record of keysTokens on the rolling window the key store
//     uses (keysStrategy), keys user:000000 ...
//   - impl=keystore is Store.RecordUsage of the same tokens on 64 keys: the
//     same window, plus the key's record (LifetimeTokens, LastUsed),
//     written in the same commit.
//
// Both sides start with every key stored and in memory (one call each
// before timing) and report decisions/s (records per second over all
// callers) and the p50/p99 latency of one call. ratio-vs-limiter-record is
// keystore's ns/op over the baseline's, in the same run (target <= 1.5).
func BenchmarkKeysSyncRecord(b *testing.B) {
	ctx := context.Background()
	keys := makeKeys(keysSyncCallers)
	var baseNs float64
	lf := newFixture(func() (*ratestore.Limiter, func() error, error) {
		db, l, err := openLimiter(b.TempDir(), "limiter", ratestore.Options{}, keysStrategy)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range keys {
			if _, err := l.Record(ctx, k, keysTokens); err != nil {
				return nil, db.Close, err
			}
		}
		return l, db.Close, nil
	})
	b.Run(fmt.Sprintf("impl=limiter-record/callers=%d", keysSyncCallers), func(b *testing.B) {
		b.ReportAllocs()
		l := lf.get(b)
		runCallers(b, keysSyncCallers, keys, func(i int) (bool, error) {
			r, err := l.Record(ctx, keys[i], keysTokens)
			return r.Allowed, err
		})
		baseNs = nsPerOp(b)
	})
	lf.release(b)
	type keyStore struct {
		ks  *keystore.Store
		ids []string
	}
	kf := newFixture(func() (keyStore, func() error, error) {
		db, ks, err := openKeyStore(b.TempDir(), "keys", ratestore.Sync)
		if err != nil {
			return keyStore{}, nil, err
		}
		ids, err := importKeys(ctx, ks, keysSyncCallers, nil)
		for _, id := range ids {
			if err == nil {
				_, err = ks.RecordUsage(ctx, id, keysTokens)
			}
		}
		return keyStore{ks, ids}, db.Close, err
	})
	b.Run(fmt.Sprintf("impl=keystore/callers=%d", keysSyncCallers), func(b *testing.B) {
		b.ReportAllocs()
		k := kf.get(b)
		runCallers(b, keysSyncCallers, k.ids, func(i int) (bool, error) {
			r, err := k.ks.RecordUsage(ctx, k.ids[i], keysTokens)
			return r.Allowed, err
		})
		if ns := nsPerOp(b); ns > 0 && baseNs > 0 {
			b.ReportMetric(ns/baseNs, "ratio-vs-limiter-record")
		}
	})
	kf.release(b)
}

// keysMemoryKeys is the key count of BenchmarkKeysMemory.
const keysMemoryKeys = 100_000

// BenchmarkKeysMemory: the heap one key costs once loaded. 100k keys are
// imported in one commit into an Async bbolt database, which is closed.
// Each iteration reopens the database, measures the live heap after a GC,
// opens the key store over it (keystore.Open loads every key record and the
// index of secret hashes), and measures again: the difference over the key
// count is B/key (the heap in use, runtime.MemStats.HeapInuse: the spans
// that hold the keys, with the unused room in them) and live-B/key
// (HeapAlloc: the objects alone). The timed part is keystore.Open alone:
// ns/op is loading 100k keys.
//
// Each key carries two strings, its id (20 bytes) and its name
// (user:000000, 11 bytes), and no model; strings-B/key is their length.
// The target is <= 300 B per key plus its strings: B/key - strings-B/key
// <= 300. All keys share one policy, which the store keeps once.
func BenchmarkKeysMemory(b *testing.B) {
	ctx := context.Background()
	b.Run(fmt.Sprintf("keys=%d", keysMemoryKeys), func(b *testing.B) {
		b.ReportAllocs()
		dir := b.TempDir()
		db, ks, err := openKeyStore(dir, "keys", ratestore.Async)
		if err != nil {
			b.Fatal(err)
		}
		ids, err := importKeys(ctx, ks, keysMemoryKeys, nil)
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
		var strBytes int
		for i, id := range ids {
			strBytes += len(id) + len(keyAt(i))
		}
		ids = nil
		var perKey, livePerKey float64
		for b.Loop() {
			b.StopTimer()
			db, err := ratestore.Open(filepath.Join(dir, "keys"), ratestore.Options{Durability: ratestore.Async})
			if err != nil {
				b.Fatal(err)
			}
			before := liveHeap()
			b.StartTimer()
			ks, err := keystore.Open(db, keystore.Options{})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			after := liveHeap()
			n := 0
			if err := ks.List(ctx, func(keystore.Key) error { n++; return nil }); err != nil || n != keysMemoryKeys {
				b.Fatalf("%d keys loaded, want %d (%v)", n, keysMemoryKeys, err)
			}
			perKey = float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / keysMemoryKeys
			livePerKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / keysMemoryKeys
			runtime.KeepAlive(ks)
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(perKey, "B/key")
		b.ReportMetric(livePerKey, "live-B/key")
		b.ReportMetric(float64(strBytes)/keysMemoryKeys, "strings-B/key")
	})
}

// liveHeap returns the memory statistics after two garbage collections
// (the second frees what finalizers of the first released).
func liveHeap() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
