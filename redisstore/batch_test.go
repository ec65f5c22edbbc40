package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

// TestUpdateLocked: batches of two DBs (two processes) that read, change
// and write one record and one limiter state under one lock take turns:
// no increment is lost, and the limiter admits exactly its limit. On a
// 3-node Cluster too, where the record "c/k1" shares the slot of k1's
// state and "total" has another, so that each commit is two scripts.
func TestUpdateLocked(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster=%v", cluster), func(t *testing.T) {
			url := func() string { return redistest.StartCluster(t, 3) }
			if !cluster {
				url = func() string { return redistest.Start(t).URL() }
			}
			testUpdateLocked(t, url())
		})
	}
}

func testUpdateLocked(t *testing.T, url string) {
	clock := newClock()
	dbs := []*redisstore.DB{
		open(t, url, clock, redisstore.Options{Timeout: 10 * time.Second}),
		open(t, url, clock, redisstore.Options{Timeout: 10 * time.Second}),
	}
	const calls, limit = 40, 25
	var wg sync.WaitGroup
	allowed := make([]bool, calls)
	errs := make([]error, calls)
	for i := range calls {
		db := dbs[i%2]
		l, err := db.Limiter("w", strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "h", Limit: limit, Window: time.Hour}}})
		require.NoError(t, err)
		wg.Go(func() {
			errs[i] = db.Update(ctx, []string{"k1"}, func(b backend.Batch) error {
				for _, rec := range []string{"c/k1", "total"} {
					v, err := b.Get([]byte(rec))
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(string(v))
					if err := b.Put([]byte(rec), []byte(strconv.Itoa(n+1))); err != nil {
						return err
					}
				}
				r, err := b.AllowN(l, "k1", 1)
				allowed[i] = r.Allowed
				return err
			})
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for _, rec := range []string{"c/k1", "total"} {
		v, err := dbs[0].Get(ctx, []byte(rec))
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(calls), string(v), rec)
	}
	n := 0
	for _, a := range allowed {
		if a {
			n++
		}
	}
	require.Equal(t, limit, n)
}

// TestUpdateConflict: a batch whose read value is changed before its
// commit by a writer without its lock stores nothing and fails with
// ErrConflict; its locks are released, so the next batch runs.
func TestUpdateConflict(t *testing.T) {
	srv := redistest.Start(t)
	db := open(t, srv.URL(), newClock(), redisstore.Options{})
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error { return b.Put([]byte("a"), []byte("1")) }))

	err := db.Update(ctx, []string{"x"}, func(b backend.Batch) error {
		if _, err := b.Get([]byte("a")); err != nil {
			return err
		}
		require.NoError(t, raw.Set(ctx, "ratestore:{a}/r/a", "changed", 0).Err()) // behind the lock's back
		if err := b.Put([]byte("a"), []byte("2")); err != nil {
			return err
		}
		return b.Put([]byte("b"), []byte("new"))
	})
	require.ErrorIs(t, err, redisstore.ErrConflict)
	v, err := db.Get(ctx, []byte("a"))
	require.NoError(t, err)
	require.Equal(t, "changed", string(v))
	v, err = db.Get(ctx, []byte("b"))
	require.NoError(t, err)
	require.Nil(t, v, "nothing of a conflicting batch is stored")

	require.NoError(t, db.Update(ctx, []string{"x"}, func(b backend.Batch) error { return b.Delete([]byte("a")) }))
	v, err = db.Get(ctx, []byte("a"))
	require.NoError(t, err)
	require.Nil(t, v)
}

// TestUpdateLockOfCrashedHolder: a lock whose holder never released it
// (a crashed process) keeps other batches waiting until ctx ends, and
// ends after LockTTL.
func TestUpdateLockOfCrashedHolder(t *testing.T) {
	srv := redistest.Start(t)
	db := open(t, srv.URL(), newClock(), redisstore.Options{LockTTL: 300 * time.Millisecond})
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	require.NoError(t, raw.Set(ctx, "ratestore:{k}/l/k", "crashed", 300*time.Millisecond).Err())

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := db.Update(short, []string{"k"}, func(backend.Batch) error { return nil })
	require.ErrorIs(t, err, short.Err())
	require.NoError(t, db.Update(ctx, []string{"k"}, func(b backend.Batch) error { return b.Put([]byte("a"), []byte("1")) }))
}

// TestUpdateFnError: fn's error is returned and, as in a ratestore
// Batch, the changes fn made before it are stored.
func TestUpdateFnError(t *testing.T) {
	srv := redistest.Start(t)
	db := open(t, srv.URL(), newClock(), redisstore.Options{})
	boom := errors.New("boom")
	err := db.Update(ctx, []string{"k"}, func(b backend.Batch) error {
		require.NoError(t, b.Put([]byte("a"), []byte("1")))
		return boom
	})
	require.ErrorIs(t, err, boom)
	v, err := db.Get(ctx, []byte("a"))
	require.NoError(t, err)
	require.Equal(t, "1", string(v))
}

