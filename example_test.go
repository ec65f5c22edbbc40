package ratestore_test

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

// exampleDB opens a database in a new temporary directory, on a clock that
// stands still at noon (Options.Now), so that the examples' output does not
// depend on when they run. It returns the database and a cleanup.
func exampleDB(now *time.Time) (*ratestore.DB, func()) {
	dir, err := os.MkdirTemp("", "ratestore-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := ratestore.Open(filepath.Join(dir, "ratestore.db"), ratestore.Options{Now: func() time.Time { return *now }})
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// Two requests per second per API key, in bursts of up to three: the third
// request in the same instant is allowed, the fourth is told when to retry.
// Each allowed call returns once its change is on disk (Sync, the default).
func Example() {
	now := time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)
	db, done := exampleDB(&now)
	defer done()

	rps, err := db.Limiter("rps", strategies.GCRA{Rate: 2, Burst: 3})
	if err != nil {
		log.Fatal(err)
	}
	for range 4 {
		r, err := rps.Allow(context.Background(), "key-1")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// true 2 0s
	// true 1 0s
	// true 0 0s
	// false 0 500ms
}

// Usage known only after the fact, such as the tokens of an LLM response,
// is recorded unconditionally, and may take a key past its limit; the next
// call is then denied until the window allows it again.
func ExampleLimiter_Record() {
	now := time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)
	db, done := exampleDB(&now)
	defer done()

	tokens, err := db.Limiter("tokens", strategies.FixedWindow{Quotas: []strategies.Quota{
		{Name: "minute", Limit: 1000, Window: time.Minute},
	}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	r, err := tokens.Record(ctx, "key-1", 1200) // the response used 1200 tokens
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after the response:", r.Remaining, "left")
	r, err = tokens.Peek(ctx, "key-1") // what the next request would meet
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next request allowed:", r.Allowed, "retry after", r.RetryAfter)
	// Output:
	// after the response: 0 left
	// next request allowed: false retry after 1m0s
}

// Reservations on one key are served in turn, at the rate: a job queue
// that sends at most 2 requests per second to an API reserves a slot for
// each and acts when it comes. A slot not used is given back.
func ExampleLimiter_Reserve() {
	now := time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)
	db, done := exampleDB(&now)
	defer done()
	l, err := db.Limiter("jobs", strategies.GCRA{Rate: 2, Burst: 1})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	var last *ratestore.Reservation
	for range 3 {
		if last, err = l.Reserve(ctx, "api", 1); err != nil {
			log.Fatal(err)
		}
		fmt.Println("act in", last.Delay())
	}
	if err := last.Cancel(ctx); err != nil { // the third job was dropped
		log.Fatal(err)
	}
	r, err := l.Reserve(ctx, "api", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next job acts in", r.Delay())
	// Output:
	// act in 0s
	// act in 500ms
	// act in 1s
	// next job acts in 1s
}
