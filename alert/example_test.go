package alert_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"
	_ "time/tzdata" // Europe/Paris wherever the example runs

	"github.com/ratestore/ratestore/alert"
	"github.com/ratestore/ratestore/pricing"
)

func Example() {
	// A webhook that prints what it receives.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println(string(body))
	}))
	defer srv.Close()

	n, err := alert.New(alert.Options{URL: srv.URL, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		panic(err)
	}
	// After each request, the gateway reports the usage of the key's
	// limits and of its team's.
	levels := []alert.Level{
		{Type: alert.TypeWindow, Name: "window 5h0m0s", Limit: 100_000, Spent: 85_000,
			ResetsAt: time.Date(2026, 2, 10, 17, 0, 0, 0, time.UTC)},
		{Type: alert.TypeBudget, Name: "budget month Europe/Paris", Team: true, Period: true,
			Limit: int64(500 * pricing.Dollar), Spent: int64(41_250 * pricing.Cent),
			ResetsAt: time.Date(2026, 3, 1, 0, 0, 0, 0, paris)},
	}
	n.Observe("key_1", "team_a", levels)
	n.Observe("key_2", "team_a", levels) // the team's budget alerted already

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil { // delivers what is queued
		panic(err)
	}
	s := n.Stats()
	fmt.Printf("crossings %d, sent %d, failed %d\n", s.Crossings, s.Sent, s.Failed)
	// Output:
	// {"type":"window","threshold":0.8,"key":"key_1","team":"team_a","scope":"key","name":"window 5h0m0s","limit":100000,"spent":85000,"resets_at":"2026-02-10T17:00:00Z"}
	// {"type":"budget","threshold":0.8,"key":"key_1","team":"team_a","scope":"team","name":"budget month Europe/Paris","limit":500,"spent":412.5,"resets_at":"2026-03-01T00:00:00+01:00"}
	// {"type":"window","threshold":0.8,"key":"key_2","team":"team_a","scope":"key","name":"window 5h0m0s","limit":100000,"spent":85000,"resets_at":"2026-02-10T17:00:00Z"}
	// crossings 3, sent 3, failed 0
}
