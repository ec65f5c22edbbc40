package promstats_test

import (
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/promstats"
)

// A DB's statistics on a /metrics endpoint.
func Example() {
	dir, err := os.MkdirTemp("", "promstats-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := ratestore.Open(filepath.Join(dir, "db"), ratestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(promstats.New(db, nil))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// http.ListenAndServe("127.0.0.1:9090", nil)
}
