package keystore_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// usageWindow is the window of Spec.TokenLimit under the default Options.
func usageWindow(limit int64) keystore.Window {
	return keystore.Window{Limit: limit, Window: 5 * time.Hour, Bucket: 5 * time.Minute}
}

// onePolicy is the Policy of a key made with Spec.TokenLimit = limit.
func onePolicy(limit int64) keystore.Policy {
	return keystore.Policy{Windows: []keystore.Window{usageWindow(limit)}}
}

// wu is a WindowUsage of the default usage window.
func wu(used, limit int64, reset time.Duration, end time.Time) keystore.WindowUsage {
	return keystore.WindowUsage{Window: 5 * time.Hour, Bucket: 5 * time.Minute, Used: used, Limit: limit,
		Remaining: max(0, limit-used), ResetAfter: reset, WindowEnd: end}
}

// oneUsage is the Usage of a key with one window whose usage is w.
func oneUsage(w keystore.WindowUsage, inFlight int) keystore.Usage {
	return keystore.Usage{Windows: []keystore.WindowUsage{w}, Used: w.Used, Limit: w.Limit, Remaining: w.Remaining,
		ResetAfter: w.ResetAfter, WindowEnd: w.WindowEnd, InFlight: inFlight}
}

// TestOpenOptions asserts that invalid Options and a nil database are
// refused with ErrInvalid, and that a valid Open works.
func TestOpenOptions(t *testing.T) {
	backendtest.Run(t, backendtest.All(), func(t *testing.T, b backendtest.Backend) {
		e := newEnv(t, b, keystore.Options{})
		e.close()
		e.openDB()
		for _, o := range []keystore.Options{
			{UsageWindow: time.Hour, UsageBucket: 7 * time.Minute}, // does not divide
			{UsageWindow: -time.Hour},
			{UsageBucket: -time.Minute},
			{UsageWindow: 7 * time.Minute},                          // the default 5-minute bucket does not divide it
			{UsageWindow: time.Hour, UsageBucket: time.Millisecond}, // too many buckets
			{LeaseTTL: -time.Second},
		} {
			_, err := e.open(o)
			require.ErrorIs(t, err, keystore.ErrInvalid, "%+v", o)
		}
		_, err := keystore.Open((*ratestore.DB)(nil), keystore.Options{})
		require.ErrorIs(t, err, keystore.ErrInvalid)

		// A refused Open attached nothing: a valid one works after it.
		e.opts = keystore.Options{UsageWindow: time.Hour, UsageBucket: time.Minute}
		e.openStore()
		k, _ := e.create("h", 10)
		require.Equal(t, []keystore.Window{{Limit: 10, Window: time.Hour, Bucket: time.Minute}}, k.Policy.Windows)
	})
}

// TestOpenTwice asserts that keystore.Open on one DB returns the same
// Store, whatever zero fields the options leave to the defaults, that
// other options are refused with ErrInvalid, and that a reopened DB gets a
// Store of its own.
func TestOpenTwice(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		for _, o := range []keystore.Options{
			{},
			{UsageWindow: keystore.DefaultWindow},
			{UsageWindow: keystore.DefaultWindow, UsageBucket: keystore.DefaultBucket, LeaseTTL: keystore.DefaultLeaseTTL},
		} {
			again, err := e.open(o)
			require.NoError(t, err)
			require.Same(t, e.ks, again, "%+v", o)
		}
		for _, o := range []keystore.Options{
			{LeaseTTL: time.Minute},
			{UsageWindow: time.Hour},
			{UsageBucket: time.Minute},
		} {
			_, err := e.open(o)
			require.ErrorIs(t, err, keystore.ErrInvalid, "%+v", o)
		}
		// The Store is still the one: keys made through it are seen
		// through every handle.
		k, _ := e.create("shared", 5)
		again, err := e.open(keystore.Options{})
		require.NoError(t, err)
		got, err := again.Get(ctx, k.ID)
		require.NoError(t, err)
		require.Equal(t, k, got)

		old := e.ks
		e.reopen()
		require.NotSame(t, old, e.ks)
		require.Equal(t, k, e.get(k.ID))
	})
}

