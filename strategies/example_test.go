package strategies_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/strategies"
)

// limiter opens a database in a new temporary directory on a clock the
// example moves (Options.Now), and a limiter of s in it.
func limiter(s strategies.Strategy, now *time.Time) (*ratestore.Limiter, func()) {
	dir, err := os.MkdirTemp("", "strategies-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := ratestore.Open(filepath.Join(dir, "db"), ratestore.Options{Now: func() time.Time { return *now }})
	if err != nil {
		log.Fatal(err)
	}
	l, err := db.Limiter("example", s)
	if err != nil {
		log.Fatal(err)
	}
	return l, func() { db.Close(); os.RemoveAll(dir) }
}

// 100,000 tokens per 5 hours, counted in 5-minute buckets: usage stops
// counting 5 hours after the bucket it fell in began, so capacity comes back
// bucket by bucket rather than all at once.
func ExampleRollingWindow() {
	now := time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)
	l, done := limiter(strategies.RollingWindow{Limit: 100_000, Window: 5 * time.Hour, Bucket: 5 * time.Minute}, &now)
	defer done()
	ctx := context.Background()

	if _, err := l.Record(ctx, "key-1", 60_000); err != nil { // 12:00
		log.Fatal(err)
	}
	now = now.Add(time.Hour)
	if _, err := l.Record(ctx, "key-1", 40_000); err != nil { // 13:00
		log.Fatal(err)
	}
	r, err := l.PeekN(ctx, "key-1", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("13:00:", r.Allowed, "retry after", r.RetryAfter) // until the 12:00 bucket expires

	now = now.Add(4 * time.Hour) // 17:00: the 60,000 of 12:00 no longer count
	r, err = l.Peek(ctx, "key-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("17:00:", r.Allowed, r.Remaining, "left")
	// Output:
	// 13:00: false retry after 4h0m0s
	// 17:00: true 60000 left
}

// Two limits on one key, as one decision: 5 per second, and 100 per hour.
// A call denied by either takes from neither.
func ExampleComposite() {
	now := time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)
	l, done := limiter(strategies.Composite{
		Primary:   strategies.TokenBucket{Rate: 5, Burst: 5},
		Secondary: strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "hour", Limit: 100, Window: time.Hour}}},
	}, &now)
	defer done()

	allowed := 0
	for range 200 { // 200 calls over 40 seconds
		r, err := l.Allow(context.Background(), "key-1")
		if err != nil {
			log.Fatal(err)
		}
		if r.Allowed {
			allowed++
		}
		now = now.Add(200 * time.Millisecond)
	}
	fmt.Println(allowed, "allowed: the hourly quota binds")
	// Output:
	// 100 allowed: the hourly quota binds
}

// At most 3 calls in any 10 seconds, exactly: a call counts for 10 seconds
// from its own instant, not from the start of a fixed window.
func ExampleSlidingLog() {
	now := time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)
	l, done := limiter(strategies.SlidingLog{Limit: 3, Window: 10 * time.Second}, &now)
	defer done()
	ctx := context.Background()

	for _, at := range []time.Duration{0, 4 * time.Second, 8 * time.Second, 9 * time.Second, 10 * time.Second} {
		now = time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC).Add(at)
		r, err := l.Allow(ctx, "key-1")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("+%v: allowed %v, retry after %v\n", at, r.Allowed, r.RetryAfter)
	}
	// Output:
	// +0s: allowed true, retry after 0s
	// +4s: allowed true, retry after 0s
	// +8s: allowed true, retry after 0s
	// +9s: allowed false, retry after 1s
	// +10s: allowed true, retry after 0s
}

// A Decider decides on states the caller keeps, with no database: what
// package ratestore does under its locks, and what a program that keeps
// its own states may do too.
func ExampleDecider() {
	d := strategies.GCRA{Rate: 1, Burst: 2}.Prepare() // once per configuration
	st := d.NewState()
	now := time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC).UnixNano()
	for range 3 {
		r, err := d.Decide(st, strategies.Call{Now: now, N: 1})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Allowed, r.Remaining, r.RetryAfter)
	}
	fmt.Printf("%s\n", st.AppendEncode(nil)) // what a store would keep
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 1s
	// 42|1768737602000000000
}
