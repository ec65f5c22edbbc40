// Package backendtest is the one backend matrix of the tests: every
// backend the packages built on the backend contract (backend.Store) run
// on, a bolt or badger database in either durability mode and Redis, and
// how a test opens one on a fake clock, closes it and opens it again.
//
// A suite that runs on every backend ranges over All (or the part of it
// that has what it tests, such as Embedded); a suite that runs on one
// backend at a time takes Single, which RATESTORE_TEST_BACKEND picks. Only
// tests import it.
package backendtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
)

// Backend is one configuration of the matrix, one of the values below: a
// database of an engine in one durability mode, or Redis.
type Backend struct {
	engine     ratestore.Backend
	durability ratestore.Durability
	redis      bool
}

// The backends of the matrix.
var (
	BoltSync    = Backend{engine: ratestore.Bolt, durability: ratestore.Sync}
	BoltAsync   = Backend{engine: ratestore.Bolt, durability: ratestore.Async}
	BadgerSync  = Backend{engine: badger.Backend, durability: ratestore.Sync}
	BadgerAsync = Backend{engine: badger.Backend, durability: ratestore.Async}
	// Redis is a redisstore.DB on a redis-server started for the test:
	// tests on it skip without redis-server, unless redistest.RequireEnv
	// is set.
	Redis = Backend{redis: true}
)

// All is every backend of the matrix: the embedded ones, then Redis.
func All() []Backend { return append(Embedded(), Redis) }

// Embedded is the databases of this process alone: each engine in each
// durability mode.
func Embedded() []Backend { return []Backend{BoltSync, BoltAsync, BadgerSync, BadgerAsync} }

// Env is the environment variable that picks Single: "redis" runs the
// suites that take it on Redis (.ci/run does, for one more run of them);
// anything else, on bolt/sync.
const Env = "RATESTORE_TEST_BACKEND"

// Single is the backend of the suites that run on one backend at a time
// (gateway's, httplimit's and server's): Redis when Env says "redis",
// bolt/sync otherwise. It is Env's one reader.
func Single() Backend {
	if os.Getenv(Env) == "redis" {
		return Redis
	}
	return BoltSync
}

// String names b as the suites' subtests do: "bolt/sync", "bolt/async",
// "badger/sync", "badger/async", "redis".
func (b Backend) String() string {
	if b.redis {
		return "redis"
	}
	return b.Engine().String() + "/" + b.durability.String()
}

// IsRedis reports whether b is Redis: shared by processes, and with no
// files.
func (b Backend) IsRedis() bool { return b.redis }

// Engine is the engine of an embedded b (ratestore.Bolt or
// badger.Backend), for a test that opens its database itself; nil for
// Redis.
func (b Backend) Engine() ratestore.Backend {
	return b.engine
}

// Durability is the durability mode of an embedded b (Sync for Redis).
func (b Backend) Durability() ratestore.Durability { return b.durability }

// Run runs f as a subtest named for each of bs.
func Run(t *testing.T, bs []Backend, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range bs {
		t.Run(b.String(), func(t *testing.T) { f(t, b) })
	}
}

// RedisTimeout bounds a Redis call of the tests: generous, for the race
// detector on two shared cores.
const RedisTimeout = 10 * time.Second

// Store is an open backend of a test, on the test's clock: a fresh
// database at a temporary path, or a redisstore.DB on a redis-server of
// its own. It is closed when the test ends, unless Abandon was called.
type Store struct {
	// Store is the open backend, through the contract. Its methods,
	// promoted, call the one open at the time of the call; a method value
	// (st.Handle) keeps the one open when it was taken, and so does what
	// a test handed st.Store to before a Reopen.
	backend.Store
	// DB is the embedded database (nil on Redis), and Redis the
	// redisstore.DB (nil on a database): for what only one of them has.
	DB    *ratestore.DB
	Redis *redisstore.DB
	// Backend is what was opened.
	Backend Backend
	// Path is the database's path (a file for bolt, a directory for
	// badger); "" on Redis.
	Path string
	// Server is the redis-server of Redis; nil on a database.
	Server *redistest.Server
	// Clock is the clock of Now and After.
	Clock *fakeclock.Clock

	t         testing.TB
	opts      ratestore.Options
	open      bool
	abandoned bool
}

// Open opens b for t on clock: a new database at a temporary path, its
// timers (Limiter.Wait's) on clock too, and in Async mode a FlushInterval
// of an hour, so that only Close and Flush write; or a redisstore.DB on a
// redis-server started for t.
func (b Backend) Open(t testing.TB, clock *fakeclock.Clock) *Store {
	t.Helper()
	return b.OpenWith(t, clock, ratestore.Options{})
}

// OpenWith is Open with more Options of an embedded database (Redis takes
// none of them): Backend, Durability, Now and After are b's and clock's,
// and FlushInterval is an hour when opts sets none.
func (b Backend) OpenWith(t testing.TB, clock *fakeclock.Clock, opts ratestore.Options) *Store {
	t.Helper()
	s := &Store{Backend: b, Clock: clock, t: t}
	if b.redis {
		s.Server = redistest.Start(t)
	} else {
		s.Path = filepath.Join(t.TempDir(), "db")
		opts.Backend, opts.Durability = b.Engine(), b.durability
		opts.Now, opts.After = clock.Now, clock.After
		if opts.FlushInterval == 0 {
			opts.FlushInterval = time.Hour
		}
		s.opts = opts
	}
	s.Reopen()
	t.Cleanup(func() {
		if s.open && !s.abandoned {
			s.Close()
		}
	})
	return s
}

// Close closes the store, failing the test on an error. (It is not the
// contract's Close: a *Store is no backend.Store, so that what a test
// hands the code under test is the backend itself, its Store.)
func (s *Store) Close() {
	s.t.Helper()
	s.open = false
	if err := s.Store.Close(); err != nil {
		s.t.Fatalf("backendtest: %s: Close: %v", s.Backend, err)
	}
}

// Reopen closes the store if it is open, and opens it again on the same
// data (the path, or the redis-server) with the same options: a restart,
// after which what survives is what was stored.
func (s *Store) Reopen() {
	s.t.Helper()
	if s.open {
		s.Close()
	}
	if s.Backend.redis {
		s.Redis = s.dial()
		s.Store = s.Redis
	} else {
		db, err := ratestore.Open(s.Path, s.opts)
		if err != nil {
			s.t.Fatalf("backendtest: %s: %v", s.Backend, err)
		}
		s.DB, s.Store = db, db
	}
	s.open = true
}

// Another opens another redisstore.DB on the Redis of s, on the same
// clock: another process sharing the data. It is closed when the test
// ends. Only Redis has one: a database is locked by its process.
func (s *Store) Another() *redisstore.DB {
	s.t.Helper()
	if !s.Backend.redis {
		s.t.Fatalf("backendtest: %s has no other process", s.Backend)
	}
	db := s.dial()
	s.t.Cleanup(func() { db.Close() })
	return db
}

// dial opens a redisstore.DB on the Redis of s.
func (s *Store) dial() *redisstore.DB {
	s.t.Helper()
	db, err := redisstore.Open(context.Background(), s.Server.URL(),
		redisstore.Options{Now: s.Clock.Now, After: s.Clock.After, Timeout: RedisTimeout})
	if err != nil {
		s.t.Fatalf("backendtest: %v", err)
	}
	return db
}

// Abandon leaves the store open when the test ends: a call under test
// that never returned still holds it, and Close would wait for it.
func (s *Store) Abandon() { s.abandoned = true }