// TestCreateAuthenticate asserts the shape of ids and secrets, that a
// secret authenticates its key and no other string does, and that unknown
// or malformed ids give ErrNotFound.
func TestCreateAuthenticate(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		spec := keystore.Spec{Name: "team-a ✓", Model: "glm-4.7", TokenLimit: 100_000, ExpiresAt: t0.Add(24 * time.Hour)}
		k, secret, err := e.ks.Create(ctx, spec)
		require.NoError(t, err)
		require.Regexp(t, regexp.MustCompile(`^key_[0-9a-f]{16}$`), k.ID)
		require.Regexp(t, regexp.MustCompile(`^rsk_[A-Za-z0-9_-]{43}$`), secret)
		require.Equal(t, keystore.Key{ID: k.ID, Name: spec.Name, Model: spec.Model, Policy: onePolicy(100_000),
			TokenLimit: 100_000, ExpiresAt: spec.ExpiresAt, CreatedAt: t0}, k)

		got, err := e.ks.Authenticate(ctx, secret)
		require.NoError(t, err)
		require.Equal(t, k, got)
		require.Equal(t, k, e.get(k.ID))
		key, res, err := e.ks.Check(ctx, secret)
		require.NoError(t, err)
		require.Equal(t, k, key)
		require.Equal(t, strategies.Result{Allowed: true, Limit: 100_000, Remaining: 100_000}, res)

		k2, secret2 := e.create("other", 5)
		require.NotEqual(t, k.ID, k2.ID)
		require.NotEqual(t, secret, secret2)
		got, err = e.ks.Authenticate(ctx, secret2)
		require.NoError(t, err)
		require.Equal(t, k2, got)

		for _, bad := range []string{"", "rsk_", secret[:len(secret)-1], secret + "x", strings.ToUpper(secret), k.ID} {
			got, err := e.ks.Authenticate(ctx, bad)
			require.ErrorIs(t, err, keystore.ErrNotFound)
			require.Zero(t, got)
			_, _, err = e.ks.Check(ctx, bad)
			require.ErrorIs(t, err, keystore.ErrNotFound)
			a, err := e.ks.Admit(ctx, bad, keystore.Request{})
			require.ErrorIs(t, err, keystore.ErrNotFound)
			require.Nil(t, a)
		}
		for _, id := range []string{"", "key_", "key_0123456789abcdeg", "KEY_0123456789abcdef", "key_0123456789ABCDEF",
			"key_0123456789abcdef0", "../k/x", secret} {
			_, err := e.ks.Get(ctx, id)
			require.ErrorIs(t, err, keystore.ErrNotFound, id)
			require.NotContains(t, err.Error(), secret)
		}
		_, err = e.ks.Get(ctx, "key_0123456789abcdef")
		require.ErrorIs(t, err, keystore.ErrNotFound)
		require.ErrorContains(t, err, "key_0123456789abcdef")
	})
}

// TestCreateInvalid asserts that a bad Spec is refused with ErrInvalid,
// with an error naming the field, and that nothing is stored.
func TestCreateInvalid(t *testing.T) {
	cases := []struct {
		field string
		spec  keystore.Spec
	}{
		{"TokenLimit", keystore.Spec{TokenLimit: -1}},
		{"Name", keystore.Spec{TokenLimit: 1, Name: strings.Repeat("n", keystore.MaxName+1)}},
		{"Name", keystore.Spec{TokenLimit: 1, Name: "a\nb"}},
		{"Name", keystore.Spec{TokenLimit: 1, Name: "a\x00b"}},
		{"Name", keystore.Spec{TokenLimit: 1, Name: "\xff"}},
		{"Model", keystore.Spec{TokenLimit: 1, Model: "m\u0085"}},
		{"Model", keystore.Spec{TokenLimit: 1, Model: strings.Repeat("m", keystore.MaxName+1)}},
		{"ExpiresAt", keystore.Spec{TokenLimit: 1, ExpiresAt: t0}},
		{"ExpiresAt", keystore.Spec{TokenLimit: 1, ExpiresAt: t0.Add(-time.Nanosecond)}},
		{"ExpiresAt", keystore.Spec{TokenLimit: 1, ExpiresAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}},
	}
	forEach(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			k, secret, err := e.ks.Create(ctx, c.spec)
			require.ErrorIs(t, err, keystore.ErrInvalid, "%+v", c.spec)
			require.ErrorContains(t, err, c.field, "%+v", c.spec)
			require.Empty(t, secret)
			require.Zero(t, k)
		}
		require.Empty(t, e.dump())
		_, _, err := e.ks.Create(ctx, keystore.Spec{TokenLimit: 1, Name: strings.Repeat("é", keystore.MaxName/2)})
		require.NoError(t, err)
	})
}

// step is one call of a window scenario, at the clock's instant after
// advance.
type step struct {
	advance    time.Duration
	record     int64 // RecordUsage(record) if >= 0, else Check
	allowed    bool
	remaining  int64
	resetAfter time.Duration
	retryAfter time.Duration
}

// TestWindowBoundaries walks a key of 1000 tokens per 5 hours through its
// window: a key at exactly its limit is allowed by Check, one token over
// is denied until the bucket that holds the excess expires, and buckets
// expire exactly Window after they start.
func TestWindowBoundaries(t *testing.T) {
	const check = -1
	// Limit 1000, 5 hours in 5-minute buckets; t0 is a bucket start.
	steps := []step{
		{0, check, true, 1000, 0, 0},
		{0, 600, true, 400, 5 * time.Hour, 0},
		{time.Hour, 400, true, 0, 5 * time.Hour, 0},        // exactly at the limit: still allowed
		{0, check, true, 0, 5 * time.Hour, 0},              //
		{0, 1, false, 0, 5 * time.Hour, 4 * time.Hour},     // one over: denied until the t0 bucket expires
		{0, check, false, 0, 5 * time.Hour, 4 * time.Hour}, //
		{4*time.Hour - 1, check, false, 0, time.Hour + 1, 1},
		{1, check, true, 599, time.Hour, 0},  // t0+5h: the 600 no longer count
		{time.Hour, check, true, 1000, 0, 0}, // t0+6h: nothing counts
	}
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("w", 1000)
		var lifetime int64
		for i, s := range steps {
			e.clock.Advance(s.advance)
			var res strategies.Result
			if s.record >= 0 {
				res = e.record(k.ID, s.record)
				lifetime += s.record
			} else {
				key, r, err := e.ks.Check(ctx, secret)
				require.NoError(t, err)
				require.Equal(t, k.ID, key.ID)
				res = r
			}
			want := strategies.Result{Allowed: s.allowed, Limit: 1000, Remaining: s.remaining,
				ResetAfter: s.resetAfter, RetryAfter: s.retryAfter}
			require.Equal(t, want, res, "step %d", i)
		}
		k = e.get(k.ID)
		require.Equal(t, lifetime, k.LifetimeTokens)
		require.Equal(t, t0.Add(time.Hour), k.LastUsed)
	})
}

