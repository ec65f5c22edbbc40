package ratestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/strategies"
)

// ExampleDB_Update records one request's usage in two limits and a record
// of the application's own, made durable by one commit: one fsync, shared
// with every concurrent caller, instead of one per change.
func ExampleDB_Update() {
	dir, err := os.MkdirTemp("", "ratestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC)
	db, err := ratestore.Open(filepath.Join(dir, "app.db"), ratestore.Options{Now: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	hour, _ := db.Limiter("tokens-hour", strategies.RollingWindow{Limit: 10_000, Window: time.Hour, Bucket: time.Minute})
	day, _ := db.Limiter("tokens-day", strategies.RollingWindow{Limit: 100_000, Window: 24 * time.Hour, Bucket: 24 * time.Minute})

	ctx := context.Background()
	err = db.Update(ctx, nil, func(b backend.Batch) error {
		for _, l := range []*ratestore.Limiter{hour, day} {
			if _, err := b.Record(l, "team-a", 1234); err != nil {
				return err
			}
		}
		return b.Put([]byte("app/last-request/team-a"), []byte(now.Format(time.RFC3339)))
	})
	if err != nil {
		log.Fatal(err)
	}

	r, _ := hour.Peek(ctx, "team-a")
	last, _ := db.Get(ctx, []byte("app/last-request/team-a"))
	fmt.Println(r.Remaining, string(last))
	// Output: 8766 2026-01-18T09:00:00Z
}
