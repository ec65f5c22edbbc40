package backend_test

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

// chargeJob is written once against the backend contract: it runs on a
// *ratestore.DB, as here, and unchanged on a *redisstore.DB shared by
// several processes. It takes a job's cost from a team's hourly allowance
// and notes the job, in one Update holding the team's lock (which only a
// shared store needs), and says whether the job may run.
func chargeJob(ctx context.Context, db backend.Store, team string, cost int64) (bool, error) {
	l, err := db.Handle("jobs", strategies.TokenBucket{Rate: 1000.0 / 3600, Burst: 1000})
	if err != nil {
		return false, err
	}
	var allowed bool
	err = db.Update(ctx, []string{team}, func(b backend.Batch) error {
		r, err := b.AllowN(l, team, cost)
		if err != nil || !r.Allowed {
			return err
		}
		allowed = true
		return b.Put([]byte("jobs/last/"+team), fmt.Appendf(nil, "%d", cost))
	})
	return allowed, err
}

// A function written once against Store runs on the embedded DB as it is,
// and on a redisstore.DB the same.
func ExampleStore() {
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

	ctx := context.Background()
	for _, cost := range []int64{600, 300, 200} {
		ok, err := chargeJob(ctx, db, "team-a", cost)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(cost, ok)
	}
	last, _ := db.Get(ctx, []byte("jobs/last/team-a"))
	fmt.Println("last job charged:", string(last))
	// Output:
	// 600 true
	// 300 true
	// 200 false
	// last job charged: 300
}