// TestUsage asserts every figure of Usage as buckets fill and expire:
// Used past the limit, Remaining floored at zero, ResetAfter until the
// newest bucket expires, and WindowEnd when the oldest does.
func TestUsage(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, _ := e.create("u", 100)
		require.Equal(t, oneUsage(wu(0, 100, 0, time.Time{}), 0), e.usage(k.ID))

		e.clock.Advance(2 * time.Minute) // bucket t0
		e.record(k.ID, 30)
		e.clock.Advance(5 * time.Minute) // bucket t0+5m
		e.record(k.ID, 90)
		e.clock.Advance(3 * time.Minute) // t0+10m
		require.Equal(t, oneUsage(wu(120, 100, 5*time.Hour-5*time.Minute, t0.Add(5*time.Hour)), 0), e.usage(k.ID))

		e.clock.Set(t0.Add(5 * time.Hour)) // the t0 bucket has gone
		require.Equal(t, oneUsage(wu(90, 100, 5*time.Minute, t0.Add(5*time.Hour+5*time.Minute)), 0), e.usage(k.ID))
		e.clock.Advance(5 * time.Minute)
		require.Equal(t, oneUsage(wu(0, 100, 0, time.Time{}), 0), e.usage(k.ID))

		_, err := e.ks.Usage(ctx, "key_0000000000000000")
		require.ErrorIs(t, err, keystore.ErrNotFound)
	})
}

// TestRecordUsage asserts that RecordUsage counts tokens past the limit
// and on disabled keys, sets LastUsed (never backwards), and refuses bad
// arguments.
func TestRecordUsage(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("r", 10)
		_, err := e.ks.RecordUsage(ctx, k.ID, -1)
		require.ErrorIs(t, err, keystore.ErrInvalid)
		_, err = e.ks.RecordUsage(ctx, "key_0000000000000000", 1)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		_, err = e.ks.RecordUsage(ctx, "nope", 1)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		require.Equal(t, oneUsage(wu(0, 10, 0, time.Time{}), 0), e.usage(k.ID))

		e.clock.Advance(time.Minute)
		res := e.record(k.ID, 0) // used, but no tokens
		require.Equal(t, strategies.Result{Allowed: true, Limit: 10, Remaining: 10}, res)
		require.Equal(t, t0.Add(time.Minute), e.get(k.ID).LastUsed)

		// Far past the limit, and on a disabled key: the tokens were spent.
		res = e.record(k.ID, 25)
		require.Equal(t, strategies.Result{Allowed: false, Limit: 10, Remaining: 0,
			ResetAfter: 5*time.Hour - time.Minute, RetryAfter: 5*time.Hour - time.Minute}, res)
		require.NoError(t, e.ks.Disable(ctx, k.ID))
		e.record(k.ID, 5)
		require.Equal(t, int64(30), e.usage(k.ID).Used)
		require.NoError(t, e.ks.Enable(ctx, k.ID))
		res = e.check(secret)
		require.False(t, res.Allowed)
		require.Equal(t, 5*time.Hour-time.Minute, res.RetryAfter)

		// A clock gone backwards keeps the latest LastUsed.
		e.clock.Advance(-time.Hour)
		e.record(k.ID, 1)
		k = e.get(k.ID)
		require.Equal(t, t0.Add(time.Minute), k.LastUsed)
		require.Equal(t, int64(31), k.LifetimeTokens)
	})
}

// TestLifetimeSaturates asserts that LifetimeTokens saturates at 2^63-1
// instead of wrapping, and that the window does too.
func TestLifetimeSaturates(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("s", 1)
		const big = int64(1) << 62
		for range 3 {
			res := e.record(k.ID, big)
			require.False(t, res.Allowed)
			require.Zero(t, res.Remaining)
		}
		require.Equal(t, int64(math.MaxInt64), e.get(k.ID).LifetimeTokens)
		require.False(t, e.check(secret).Allowed)
		e.reopen()
		require.Equal(t, int64(math.MaxInt64), e.get(k.ID).LifetimeTokens)
	})
}

// TestUsageReportsHugeUsage asserts that Usage reports the tokens a window
// holds when they are more than 2^62: the window saturates at 2^63-1, and
// so must Used.
func TestUsageReportsHugeUsage(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, _ := e.create("s", 1)
		const big = int64(1) << 62
		for range 3 {
			e.record(k.ID, big)
		}
		u := e.usage(k.ID)
		require.Equal(t, int64(math.MaxInt64), u.Windows[0].Used, "the window holds 2^63-1 tokens")
		require.Equal(t, int64(math.MaxInt64), u.Used)
	})
}

