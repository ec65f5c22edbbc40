package keystore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/redisstore"
)

// Example opens a key store, creates a key with two token windows, a
// request rate, a concurrency cap and the models it may use, and meters
// one request: Admit holds an estimate of its tokens while it runs, and
// Finish charges what it really used.
func Example() {
	dir, err := os.MkdirTemp("", "keystore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// A fixed clock, so that the output does not depend on when it runs.
	now := time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC)
	db, err := ratestore.Open(filepath.Join(dir, "keys.db"), ratestore.Options{Now: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	key, secret, err := ks.Create(ctx, keystore.Spec{
		Name: "team-a",
		Policy: keystore.Policy{
			Windows: []keystore.Window{
				{Limit: 100_000, Window: 5 * time.Hour},
				{Limit: 1_000_000, Window: 7 * 24 * time.Hour},
			},
			RequestsPerMinute: 60,
			MaxConcurrent:     4,
			Models:            []string{"claude-*", "gpt-4o"},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// The secret is shown once: hand it to the client. The store keeps
	// only its hash.
	_ = secret

	a, err := ks.Admit(ctx, secret, keystore.Request{Model: "claude-sonnet-4", Reserve: 4096})
	if err != nil {
		log.Fatal(err)
	}
	u, err := ks.Usage(ctx, key.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("admitted %s: %d tokens reserved, %d in flight\n", a.Key().Name, u.Used, u.InFlight)

	// ... the request runs, and its response says it used 1234 tokens.
	u, err = a.Finish(ctx, 1234)
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range u.Windows {
		fmt.Printf("window %v: %d of %d used\n", w.Window, w.Used, w.Limit)
	}

	_, err = ks.Admit(ctx, secret, keystore.Request{Model: "gemini-2.5-pro"})
	var d *keystore.Denial
	if errors.As(err, &d) {
		fmt.Println("refused:", d.Reason, errors.Is(err, keystore.ErrModel))
	}
	// Output:
	// admitted team-a: 4096 tokens reserved, 1 in flight
	// window 5h0m0s: 1234 of 100000 used
	// window 168h0m0s: 1234 of 1000000 used
	// refused: model true
}

// Two processes open the key store in one Redis: a key created by one is
// admitted by the other at once, and both count against one window.
// (Not run by go test: it needs a Redis at localhost:6379.)
func ExampleOpen_redis() {
	ctx := context.Background()
	rdb, err := redisstore.Open(ctx, "redis://localhost:6379/0", redisstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	keys, err := keystore.Open(rdb, keystore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	_, secret, err := keys.Create(ctx, keystore.Spec{Name: "team-a", TokenLimit: 100_000})
	if err != nil {
		log.Fatal(err)
	}
	a, err := keys.Admit(ctx, secret, keystore.Request{Model: "gpt-4o", Reserve: 2000})
	if err != nil {
		log.Fatal(err) // a *keystore.Denial when a limit refuses
	}
	u, err := a.Finish(ctx, 1234)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(u.Remaining)
}

// ExampleStore_Quota meters two keys' requests against one upstream's
// quota of 10,000 tokens a minute: each request is checked against its
// key and the quota in one decision, and a request over the quota is
// refused by it, taking nothing from the key.
func ExampleStore_Quota() {
	dir, err := os.MkdirTemp("", "keystore-quota")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC)
	db, err := ratestore.Open(filepath.Join(dir, "keys.db"), ratestore.Options{Now: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	upstream, err := ks.Quota("upstream:openai-a", keystore.Policy{
		Windows: []keystore.Window{{Limit: 10_000, Window: time.Minute}},
	})
	if err != nil {
		log.Fatal(err)
	}
	_, a, _ := ks.Create(ctx, keystore.Spec{Name: "a", TokenLimit: 100_000})
	_, b, _ := ks.Create(ctx, keystore.Spec{Name: "b", TokenLimit: 100_000})

	first, err := ks.Admit(ctx, a, keystore.Request{Reserve: 8_000, Quotas: []*keystore.Quota{upstream}})
	fmt.Println("a admitted:", err == nil)
	_, err = ks.Admit(ctx, b, keystore.Request{Reserve: 8_000, Quotas: []*keystore.Quota{upstream}})
	var d *keystore.Denial
	if errors.As(err, &d) {
		fmt.Println("b refused by", d.Quota, d.Limit)
	}
	first.Finish(ctx, 1_200) // it used less than it held
	_, err = ks.Admit(ctx, b, keystore.Request{Reserve: 8_000, Quotas: []*keystore.Quota{upstream}})
	fmt.Println("b admitted:", err == nil)
	u, _ := ks.QuotaUsage(ctx, upstream)
	fmt.Println("quota used:", u.Used)
	// Output:
	// a admitted: true
	// b refused by upstream:openai-a window 1m0s
	// b admitted: true
	// quota used: 9200
}
