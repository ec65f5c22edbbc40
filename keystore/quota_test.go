package keystore_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/keystore"
)

// quotaPolicy is an upstream's quota: 100 tokens a minute.
var quotaPolicy = keystore.Policy{Windows: []keystore.Window{{Limit: 100, Window: time.Minute, Bucket: time.Second}}}

// TestQuota: a quota's window counts the requests of every key that names
// it, in the same decision as each key's own: a request over it is
// refused, named by the quota, and takes nothing; Finish settles the
// reservation to the tokens used, in the quota as in the key.
func TestQuota(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		q, err := e.ks.Quota("upstream:openai-a", quotaPolicy)
		require.NoError(t, err)
		ka, sa := e.create("a", 1000)
		kb, sb := e.create("b", 1000)

		a, err := e.ks.Admit(ctx, sa, keystore.Request{Reserve: 60, Quotas: []*keystore.Quota{q}})
		require.NoError(t, err)
		_, err = e.ks.Admit(ctx, sb, keystore.Request{Reserve: 60, Quotas: []*keystore.Quota{q}})
		require.ErrorIs(t, err, keystore.ErrLimited)
		var d *keystore.Denial
		require.True(t, errors.As(err, &d))
		require.Equal(t, "upstream:openai-a", d.Quota)
		require.Equal(t, "window", d.Reason)
		require.Contains(t, err.Error(), "quota upstream:openai-a")
		require.Zero(t, e.usage(kb.ID).Used, "a refusal takes nothing from the key")
		qu, err := e.ks.QuotaUsage(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, 60, qu.Used, "the reservation in flight")
		require.Equal(t, 1, qu.InFlight)

		_, err = a.Finish(ctx, 30)
		require.NoError(t, err)
		require.EqualValues(t, 30, e.usage(ka.ID).Used)
		b, err := e.ks.Admit(ctx, sb, keystore.Request{Reserve: 60, Quotas: []*keystore.Quota{q}})
		require.NoError(t, err, "30 used and 60 held fit in 100")
		_, err = e.ks.Admit(ctx, sa, keystore.Request{Reserve: 11, Quotas: []*keystore.Quota{q}})
		require.ErrorIs(t, err, keystore.ErrLimited, "101 would not")
		_, err = b.Finish(ctx, 60)
		require.NoError(t, err)
		qu, err = e.ks.QuotaUsage(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, 90, qu.Used, "30 and 60 charged")
		require.Zero(t, qu.InFlight)

		// A minute later the quota's window is empty again.
		e.clock.Advance(time.Minute)
		_, err = e.ks.Admit(ctx, sa, keystore.Request{Reserve: 100, Quotas: []*keystore.Quota{q}})
		require.NoError(t, err)
	})
}

// TestQuotaConcurrency: a quota's cap on requests in flight and its
// request rate hold across keys; Finish frees the slot.
func TestQuotaConcurrency(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		q, err := e.ks.Quota("upstream:one-at-a-time", keystore.Policy{MaxConcurrent: 1, RequestsPerMinute: 2})
		require.NoError(t, err)
		_, sa := e.create("a", 1000)
		_, sb := e.create("b", 1000)
		qs := []*keystore.Quota{q}
		a, err := e.ks.Admit(ctx, sa, keystore.Request{Quotas: qs})
		require.NoError(t, err)
		_, err = e.ks.Admit(ctx, sb, keystore.Request{Quotas: qs})
		var d *keystore.Denial
		require.True(t, errors.As(err, &d), "%v", err)
		require.Equal(t, "concurrency", d.Reason)
		_, err = a.Finish(ctx, 0)
		require.NoError(t, err)
		b, err := e.ks.Admit(ctx, sb, keystore.Request{Quotas: qs})
		require.NoError(t, err)
		_, err = b.Finish(ctx, 0)
		require.NoError(t, err)
		_, err = e.ks.Admit(ctx, sa, keystore.Request{Quotas: qs})
		require.True(t, errors.As(err, &d), "%v", err)
		require.Equal(t, "rate", d.Reason, "the third request of the minute")
	})
}