// TestExpiryDisableEnable asserts that a key is expired from its ExpiresAt
// on, that disabled is reported before expired, both with the key, and
// that Update (ExpiresAt), Disable and Enable change that, idempotently.
func TestExpiryDisableEnable(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createSpec(keystore.Spec{Name: "x", TokenLimit: 10, ExpiresAt: t0.Add(time.Hour)})
		setExpiry := func(at time.Time) error {
			_, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
				s.ExpiresAt = at
				return nil
			})
			return err
		}
		auth := func() error {
			t.Helper()
			got, err := e.ks.Authenticate(ctx, secret)
			key, _, cerr := e.ks.Check(ctx, secret)
			a, aerr := e.ks.Admit(ctx, secret, keystore.Request{})
			for _, sentinel := range []error{keystore.ErrExpired, keystore.ErrDisabled} {
				require.Equal(t, errors.Is(err, sentinel), errors.Is(cerr, sentinel))
				require.Equal(t, errors.Is(err, sentinel), errors.Is(aerr, sentinel))
			}
			if err != nil {
				require.Equal(t, k.ID, got.ID, "refusals come with the key")
				require.Equal(t, k.ID, key.ID)
				require.Nil(t, a)
				d := denial(t, err)
				require.Equal(t, time.Duration(-1), d.RetryAfter)
			} else {
				e.finish(a, 0)
			}
			return err
		}
		e.clock.Set(t0.Add(time.Hour - 1))
		require.NoError(t, auth())
		e.clock.Set(t0.Add(time.Hour)) // expired from ExpiresAt on
		err := auth()
		require.ErrorIs(t, err, keystore.ErrExpired)
		require.ErrorContains(t, err, k.ID)
		require.Equal(t, "expired", denial(t, err).Reason)

		require.NoError(t, e.ks.Disable(ctx, k.ID))
		require.True(t, e.get(k.ID).Disabled)
		err = auth()
		require.ErrorIs(t, err, keystore.ErrDisabled, "disabled is checked before expired")
		require.Equal(t, "disabled", denial(t, err).Reason)
		require.NoError(t, setExpiry(time.Time{}))
		require.True(t, e.get(k.ID).ExpiresAt.IsZero())
		require.ErrorIs(t, auth(), keystore.ErrDisabled)
		require.NoError(t, e.ks.Disable(ctx, k.ID)) // again: a no-op
		require.NoError(t, e.ks.Enable(ctx, k.ID))
		require.False(t, e.get(k.ID).Disabled)
		require.NoError(t, auth())
		require.NoError(t, e.ks.Enable(ctx, k.ID)) // again: a no-op
		require.NoError(t, auth())

		require.NoError(t, setExpiry(t0)) // in the past: expires at once
		require.ErrorIs(t, auth(), keystore.ErrExpired)
		require.NoError(t, setExpiry(t0.Add(2*time.Hour)))
		require.NoError(t, auth())
		require.Equal(t, t0.Add(2*time.Hour), e.get(k.ID).ExpiresAt)

		before := e.get(k.ID)
		err = setExpiry(time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC))
		require.ErrorIs(t, err, keystore.ErrInvalid)
		require.ErrorContains(t, err, "ExpiresAt")
		require.Equal(t, before, e.get(k.ID))

		e.reopen()
		require.Equal(t, before, e.get(k.ID))
		require.NoError(t, auth())

		for name, f := range map[string]func(string) error{
			"Disable": func(id string) error { return e.ks.Disable(ctx, id) },
			"Enable":  func(id string) error { return e.ks.Enable(ctx, id) },
			"Update": func(id string) error {
				_, err := e.ks.Update(ctx, id, func(*keystore.Spec) error { return nil })
				return err
			},
			"Delete":        func(id string) error { return e.ks.Delete(ctx, id) },
			"Get":           func(id string) error { _, err := e.ks.Get(ctx, id); return err },
			"Usage":         func(id string) error { _, err := e.ks.Usage(ctx, id); return err },
			"RecordUsage":   func(id string) error { _, err := e.ks.RecordUsage(ctx, id, 1); return err },
			"MigrateLegacy": func(id string) error { _, err := e.ks.MigrateLegacy(ctx, id); return err },
		} {
			require.ErrorIs(t, f("key_0000000000000000"), keystore.ErrNotFound, name)
			require.ErrorIs(t, f("bad"), keystore.ErrNotFound, name)
		}
	})
}

