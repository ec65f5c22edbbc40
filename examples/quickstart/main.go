// Command quickstart meters two API keys with ratestore on the default
// embedded store, a bbolt file, and shows that the state survives a restart:
// run it twice in a row and the second run starts where the first ended.
//
//	go run ./examples/quickstart            # uses ./ratestore.db
//	go run ./examples/quickstart -db /tmp/x.db
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/strategies"
)

func main() {
	path := flag.String("db", "ratestore.db", "database file (bbolt)")
	flag.Parse()

	db, err := ratestore.Open(*path, ratestore.Options{}) // bbolt, Sync: every change fsynced
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	// Requests: 2 per second with bursts of 5, as GCRA.
	rps, err := db.Limiter("rps", strategies.GCRA{Rate: 2, Burst: 5})
	if err != nil {
		log.Fatal(err)
	}
	// Tokens: 1,000 per minute and 20,000 per day, both enforced at once.
	tokens, err := db.Limiter("tokens", strategies.FixedWindow{Quotas: []strategies.Quota{
		{Name: "minute", Limit: 1_000, Window: time.Minute},
		{Name: "day", Limit: 20_000, Window: 24 * time.Hour},
	}})
	if err != nil {
		log.Fatal(err)
	}

	fmt.Printf("%-8s %-4s %-14s %8s %-12s %11s\n", "key", "call", "request", "rps left", "tokens", "tokens left")
	for _, key := range []string{"team-a", "team-b"} {
		for call := 1; call <= 7; call++ {
			r, err := rps.Allow(ctx, key)
			if err != nil {
				log.Fatal(err)
			}
			if !r.Allowed {
				// Denied: the request never reaches the upstream, so it uses no tokens.
				fmt.Printf("%-8s %-4d %-14s %8d\n", key, call, "retry in "+r.RetryAfter.Round(time.Millisecond).String(), r.Remaining)
				continue
			}
			// Token usage is known only after the upstream answered: Record it.
			// Past the quota, Record still counts, and reports the key over it.
			t, err := tokens.Record(ctx, key, 120)
			if err != nil {
				log.Fatal(err)
			}
			usage := "within quota"
			if !t.Allowed {
				usage = "over quota"
			}
			fmt.Printf("%-8s %-4d %-14s %8d %-12s %11d\n", key, call, "allowed", r.Remaining, usage, t.Remaining)
		}
	}
	fmt.Printf("\nstate is in %s (%s); run again to see it carried over.\n", db.Path(), db.Backend())
}
