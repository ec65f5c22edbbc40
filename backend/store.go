package backend

import (
	"context"
	"time"

	"github.com/ratestore/ratestore/strategies"
)

// Store is the contract of a backend: what a *ratestore.DB (embedded, this
// process alone) and a *redisstore.DB (shared by the processes of one
// Redis) both are, and all that the packages built on them (keystore,
// ledger, audit, gateway, server, httplimit, migrate) use. Code written
// once against it runs on either, with no branch on which it has:
//
//	func Open(db backend.Store) (*Thing, error)
//
// Two things differ by nature, and each is a method that does nothing on
// the embedded DB: Update's locks (on a DB, the only writer is this
// process, whose callers order a check and its take with locks of their
// own, as the key store does with a mutex per key) and Reread (only this process changes a DB's records, so what it last stored
// is what is stored). Prefetch, which saves round trips, is free on a DB
// as well.
type Store interface {
	// Handle returns the limiter applying strategy s to any key under
	// name, doing no I/O: the backend's own Limiter method, as this
	// contract's interface. name is 1 to MaxNameLen bytes of
	// [A-Za-z0-9_.:@+-].
	Handle(name string, s strategies.Strategy) (Limiter, error)
	// Concurrency returns leases of at most max holders per key under
	// name, each ending after ttl unless released before.
	Concurrency(name string, max int64, ttl time.Duration) (*Concurrency, error)
	// Update runs fn with a batch whose changes are stored together: all
	// of them or none after a crash. A shared store holds the locks named
	// by locks against the Updates of other processes while fn runs.
	Update(ctx context.Context, locks []string, fn func(Batch) error) error
	// UpdateCached is Update, except that on a shared store the batch may
	// decide on the values this process last stored or read, instead of
	// reading them, and its commit checks that they are still stored:
	// when one is not, it stores nothing and fails with an error matching
	// ErrConflict, and the caller makes its change again with Update,
	// having undone what fn did outside the batch. It saves the reads of a
	// change to values this process has just used (a key store's Finish,
	// after its Admit). On a store this process alone changes, it is
	// Update.
	UpdateCached(ctx context.Context, locks []string, fn func(Batch) error) error
	// Get returns the record at key (nil: none), a copy the caller owns.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Scan calls fn with every record whose key starts with prefix, in key
	// order.
	Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error
	// Reread returns the stored values (nil: none) of those of keys that
	// another process may have changed since this one stored them, in the
	// order of keys: all of them on a shared store, none (an empty slice)
	// on one this process alone changes. Callers that keep records in
	// memory learn others' changes from it, with no branch on which store
	// they have.
	Reread(ctx context.Context, keys [][]byte) ([][]byte, error)
	// ScanFrom is Scan beginning at the first key >= start (nil: the first
	// key with prefix): how a caller pages through an ordered range without
	// reading what comes before it. A page of n records costs O(n + log N)
	// on every backend.
	ScanFrom(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error
	// RereadPrefix is Scan where other processes change the records, and
	// calls nothing on a store this process alone changes: how a caller
	// finds the records others added.
	RereadPrefix(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error
	// Changes returns the messages announced under topic (Batch.Announce)
	// by every process since position after, oldest first, at most max of
	// them, and the position after the last one returned (after itself
	// when there is none). after "" asks for the position of now, with no
	// message. When messages after it were dropped (a feed keeps a bounded
	// number), it fails with an error matching ErrGap: the caller has
	// missed changes and must read what it keeps again. A store this
	// process alone changes has nothing to tell: it returns no message.
	Changes(ctx context.Context, topic, after string, max int) (msgs [][]byte, next string, err error)
	// Flush returns once every change made before it is stored durably.
	Flush(ctx context.Context) error
	// Now reads the store's clock.
	Now() time.Time
	// Attach returns the value attached to the store under key, calling
	// open to make it the first time: one key store per store.
	Attach(key any, open func() (any, error)) (any, error)
	Close() error
}

// Limiter is what the limiter handle of every backend does (the methods of
// ratestore.Limiter and redisstore.Limiter): httplimit, server and the
// gateway decide with it.
type Limiter interface {
	// Name is the limiter's name, never empty but for a nil pointer of
	// a backend's limiter type (the result of a failed Limiter call).
	Name() string
	Strategy() strategies.Strategy
	Allow(ctx context.Context, key string) (strategies.Result, error)
	AllowN(ctx context.Context, key string, n int64) (strategies.Result, error)
	Peek(ctx context.Context, key string) (strategies.Result, error)
	PeekN(ctx context.Context, key string, n int64) (strategies.Result, error)
	Record(ctx context.Context, key string, n int64) (strategies.Result, error)
	Reset(ctx context.Context, key string) error
	Reserve(ctx context.Context, key string, n int64) (*Reservation, error)
	Wait(ctx context.Context, key string, n int64) error
	Inspect(ctx context.Context, key string, fn func(st strategies.State, now int64) error) error
}

// Batch is what the batch of every backend's Update does, on the limiters
// of the same backend (a limiter of another backend is an error matching
// ErrInvalid). Its changes are made when called and stored by the commit
// that ends Update; its reads see its own changes. A record's value may be
// empty: Put stores it, Delete removes the record.
type Batch interface {
	AllowN(l Limiter, key string, n int64) (strategies.Result, error)
	PeekN(l Limiter, key string, n int64) (strategies.Result, error)
	Record(l Limiter, key string, n int64) (strategies.Result, error)
	Reset(l Limiter, key string) error
	Modify(l Limiter, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (strategies.Result, error)
	Inspect(l Limiter, key string, fn func(st strategies.State, now int64) error) error
	Get(key []byte) ([]byte, error)
	Put(key, value []byte) error
	Delete(key []byte) error
	// Reread is Store.Reread in the batch: on a shared store, the values
	// read are those the commit checks are unchanged.
	Reread(keys [][]byte) ([][]byte, error)
	// Announce tells the other processes of a shared store, through
	// Store.Changes, that the batch changed what msg names, once its
	// commit has stored the change. On a store this process alone changes
	// it does nothing: there is nobody to tell. topic is 1 to 64 bytes of
	// a limiter name's characters.
	Announce(topic string, msg []byte) error
	// Prefetch reads at once the records at records and key's states
	// under limiters (the backend's), which the batch is about to use,
	// where that saves round trips.
	Prefetch(records [][]byte, key string, limiters ...Limiter) error
	// Now is the instant the batch's calls decide at, no earlier than a
	// clock read before it.
	Now() time.Time
}

// ReadOnly reports whether s was opened read-only (ratestore.Options.ReadOnly),
// when nothing it holds may change: a backend with no read-only mode
// (Redis) never is.
func ReadOnly(s Store) bool {
	ro, ok := s.(interface{ ReadOnly() bool })
	return ok && ro.ReadOnly()
}