// TestUpdateTokenLimit asserts that Update's TokenLimit shorthand sets the
// limit of the first window, applies to the usage already counted, and
// refuses a limit that is not positive without changing anything.
func TestUpdateTokenLimit(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("l", 1000)
		e.record(k.ID, 500)
		var seen keystore.Spec
		setLimit := func(n int64) (keystore.Key, error) {
			return e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
				seen = *s
				seen.Policy.Windows = slices.Clone(s.Policy.Windows)
				s.TokenLimit = n
				return nil
			})
		}
		got, err := setLimit(400)
		require.NoError(t, err)
		require.Equal(t, keystore.Spec{Name: "l", TokenLimit: 1000, Policy: onePolicy(1000)}, seen, "fn sees the key as it is")
		require.Equal(t, int64(400), got.TokenLimit)
		require.Equal(t, onePolicy(400), got.Policy)
		require.Equal(t, got, e.get(k.ID))
		require.Equal(t, strategies.Result{Allowed: false, Limit: 400, Remaining: 0,
			ResetAfter: 5 * time.Hour, RetryAfter: 5 * time.Hour}, e.check(secret))
		_, err = setLimit(500)
		require.NoError(t, err)
		require.Equal(t, strategies.Result{Allowed: true, Limit: 500, Remaining: 0, ResetAfter: 5 * time.Hour}, e.check(secret))
		for _, bad := range []int64{0, -5} {
			_, err := setLimit(bad)
			require.ErrorIs(t, err, keystore.ErrInvalid)
			require.ErrorContains(t, err, "Limit")
		}
		require.Equal(t, int64(500), e.get(k.ID).TokenLimit)
		require.Equal(t, int64(500), e.usage(k.ID).Used)
		e.reopen()
		require.Equal(t, int64(500), e.get(k.ID).TokenLimit)
		require.Equal(t, int64(500), e.usage(k.ID).Used)
	})
}

// TestDelete asserts that Delete removes the key's record, index entry and
// usage, that its secret stops working, and that other keys are left
// alone.
func TestDelete(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("d", keystore.Policy{
			Windows:           []keystore.Window{{Limit: 10, Window: time.Hour}},
			RequestsPerMinute: 5,
		})
		other, otherSecret := e.create("keep", 10)
		e.record(k.ID, 3)
		e.record(other.ID, 4)
		e.finish(e.admit(secret, keystore.Request{}), 1)
		require.Equal(t, int64(4), e.rateRemaining(k.ID, 5))
		require.NoError(t, e.ks.Delete(ctx, k.ID))

		_, err := e.ks.Get(ctx, k.ID)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		_, err = e.ks.Authenticate(ctx, secret)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		_, _, err = e.ks.Check(ctx, secret)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		_, err = e.ks.Admit(ctx, secret, keystore.Request{})
		require.ErrorIs(t, err, keystore.ErrNotFound)
		require.ErrorIs(t, e.ks.Delete(ctx, k.ID), keystore.ErrNotFound)

		// Its usage is gone from the engine too.
		r := e.peek("keys:w:1h0m0s", strategies.RollingWindow{Limit: 10, Window: time.Hour, Bucket: time.Minute}, k.ID)
		require.Equal(t, int64(10), r.Remaining)
		require.Equal(t, int64(5), e.rateRemaining(k.ID, 5))

		dump := e.dump()
		require.Equal(t, map[string]string{hashKey(otherSecret): other.ID}, onlyPrefix(dump, "h/"))
		require.Len(t, onlyPrefix(dump, "k/"), 1)
		require.Contains(t, dump, "k/"+other.ID)
		_, err = e.ks.Authenticate(ctx, otherSecret)
		require.NoError(t, err)
		require.Equal(t, int64(4), e.usage(other.ID).Used)

		e.reopen()
		_, err = e.ks.Authenticate(ctx, secret)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		require.Equal(t, int64(4), e.usage(other.ID).Used)
	})
}

// TestList asserts that List visits every key once, in id order, that fn
// may call the Store, and that an error from fn stops it.
func TestList(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		want := map[string]keystore.Key{}
		for i := range 7 {
			k, _ := e.create(strings.Repeat("n", i), int64(i+1))
			want[k.ID] = k
		}
		var ids []string
		require.NoError(t, e.ks.List(ctx, func(k keystore.Key) error {
			require.Equal(t, want[k.ID], k)
			ids = append(ids, k.ID)
			// fn may write to the store.
			_, err := e.ks.RecordUsage(ctx, k.ID, 1)
			return err
		}))
		require.Len(t, ids, len(want))
		require.True(t, slices.IsSorted(ids))

		stop := errors.New("stop")
		n := 0
		require.ErrorIs(t, e.ks.List(ctx, func(keystore.Key) error {
			if n++; n == 2 {
				return stop
			}
			return nil
		}), stop)
		require.Equal(t, 2, n)

		// fn may delete keys, the next one included.
		n = 0
		require.NoError(t, e.ks.List(ctx, func(k keystore.Key) error {
			n++
			i := slices.Index(ids, k.ID)
			if i+1 < len(ids) {
				return e.ks.Delete(ctx, ids[i+1])
			}
			return nil
		}))
		require.Equal(t, 4, n)
	})
}

