package audit_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/internal/fakeclock"
)

// typical is an event as the admin API records a change of a key's
// token window through the console.
func typical(i int) audit.Event {
	return audit.Event{
		Actor: "session:1a2b3c4d", Action: "key.update", Target: fmt.Sprintf("key_%016x", i%1000), Address: "203.0.113.7",
		Changes: map[string]audit.Change{"windows": {
			From: json.RawMessage(`[{"limit":100000,"window":"5h0m0s","bucket":"5m0s"}]`),
			To:   json.RawMessage(`[{"limit":200000,"window":"5h0m0s","bucket":"5m0s"}]`),
		}},
	}
}

// BenchmarkRecord records typical events on a bbolt file in Async mode
// (the commit, not the fsync, is measured) and reports what an event
// costs: record-B/event, the bytes of its two records' keys and values,
// and file-B/event, what the file grew by (pages, free lists and all),
// both per event.
func BenchmarkRecord(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	clock := fakeclock.New(t0)
	db, err := ratestore.Open(path, ratestore.Options{Durability: ratestore.Async, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	l, err := audit.Open(db, audit.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	if err := db.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	empty := fileSize(b, path)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		clock.Advance(time.Second)
		if _, err := l.Record(ctx, typical(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	records := 0
	if err := db.Scan(ctx, []byte("A/"), func(k, v []byte) error { records += len(k) + len(v); return nil }); err != nil {
		b.Fatal(err)
	}
	l.Close(ctx)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(records)/float64(b.N), "record-B/event")
	b.ReportMetric(float64(fileSize(b, path)-empty)/float64(b.N), "file-B/event")
}

// BenchmarkEventsPage reads a page of 100 events from a log of 100k, of
// the whole log and of one target of 1000 (100 events each), from a
// cursor in the middle.
func BenchmarkEventsPage(b *testing.B) {
	clock := fakeclock.New(t0)
	db, err := ratestore.Open(filepath.Join(b.TempDir(), "bench.db"), ratestore.Options{Durability: ratestore.Async, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	l, err := audit.Open(db, audit.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(ctx)
	const n = 100_000
	for i := range n {
		clock.Advance(time.Second)
		if _, err := l.Record(ctx, typical(i)); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []audit.Query{{}, {Target: typical(7).Target}} {
		name := "all"
		if q.Target != "" {
			name = "target"
		}
		b.Run(name, func(b *testing.B) {
			mid := q
			mid.Limit = 50
			p, err := l.Events(ctx, mid)
			if err != nil {
				b.Fatal(err)
			}
			q.Cursor = p.Next
			want := 100
			if q.Target != "" {
				want = 50 // of the target's 100
			}
			b.ReportAllocs()
			for b.Loop() {
				p, err := l.Events(ctx, q)
				if err != nil || len(p.Events) != want {
					b.Fatal(err, len(p.Events))
				}
			}
		})
	}
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
