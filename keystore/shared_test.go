package keystore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/redisstore"
)

// twoStores opens the key store twice on one redis-server, through two
// redisstore.DBs: two gateway processes sharing their keys.
func twoStores(t *testing.T) (a, b *keystore.Store, clock *fakeclock.Clock) {
	t.Helper()
	a, b, clock, _ = twoStoresOn(t)
	return a, b, clock
}

// twoStoresOn is twoStores, with the redis-server.
func twoStoresOn(t *testing.T) (a, b *keystore.Store, clock *fakeclock.Clock, srv *redistest.Server) {
	t.Helper()
	srv = redistest.Start(t)
	clock = fakeclock.New(t0)
	open := func() *keystore.Store {
		rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: clock.Now, Timeout: 10 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { rdb.Close() })
		ks, err := keystore.Open(rdb, keystore.Options{})
		require.NoError(t, err)
		return ks
	}
	return open(), open(), clock, srv
}

// TestSharedKeys: what one process does to a key (create, change,
// disable, delete, use) the other sees at its next call.
func TestSharedKeys(t *testing.T) {
	a, b, _ := twoStores(t)
	k, secret, err := a.Create(ctx, keystore.Spec{Name: "shared", TokenLimit: 100})
	require.NoError(t, err)

	got, err := b.Authenticate(ctx, secret)
	require.NoError(t, err, "a key created by another process")
	require.Equal(t, k.ID, got.ID)

	_, err = b.RecordUsage(ctx, k.ID, 30)
	require.NoError(t, err)
	u, err := a.Usage(ctx, k.ID)
	require.NoError(t, err)
	require.EqualValues(t, 30, u.Used)

	_, err = a.Update(ctx, k.ID, func(s *keystore.Spec) error { s.TokenLimit = 50; return nil })
	require.NoError(t, err)
	_, res, err := b.Check(ctx, secret)
	require.NoError(t, err)
	require.EqualValues(t, 20, res.Remaining, "the limit another process set")

	require.NoError(t, b.Disable(ctx, k.ID))
	_, err = a.Admit(ctx, secret, keystore.Request{})
	require.ErrorIs(t, err, keystore.ErrDisabled)
	require.NoError(t, a.Enable(ctx, k.ID))
	adm, err := b.Admit(ctx, secret, keystore.Request{Reserve: 10})
	require.NoError(t, err)
	_, err = adm.Finish(ctx, 5)
	require.NoError(t, err)
	got, err = a.Get(ctx, k.ID)
	require.NoError(t, err)
	require.EqualValues(t, 30+5, got.LifetimeTokens, "both processes' tokens")

	var listed []string
	require.NoError(t, b.List(ctx, func(k keystore.Key) error { listed = append(listed, k.ID); return nil }))
	require.Equal(t, []string{k.ID}, listed)

	require.NoError(t, a.Delete(ctx, k.ID))
	_, err = b.Authenticate(ctx, secret)
	require.ErrorIs(t, err, keystore.ErrNotFound)
	_, err = b.Get(ctx, k.ID)
	require.ErrorIs(t, err, keystore.ErrNotFound)
	listed = nil
	require.NoError(t, b.List(ctx, func(k keystore.Key) error { listed = append(listed, k.ID); return nil }))
	require.Empty(t, listed)
}

// TestSharedAdmitExact: Admits of one key in two processes at once take
// exactly its window and its slots: the tokens reserved never exceed the
// limit, and no more requests run at once than MaxConcurrent.
func TestSharedAdmitExact(t *testing.T) {
	a, b, _ := twoStores(t)
	_, secret, err := a.Create(ctx, keystore.Spec{Name: "busy", Policy: keystore.Policy{
		Windows:       []keystore.Window{{Limit: 1000, Window: time.Hour, Bucket: time.Minute}},
		MaxConcurrent: 7,
	}})
	require.NoError(t, err)

	// Round 1: 40 Admits of 30 tokens, none finished: the slots refuse
	// all but 7.
	const n = 40
	var admitted atomic.Int64
	held := make([]*keystore.Admission, n)
	err = parallel(n, func(i int) error {
		ks := []*keystore.Store{a, b}[i%2]
		adm, err := ks.Admit(ctx, secret, keystore.Request{Reserve: 30})
		if errors.Is(err, keystore.ErrLimited) {
			return nil
		}
		if err == nil {
			admitted.Add(1)
			held[i] = adm
		}
		return err
	})
	require.NoError(t, err)
	require.EqualValues(t, 7, admitted.Load())
	for _, adm := range held {
		if adm != nil {
			_, err := adm.Finish(ctx, 30)
			require.NoError(t, err)
		}
	}

	// Round 2: Admits finished at once: the window (1000 - 210 used)
	// admits 26 more of 30 tokens, and no more, whoever asks.
	admitted.Store(0)
	err = parallel(n, func(i int) error {
		ks := []*keystore.Store{a, b}[i%2]
		adm, err := ks.Admit(ctx, secret, keystore.Request{Reserve: 30})
		for errors.Is(err, keystore.ErrLimited) {
			var d *keystore.Denial
			errors.As(err, &d)
			if d.Reason == "window" {
				return nil
			}
			adm, err = ks.Admit(ctx, secret, keystore.Request{Reserve: 30}) // a slot is busy: again
		}
		if err != nil {
			return err
		}
		admitted.Add(1)
		_, err = adm.Finish(ctx, 30)
		return err
	})
	require.NoError(t, err)
	require.EqualValues(t, (1000-210)/30, admitted.Load())
	k, err := b.Authenticate(ctx, secret)
	require.NoError(t, err)
	u, err := a.Usage(ctx, k.ID)
	require.NoError(t, err)
	require.EqualValues(t, 210+30*admitted.Load(), u.Used)
	require.Zero(t, u.InFlight)
}

