package badger_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/strategies"
)

// A DB whose states live in a badger directory: the only difference from
// the default is Options.Backend, and the import that links badger.
func Example() {
	dir, err := os.MkdirTemp("", "ratestore-badger")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := ratestore.Open(filepath.Join(dir, "states"), ratestore.Options{Backend: badger.Backend})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	l, err := db.Limiter("rps", strategies.GCRA{Rate: 1, Burst: 2})
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		r, err := l.Allow(context.Background(), "key")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Allowed)
	}
	fmt.Println(db.Backend())
	// Output:
	// true
	// true
	// false
	// badger
}
