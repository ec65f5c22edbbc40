package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/redisstore"
)

// The gateway in front of a model API: clients send their ratestore key as
// the API key; the gateway checks it and its policy, forwards the request
// with the upstream's own key, and charges the key the tokens the response
// reports.
func Example() {
	// A stand-in for the model API, answering every chat completion with
	// 12 prompt and 30 completion tokens.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}}`)
	}))
	defer upstream.Close()

	dir, err := os.MkdirTemp("", "gateway-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)
	db, err := ratestore.Open(filepath.Join(dir, "db"), ratestore.Options{Now: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	keys, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	k, secret, err := keys.Create(context.Background(), keystore.Spec{Name: "team-a", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 100_000, Window: 5 * time.Hour}},
	}})
	if err != nil {
		log.Fatal(err)
	}

	up, _ := url.Parse(upstream.URL)
	g, err := gateway.New(db, gateway.Options{Upstream: up, UpstreamKey: "the upstream's own key"})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(g)
	for _, bearer := range []string{secret, "not a key"} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	// A request is charged as its handler ends, after its answer was sent:
	// Close waits for the handlers.
	srv.Close()
	u, err := keys.Usage(context.Background(), k.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("charged:", u.Windows[0].Used, "tokens")
	// Output:
	// 200 OK
	// 401 Unauthorized
	// charged: 42 tokens
}

// Several gateways behind one load balancer share their keys and every
// limit through one Redis; keys are created through any one's admin API,
// which the console (package console) guards with the admin token and
// mounts in front of the proxy, as the gateway command does. (Not run by
// go test: it needs a Redis at localhost:6379.)
func ExampleNew_redis() {
	rdb, err := redisstore.Open(context.Background(), "redis://localhost:6379/0", redisstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	up, _ := url.Parse("https://api.openai.com")
	g, err := gateway.New(rdb, gateway.Options{Upstream: up, UpstreamKey: os.Getenv("OPENAI_API_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	api, err := admin.New(admin.Options{Keys: g.Keys(), Ledger: g.Ledger(), Gateway: g})
	if err != nil {
		log.Fatal(err)
	}
	// The console's sessions are kept in the Redis too: signed in at one
	// gateway, an operator is signed in at all.
	operator, err := console.New(console.Options{Token: os.Getenv("RATESTORE_ADMIN_TOKEN"), Sessions: console.StoreSessions(rdb),
		API: api, Metrics: g.Metrics(), Next: g})
	if err != nil {
		log.Fatal(err) // an admin token shorter than 32 bytes
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", operator))
}
