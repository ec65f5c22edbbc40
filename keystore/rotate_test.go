package keystore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/redisstore"
)

// rotate rotates key id with grace and returns the key and its new secret.
func (e *env) rotate(id string, grace time.Duration) (keystore.Key, string) {
	e.t.Helper()
	k, secret, err := e.ks.Rotate(ctx, id, grace)
	require.NoError(e.t, err)
	require.Equal(e.t, id, k.ID)
	require.True(e.t, strings.HasPrefix(secret, "rsk_"), secret)
	require.Len(e.t, secret, 47)
	return k, secret
}

// works asserts that secret authenticates key id: Authenticate, Check
// and Admit (finished at once).
func (e *env) works(id, secret string) {
	e.t.Helper()
	k, err := e.ks.Authenticate(ctx, secret)
	require.NoError(e.t, err)
	require.Equal(e.t, id, k.ID)
	k, _, err = e.ks.Check(ctx, secret)
	require.NoError(e.t, err)
	require.Equal(e.t, id, k.ID)
	e.finish(e.admit(secret, keystore.Request{}), 0)
}

// refused asserts that secret is unknown to Authenticate, Check and
// Admit.
func (e *env) refused(secret string) {
	e.t.Helper()
	_, err := e.ks.Authenticate(ctx, secret)
	require.ErrorIs(e.t, err, keystore.ErrNotFound)
	_, _, err = e.ks.Check(ctx, secret)
	require.ErrorIs(e.t, err, keystore.ErrNotFound)
	_, err = e.ks.Admit(ctx, secret, keystore.Request{})
	require.ErrorIs(e.t, err, keystore.ErrNotFound)
	require.Equal(e.t, "unknown", denial(e.t, err).Reason)
}

// hashes returns the ids the stored secret hashes name, by hash key.
func (e *env) hashes() map[string]string {
	e.t.Helper()
	return onlyPrefix(e.dump(), "h/")
}

// TestRotate: the new secret works at once and the old one until the end
// of its grace, then is refused as unknown; the key keeps its id, policy,
// usage, budgets and lifetime totals; the old hash's index entry goes at
// the next write of the key.
func TestRotate(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, old := e.createPolicy("rot", keystore.Policy{
			Windows:           []keystore.Window{{Limit: 1000, Window: 5 * time.Hour}, {Limit: 5000, Window: 24 * time.Hour}},
			RequestsPerMinute: 100,
			Budgets:           []keystore.Budget{{Limit: pricing.Dollar, Window: time.Hour}},
		})
		a := e.admit(old, keystore.Request{Reserve: 10, Cost: cents(30)})
		_, err := a.FinishSpend(ctx, 42, cents(12))
		require.NoError(t, err)
		e.record(k.ID, 8)
		e.clock.Advance(time.Minute)
		before, usage := e.get(k.ID), e.usage(k.ID)
		require.Zero(t, before.PreviousSecretExpiresAt)

		got, secret := e.rotate(k.ID, time.Hour)
		require.NotEqual(t, old, secret)
		end := t0.Add(time.Minute + time.Hour)
		require.Equal(t, end, got.PreviousSecretExpiresAt)
		want := before
		want.PreviousSecretExpiresAt = end
		require.Equal(t, want, got, "the same key, its previous secret's end aside")
		require.Equal(t, usage, e.usage(k.ID), "usage and budgets unchanged")
		require.Equal(t, map[string]string{hashKey(old): k.ID, hashKey(secret): k.ID}, e.hashes())

		e.works(k.ID, secret)
		e.works(k.ID, old)
		e.clock.Advance(time.Hour - time.Nanosecond)
		e.works(k.ID, old)
		e.clock.Advance(time.Nanosecond)
		e.refused(old)
		require.Equal(t, end, e.get(k.ID).PreviousSecretExpiresAt, "not written since the end")
		require.Equal(t, map[string]string{hashKey(old): k.ID, hashKey(secret): k.ID}, e.hashes())

		e.works(k.ID, secret) // its Finish writes the key, dropping the previous secret
		require.Equal(t, map[string]string{hashKey(secret): k.ID}, e.hashes())
		require.Zero(t, e.get(k.ID).PreviousSecretExpiresAt)
		e.refused(old)
		got = e.get(k.ID)
		require.Equal(t, before.LifetimeTokens, got.LifetimeTokens, "the admissions above finished with 0 tokens")
		require.Equal(t, before.LifetimeSpend, got.LifetimeSpend)
		require.Equal(t, before.Policy, got.Policy)
		require.Equal(t, before.CreatedAt, got.CreatedAt)
	})
}

