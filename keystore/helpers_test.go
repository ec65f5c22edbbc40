package keystore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
	"github.com/ratestore/ratestore/keystore"
	"github.com/stretchr/testify/require"
)

var (
	ctx = context.Background()
	// t0 is the start of every test's clock, 2026-01-18T09:00:00Z: a
	// bucket start.
	t0 = time.Unix(1768726800, 0).UTC()
)

// backends are the storage backends every behavioural test runs on.
var backends = []string{"bolt", "badger"}

// openBackend opens the backend named at path: a file for bolt, a
// directory for badger.
func openBackend(name, path string) (storage.Store, error) {
	if name == "badger" {
		return badgerstore.Open(path, nil)
	}
	return boltstore.Open(path)
}

// clock is a fake clock in Unix nanoseconds.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() int64              { return c.ns.Load() }
func (c *clock) Time() time.Time         { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *clock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }

// env is a key store on a backend, with a fake clock and a Durable hook
// that counts its calls and can be made to fail.
type env struct {
	t       *testing.T
	backend string
	path    string
	raw     storage.Store // what the key store sees: the backend, maybe wrapped
	base    storage.Store // the backend itself
	ks      *keystore.Store
	clock   *clock
	durable atomic.Int64
	failDur atomic.Pointer[error]
}

// forEachBackend runs f on a fresh env on each backend.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			f(t, newEnv(t, b))
		})
	}
}

func newEnv(t *testing.T, backend string) *env {
	e := &env{t: t, backend: backend, path: filepath.Join(t.TempDir(), "k.db"), clock: &clock{}}
	e.clock.Set(t0)
	e.open()
	t.Cleanup(func() { e.base.Close() })
	return e
}

func (e *env) open() {
	s, err := openBackend(e.backend, e.path)
	require.NoError(e.t, err)
	e.base, e.raw = s, s
	e.ks = e.newKeys(s)
}

func (e *env) newKeys(s storage.Store) *keystore.Store {
	ks, err := keystore.New(s, keystore.Options{
		Now: e.clock.Now,
		Durable: func(context.Context) error {
			e.durable.Add(1)
			if err := e.failDur.Load(); err != nil {
				return *err
			}
			return s.Sync()
		},
	})
	require.NoError(e.t, err)
	return ks
}

// reopen closes the backend and opens it again, with a new key store.
func (e *env) reopen() {
	require.NoError(e.t, e.base.Close())
	e.open()
}

// wrap puts w in front of the backend.
func (e *env) wrap(w storage.Store) {
	e.raw = w
	e.ks = e.newKeys(w)
}

// dump returns every entry of the store.
func (e *env) dump() map[string]string {
	m := map[string]string{}
	require.NoError(e.t, e.base.Scan(nil, nil, func(k, v []byte) error {
		m[string(k)] = string(v)
		return nil
	}))
	return m
}

// put writes value at key in the store, behind the key store's back.
func (e *env) put(key string, value []byte) {
	require.NoError(e.t, e.raw.Commit([]storage.Op{{Key: []byte(key), Value: value}}))
}

// create makes a key with limit tokens per window.
func (e *env) create(name string, limit int64) (keystore.Key, string) {
	k, secret, err := e.ks.Create(ctx, keystore.Spec{Name: name, TokenLimit: limit})
	require.NoError(e.t, err)
	return k, secret
}

func (e *env) usage(id string) keystore.Usage {
	u, err := e.ks.Usage(ctx, id)
	require.NoError(e.t, err)
	return u
}

func (e *env) get(id string) keystore.Key {
	k, err := e.ks.Get(ctx, id)
	require.NoError(e.t, err)
	return k
}

func (e *env) pending() int {
	n, err := e.ks.PendingLegacy(ctx)
	require.NoError(e.t, err)
	return n
}

// failingCommit is a storage.Store whose Commit fails.
type failingCommit struct {
	storage.Store
	err error
}

func (f failingCommit) Commit([]storage.Op) error { return f.err }

var errBoom = errors.New("boom")

// parallel runs f(i) for i in [0, n) on n goroutines, all released at once,
// and returns the first error.
func parallel(n int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make(chan error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			if err := f(i); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	return <-errs
}
