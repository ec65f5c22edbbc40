package keystore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

var (
	ctx = context.Background()
	// t0 is the start of every test's clock, 2026-01-18T09:00:00Z: the
	// start of a bucket of every window the tests use.
	t0 = time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC)
)

// env is a key store on a store of the backend matrix, with a fake clock:
// every behavioural test of the key store runs on each backend (its
// conformance suite). In Async mode the flush interval is far longer than
// any test, so only Close (and Flush) make changes durable: reopen proves
// that they do.
type env struct {
	t     *testing.T
	be    backendtest.Backend
	opts  keystore.Options
	clock *fakeclock.Clock
	st    *backendtest.Store
	ks    *keystore.Store
}

// forEach runs f on a fresh env on every backend, with the default
// Options.
func forEach(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	forEachOpts(t, keystore.Options{}, f)
}

// forEachOpts is forEach with the key store opened with opts.
func forEachOpts(t *testing.T, opts keystore.Options, f func(t *testing.T, e *env)) {
	t.Helper()
	backendtest.Run(t, backendtest.All(), func(t *testing.T, b backendtest.Backend) {
		f(t, newEnv(t, b, opts))
	})
}

// newEnv opens a fresh store of b, and its key store.
func newEnv(t *testing.T, b backendtest.Backend, opts keystore.Options) *env {
	t.Helper()
	e := &env{t: t, be: b, opts: opts, clock: fakeclock.New(t0)}
	e.st = b.Open(t, e.clock)
	e.openStore()
	return e
}

// openDB opens the store again (see close), without its key store.
func (e *env) openDB() {
	e.t.Helper()
	e.st.Reopen()
	e.ks = nil
}

// openStore opens the key store of the open database.
func (e *env) openStore() {
	e.t.Helper()
	ks, err := e.open(e.opts)
	require.NoError(e.t, err)
	e.ks = ks
}

// open opens the key store of the open database with opts.
func (e *env) open(opts keystore.Options) (*keystore.Store, error) {
	return keystore.Open(e.st.Store, opts)
}

// close closes the database.
func (e *env) close() {
	e.t.Helper()
	e.st.Close()
	e.ks = nil
}

// reopen closes the database and opens it again at the same path, with a
// new key store: what survives is what reached the disk.
func (e *env) reopen() {
	e.t.Helper()
	e.openDB()
	e.openStore()
}

// create makes a key with one window of limit tokens (the usage window).
func (e *env) create(name string, limit int64) (keystore.Key, string) {
	e.t.Helper()
	return e.createSpec(keystore.Spec{Name: name, TokenLimit: limit})
}

// createSpec makes a key from spec.
func (e *env) createSpec(spec keystore.Spec) (keystore.Key, string) {
	e.t.Helper()
	k, secret, err := e.ks.Create(ctx, spec)
	require.NoError(e.t, err)
	return k, secret
}

// createPolicy makes a key with policy p.
func (e *env) createPolicy(name string, p keystore.Policy) (keystore.Key, string) {
	e.t.Helper()
	return e.createSpec(keystore.Spec{Name: name, Policy: p})
}

func (e *env) usage(id string) keystore.Usage {
	e.t.Helper()
	u, err := e.ks.Usage(ctx, id)
	require.NoError(e.t, err)
	return u
}

// used returns the tokens used in every window of key id, in policy order.
func (e *env) used(id string) []int64 {
	e.t.Helper()
	var out []int64
	for _, w := range e.usage(id).Windows {
		out = append(out, w.Used)
	}
	return out
}

func (e *env) get(id string) keystore.Key {
	e.t.Helper()
	k, err := e.ks.Get(ctx, id)
	require.NoError(e.t, err)
	return k
}

func (e *env) record(id string, tokens int64) strategies.Result {
	e.t.Helper()
	r, err := e.ks.RecordUsage(ctx, id, tokens)
	require.NoError(e.t, err)
	return r
}

func (e *env) check(secret string) strategies.Result {
	e.t.Helper()
	_, r, err := e.ks.Check(ctx, secret)
	require.NoError(e.t, err)
	return r
}

func (e *env) admit(secret string, req keystore.Request) *keystore.Admission {
	e.t.Helper()
	a, err := e.ks.Admit(ctx, secret, req)
	require.NoError(e.t, err)
	require.NotNil(e.t, a)
	return a
}

func (e *env) finish(a *keystore.Admission, tokens int64) keystore.Usage {
	e.t.Helper()
	u, err := a.Finish(ctx, tokens)
	require.NoError(e.t, err)
	return u
}

func (e *env) pending() int {
	e.t.Helper()
	n, err := e.ks.PendingLegacy(ctx)
	require.NoError(e.t, err)
	return n
}

// rawGet reads the record at key, behind the key store's back.
func (e *env) rawGet(key string) []byte {
	e.t.Helper()
	v, err := e.st.Get(ctx, []byte(key))
	require.NoError(e.t, err)
	return v
}

// rawPut writes value at key (nil: deletes it), behind the key store's
// back.
func (e *env) rawPut(key string, value []byte) {
	e.t.Helper()
	require.NoError(e.t, e.st.Update(ctx, nil, func(b backend.Batch) error {
		if value == nil {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), value)
	}))
}

// dump returns every record of the key store (k/, h/ and l/), by key.
func (e *env) dump() map[string]string {
	e.t.Helper()
	m := map[string]string{}
	for _, p := range []string{"k/", "h/", "l/"} {
		require.NoError(e.t, e.st.Scan(ctx, []byte(p), func(k, v []byte) error {
			m[string(k)] = string(v)
			return nil
		}))
	}
	return m
}

// onlyPrefix returns the entries of m whose key starts with prefix.
func onlyPrefix(m map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// hashKey is the key of the index entry of secret.
func hashKey(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return "h/" + string(h[:])
}

// rateRemaining reports, straight from the engine, how many requests the
// request rate of key id (a policy of rpm requests per minute) has left:
// the key store keeps it under the limiter "keys:rpm".
func (e *env) rateRemaining(id string, rpm int64) int64 {
	e.t.Helper()
	return e.peek("keys:rpm", strategies.RollingWindow{Limit: rpm, Window: time.Minute, Bucket: time.Second}, id).Remaining
}

// peek is a Peek of key under the limiter name with strategy s, straight
// from the engine.
func (e *env) peek(name string, s strategies.Strategy, key string) strategies.Result {
	e.t.Helper()
	l, err := e.st.Handle(name, s)
	require.NoError(e.t, err)
	r, err := l.Peek(ctx, key)
	require.NoError(e.t, err)
	return r
}

// within runs f and fails the test if it has not returned after d of real
// time, and stops it: everything else would wait for the call too. It is
// a watchdog for calls that deadlock, not a clock: nothing the tests
// assert depends on it. A call that never returns is left running, and
// e's store abandoned so that the cleanup does not wait for it.
func (e *env) within(d time.Duration, what string, f func()) bool {
	e.t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		e.st.Abandon()
		e.t.Fatalf("%s did not return within %v: deadlocked (it holds the database, so the test stops here)", what, d)
		return false
	}
}

// denial returns the *keystore.Denial in err, failing if there is none.
func denial(t *testing.T, err error) *keystore.Denial {
	t.Helper()
	var d *keystore.Denial
	require.True(t, errors.As(err, &d), "%v is not a *keystore.Denial", err)
	return d
}

// parallel runs f(i) for i in [0, n) on n goroutines, all released at once,
// and returns the errors they returned, joined.
func parallel(n int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errors.Join(errs...)
}
