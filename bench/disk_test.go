package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
)

// BenchmarkDisk: what a database of bigKeys() GCRA states costs (1M with
// RATESTORE_BENCH_FULL=1), on each backend. The keys get their states
// through Async mode in batches (fill), under the default MaxCachedKeys,
// and the benchmark reports:
//
//   - disk-B/key: the database's size on disk after Close, over the key
//     count: the bbolt file (its write-ahead log, cut to its header on
//     Close, is wal-B) or every file of the badger directory;
//   - compacted-B/key (bolt): the bbolt file rewritten by bolt.Compact
//     after ratestore closed it, without its free pages;
//   - rss0-MB, rss-MB, hwm-MB: the process's VmRSS before the fill, its
//     VmRSS after it (database open) and its peak VmHWM during it
//     (/proc/self/status; the peak is reset first through
//     /proc/self/clear_refs where the kernel allows), and heap-MB, the Go
//     heap in use then; cached-keys, the states held in memory. Run each
//     backend in a process of its own for these to be about it alone;
//   - fill-keys/s: how fast the fill stored the keys;
//   - open-ms: the time of one Open of the closed database; the timed loop
//     (ns/op) is Open, one Peek of a stored key and Close.
//
// Run it with -benchtime 1x (or a few x): the fill happens once per
// sub-benchmark, before the timed loop.
func BenchmarkDisk(b *testing.B) {
	n := bigKeys()
	for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		b.Run(fmt.Sprintf("backend=%s/keys=%d", backend, n), func(b *testing.B) {
			ctx := context.Background()
			dir, name := b.TempDir(), "disk-"+backend.String()
			path := filepath.Join(dir, name)
			opts := ratestore.Options{Backend: backend, Durability: ratestore.Async}

			resetPeakRSS()
			rss0 := procStatusMB("VmRSS")
			start := time.Now()
			db, l, err := openLimiter(dir, name, opts, coldStrategy)
			if err != nil {
				b.Fatal(err)
			}
			if err := fill(ctx, db, l, n); err != nil {
				db.Close()
				b.Fatal(err)
			}
			fillTime := time.Since(start)
			rss, hwm := procStatusMB("VmRSS"), procStatusMB("VmHWM")
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			cached := db.CachedKeys()
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}

			// Reported after the timed loop: b.Loop's start drops metrics.
			metrics := map[string]float64{}
			size, err := diskSize(path)
			if err != nil {
				b.Fatal(err)
			}
			perKey := func(bytes int64) float64 { return float64(bytes) / float64(n) }
			metrics["disk-B/key"] = perKey(size)
			if backend == ratestore.Bolt {
				wal, err := diskSize(path + "-wal")
				if err != nil {
					b.Fatal(err)
				}
				metrics["wal-B"] = float64(wal)
				compacted, err := compactBolt(path, filepath.Join(dir, "compacted.db"))
				if err != nil {
					b.Fatal(err)
				}
				metrics["compacted-B/key"] = perKey(compacted)
			}
			if rss0 > 0 {
				metrics["rss0-MB"], metrics["rss-MB"], metrics["hwm-MB"] = rss0, rss, hwm
			}
			metrics["heap-MB"] = float64(ms.HeapInuse) / (1 << 20)
			metrics["cached-keys"] = float64(cached)
			metrics["fill-keys/s"] = float64(n) / fillTime.Seconds()

			var open time.Duration
			for b.Loop() {
				t := time.Now()
				db, l, err := openLimiter(dir, name, opts, coldStrategy)
				open += time.Since(t)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Peek(ctx, keyAt(n/2)); err != nil {
					b.Fatal(err)
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
			metrics["open-ms"] = open.Seconds() * 1e3 / float64(b.N)
			for unit, v := range metrics {
				b.ReportMetric(v, unit)
			}
		})
	}
}

// diskSize is the size of the file at path, or of every file below it if it
// is a directory.
func diskSize(path string) (int64, error) {
	var size int64
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		size += info.Size()
		return err
	})
	return size, err
}

// compactBolt rewrites the closed bbolt file src into dst with bolt.Compact
// (what ratestore's own compaction does, which the bench module cannot
// import) and returns dst's size.
func compactBolt(src, dst string) (int64, error) {
	in, err := bolt.Open(src, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	err = bolt.Compact(out, in, 64<<20)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	return diskSize(dst)
}

// procStatusMB reads field (VmRSS, VmHWM, RssFile) of /proc/self/status in MiB, or
// 0 where there is no such file.
func procStatusMB(field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(field+":"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest) // "123456 kB"
		if len(f) == 2 {
			kb, err := strconv.ParseFloat(string(f[0]), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

// resetPeakRSS resets VmHWM to the current RSS (Linux: "5" to
// /proc/self/clear_refs); where that fails the peak is the process's.
func resetPeakRSS() {
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
