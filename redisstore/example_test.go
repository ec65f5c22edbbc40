package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

// Two instances of a gateway open the same Redis and share each key's
// limit: 100k tokens per 5 hours, whichever instance serves the request.
// (Not run by go test: it needs a Redis at localhost:6379.)
func Example() {
	ctx := context.Background()
	db, err := redisstore.Open(ctx, "redis://localhost:6379/0", redisstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	tokens, err := db.Limiter("tokens", strategies.RollingWindow{Limit: 100_000, Window: 5 * time.Hour, Bucket: 5 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	r, err := tokens.Record(ctx, "team-a", 1234) // the tokens a response used
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Remaining)
}
