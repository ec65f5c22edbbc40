package ratestore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

// TestStoreContract runs one test of the backend contract (backend.Store)
// on every backend of the matrix and on a Redis Cluster: records, batches,
// Reread, leases and reservations mean the same on each. shared says
// whether the store is changed by other processes, the one thing Reread
// reports.
func TestStoreContract(t *testing.T) {
	backendtest.Run(t, backendtest.All(), func(t *testing.T, b backendtest.Backend) {
		st := b.Open(t, newClock())
		contract(t, st.Store, st.Clock.Advance, b.IsRedis())
	})
	t.Run("redis-cluster", func(t *testing.T) {
		clock := newClock()
		db, err := redisstore.Open(ctx, redistest.StartCluster(t, 3), redisstore.Options{Now: clock.Now, Timeout: 5 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		contract(t, db, clock.Advance, true)
	})
}

// contractScanFrom: ScanFrom pages through a range longer than a page of
// any backend, from any start, in key order, and stops when fn fails; a
// prefix with no "/" finds the keys of several segments (a backend may
// split its index at the first "/") in one order.
func contractScanFrom(t *testing.T, db backend.Store) {
	var want []string
	require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error {
		for i := range 300 {
			k := fmt.Sprintf("p/%04d", i)
			want = append(want, k)
			require.NoError(t, b.Put([]byte(k), []byte(k)))
		}
		for _, k := range []string{"p", "p.x/1", "pa/1", "pa", "p0", "q/1", "o/1"} {
			require.NoError(t, b.Put([]byte(k), []byte(k)))
		}
		return nil
	}))
	scan := func(prefix, start string, n int) []string {
		var got []string
		err := db.ScanFrom(ctx, []byte(prefix), []byte(start), func(k, v []byte) error {
			if prefix != "" { // the records of this test
				require.Equal(t, string(k), string(v))
			}
			if got = append(got, string(k)); len(got) == n {
				return errStop
			}
			return nil
		})
		if n > 0 && len(got) == n {
			require.ErrorIs(t, err, errStop, "ScanFrom returns fn's error")
		} else {
			require.NoError(t, err)
		}
		return got
	}
	var paged []string
	for start := ""; ; {
		page := scan("p/", start, 50)
		paged = append(paged, page...)
		if len(page) < 50 {
			break
		}
		start = page[len(page)-1] + "\x00"
	}
	require.Equal(t, want, paged, "pages of 50 from the last key read")
	require.Equal(t, want[137:], scan("p/", "p/0137", 0), "from a key that exists")
	require.Equal(t, want[138:140], scan("p/", "p/0137x", 2), "from a key that does not")
	require.Equal(t, want, scan("p/", "a", 0), "a start before the prefix")
	require.Empty(t, scan("p/", "p/9", 0), "a start after the range")
	require.Equal(t, append(append([]string{"p", "p.x/1"}, want...), "p0", "pa", "pa/1"), scan("p", "", 0))
	require.Equal(t, append(want[299:], "p0", "pa"), scan("p", "p/0299", 3))
}

var errStop = errors.New("stop")