// TestSecretsNeverStored asserts that no secret, created or imported,
// reaches the database, neither in its records nor anywhere in its files
// on disk, while the hash of each does.
func TestSecretsNeverStored(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		var secrets []string
		for i := range 5 {
			k, secret := e.createSpec(keystore.Spec{Name: "k", TokenLimit: int64(i + 100), ExpiresAt: t0.Add(time.Hour)})
			e.record(k.ID, 7)
			a := e.admit(secret, keystore.Request{Reserve: 1})
			if i%2 == 0 {
				e.finish(a, 2)
			}
			secrets = append(secrets, secret)
		}
		imported := []keystore.Imported{
			{Secret: "pk_live_4eC39HqLyjWDarjtT1zdp7dc", Name: "legacy", TokenLimit: 100,
				Windows: []keystore.LegacyWindow{{Start: t0.Add(-time.Hour), Tokens: 5}}},
			{Secret: "pk_live_short", TokenLimit: 100},
		}
		_, err := e.ks.Import(ctx, imported)
		require.NoError(t, err)
		for _, k := range imported {
			secrets = append(secrets, k.Secret)
		}
		e.reopen() // and what reached the files
		dump := e.dump()
		require.NotEmpty(t, dump)
		for _, secret := range secrets {
			require.Contains(t, dump, hashKey(secret), "the hash is stored")
			for k, v := range dump {
				for _, b := range []string{k, v} {
					require.NotContains(t, b, secret)
					require.NotContains(t, b, strings.TrimPrefix(secret, "rsk_"))
				}
			}
		}
		// Nor in the files, whatever the backend keeps beside its keys.
		if e.be.IsRedis() {
			return // no files: the test's redis-server persists nothing
		}
		e.close()
		n := 0
		walkFiles(t, e.st.Path, func(name string, data []byte) {
			n++
			for _, secret := range secrets {
				require.False(t, bytes.Contains(data, []byte(secret)), name)
				require.False(t, bytes.Contains(data, []byte(strings.TrimPrefix(secret, "rsk_"))), name)
			}
		})
		require.NotZero(t, n)
		e.openDB()
		e.openStore()
	})
}

// walkFiles calls fn with the contents of every file of the database at
// path: the file or directory itself and its siblings (a log beside it).
func walkFiles(t *testing.T, path string, fn func(name string, data []byte)) {
	t.Helper()
	matches, err := filepath.Glob(path + "*")
	require.NoError(t, err)
	require.NotEmpty(t, matches)
	for _, m := range matches {
		require.NoError(t, filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err == nil {
				fn(p, data)
			}
			return err
		}))
	}
}

// policyBytes is the encoding of a policy in a version 2 record:
// uvarints of the window count, each window's limit, length and bucket,
// the requests per minute, the concurrency cap and the model count (here
// none).
func policyBytes(windows ...keystore.Window) []byte {
	b := uvarint(nil, uint64(len(windows)))
	for _, w := range windows {
		b = uvarint(b, uint64(w.Limit))
		b = uvarint(b, uint64(w.Window))
		b = uvarint(b, uint64(w.Bucket))
	}
	return append(b, 0, 0, 0, 0) // no rate, concurrency cap, models or budgets
}

func uvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// TestCorruptRecord asserts that a record whose bytes were damaged makes
// every call naming its key fail with ErrCorrupt naming the id (its secret
// included, through the stored index), leaves the other keys working, and
// that Delete removes it.
func TestCorruptRecord(t *testing.T) {
	// A key made with TokenLimit 100 ends with its policy, length-prefixed,
	// then what it spent (0, one byte).
	pol := policyBytes(usageWindow(100))
	withPolicy := func(v, p []byte) []byte {
		v = bytes.Clone(v[:len(v)-len(pol)-2])
		return append(append(uvarint(v, uint64(len(p))), p...), 0)
	}
	mutations := []struct {
		name string
		f    func(v []byte) []byte
	}{
		{"empty", func([]byte) []byte { return []byte{} }},
		{"garbage", func([]byte) []byte { return []byte("not a record") }},
		{"version 0", func(v []byte) []byte { v[0] = 0; return v }},
		{"version 4", func(v []byte) []byte { v[0] = 4; return v }},
		{"unknown flag", func(v []byte) []byte { v[1] |= 0x80; return v }},
		{"cut short", func(v []byte) []byte { return v[:len(v)-1] }},
		{"cut in the hash", func(v []byte) []byte { return v[:20] }},
		{"trailing byte", func(v []byte) []byte { return append(v, 0) }},
		{"no window and a trailing byte", func(v []byte) []byte { return withPolicy(v, []byte{0, 0, 0, 0, 0, 0}) }},
		{"bucket not dividing", func(v []byte) []byte {
			return withPolicy(v, policyBytes(keystore.Window{Limit: 100, Window: 5 * time.Hour, Bucket: 7 * time.Minute}))
		}},
		{"two windows of one length", func(v []byte) []byte {
			return withPolicy(v, policyBytes(usageWindow(100), usageWindow(50)))
		}},
		{"policy cut short", func(v []byte) []byte { return withPolicy(v, pol[:len(pol)-1]) }},
	}
	forEach(t, func(t *testing.T, e *env) {
		good, goodSecret := e.create("good", 100)
		ids := make([]string, len(mutations))
		secrets := make([]string, len(mutations))
		for i, m := range mutations {
			k, secret := e.create("c", 100)
			e.record(k.ID, 3)
			v := e.rawGet("k/" + k.ID)
			require.True(t, bytes.HasSuffix(v, append(bytes.Clone(pol), 0)), "%q", v)
			e.rawPut("k/"+k.ID, m.f(bytes.Clone(v)))
			ids[i], secrets[i] = k.ID, secret
		}
		e.reopen()

		for i, m := range mutations {
			t.Run(m.name, func(t *testing.T) {
				id, secret := ids[i], secrets[i]
				isCorrupt := func(what string, err error) {
					t.Helper()
					require.ErrorIs(t, err, keystore.ErrCorrupt, what)
					require.ErrorIs(t, err, strategies.ErrCorrupt, what)
					require.ErrorContains(t, err, id, what)
				}
				_, err := e.ks.Get(ctx, id)
				isCorrupt("Get", err)
				_, err = e.ks.Authenticate(ctx, secret)
				isCorrupt("Authenticate", err)
				_, _, err = e.ks.Check(ctx, secret)
				isCorrupt("Check", err)
				a, err := e.ks.Admit(ctx, secret, keystore.Request{Reserve: 1})
				isCorrupt("Admit", err)
				require.Nil(t, a)
				_, err = e.ks.RecordUsage(ctx, id, 1)
				isCorrupt("RecordUsage", err)
				_, err = e.ks.Usage(ctx, id)
				isCorrupt("Usage", err)
				_, err = e.ks.Update(ctx, id, func(*keystore.Spec) error { return nil })
				isCorrupt("Update", err)
				_, err = e.ks.MigrateLegacy(ctx, id)
				isCorrupt("MigrateLegacy", err)
				isCorrupt("Disable", e.ks.Disable(ctx, id))
				isCorrupt("Enable", e.ks.Enable(ctx, id))
			})
		}
		err := e.ks.List(ctx, func(keystore.Key) error { return nil })
		require.ErrorIs(t, err, keystore.ErrCorrupt, "List stops at a corrupt key")

		// The other key works.
		_, err = e.ks.Authenticate(ctx, goodSecret)
		require.NoError(t, err)
		e.record(good.ID, 5)
		require.Equal(t, int64(5), e.usage(good.ID).Used)

		// Delete is the way out: the index entry goes too.
		for i, id := range ids {
			e.within(2*time.Second, "Delete of a key whose record is corrupt", func() {
				require.NoError(t, e.ks.Delete(ctx, id))
			})
			_, err := e.ks.Authenticate(ctx, secrets[i])
			require.ErrorIs(t, err, keystore.ErrNotFound)
			_, err = e.ks.Get(ctx, id)
			require.ErrorIs(t, err, keystore.ErrNotFound)
		}
		require.Equal(t, map[string]string{"k/" + good.ID: e.rawString("k/" + good.ID), hashKey(goodSecret): good.ID}, e.dump())
		require.NoError(t, e.ks.List(ctx, func(keystore.Key) error { return nil }))
		e.reopen()
		require.Len(t, e.dump(), 2)
	})
}

