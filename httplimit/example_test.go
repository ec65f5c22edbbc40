package httplimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/strategies"
)

func Example() {
	dir, err := os.MkdirTemp("", "httplimit")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a fixed clock, for the output below
	db, err := ratestore.Open(filepath.Join(dir, "ratestore.db"), ratestore.Options{Now: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// 2 requests per API key, refilled at 1 per second.
	perKey, err := db.Limiter("per-key", strategies.GCRA{Rate: 1, Burst: 2})
	if err != nil {
		log.Fatal(err)
	}
	lim, err := httplimit.New(httplimit.Options{
		Rules: []httplimit.Rule{{Limiter: perKey, Key: httplimit.APIKey()}},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /hello", lim.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/hello", nil)
		req.Header.Set("Authorization", "Bearer sk-example")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "per-key";r=1;t=1 Retry-After: ""
	// 200 RateLimit: "per-key";r=0;t=2 Retry-After: ""
	// 429 RateLimit: "per-key";r=0;t=1 Retry-After: "1"
}