// TestFinishOnAMovingClock: with a clock that moves at every read, as a
// real one does, Finish frees the slot Admit took and refunds the
// reservation in its bucket, on a database and on Redis: the admission's
// instant is its batch's.
func TestFinishOnAMovingClock(t *testing.T) {
	var ticks atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * 7 * time.Millisecond) }
	srv := redistest.Start(t)
	rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: now, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer rdb.Close()
	db, err := ratestore.Open(filepath.Join(t.TempDir(), "keys.db"), ratestore.Options{Now: now})
	require.NoError(t, err)
	defer db.Close()
	stores := map[string]func() (*keystore.Store, error){
		"bolt":  func() (*keystore.Store, error) { return keystore.Open(db, keystore.Options{}) },
		"redis": func() (*keystore.Store, error) { return keystore.Open(rdb, keystore.Options{}) },
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ks, err := open()
			require.NoError(t, err)
			k, secret, err := ks.Create(ctx, keystore.Spec{Name: "moving", Policy: keystore.Policy{
				Windows:       []keystore.Window{{Limit: 1000, Window: time.Minute, Bucket: 10 * time.Millisecond}},
				MaxConcurrent: 1,
			}})
			require.NoError(t, err)
			for range 20 {
				a, err := ks.Admit(ctx, secret, keystore.Request{Reserve: 40})
				require.NoError(t, err)
				u, err := a.Finish(ctx, 2)
				require.NoError(t, err)
				require.Zero(t, u.InFlight, "the slot is free")
			}
			u, err := ks.Usage(ctx, k.ID)
			require.NoError(t, err)
			require.EqualValues(t, 20*2, u.Used, "every reservation refunded")
		})
	}
}

// TestSharedDeleteUnseen: a process deletes a key another created that it
// has never used, with its states, and one whose record the other process
// stored corrupt.
func TestSharedDeleteUnseen(t *testing.T) {
	a, b, _, srv := twoStoresOn(t)
	k, secret, err := a.Create(ctx, keystore.Spec{Name: "unseen", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 100, Window: time.Hour}}, RequestsPerMinute: 10,
	}})
	require.NoError(t, err)
	_, err = a.RecordUsage(ctx, k.ID, 40)
	require.NoError(t, err)
	require.NoError(t, b.Delete(ctx, k.ID))
	_, err = a.Authenticate(ctx, secret)
	require.ErrorIs(t, err, keystore.ErrNotFound)
	require.ErrorIs(t, b.Delete(ctx, k.ID), keystore.ErrNotFound)

	// Nothing of the deleted key is left in Redis: no record, no state.
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	left, err := raw.Keys(ctx, "*"+k.ID+"*").Result()
	require.NoError(t, err)
	require.Empty(t, left)
}

// recorder is a keystore.Recorder writing one record per request, as a
// ledger's entry.
type recorder struct{ n int }

func (r *recorder) Record(w keystore.Records, _ time.Time) error {
	r.n++
	return w.Put([]byte(fmt.Sprintf("e/%d", r.n)), []byte("entry"))
}

func (r *recorder) Discard() { r.n-- }