// TestScan: Scan finds exactly the records under a prefix, even one with
// the characters SCAN's patterns give a meaning, and no limiter state.
func TestScan(t *testing.T) {
	srv := redistest.Start(t)
	db := open(t, srv.URL(), newClock(), redisstore.Options{})
	want := map[string]string{}
	require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error {
		for i := range 2500 { // more than one SCAN page
			k := fmt.Sprintf("k/[*?\\]%d", i)
			want[k] = strconv.Itoa(i)
			require.NoError(t, b.Put([]byte(k), []byte(want[k])))
		}
		return b.Put([]byte("k/x"), []byte("not under the prefix"))
	}))
	l, err := db.Limiter("w", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	_, err = l.Allow(ctx, "k/[*?\\]1")
	require.NoError(t, err)

	got := map[string]string{}
	require.NoError(t, db.Scan(ctx, []byte("k/[*?\\]"), func(k, v []byte) error {
		got[string(k)] = string(v)
		return nil
	}))
	require.Equal(t, want, got)
}

// TestScanOnCluster: Scan finds the records of every node of a Cluster,
// in key order, and Reread reads records of several slots at once.
func TestScanOnCluster(t *testing.T) {
	db := open(t, redistest.StartCluster(t, 3), newClock(), redisstore.Options{})
	var keys [][]byte
	require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error {
		for i := range 300 {
			k := []byte(fmt.Sprintf("k/id%03d", i))
			keys = append(keys, k)
			require.NoError(t, b.Put(k, k))
		}
		return nil
	}))
	var got [][]byte
	require.NoError(t, db.Scan(ctx, []byte("k/"), func(k, v []byte) error {
		require.Equal(t, k, v)
		got = append(got, slices.Clone(k))
		return nil
	}))
	require.Equal(t, keys, got)
	vals, err := db.Reread(ctx, keys)
	require.NoError(t, err)
	require.Equal(t, keys, vals)
}

// TestPrefetch: Prefetch reads records and states in one go; the batch
// then decides on them as it would have on its own reads, a value it
// wrote before is kept, and the commit still checks what was read.
func TestPrefetch(t *testing.T) {
	srv := redistest.Start(t)
	db := open(t, srv.URL(), newClock(), redisstore.Options{})
	l, err := db.Limiter("w", strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "h", Limit: 3, Window: time.Hour}}})
	require.NoError(t, err)
	_, err = l.AllowN(ctx, "k", 2)
	require.NoError(t, err)
	require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error { return b.Put([]byte("a"), []byte("1")) }))

	require.NoError(t, db.Update(ctx, []string{"k"}, func(b backend.Batch) error {
		require.NoError(t, b.Put([]byte("b"), []byte("mine")))
		require.NoError(t, b.Prefetch([][]byte{[]byte("a"), []byte("b"), []byte("none")}, "k", l))
		for rec, want := range map[string]string{"a": "1", "b": "mine", "none": ""} {
			v, err := b.Get([]byte(rec))
			require.NoError(t, err)
			require.Equal(t, want, string(v), rec)
		}
		r, err := b.AllowN(l, "k", 1)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		require.Zero(t, r.Remaining, "the prefetched state: 2 of 3 used")
		return nil
	}))
	r, err := l.Peek(ctx, "k")
	require.NoError(t, err)
	require.Zero(t, r.Remaining, "the batch's take was stored")
}

// TestLayoutMigration: records stored by the layout before hash tags
// ("P r:<key>") are moved to their keys of today by the first Open, which
// keeps a record written since under the new key; Get and Scan find them.
func TestLayoutMigration(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	for k, v := range map[string]string{"ratestore:r:k/key_1": "one", "ratestore:r:t/team_1": "team", "ratestore:r:k/key_2": "old"} {
		require.NoError(t, raw.Set(ctx, k, v, 0).Err())
	}
	require.NoError(t, raw.Set(ctx, "ratestore:{key_2}/r/k/key_2", "new", 0).Err())
	db := open(t, srv.URL(), newClock(), redisstore.Options{})
	got := map[string]string{}
	require.NoError(t, db.Scan(ctx, nil, func(k, v []byte) error { got[string(k)] = string(v); return nil }))
	require.Equal(t, map[string]string{"k/key_1": "one", "t/team_1": "team", "k/key_2": "new"}, got)
	require.Zero(t, raw.Exists(ctx, "ratestore:r:k/key_1", "ratestore:r:t/team_1", "ratestore:r:k/key_2").Val())
	require.Equal(t, "3", raw.Get(ctx, "ratestore:layout").Val())
	open(t, srv.URL(), newClock(), redisstore.Options{}) // once is enough: nothing to move
}
