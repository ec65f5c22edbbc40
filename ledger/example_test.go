package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// A request is admitted by the key store, and finished with a ledger
// note: its usage, its entry and its rollups are written by one commit.
// Then the operator asks what the key spent, by model, and for its last
// requests.
func Example() {
	dir, _ := os.MkdirTemp("", "ledger-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := ratestore.Open(filepath.Join(dir, "gateway.db"), ratestore.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	keys, _ := keystore.Open(db, keystore.Options{})
	led, _ := ledger.Open(db, ledger.Options{Retention: 90 * 24 * time.Hour})
	defer led.Close(ctx)
	k, secret, _ := keys.Create(ctx, keystore.Spec{Name: "app", TokenLimit: 100_000})

	for _, model := range []string{"gpt-4o", "gpt-4o", "claude-sonnet-4"} {
		a, err := keys.Admit(ctx, secret, keystore.Request{Model: model, Reserve: 500})
		if err != nil {
			panic(err)
		}
		note, _ := led.Note(ledger.Entry{
			RequestID: "req_0123456789abcdef", Key: k.ID, Model: model, Route: "chat completions",
			Tokens: ledger.Tokens{Input: 120, Output: 30}, Cost: 450 * pricing.Micro, Status: 200,
		})
		_, err = a.FinishWith(ctx, 150, 450*pricing.Micro, note)
		note.Done(err)
	}

	spend, _ := led.Spend(ctx, ledger.SpendQuery{GroupBy: []string{ledger.ByModel}})
	for _, r := range spend.Rows {
		fmt.Printf("%s: %d requests, %d tokens, $%s\n", r.Model, r.Requests, r.Tokens.Input+r.Tokens.Output, r.Cost)
	}
	page, _ := led.Requests(ctx, ledger.RequestQuery{Key: k.ID, Limit: 2})
	fmt.Println(len(page.Entries), "entries,", "more:", page.Next != "")
	// Output:
	// claude-sonnet-4: 1 requests, 150 tokens, $0.00045
	// gpt-4o: 2 requests, 300 tokens, $0.0009
	// 2 entries, more: true
}
