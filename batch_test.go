package ratestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/strategies"
)

// TestRecords: records put and deleted in a Batch are read back at once by
// Get, before and after their commit, survive a restart, and Scan lists
// them in key order, on every backend and durability mode.
func TestRecords(t *testing.T) {
	for _, e := range backendtest.Embedded() {
		t.Run(e.String(), func(t *testing.T) {
			s := open(t, e)
			require.NoError(t, s.Update(ctx, nil, func(b backend.Batch) error {
				for _, k := range []string{"k/b", "k/a", "k/c", "x/other"} {
					if err := b.Put([]byte(k), []byte("v"+k)); err != nil {
						return err
					}
				}
				return b.Put([]byte("k/empty"), nil)
			}))
			v, err := s.Get(ctx, []byte("k/a"))
			require.NoError(t, err)
			require.Equal(t, "vk/a", string(v))
			v, err = s.Get(ctx, []byte("k/empty"))
			require.NoError(t, err)
			require.NotNil(t, v, "an empty record exists")
			require.Empty(t, v)

			require.NoError(t, s.Update(ctx, nil, func(b backend.Batch) error { return b.Delete([]byte("k/b")) }))
			v, err = s.Get(ctx, []byte("k/b"))
			require.NoError(t, err)
			require.Nil(t, v, "deleted, even before the commit in Async mode")

			s.reopen()
			var got []string
			require.NoError(t, s.Scan(ctx, []byte("k/"), func(k, v []byte) error {
				got = append(got, fmt.Sprintf("%s=%s", k, v))
				return nil
			}))
			require.Equal(t, []string{"k/a=vk/a", "k/c=vk/c", "k/empty="}, got)
			v, err = s.Get(ctx, []byte("k/missing"))
			require.NoError(t, err)
			require.Nil(t, v)
		})
	}
}

// TestRecordKeys: a record key that is empty, too long or in the states'
// prefix is refused with ErrInvalid, and nothing is written.
func TestRecordKeys(t *testing.T) {
	s := open(t, backendtest.BoltSync)
	for _, k := range [][]byte{nil, {}, bytes.Repeat([]byte("k"), ratestore.MaxKeyLen+1), []byte("s/x")} {
		err := s.Update(ctx, nil, func(b backend.Batch) error { return b.Put(k, []byte("v")) })
		require.ErrorIs(t, err, ratestore.ErrInvalid, "key %.20q", k)
		_, err = s.Get(ctx, k)
		require.ErrorIs(t, err, ratestore.ErrInvalid)
	}
	require.ErrorIs(t, s.Scan(ctx, []byte("s/"), func(k, v []byte) error { return nil }), ratestore.ErrInvalid)
	n := 0
	require.NoError(t, s.Export(ctx, func(ratestore.Entry) error { n++; return nil }))
	require.Zero(t, n, "nothing was written")
}