// TestRotateRestart: the grace is in the record: a restart keeps it, and
// its end.
func TestRotateRestart(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, old := e.create("r", 100)
		_, secret := e.rotate(k.ID, 2*time.Hour)
		e.reopen()
		for key, v := range e.dump() {
			require.NotContains(t, key+v, strings.TrimPrefix(secret, "rsk_"), "only its hash is stored")
		}
		e.works(k.ID, old)
		e.works(k.ID, secret)
		require.Equal(t, t0.Add(2*time.Hour), e.get(k.ID).PreviousSecretExpiresAt)
		e.clock.Advance(2 * time.Hour)
		e.refused(old)
		e.reopen()
		e.refused(old)
		e.works(k.ID, secret)
	})
}

// TestRotateTwice: a key has one previous secret: rotating during a grace
// refuses the oldest secret at once, and the one just replaced gets the
// new grace.
func TestRotateTwice(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, s1 := e.create("twice", 100)
		_, s2 := e.rotate(k.ID, time.Hour)
		e.clock.Advance(10 * time.Minute)
		got, s3 := e.rotate(k.ID, 2*time.Hour)
		require.Equal(t, t0.Add(10*time.Minute+2*time.Hour), got.PreviousSecretExpiresAt)
		e.refused(s1)
		e.works(k.ID, s2)
		e.works(k.ID, s3)
		require.Equal(t, map[string]string{hashKey(s2): k.ID, hashKey(s3): k.ID}, e.hashes())
		e.clock.Advance(2 * time.Hour)
		e.refused(s2)
		e.works(k.ID, s3)
	})
}

// TestRotateNoGrace: grace 0 refuses the old secret at once and drops its
// index entry; an admission it made still finishes.
func TestRotateNoGrace(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, old := e.create("now", 100)
		a := e.admit(old, keystore.Request{Reserve: 5})
		got, secret := e.rotate(k.ID, 0)
		require.Zero(t, got.PreviousSecretExpiresAt)
		e.refused(old)
		e.works(k.ID, secret)
		require.Equal(t, map[string]string{hashKey(secret): k.ID}, e.hashes())
		u := e.finish(a, 3)
		require.EqualValues(t, 3, u.Used)
		e.reopen()
		e.refused(old)
		e.works(k.ID, secret)
	})
}

