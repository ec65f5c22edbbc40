package redisstore

import (
	"time"

	"github.com/ratestore/ratestore/backend"
)

// Concurrency is the one Concurrency of every backend: on Redis, it bounds
// how many holders, in every instance, act on a key at once.
type Concurrency = backend.Concurrency

// Lease is the one Lease of every backend.
type Lease = backend.Lease

// Concurrency returns the leases of at most max holders per key under
// name, each ending after ttl unless released before, as
// ratestore.DB.Concurrency does: a lease is one unit of a
// strategies.SlidingLog{Limit: max, Window: ttl} under name, so a crashed
// holder's slot frees after ttl. A lease acquired by Options.FailOpen
// while Redis could not decide holds no slot.
func (db *DB) Concurrency(name string, max int64, ttl time.Duration) (*Concurrency, error) {
	return backend.NewConcurrency(db, name, max, ttl)
}
