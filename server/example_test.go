package server_test

import (
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/server"
)

// A program serves its embedded store's limiters to the programs in other
// languages on its machine: HTTP on one port, CL.THROTTLE on another. With
// a redisstore.DB in place of the ratestore.DB, server.New(rdb, opts)
// serves limits that several such servers share. (Not run by go test: it
// serves until stopped.)
func ExampleNew() {
	db, err := ratestore.Open(filepath.Join(os.TempDir(), "serve-example.db"), ratestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	s := server.New(db, server.Options{Token: os.Getenv("RATESTORE_SERVE_TOKEN")})
	ln, err := net.Listen("tcp", "127.0.0.1:6380")
	if err != nil {
		log.Fatal(err)
	}
	go s.ServeRESP(ln)
	log.Fatal(http.ListenAndServe("127.0.0.1:8081", s.Handler()))
}