func (e *env) rawString(key string) string { return string(e.rawGet(key)) }

// TestConcurrentRecordUsage asserts that RecordUsage from 256 goroutines
// at once, interleaved with Checks, counts every token exactly once.
func TestConcurrentRecordUsage(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("hot", keystore.Policy{Windows: []keystore.Window{
			{Limit: 1_000_000, Window: time.Hour}, {Limit: 10_000_000, Window: 24 * time.Hour},
		}})
		const goroutines = 256
		var want int64
		for i := range goroutines {
			want += int64(i%7 + 1)
		}
		require.NoError(t, parallel(goroutines, func(i int) error {
			if _, err := e.ks.RecordUsage(ctx, k.ID, int64(i%7+1)); err != nil {
				return err
			}
			_, _, err := e.ks.Check(ctx, secret)
			return err
		}))
		require.Equal(t, []int64{want, want}, e.used(k.ID))
		require.Equal(t, want, e.get(k.ID).LifetimeTokens)
		e.reopen()
		require.Equal(t, []int64{want, want}, e.used(k.ID))
		require.Equal(t, want, e.get(k.ID).LifetimeTokens)
	})
}

// TestReopenPersists asserts that keys, their policies, usage, state
// (disabled, expiry), legacy usage pending and secrets survive Close and
// Open.
func TestReopenPersists(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		a, secretA := e.createSpec(keystore.Spec{Name: "a", Model: "m", TokenLimit: 50, ExpiresAt: t0.Add(48 * time.Hour)})
		b, secretB := e.create("b", 20)
		c, secretC := e.createPolicy("c", keystore.Policy{
			Windows:           []keystore.Window{{Limit: 100, Window: time.Hour}, {Limit: 1000, Window: 24 * time.Hour, Bucket: time.Hour}},
			RequestsPerMinute: 3,
			MaxConcurrent:     2,
			Models:            []string{"claude-*", "gpt-4o"},
		})
		e.clock.Advance(time.Minute)
		e.record(a.ID, 30)
		require.NoError(t, e.ks.Disable(ctx, b.ID))
		e.finish(e.admit(secretC, keystore.Request{Model: "gpt-4o", Reserve: 10}), 7)
		res, err := e.ks.Import(ctx, []keystore.Imported{{Secret: "pk_live_x", Name: "old", TokenLimit: 9,
			LifetimeTokens: 99, Windows: []keystore.LegacyWindow{{Start: t0.Add(-time.Hour), Tokens: 4}}}})
		require.NoError(t, err)
		legacyID := res.IDs[0]

		var keys []keystore.Key
		require.NoError(t, e.ks.List(ctx, func(k keystore.Key) error { keys = append(keys, k); return nil }))
		usageA, usageC := e.usage(a.ID), e.usage(c.ID)

		e.reopen()
		var again []keystore.Key
		require.NoError(t, e.ks.List(ctx, func(k keystore.Key) error { again = append(again, k); return nil }))
		require.Equal(t, keys, again)
		require.Equal(t, usageA, e.usage(a.ID))
		require.Equal(t, usageC, e.usage(c.ID))
		require.Equal(t, int64(2), e.rateRemaining(c.ID, 3))
		require.Equal(t, 1, e.pending())
		_, err = e.ks.Authenticate(ctx, secretA)
		require.NoError(t, err)
		_, err = e.ks.Authenticate(ctx, secretB)
		require.ErrorIs(t, err, keystore.ErrDisabled)
		_, err = e.ks.Admit(ctx, secretC, keystore.Request{Model: "llama"})
		require.ErrorIs(t, err, keystore.ErrModel)
		k, err := e.ks.Authenticate(ctx, "pk_live_x")
		require.NoError(t, err)
		require.Equal(t, legacyID, k.ID)
		require.Equal(t, int64(4), e.usage(legacyID).Used)
		e.reopen()
		require.Equal(t, 0, e.pending())
		require.Equal(t, int64(4), e.usage(legacyID).Used)
		require.Equal(t, int64(99), e.get(legacyID).LifetimeTokens)
	})
}

