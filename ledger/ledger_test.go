package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

var (
	ctx = context.Background()
	t0  = time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
)

// env is a ledger on a store of the backend matrix, with a fake clock.
type env struct {
	t     *testing.T
	be    backendtest.Backend
	st    *backendtest.Store // nil for a ledger bound to a store of its own (TestSharedRedis)
	clock *fakeclock.Clock
	reads *reads // what the ledger reads of its store, when counted
	led   *ledger.Ledger
	// stored is a read-only Ledger of the open database: what is stored,
	// without the refusals led counted and has not written.
	stored *ledger.Ledger
	// Bound to the open database:
	record func(e ledger.Entry) ledger.Entry
	// another opens another Ledger of the database (another writer), and
	// recordWith records an entry with one.
	another    func() *ledger.Ledger
	recordWith func(l *ledger.Ledger, e ledger.Entry) ledger.Entry
	// recordAll records es, entry i at at[i], in one batch.
	recordAll func(es []ledger.Entry, at []time.Time) []ledger.Entry
	scan      func(prefix string, fn func(k, v []byte))
	// hide deletes the records under prefix, and returns the function
	// that puts them back.
	hide        func(prefix string) (restore func())
	put         func(k, v []byte)
	closeLedger func() error
}

func forEach(t *testing.T, f func(t *testing.T, e *env)) { forModes(t, false, f) }

// forModes runs f on every backend, with the ledger's reads counted in
// e.reads if counting.
func forModes(t *testing.T, counting bool, f func(t *testing.T, e *env)) {
	backendtest.Run(t, backendtest.All(), func(t *testing.T, b backendtest.Backend) {
		e := &env{t: t, be: b, clock: fakeclock.New(t0)}
		if counting {
			e.reads = &reads{}
		}
		e.st = b.Open(t, e.clock)
		bind(e, count(e.st.Store, e.reads), ledger.Options{})
		t.Cleanup(func() { e.close() })
		f(t, e)
	})
}

// open opens the closed store again (see close), with a Ledger of opts.
func (e *env) open(opts ledger.Options) {
	e.t.Helper()
	e.st.Reopen()
	bind(e, count(e.st.Store, e.reads), opts)
}