// TestQuotaExact: requests of many keys racing for one quota are admitted
// exactly as far as it has room, on every backend, and on Redis across two
// processes.
func TestQuotaExact(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		stores := []*keystore.Store{e.ks}
		if e.be.IsRedis() {
			other, err := keystore.Open(e.st.Another(), keystore.Options{})
			require.NoError(t, err)
			stores = append(stores, other)
		}
		quotas := make([]*keystore.Quota, len(stores)) // one name: one quota
		for i, ks := range stores {
			var err error
			quotas[i], err = ks.Quota("upstream:shared", quotaPolicy)
			require.NoError(t, err)
		}
		secrets := make([]string, 20)
		for i := range secrets {
			_, secrets[i] = e.create(fmt.Sprintf("k%d", i), 1000)
		}
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for i, s := range secrets {
			ks, q := stores[i%len(stores)], quotas[i%len(stores)]
			wg.Go(func() {
				_, err := ks.Admit(ctx, s, keystore.Request{Reserve: 10, Quotas: []*keystore.Quota{q}})
				if err == nil {
					admitted.Add(1)
				} else if !errors.Is(err, keystore.ErrLimited) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 10, admitted.Load(), "100 tokens a minute, 10 a request")
	})
}

// TestQuotaInvalid: a quota needs a name that shows what it is, and has no
// models of its own.
func TestQuotaInvalid(t *testing.T) {
	e := newEnv(t, backendtest.BoltSync, keystore.Options{})
	for _, c := range []struct {
		name string
		p    keystore.Policy
	}{
		{"", quotaPolicy},
		{"admin\u200b", quotaPolicy},
		{string(make([]byte, keystore.MaxQuotaName+1)), quotaPolicy},
		{"m", keystore.Policy{Models: []string{"gpt-4o"}}},
		{"w", keystore.Policy{Windows: []keystore.Window{{Limit: -1, Window: time.Minute}}}},
	} {
		_, err := e.ks.Quota(c.name, c.p)
		require.ErrorIs(t, err, keystore.ErrInvalid, "%q", c.name)
	}
	_, secret := e.create("a", 10)
	for _, qs := range [][]*keystore.Quota{{nil}, {&keystore.Quota{}}} {
		_, err := e.ks.Admit(ctx, secret, keystore.Request{Quotas: qs})
		require.ErrorIs(t, err, keystore.ErrInvalid, "a quota not made by the Store")
	}
}

// TestQuotaMove: an admission moved to another quota is held there, and
// what it held in the first is given back (tokens, slot); the key's own
// hold is not taken twice, and a quota without room refuses the move and
// changes nothing.
func TestQuotaMove(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		qa, err := e.ks.Quota("upstream:a", quotaPolicy)
		require.NoError(t, err)
		qb, err := e.ks.Quota("upstream:b", keystore.Policy{Windows: quotaPolicy.Windows, MaxConcurrent: 1, RequestsPerMinute: 5})
		require.NoError(t, err)
		k, s := e.create("k", 1000)
		usage := func(q *keystore.Quota) keystore.Usage {
			u, err := e.ks.QuotaUsage(ctx, q)
			require.NoError(t, err)
			return u
		}
		a, err := e.ks.Admit(ctx, s, keystore.Request{Reserve: 60, Quotas: []*keystore.Quota{qa}})
		require.NoError(t, err)
		e.clock.Advance(3 * time.Second) // the move's holds are taken at its own instant
		require.NoError(t, a.Move(ctx, []*keystore.Quota{qb}))
		require.Zero(t, usage(qa).Used, "given back")
		require.Zero(t, usage(qa).InFlight)
		require.EqualValues(t, 60, usage(qb).Used)
		require.Equal(t, 1, usage(qb).InFlight)
		require.EqualValues(t, 1, usage(qb).Requests, "the request counted in the rate of the quota it moved to")
		require.EqualValues(t, 60, e.usage(k.ID).Used, "the key's hold, once")

		_, s2 := e.create("k2", 1000)
		b, err := e.ks.Admit(ctx, s2, keystore.Request{Reserve: 50, Quotas: []*keystore.Quota{qa}})
		require.NoError(t, err)
		err = b.Move(ctx, []*keystore.Quota{qb})
		var d *keystore.Denial
		require.True(t, errors.As(err, &d), "%v", err)
		require.Equal(t, "upstream:b", d.Quota)
		require.EqualValues(t, 50, usage(qa).Used, "a refused move changes nothing")
		require.EqualValues(t, 60, usage(qb).Used)

		_, err = a.Finish(ctx, 20)
		require.NoError(t, err)
		require.EqualValues(t, 20, usage(qb).Used, "settled where it moved")
		require.Zero(t, usage(qb).InFlight, "its slot freed")
		require.EqualValues(t, 20, e.usage(k.ID).Used)
		require.ErrorIs(t, a.Move(ctx, []*keystore.Quota{qa}), keystore.ErrInvalid, "finished")
	})
}
