package ratestore

import (
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/strategies"
)

// A DB meets the backend contract (backend.Store): the key store, the
// ledger, the gateway and everything else built on the contract run on it
// as they run on a redisstore.DB. What the contract writes once for every
// backend is used here under the names a DB's users know.
type (
	// Concurrency bounds how many holders act on a key at once (see
	// backend.Concurrency).
	Concurrency = backend.Concurrency
	// A Lease is a slot of a key held by one holder (see backend.Lease).
	Lease = backend.Lease
	// A Reservation is n taken from a key now, for an action its holder
	// performs later (see backend.Reservation and Limiter.Reserve).
	Reservation = backend.Reservation
)

// Handle is Limiter as the contract's interface: the same handle, for code
// written once for every backend.
func (db *DB) Handle(name string, s strategies.Strategy) (backend.Limiter, error) {
	l, err := db.Limiter(name, s)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Concurrency returns the leases of at most max holders per key under
// name, each ending after ttl unless released before. name is a limiter
// name, and shares state with the limiters of that name; max is at least
// 1, ttl in (0, strategies.MaxWindow].
func (db *DB) Concurrency(name string, max int64, ttl time.Duration) (*Concurrency, error) {
	return backend.NewConcurrency(db, name, max, ttl)
}

var (
	_ backend.Store   = (*DB)(nil)
	_ backend.Limiter = (*Limiter)(nil)
)