// TestRotateInvalid: a grace out of range is a FieldError naming it and
// changes nothing; an unknown or malformed id is ErrNotFound; a disabled
// or expired key may be rotated, and stays so.
func TestRotateInvalid(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, old := e.create("bad", 100)
		for _, g := range []time.Duration{-time.Nanosecond, keystore.MaxGrace + time.Nanosecond} {
			_, secret, err := e.ks.Rotate(ctx, k.ID, g)
			require.ErrorIs(t, err, keystore.ErrInvalid)
			var fe *keystore.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "Grace", fe.Field)
			require.Empty(t, secret)
		}
		e.works(k.ID, old)
		require.Equal(t, map[string]string{hashKey(old): k.ID}, e.hashes())
		for _, id := range []string{"key_0123456789abcdef", "nope"} {
			_, secret, err := e.ks.Rotate(ctx, id, time.Hour)
			require.ErrorIs(t, err, keystore.ErrNotFound)
			require.Empty(t, secret)
		}

		require.NoError(t, e.ks.Disable(ctx, k.ID))
		got, secret := e.rotate(k.ID, keystore.MaxGrace)
		require.True(t, got.Disabled)
		_, err := e.ks.Authenticate(ctx, secret)
		require.ErrorIs(t, err, keystore.ErrDisabled)
		_, err = e.ks.Authenticate(ctx, old)
		require.ErrorIs(t, err, keystore.ErrDisabled, "the previous secret names the key, disabled")

		x, xOld := e.createSpec(keystore.Spec{Name: "exp", TokenLimit: 5, ExpiresAt: t0.Add(time.Minute)})
		e.clock.Advance(time.Minute)
		_, xNew := e.rotate(x.ID, time.Hour)
		for _, s := range []string{xOld, xNew} {
			_, err = e.ks.Authenticate(ctx, s)
			require.ErrorIs(t, err, keystore.ErrExpired)
		}
	})
}

// TestRotateDelete: Delete refuses both secrets and removes both index
// entries.
func TestRotateDelete(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, old := e.create("del", 100)
		_, secret := e.rotate(k.ID, time.Hour)
		require.NoError(t, e.ks.Delete(ctx, k.ID))
		e.refused(old)
		e.refused(secret)
		require.Empty(t, e.hashes())
		e.reopen()
		e.refused(old)
		e.refused(secret)
	})
}

// TestRotateShared: on a shared Redis, another process sees the rotation
// at its next call: the new secret, the old one until its grace ends, and
// its end dropping it.
func TestRotateShared(t *testing.T) {
	a, b, clock, srv := twoStoresOn(t)
	k, old, err := a.Create(ctx, keystore.Spec{Name: "shared", TokenLimit: 100})
	require.NoError(t, err)
	_, err = b.Authenticate(ctx, old) // b holds the key as it was
	require.NoError(t, err)

	_, secret, err := a.Rotate(ctx, k.ID, time.Hour)
	require.NoError(t, err)
	for _, s := range []string{secret, old} {
		got, err := b.Authenticate(ctx, s)
		require.NoError(t, err)
		require.Equal(t, k.ID, got.ID)
		require.Equal(t, t0.Add(time.Hour), got.PreviousSecretExpiresAt)
		adm, err := b.Admit(ctx, s, keystore.Request{Reserve: 1})
		require.NoError(t, err)
		_, err = adm.Finish(ctx, 1)
		require.NoError(t, err)
	}
	clock.Advance(time.Hour)
	for _, st := range []*keystore.Store{a, b} {
		_, err = st.Authenticate(ctx, old)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		_, err = st.Admit(ctx, old, keystore.Request{})
		require.ErrorIs(t, err, keystore.ErrNotFound)
	}

	// b rotates it at once; a, which holds the key, follows.
	_, third, err := b.Rotate(ctx, k.ID, 0)
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, secret)
	require.ErrorIs(t, err, keystore.ErrNotFound)
	_, _, err = a.Check(ctx, secret)
	require.ErrorIs(t, err, keystore.ErrNotFound)
	got, err := a.Authenticate(ctx, third)
	require.NoError(t, err)
	require.Zero(t, got.PreviousSecretExpiresAt)
	require.EqualValues(t, 2, got.LifetimeTokens)

	// A process opened after knows only the newest.
	rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: clock.Now, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer rdb.Close()
	c, err := keystore.Open(rdb, keystore.Options{})
	require.NoError(t, err)
	for _, s := range []string{old, secret} {
		_, err = c.Authenticate(ctx, s)
		require.ErrorIs(t, err, keystore.ErrNotFound)
	}
	got, err = c.Authenticate(ctx, third)
	require.NoError(t, err)
	require.Equal(t, k.ID, got.ID)
}