// TestBatchNoRollback: an error from Update's function is returned, and the
// changes made before it stand and are committed: a Batch is not a
// transaction. A Batch kept past its Update refuses every call.
func TestBatchNoRollback(t *testing.T) {
	s := open(t, backendtest.BoltSync)
	l, err := s.Limiter("b", strategies.GCRA{Rate: 1, Burst: 3})
	require.NoError(t, err)
	boom := errors.New("boom")
	var kept backend.Batch
	err = s.Update(ctx, nil, func(b backend.Batch) error {
		kept = b
		if _, err := b.AllowN(l, "k", 2); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	r, err := l.Peek(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(1), r.Remaining, "the AllowN made before the error stands")

	_, err = kept.AllowN(l, "k", 1)
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	require.ErrorIs(t, kept.Put([]byte("k/x"), nil), ratestore.ErrInvalid)

	other := open(t, backendtest.BoltAsync)
	ol, err := other.Limiter("b", strategies.GCRA{Rate: 1, Burst: 3})
	require.NoError(t, err)
	err = s.Update(ctx, nil, func(b backend.Batch) error { _, err := b.Record(ol, "k", 1); return err })
	require.ErrorIs(t, err, ratestore.ErrInvalid, "a limiter of another DB")
}

// TestPeekN: PeekN answers what AllowN would, RetryAfter included, and
// takes nothing.
func TestPeekN(t *testing.T) {
	for _, e := range backendtest.Embedded() {
		t.Run(e.String(), func(t *testing.T) {
			s := open(t, e)
			l, err := s.Limiter("p", strategies.RollingWindow{Limit: 10, Window: time.Minute, Bucket: time.Second})
			require.NoError(t, err)
			_, err = l.Record(ctx, "k", 8)
			require.NoError(t, err)
			for _, n := range []int64{0, 2, 3, 11} {
				p, err := l.PeekN(ctx, "k", n)
				require.NoError(t, err)
				a, err := l.AllowN(ctx, "k", n)
				require.NoError(t, err)
				require.Equal(t, a.Allowed, p.Allowed, "n=%d", n)
				require.Equal(t, a.RetryAfter, p.RetryAfter, "n=%d", n)
				if a.Allowed && n > 0 {
					require.NoError(t, l.Reset(ctx, "k"))
					_, err := l.Record(ctx, "k", 8)
					require.NoError(t, err)
				}
			}
			p, err := l.PeekN(ctx, "k", 3)
			require.NoError(t, err)
			require.False(t, p.Allowed)
			require.Equal(t, time.Minute, p.RetryAfter, "8 used: 3 more fit once the bucket expires")
			r, err := l.Peek(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, int64(2), r.Remaining, "PeekN took nothing")
			_, err = l.PeekN(ctx, "k", -1)
			require.ErrorIs(t, err, ratestore.ErrInvalid)
		})
	}
}

// TestModify: Modify replaces a state by what its function returns,
// persists it, deletes a state left at its initial value, and changes
// nothing when the function fails.
func TestModify(t *testing.T) {
	for _, e := range backendtest.Embedded() {
		t.Run(e.String(), func(t *testing.T) {
			s := open(t, e)
			rw := strategies.RollingWindow{Limit: 100, Window: time.Hour, Bucket: time.Minute}
			l, err := s.Limiter("m", rw)
			require.NoError(t, err)
			now := s.clock.Now().UnixNano()
			err = s.Update(ctx, nil, func(b backend.Batch) error {
				r, err := b.Modify(l, "k", func(st strategies.State, at int64) (strategies.State, error) {
					require.Equal(t, now, at)
					return st, rw.Merge(st, at, at-int64(30*time.Minute), 40)
				})
				require.NoError(t, err)
				require.Equal(t, int64(60), r.Remaining)
				require.Equal(t, 30*time.Minute, r.ResetAfter, "the usage went to the bucket half an hour ago")
				return nil
			})
			require.NoError(t, err)

			boom := errors.New("boom")
			err = s.Update(ctx, nil, func(b backend.Batch) error {
				_, err := b.Modify(l, "k", func(st strategies.State, _ int64) (strategies.State, error) { return nil, boom })
				return err
			})
			require.ErrorIs(t, err, boom)

			s.reopen()
			l, err = s.Limiter("m", rw)
			require.NoError(t, err)
			r, err := l.Peek(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, int64(60), r.Remaining, "the merge persisted; the failed Modify changed nothing")

			require.NoError(t, s.Update(ctx, nil, func(b backend.Batch) error {
				_, err := b.Modify(l, "k", func(st strategies.State, at int64) (strategies.State, error) {
					_, err := rw.Refund(st, at, at-int64(30*time.Minute), 40)
					return st, err
				})
				return err
			}))
			require.Empty(t, s.raw("m", "k"), "back at its initial value: deleted")
		})
	}
}

// TestBatchOneCommit: the changes of concurrent Updates each land whole in
// one commit, and a reader sees them together once the Update returned.
func TestBatchOneCommit(t *testing.T) {
	s := open(t, backendtest.BoltSync)
	l, err := s.Limiter("c", strategies.TokenBucket{Rate: 1e-9, Burst: 1 << 40})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 20 {
				key := fmt.Sprintf("w%d", w)
				err := s.Update(ctx, nil, func(b backend.Batch) error {
					if _, err := b.AllowN(l, key, 1); err != nil {
						return err
					}
					return b.Put([]byte("k/"+key), fmt.Appendf(nil, "%d", i+1))
				})
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	s.reopen()
	l, err = s.Limiter("c", strategies.TokenBucket{Rate: 1e-9, Burst: 1 << 40})
	require.NoError(t, err)
	for w := range 16 {
		key := fmt.Sprintf("w%d", w)
		r, err := l.Peek(ctx, key)
		require.NoError(t, err)
		v, err := s.Get(ctx, []byte("k/"+key))
		require.NoError(t, err)
		require.Equal(t, "20", string(v))
		require.Equal(t, int64(1<<40-20), r.Remaining)
	}
}

// TestAttach: Attach makes a value once per key and DB, returns it to every
// later caller, and attaches nothing when open fails.
func TestAttach(t *testing.T) {
	s := open(t, backendtest.BoltSync)
	type k1 struct{}
	type k2 struct{}
	calls := 0
	open := func() (any, error) { calls++; return &calls, nil }
	a, err := s.Attach(k1{}, open)
	require.NoError(t, err)
	b, err := s.Attach(k1{}, open)
	require.NoError(t, err)
	require.Same(t, a, b)
	require.Equal(t, 1, calls)

	boom := errors.New("boom")
	_, err = s.Attach(k2{}, func() (any, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	c, err := s.Attach(k2{}, open)
	require.NoError(t, err)
	require.Same(t, a, c, "the failed open attached nothing")
	require.Equal(t, 2, calls)
}

// TestClosedBatch: Update, Get and Scan after Close return ErrClosed.
func TestClosedBatch(t *testing.T) {
	s := open(t, backendtest.BoltSync)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Update(ctx, nil, func(backend.Batch) error { return nil }), ratestore.ErrClosed)
	_, err := s.Get(ctx, []byte("k/x"))
	require.ErrorIs(t, err, ratestore.ErrClosed)
	require.ErrorIs(t, s.Scan(ctx, []byte("k/"), func(k, v []byte) error { return nil }), ratestore.ErrClosed)
}

// TestInspect: Inspect hands fn the key's state as of the call, a fresh one
// for a key without one, writes nothing, and returns fn's error wrapped.
func TestInspect(t *testing.T) {
	for _, e := range backendtest.Embedded() {
		t.Run(e.String(), func(t *testing.T) {
			s := open(t, e)
			rw := strategies.RollingWindow{Limit: 100, Window: time.Hour, Bucket: time.Minute}
			l, err := s.Limiter("i", rw)
			require.NoError(t, err)
			_, err = l.Record(ctx, "k", 30)
			require.NoError(t, err)
			used := func(key string) int64 {
				var n int64
				require.NoError(t, l.Inspect(ctx, key, func(st strategies.State, now int64) (err error) {
					require.Equal(t, s.clock.Now().UnixNano(), now)
					n, err = rw.Used(st, now)
					return err
				}))
				return n
			}
			require.Equal(t, int64(30), used("k"))
			require.Zero(t, used("fresh"))
			require.Empty(t, s.raw("i", "fresh"), "Inspect wrote nothing")
			boom := errors.New("boom")
			err = l.Inspect(ctx, "k", func(strategies.State, int64) error { return boom })
			require.ErrorIs(t, err, boom)
			require.ErrorContains(t, err, `limiter "i"`)
		})
	}
}