func bind(e *env, db backend.Store, opts ledger.Options) {
	if opts.After == nil && e.clock != nil {
		opts.After = e.clock.After
	}
	led, err := ledger.Open(db, opts)
	require.NoError(e.t, err)
	e.led = led
	e.stored, err = ledger.Open(db, ledger.Options{ReadOnly: true})
	require.NoError(e.t, err)
	e.recordWith = func(l *ledger.Ledger, en ledger.Entry) ledger.Entry {
		n, err := l.Note(en)
		require.NoError(e.t, err)
		err = db.Update(ctx, []string{en.Key}, func(b backend.Batch) error { return n.Record(b, b.Now()) })
		n.Done(err)
		require.NoError(e.t, err)
		return n.Entry()
	}
	e.record = func(en ledger.Entry) ledger.Entry { return e.recordWith(led, en) }
	e.another = func() *ledger.Ledger {
		l, err := ledger.Open(db, ledger.Options{After: opts.After})
		require.NoError(e.t, err)
		return l
	}
	e.recordAll = func(es []ledger.Entry, at []time.Time) []ledger.Entry {
		notes := make([]*ledger.Note, len(es))
		err := db.Update(ctx, nil, func(b backend.Batch) error {
			for i, en := range es {
				n, err := led.Note(en)
				if err != nil {
					return err
				}
				notes[i] = n
				if err := n.Record(b, at[i]); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(e.t, err)
		out := make([]ledger.Entry, len(es))
		for i, n := range notes {
			n.Done(nil)
			out[i] = n.Entry()
		}
		return out
	}
	e.scan = func(prefix string, fn func(k, v []byte)) {
		require.NoError(e.t, db.Scan(ctx, []byte(prefix), func(k, v []byte) error { fn(k, v); return nil }))
	}
	e.hide = func(prefix string) func() {
		var ks, vs [][]byte
		e.scan(prefix, func(k, v []byte) { ks, vs = append(ks, bytes.Clone(k)), append(vs, bytes.Clone(v)) })
		each := func(fn func(b backend.Batch, i int) error) {
			require.NoError(e.t, db.Update(ctx, nil, func(b backend.Batch) error {
				for i := range ks {
					if err := fn(b, i); err != nil {
						return err
					}
				}
				return nil
			}))
		}
		each(func(b backend.Batch, i int) error { return b.Delete(ks[i]) })
		return func() { each(func(b backend.Batch, i int) error { return b.Put(ks[i], vs[i]) }) }
	}
	e.put = func(k, v []byte) {
		require.NoError(e.t, db.Update(ctx, nil, func(b backend.Batch) error { return b.Put(k, v) }))
	}
	e.closeLedger = func() error { return led.Close(ctx) }
}

// close closes the ledger, and the store if it is the env's.
func (e *env) close() {
	if e.closeLedger == nil {
		return
	}
	require.NoError(e.t, e.closeLedger())
	e.closeLedger = nil
	if e.st != nil {
		e.st.Close()
	}
}

func (e *env) reopen() {
	e.close()
	e.open(ledger.Options{})
}

var (
	keys   = []string{"key_00000000000000a1", "key_00000000000000a2", "key_00000000000000b1", "key_0000000000000c01", "legacy-key"}
	teamOf = map[string]string{keys[0]: "team_000000000000000a", keys[1]: "team_000000000000000a", keys[2]: "team_000000000000000b"}
	models = []string{"gpt-4o", "claude-sonnet-4", "gemini-2.5-pro"}
	// upstreams are the upstreams of a random load's entries, "" for none.
	upstreams = []string{"openai-a", "", "azure-east"}
	// endUsers are the end users of a random load's entries, "" for none;
	// one is named as a model.
	endUsers = []string{"u-1", "", "u-2", "gpt-4o", "u-3"}
)

// load records n entries, a few minutes apart, and returns them as
// recorded.
func (e *env) load(r *rand.Rand, n int) []ledger.Entry {
	var out []ledger.Entry
	for i := range n {
		out = append(out, e.record(randomEntry(r, i)))
		e.clock.Advance(time.Duration(1+r.IntN(600)) * time.Second)
	}
	return out
}

// loadBatched is load, many entries a batch, each at its own time, a few
// seconds apart.
func (e *env) loadBatched(r *rand.Rand, n int) []ledger.Entry {
	var out []ledger.Entry
	for i := 0; i < n; i += 1000 {
		var es []ledger.Entry
		var at []time.Time
		for j := i; j < min(n, i+1000); j++ {
			es, at = append(es, randomEntry(r, j)), append(at, e.clock.Now())
			e.clock.Advance(time.Duration(1+r.IntN(60)) * time.Second)
		}
		out = append(out, e.recordAll(es, at)...)
	}
	return out
}

// randomEntry is the i-th entry of a random load.
func randomEntry(r *rand.Rand, i int) ledger.Entry {
	k := keys[r.IntN(len(keys))]
	return ledger.Entry{
		RequestID: fmt.Sprintf("req_%016x", r.Uint64()), Key: k, Team: teamOf[k], Model: models[r.IntN(len(models))],
		Route: "/v1/chat/completions", Status: []int{200, 200, 200, 500}[r.IntN(4)], Latency: time.Duration(r.IntN(5000)) * time.Millisecond,
		Upstream:  upstreams[i%len(upstreams)],
		EndUser:   endUsers[r.IntN(len(endUsers))],
		Tokens:    ledger.Tokens{Input: r.Int64N(5000), Output: r.Int64N(900), CacheRead: r.Int64N(3) * 100, CacheWrite: r.Int64N(2) * 7, Reasoning: r.Int64N(50)},
		Cost:      pricing.USD(r.Int64N(3_000_000)),
		Estimated: i%17 == 0,
	}
}
