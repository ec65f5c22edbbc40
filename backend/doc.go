// Package backend is the contract between ratestore's engines and what is
// built on them: the interfaces a backend meets (Store, its Limiter and
// its Batch), the errors every backend returns, the rules of names and
// keys, and what is written once on the contract for every backend
// (Concurrency's leases, Reservation).
//
// Two backends meet it: the embedded engine (package ratestore, on bbolt
// or badger) and redisstore (Redis, shared by several processes). The
// packages above them take a Store as it is, and never ask which one they
// have. This package imports neither backend, so a backend, and code
// written on the contract, links only what it uses.
package backend