// TestCancelledContext asserts that every call given a cancelled context
// returns its error and changes nothing, and that an Admission whose
// Finish was cancelled can still be finished.
func TestCancelledContext(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("c", 10)
		a := e.admit(secret, keystore.Request{Reserve: 2})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		before := e.dump()
		_, _, err := e.ks.Create(cctx, keystore.Spec{TokenLimit: 1})
		require.ErrorIs(t, err, context.Canceled)
		_, err = e.ks.RecordUsage(cctx, k.ID, 1)
		require.ErrorIs(t, err, context.Canceled)
		_, err = e.ks.Authenticate(cctx, secret)
		require.ErrorIs(t, err, context.Canceled)
		_, _, err = e.ks.Check(cctx, secret)
		require.ErrorIs(t, err, context.Canceled)
		_, err = e.ks.Admit(cctx, secret, keystore.Request{Reserve: 1})
		require.ErrorIs(t, err, context.Canceled)
		_, err = e.ks.Get(cctx, k.ID)
		require.ErrorIs(t, err, context.Canceled)
		_, err = e.ks.Usage(cctx, k.ID)
		require.ErrorIs(t, err, context.Canceled)
		_, err = e.ks.Update(cctx, k.ID, func(s *keystore.Spec) error { s.Name = "renamed"; return nil })
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, e.ks.Disable(cctx, k.ID), context.Canceled)
		require.ErrorIs(t, e.ks.Delete(cctx, k.ID), context.Canceled)
		_, err = e.ks.Import(cctx, []keystore.Imported{{Secret: "x", TokenLimit: 1}})
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, e.ks.List(cctx, func(keystore.Key) error { return nil }), context.Canceled)
		_, err = a.Finish(cctx, 5)
		require.ErrorIs(t, err, context.Canceled)

		require.Equal(t, before, e.dump())
		require.Equal(t, oneUsage(wu(2, 10, 5*time.Hour, t0.Add(5*time.Hour)), 1), e.usage(k.ID))
		require.Equal(t, "c", e.get(k.ID).Name)
		u := e.finish(a, 5)
		require.Equal(t, int64(5), u.Used)
		require.Equal(t, 0, u.InFlight)
	})
}

// TestClosed asserts that the calls that change a key, and those that read
// its usage, fail with ratestore.ErrClosed once the database is closed.
func TestClosed(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("c", 10)
		a := e.admit(secret, keystore.Request{Reserve: 2})
		ks := e.ks
		e.close()
		_, _, err := ks.Create(ctx, keystore.Spec{TokenLimit: 1})
		require.ErrorIs(t, err, ratestore.ErrClosed)
		_, err = ks.RecordUsage(ctx, k.ID, 1)
		require.ErrorIs(t, err, ratestore.ErrClosed)
		_, _, err = ks.Check(ctx, secret)
		require.ErrorIs(t, err, ratestore.ErrClosed)
		_, err = ks.Admit(ctx, secret, keystore.Request{})
		require.ErrorIs(t, err, ratestore.ErrClosed)
		_, err = ks.Usage(ctx, k.ID)
		require.ErrorIs(t, err, ratestore.ErrClosed)
		require.ErrorIs(t, ks.Disable(ctx, k.ID), ratestore.ErrClosed)
		require.ErrorIs(t, ks.Delete(ctx, k.ID), ratestore.ErrClosed)
		_, err = a.Finish(ctx, 1)
		require.ErrorIs(t, err, ratestore.ErrClosed)
		e.openDB()
		e.openStore()
		require.Equal(t, oneUsage(wu(2, 10, 5*time.Hour, t0.Add(5*time.Hour)), 1), e.usage(k.ID),
			"the reservation and the slot of an admission never finished stay held")
		e.clock.Advance(keystore.DefaultLeaseTTL)
		require.Equal(t, 0, e.usage(k.ID).InFlight, "the slot is freed at the lease's end")
	})
}
