// Package badger keeps a ratestore.DB's data in a badger directory
// (github.com/dgraph-io/badger/v4) instead of the default bbolt file:
//
//	db, err := ratestore.Open("ratestore.badger", ratestore.Options{Backend: badger.Backend})
//
// It is a package of its own so that only programs that import it link
// badger and what badger needs (protobuf, OpenTelemetry, its compression
// libraries): a program that keeps its states in bbolt stays small.
//
// badger suits stores with many keys changing at a high rate; its Sync
// writes cost about as much as bbolt's (see the benchmarks in the
// repository). What it does on damaged files, a full disk and a crash is
// the same as bbolt's from the caller's side: see ratestore.Options.Recover
// and the README's Faults section.
package badger

import (
	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
)

// Backend is badger as a ratestore.Backend: a directory at the DB's path.
const Backend = backend("badger")

type backend string

var _ ratestore.Backend = Backend

func (b backend) String() string { return string(b) }

// OpenStore implements ratestore.Backend.
func (backend) OpenStore(path string, opts storage.Options) (storage.Store, error) {
	return badgerstore.OpenWith(path, opts)
}