// TestRedisRoundTrips: on Redis, with one process serving the key, an
// Admit costs two round trips (its reads with the locks, its commit), a
// Finish one (its commit, on the values the Admit left; and one more, the
// announcement to the other processes, when it moves the key's last use to
// a new second or its spend by a step: here the first), and a Check one,
// for a key of a team with windows, budgets and a recorder writing in the
// Finish's batch. When another process has changed the key in between, a
// Finish finds out at its commit and runs again on what is stored: the
// usage is exact.
func TestRedisRoundTrips(t *testing.T) {
	a, b, clock, srv := twoStoresOn(t)
	budgets := []keystore.Budget{{Limit: 100 * pricing.Dollar, Window: 24 * time.Hour}}
	team, err := a.CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1e9, Window: 5 * time.Hour}}, Budgets: budgets}})
	require.NoError(t, err)
	k, secret, err := a.Create(ctx, keystore.Spec{Name: "k", Team: team.ID, Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1e9, Window: 5 * time.Hour}, {Limit: 1e9, Window: 7 * 24 * time.Hour}},
		Budgets: budgets, RequestsPerMinute: 1e6, MaxConcurrent: 10}})
	require.NoError(t, err)
	rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: clock.Now, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer rdb.Close()
	trips := redistest.CountTrips(rdb.Client())
	ks, err := keystore.Open(rdb, keystore.Options{})
	require.NoError(t, err)
	rec := &recorder{}
	step := func(what string, want int64, fn func() error) {
		t.Helper()
		before := trips()
		require.NoError(t, fn(), what)
		require.Equal(t, want, trips()-before, what)
	}
	for range 3 {
		var adm *keystore.Admission
		step("Admit", 2, func() (err error) {
			adm, err = ks.Admit(ctx, secret, keystore.Request{Reserve: 100, Cost: pricing.Micro})
			return err
		})
		// The key's first use moves its last use, which is announced: in
		// the commit's script, no round trip of its own.
		step("Finish", 1, func() error {
			_, err := adm.FinishWith(ctx, 40, pricing.Micro, rec)
			return err
		})
		step("Check", 1, func() error { _, _, err := ks.Check(ctx, secret); return err })
	}
	// Another process uses the key between an Admit and its Finish.
	adm, err := ks.Admit(ctx, secret, keystore.Request{Reserve: 100})
	require.NoError(t, err)
	ob, err := b.Admit(ctx, secret, keystore.Request{Reserve: 100})
	require.NoError(t, err)
	_, err = ob.Finish(ctx, 10)
	require.NoError(t, err)
	_, err = adm.FinishWith(ctx, 40, 0, rec)
	require.NoError(t, err)
	u, err := a.Usage(ctx, k.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4*40+10, u.Windows[0].Used)
	require.Zero(t, u.InFlight)
	require.Equal(t, 4, rec.n, "one record per request")
	tu, err := a.TeamUsage(ctx, team.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4*40+10, tu.Windows[0].Used)
}

// TestRedisCluster: the key store on a 3-node Redis Cluster, where a key's
// records and states share its slot and its team's have another: keys and
// teams are created, admitted and finished by two processes, and the
// usage is exact.
func TestRedisCluster(t *testing.T) {
	url := redistest.StartCluster(t, 3)
	open := func() *keystore.Store {
		rdb, err := redisstore.Open(ctx, url, redisstore.Options{Timeout: 10 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { rdb.Close() })
		ks, err := keystore.Open(rdb, keystore.Options{})
		require.NoError(t, err)
		return ks
	}
	a, b := open(), open()
	team, err := a.CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: time.Hour}}}})
	require.NoError(t, err)
	var secrets []string
	var ids []string
	for i := range 8 {
		k, secret, err := a.Create(ctx, keystore.Spec{Name: fmt.Sprint("k", i), Team: team.ID, Policy: keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: time.Hour}}}})
		require.NoError(t, err)
		secrets, ids = append(secrets, secret), append(ids, k.ID)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			ks := []*keystore.Store{a, b}[w%2]
			for range 10 {
				adm, err := ks.Admit(ctx, secrets[w], keystore.Request{Reserve: 50})
				if !assert.NoError(t, err) {
					return
				}
				_, err = adm.Finish(ctx, 7)
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		u, err := b.Usage(ctx, id)
		require.NoError(t, err)
		require.EqualValues(t, 70, u.Windows[0].Used, id)
	}
	tu, err := b.TeamUsage(ctx, team.ID)
	require.NoError(t, err)
	require.EqualValues(t, 8*70, tu.Windows[0].Used)
	n := 0
	require.NoError(t, b.List(ctx, func(keystore.Key) error { n++; return nil }))
	require.Equal(t, 8, n)
}

// TestLookup: Lookup answers from the key as this process last read it
// while that key is usable (Admit then checks it as stored), and reads it
// again before it refuses: a key another process enabled again is never
// refused.
func TestLookup(t *testing.T) {
	a, b, _ := twoStores(t)
	k, secret, err := a.Create(ctx, keystore.Spec{Name: "k", TokenLimit: 1000})
	require.NoError(t, err)
	got, err := a.Lookup(ctx, secret)
	require.NoError(t, err)
	require.Equal(t, k.ID, got.ID)

	require.NoError(t, b.Disable(ctx, k.ID))
	_, err = a.Lookup(ctx, secret)
	require.NoError(t, err, "as a last read it: usable")
	_, err = a.Admit(ctx, secret, keystore.Request{})
	require.ErrorIs(t, err, keystore.ErrDisabled, "Admit reads it as stored")
	_, err = a.Lookup(ctx, secret)
	require.ErrorIs(t, err, keystore.ErrDisabled)

	require.NoError(t, b.Enable(ctx, k.ID))
	_, err = a.Lookup(ctx, secret)
	require.NoError(t, err, "read again before refusing")
	_, err = a.Lookup(ctx, "rsk_unknown")
	require.ErrorIs(t, err, keystore.ErrNotFound)
}