func contract(t *testing.T, db backend.Store, advance func(time.Duration), shared bool) {
	l, err := db.Handle("contract", strategies.TokenBucket{Rate: 1, Burst: 2})
	require.NoError(t, err)

	// Records: an empty value is a record; Delete removes one; the batch
	// sees its own changes; Scan walks a prefix in key order.
	require.NoError(t, db.Update(ctx, []string{"lock-a"}, func(b backend.Batch) error {
		require.NoError(t, b.Put([]byte("r/b"), []byte("2")))
		require.NoError(t, b.Put([]byte("r/a"), []byte("1")))
		require.NoError(t, b.Put([]byte("r/empty"), nil))
		require.NoError(t, b.Put([]byte("r/gone"), []byte("x")))
		require.NoError(t, b.Delete([]byte("r/gone")))
		v, err := b.Get([]byte("r/a"))
		require.Equal(t, []byte("1"), v)
		return err
	}))
	v, err := db.Get(ctx, []byte("r/empty"))
	require.NoError(t, err)
	require.NotNil(t, v, "an empty record exists")
	require.Empty(t, v)
	v, err = db.Get(ctx, []byte("r/gone"))
	require.NoError(t, err)
	require.Nil(t, v)
	var keys []string
	require.NoError(t, db.Scan(ctx, []byte("r/"), func(k, v []byte) error { keys = append(keys, string(k)+"="+string(v)); return nil }))
	require.Equal(t, []string{"r/a=1", "r/b=2", "r/empty="}, keys)
	keys = nil
	require.NoError(t, db.ScanFrom(ctx, []byte("r/"), []byte("r/aa"), func(k, v []byte) error { keys = append(keys, string(k)); return nil }))
	require.Equal(t, []string{"r/b", "r/empty"}, keys, "ScanFrom begins at the first key >= start")
	contractScanFrom(t, db)

	// Changes: a shared store tells what its batches announced, after the
	// position asked for; one this process alone changes tells nothing.
	_, pos, err := db.Changes(ctx, "contract", "", 10)
	require.NoError(t, err)
	require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error {
		require.ErrorIs(t, b.Announce("bad topic", nil), ratestore.ErrInvalid)
		require.NoError(t, b.Announce("contract", []byte("one")))
		return b.Announce("contract", []byte("two"))
	}))
	msgs, next, err := db.Changes(ctx, "contract", pos, 1)
	require.NoError(t, err)
	if shared {
		require.Equal(t, [][]byte{[]byte("one")}, msgs)
		msgs, _, err = db.Changes(ctx, "contract", next, 10)
		require.NoError(t, err)
		require.Equal(t, [][]byte{[]byte("two")}, msgs)
	} else {
		require.Empty(t, msgs)
	}
	_, _, err = db.Changes(ctx, "contract", pos, 0)
	require.ErrorIs(t, err, ratestore.ErrInvalid, "max < 1")

	// Reread: every key on a shared store, none on one this process alone
	// changes; the same in a batch.
	vals, err := db.Reread(ctx, [][]byte{[]byte("r/a"), []byte("r/none")})
	require.NoError(t, err)
	if shared {
		require.Equal(t, [][]byte{[]byte("1"), nil}, vals)
	} else {
		require.Empty(t, vals)
	}
	seen := 0
	require.NoError(t, db.RereadPrefix(ctx, []byte("r/"), func(k, v []byte) error { seen++; return nil }))
	require.Equal(t, map[bool]int{true: 3, false: 0}[shared], seen)

	// A batch decides as the limiter does, and its reads see its changes.
	require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error {
		require.NoError(t, b.Prefetch([][]byte{[]byte("r/a")}, "k", l))
		r, err := b.AllowN(l, "k", 2)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		r, err = b.PeekN(l, "k", 1)
		require.NoError(t, err)
		require.False(t, r.Allowed, "the batch sees its own take")
		require.False(t, b.Now().IsZero())
		return nil
	}))
	r, err := l.Peek(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(0), r.Remaining)

	// A reservation cancelled before its time gives back what it took.
	advance(2 * time.Second)
	res, err := l.Reserve(ctx, "k", 2)
	require.NoError(t, err)
	require.Equal(t, time.Duration(0), res.Delay())
	res, err = l.Reserve(ctx, "k", 1)
	require.NoError(t, err)
	require.Equal(t, time.Second, res.Delay())
	require.NoError(t, res.Cancel(ctx))
	r, err = l.Peek(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(0), r.Remaining)
	require.Equal(t, time.Duration(0), r.RetryAfter, "the cancelled reservation is given back")

	// Leases: at most max held; a release frees one.
	c, err := db.Concurrency("contract-leases", 1, time.Minute)
	require.NoError(t, err)
	lease, r, err := c.Acquire(ctx, "k")
	require.NoError(t, err)
	require.True(t, r.Allowed)
	_, r, err = c.Acquire(ctx, "k")
	require.NoError(t, err)
	require.False(t, r.Allowed)
	require.NoError(t, lease.Release(ctx))
	_, r, err = c.Acquire(ctx, "k")
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.NoError(t, db.Flush(ctx))
}
