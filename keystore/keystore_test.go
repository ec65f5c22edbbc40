package keystore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

func TestNewOptions(t *testing.T) {
	s, err := openBackend("bolt", t.TempDir()+"/k.db")
	require.NoError(t, err)
	defer s.Close()
	for _, o := range []keystore.Options{
		{Window: time.Hour, Bucket: 7 * time.Minute},
		{Window: -time.Hour},
		{Bucket: -time.Minute},
		{Window: 7 * time.Minute}, // the default 5-minute bucket does not divide it
		{Window: time.Hour, Bucket: time.Millisecond},
	} {
		_, err := keystore.New(s, o)
		require.ErrorIs(t, err, keystore.ErrInvalid, "%+v", o)
	}
	_, err = keystore.New(nil, keystore.Options{})
	require.ErrorIs(t, err, keystore.ErrInvalid)
	ks, err := keystore.New(s, keystore.Options{}) // system clock, storage Sync
	require.NoError(t, err)
	k, secret, err := ks.Create(ctx, keystore.Spec{TokenLimit: 1})
	require.NoError(t, err)
	got, err := ks.Authenticate(ctx, secret)
	require.NoError(t, err)
	require.Equal(t, k, got)
}

func TestCreateAuthenticate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		spec := keystore.Spec{Name: "team-a ✓", Model: "glm-4.7", TokenLimit: 100_000, ExpiresAt: t0.Add(24 * time.Hour)}
		k, secret, err := e.ks.Create(ctx, spec)
		require.NoError(t, err)
		require.Regexp(t, regexp.MustCompile(`^key_[0-9a-f]{16}$`), k.ID)
		require.Regexp(t, regexp.MustCompile(`^rsk_[A-Za-z0-9_-]{43}$`), secret)
		require.Equal(t, keystore.Key{ID: k.ID, Name: spec.Name, Model: spec.Model, TokenLimit: spec.TokenLimit,
			ExpiresAt: spec.ExpiresAt, CreatedAt: t0}, k)
		require.Equal(t, int64(1), e.durable.Load())

		got, err := e.ks.Authenticate(ctx, secret)
		require.NoError(t, err)
		require.Equal(t, k, got)
		require.Equal(t, k, e.get(k.ID))

		k2, secret2 := e.create("other", 5)
		require.NotEqual(t, k.ID, k2.ID)
		require.NotEqual(t, secret, secret2)
		got, err = e.ks.Authenticate(ctx, secret2)
		require.NoError(t, err)
		require.Equal(t, k2, got)

		for _, bad := range []string{"", "rsk_", secret[:len(secret)-1], secret + "x", strings.ToUpper(secret)} {
			got, err := e.ks.Authenticate(ctx, bad)
			require.ErrorIs(t, err, keystore.ErrNotFound)
			require.Zero(t, got)
			_, _, err = e.ks.Check(ctx, bad)
			require.ErrorIs(t, err, keystore.ErrNotFound)
		}
		for _, id := range []string{"", "key_", "key_0123456789abcdeg", "KEY_0123456789abcdef", "key_0123456789ABCDEF", "key_0123456789abcdef0", "../k/x"} {
			_, err := e.ks.Get(ctx, id)
			require.ErrorIs(t, err, keystore.ErrNotFound, id)
		}
		_, err = e.ks.Get(ctx, "key_0123456789abcdef")
		require.ErrorIs(t, err, keystore.ErrNotFound)
		require.Contains(t, err.Error(), "key_0123456789abcdef")
		require.Equal(t, int64(2), e.durable.Load(), "reads do not wait for durability")
	})
}

func TestCreateInvalid(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, spec := range []keystore.Spec{
			{TokenLimit: 0},
			{TokenLimit: -1},
			{TokenLimit: 1, Name: strings.Repeat("n", keystore.MaxName+1)},
			{TokenLimit: 1, Name: "a\nb"},
			{TokenLimit: 1, Name: "a\x00b"},
			{TokenLimit: 1, Name: "\xff"},
			{TokenLimit: 1, Model: "m\u0085"},
			{TokenLimit: 1, ExpiresAt: t0},
			{TokenLimit: 1, ExpiresAt: t0.Add(-time.Nanosecond)},
			{TokenLimit: 1, ExpiresAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)},
		} {
			_, secret, err := e.ks.Create(ctx, spec)
			require.ErrorIs(t, err, keystore.ErrInvalid, "%+v", spec)
			require.Empty(t, secret)
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
	forEachBackend(t, func(t *testing.T, e *env) {
		k, secret := e.create("w", 1000)
		var lifetime int64
		for i, s := range steps {
			e.clock.Advance(s.advance)
			var res strategies.Result
			if s.record >= 0 {
				var err error
				res, err = e.ks.RecordUsage(ctx, k.ID, s.record)
				require.NoError(t, err)
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

func TestUsage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		k, _ := e.create("u", 100)
		require.Equal(t, keystore.Usage{Limit: 100, Remaining: 100}, e.usage(k.ID))

		e.clock.Advance(2 * time.Minute) // bucket t0
		_, err := e.ks.RecordUsage(ctx, k.ID, 30)
		require.NoError(t, err)
		e.clock.Advance(5 * time.Minute) // bucket t0+5m
		_, err = e.ks.RecordUsage(ctx, k.ID, 90)
		require.NoError(t, err)
		e.clock.Advance(3 * time.Minute) // t0+10m
		require.Equal(t, keystore.Usage{Used: 120, Limit: 100, Remaining: 0,
			ResetAfter: 5*time.Hour - 5*time.Minute, WindowEnd: t0.Add(5 * time.Hour)}, e.usage(k.ID))

		e.clock.Set(t0.Add(5 * time.Hour)) // the t0 bucket has gone
		require.Equal(t, keystore.Usage{Used: 90, Limit: 100, Remaining: 10,
			ResetAfter: 5 * time.Minute, WindowEnd: t0.Add(5*time.Hour + 5*time.Minute)}, e.usage(k.ID))
		e.clock.Advance(5 * time.Minute)
		require.Equal(t, keystore.Usage{Limit: 100, Remaining: 100}, e.usage(k.ID))

		_, err = e.ks.Usage(ctx, "key_0000000000000000")
		require.ErrorIs(t, err, keystore.ErrNotFound)
	})
}

func TestRecordUsage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		k, secret := e.create("r", 10)
		_, err := e.ks.RecordUsage(ctx, k.ID, -1)
		require.ErrorIs(t, err, keystore.ErrInvalid)
		_, err = e.ks.RecordUsage(ctx, "key_0000000000000000", 1)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		_, err = e.ks.RecordUsage(ctx, "nope", 1)
		require.ErrorIs(t, err, keystore.ErrNotFound)

		e.clock.Advance(time.Minute)
		res, err := e.ks.RecordUsage(ctx, k.ID, 0) // used, but no tokens
		require.NoError(t, err)
		require.Equal(t, strategies.Result{Allowed: true, Limit: 10, Remaining: 10}, res)
		require.Equal(t, t0.Add(time.Minute), e.get(k.ID).LastUsed)

		// Far past the limit, and on a disabled key: the tokens were spent.
		res, err = e.ks.RecordUsage(ctx, k.ID, 25)
		require.NoError(t, err)
		require.False(t, res.Allowed)
		require.NoError(t, e.ks.Disable(ctx, k.ID))
		_, err = e.ks.RecordUsage(ctx, k.ID, 5)
		require.NoError(t, err)
		require.Equal(t, int64(30), e.usage(k.ID).Used)
		require.NoError(t, e.ks.Enable(ctx, k.ID))
		_, res, err = e.ks.Check(ctx, secret)
		require.NoError(t, err)
		require.False(t, res.Allowed)
		require.Equal(t, 5*time.Hour-time.Minute, res.RetryAfter)

		// A clock gone backwards keeps the latest LastUsed.
		e.clock.Advance(-time.Hour)
		_, err = e.ks.RecordUsage(ctx, k.ID, 1)
		require.NoError(t, err)
		k = e.get(k.ID)
		require.Equal(t, t0.Add(time.Minute), k.LastUsed)
		require.Equal(t, int64(31), k.LifetimeTokens)
	})
}

func TestLifetimeSaturates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		k, _ := e.create("s", 1)
		const big = int64(1) << 62
		for range 3 {
			_, err := e.ks.RecordUsage(ctx, k.ID, big)
			require.NoError(t, err)
		}
		require.Equal(t, int64(1<<63-1), e.get(k.ID).LifetimeTokens)
		require.Equal(t, int64(1<<63-1), e.usage(k.ID).Used)
	})
}

func TestExpiryDisableEnable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		k, secret, err := e.ks.Create(ctx, keystore.Spec{Name: "x", TokenLimit: 10, ExpiresAt: t0.Add(time.Hour)})
		require.NoError(t, err)
		auth := func() error {
			t.Helper()
			got, err := e.ks.Authenticate(ctx, secret)
			key, _, cerr := e.ks.Check(ctx, secret)
			require.Equal(t, errors.Is(err, keystore.ErrExpired), errors.Is(cerr, keystore.ErrExpired))
			require.Equal(t, errors.Is(err, keystore.ErrDisabled), errors.Is(cerr, keystore.ErrDisabled))
			if err != nil {
				require.Equal(t, k.ID, got.ID, "refusals come with the key")
				require.Equal(t, k.ID, key.ID)
			}
			return err
		}
		e.clock.Set(t0.Add(time.Hour - 1))
		require.NoError(t, auth())
		e.clock.Set(t0.Add(time.Hour)) // expired from ExpiresAt on
		require.ErrorIs(t, auth(), keystore.ErrExpired)
		require.ErrorContains(t, auth(), k.ID)

		require.NoError(t, e.ks.Disable(ctx, k.ID))
		require.True(t, e.get(k.ID).Disabled)
		require.ErrorIs(t, auth(), keystore.ErrDisabled, "disabled is checked before expired")
		require.NoError(t, e.ks.SetExpiry(ctx, k.ID, time.Time{}))
		require.True(t, e.get(k.ID).ExpiresAt.IsZero())
		require.ErrorIs(t, auth(), keystore.ErrDisabled)
		require.NoError(t, e.ks.Disable(ctx, k.ID)) // again: a no-op
		require.NoError(t, e.ks.Enable(ctx, k.ID))
		require.False(t, e.get(k.ID).Disabled)
		require.NoError(t, auth())

		require.NoError(t, e.ks.SetExpiry(ctx, k.ID, t0)) // in the past: expires at once
		require.ErrorIs(t, auth(), keystore.ErrExpired)
		require.NoError(t, e.ks.SetExpiry(ctx, k.ID, t0.Add(2*time.Hour)))
		require.NoError(t, auth())
		require.Equal(t, t0.Add(2*time.Hour), e.get(k.ID).ExpiresAt)

		require.ErrorIs(t, e.ks.SetExpiry(ctx, k.ID, time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)), keystore.ErrInvalid)
		for _, f := range []func(string) error{
			func(id string) error { return e.ks.Disable(ctx, id) },
			func(id string) error { return e.ks.Enable(ctx, id) },
			func(id string) error { return e.ks.SetExpiry(ctx, id, t0) },
			func(id string) error { return e.ks.SetTokenLimit(ctx, id, 1) },
			func(id string) error { return e.ks.Delete(ctx, id) },
		} {
			require.ErrorIs(t, f("key_0000000000000000"), keystore.ErrNotFound)
			require.ErrorIs(t, f("bad"), keystore.ErrNotFound)
		}
	})
}

func TestSetTokenLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		k, secret := e.create("l", 1000)
		_, err := e.ks.RecordUsage(ctx, k.ID, 500)
		require.NoError(t, err)
		require.NoError(t, e.ks.SetTokenLimit(ctx, k.ID, 400))
		require.Equal(t, int64(400), e.get(k.ID).TokenLimit)
		_, res, err := e.ks.Check(ctx, secret)
		require.NoError(t, err)
		require.Equal(t, strategies.Result{Allowed: false, Limit: 400, Remaining: 0,
			ResetAfter: 5 * time.Hour, RetryAfter: 5 * time.Hour}, res)
		require.NoError(t, e.ks.SetTokenLimit(ctx, k.ID, 500))
		_, res, err = e.ks.Check(ctx, secret)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		for _, bad := range []int64{0, -5} {
			require.ErrorIs(t, e.ks.SetTokenLimit(ctx, k.ID, bad), keystore.ErrInvalid)
		}
		require.Equal(t, int64(500), e.get(k.ID).TokenLimit)
	})
}

func TestDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		k, secret := e.create("d", 10)
		other, otherSecret := e.create("keep", 10)
		_, err := e.ks.RecordUsage(ctx, k.ID, 3)
		require.NoError(t, err)
		require.NoError(t, e.ks.Delete(ctx, k.ID))

		_, err = e.ks.Get(ctx, k.ID)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		_, err = e.ks.Authenticate(ctx, secret)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		_, _, err = e.ks.Check(ctx, secret)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		require.ErrorIs(t, e.ks.Delete(ctx, k.ID), keystore.ErrNotFound)

		h := sha256.Sum256([]byte(otherSecret))
		require.Equal(t, map[string]string{"h/" + string(h[:]): other.ID}, onlyPrefix(e.dump(), "h/"))
		require.Len(t, onlyPrefix(e.dump(), "k/"), 1)
		_, err = e.ks.Authenticate(ctx, otherSecret)
		require.NoError(t, err)
	})
}

func onlyPrefix(m map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

func TestList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
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
	})
}

func TestSecretsNeverStored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		var secrets []string
		for i := range 5 {
			k, secret, err := e.ks.Create(ctx, keystore.Spec{Name: "k", TokenLimit: int64(i + 1), ExpiresAt: t0.Add(time.Hour)})
			require.NoError(t, err)
			_, err = e.ks.RecordUsage(ctx, k.ID, 7)
			require.NoError(t, err)
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
			h := sha256.Sum256([]byte(secret))
			found := false
			for k, v := range dump {
				for _, b := range []string{k, v} {
					require.NotContains(t, b, secret)
					require.NotContains(t, b, strings.TrimPrefix(secret, "rsk_"))
					found = found || strings.Contains(b, string(h[:]))
				}
			}
			require.True(t, found, "the hash is stored")
		}
		// Nor in the files, whatever the backend keeps beside its keys.
		require.NoError(t, e.base.Close())
		walkFiles(t, e.path, func(name string, data []byte) {
			for _, secret := range secrets {
				require.False(t, bytes.Contains(data, []byte(secret)), name)
			}
		})
		e.open()
	})
}

// walkFiles calls fn with the contents of every file of the database at
// path: the file or directory itself and its siblings (a log beside it).
func walkFiles(t *testing.T, path string, fn func(name string, data []byte)) {
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

func TestCorruptRecord(t *testing.T) {
	type mutation struct {
		name string
		f    func(v []byte) []byte
	}
	mutations := []mutation{
		{"empty", func([]byte) []byte { return []byte{} }},
		{"garbage", func([]byte) []byte { return []byte("not a record") }},
		{"version", func(v []byte) []byte { v[0] = 2; return v }},
		{"unknown flag", func(v []byte) []byte { v[1] |= 0x80; return v }},
		{"cut short", func(v []byte) []byte { return v[:len(v)-1] }},
		{"trailing byte", func(v []byte) []byte { return append(v, 0) }},
		{"bad window", func(v []byte) []byte { v[len(v)-1] = 'x'; return v }},
		{"zero limit", func(v []byte) []byte { v[2+32] = 0; return v }},
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, m := range mutations {
			t.Run(m.name, func(t *testing.T) {
				k, secret := e.create("c", 100)
				_, err := e.ks.RecordUsage(ctx, k.ID, 3) // a window, last in the record
				require.NoError(t, err)
				v, err := e.raw.Get([]byte("k/" + k.ID))
				require.NoError(t, err)
				e.put("k/"+k.ID, m.f(v))

				isCorrupt := func(err error) {
					t.Helper()
					require.ErrorIs(t, err, keystore.ErrCorrupt)
					require.ErrorIs(t, err, strategies.ErrCorrupt)
					require.ErrorContains(t, err, k.ID)
				}
				_, err = e.ks.Get(ctx, k.ID)
				isCorrupt(err)
				_, err = e.ks.Authenticate(ctx, secret)
				isCorrupt(err)
				_, _, err = e.ks.Check(ctx, secret)
				isCorrupt(err)
				_, err = e.ks.RecordUsage(ctx, k.ID, 1)
				isCorrupt(err)
				_, err = e.ks.Usage(ctx, k.ID)
				isCorrupt(err)
				isCorrupt(e.ks.Disable(ctx, k.ID))
				isCorrupt(e.ks.List(ctx, func(keystore.Key) error { return nil }))

				// Delete is the way out: it finds the index entry by a scan.
				require.NoError(t, e.ks.Delete(ctx, k.ID))
				_, err = e.ks.Authenticate(ctx, secret)
				require.ErrorIs(t, err, keystore.ErrNotFound)
				require.Empty(t, e.dump())
			})
		}
	})
}

func TestConcurrentRecordUsage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		k, secret := e.create("hot", 1_000_000)
		const goroutines, calls, tokens = 64, 4, 3
		require.NoError(t, parallel(goroutines, func(i int) error {
			for range calls {
				if _, err := e.ks.RecordUsage(ctx, k.ID, tokens); err != nil {
					return err
				}
				if _, _, err := e.ks.Check(ctx, secret); err != nil {
					return err
				}
			}
			return nil
		}))
		const total = goroutines * calls * tokens
		require.Equal(t, int64(total), e.usage(k.ID).Used)
		require.Equal(t, int64(total), e.get(k.ID).LifetimeTokens)
	})
}

func TestReopenPersists(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a, secretA, err := e.ks.Create(ctx, keystore.Spec{Name: "a", Model: "m", TokenLimit: 50, ExpiresAt: t0.Add(48 * time.Hour)})
		require.NoError(t, err)
		b, secretB := e.create("b", 20)
		e.clock.Advance(time.Minute)
		_, err = e.ks.RecordUsage(ctx, a.ID, 30)
		require.NoError(t, err)
		require.NoError(t, e.ks.Disable(ctx, b.ID))
		res, err := e.ks.Import(ctx, []keystore.Imported{{Secret: "pk_live_x", Name: "old", TokenLimit: 9,
			LifetimeTokens: 99, Windows: []keystore.LegacyWindow{{Start: t0.Add(-time.Hour), Tokens: 4}}}})
		require.NoError(t, err)
		legacyID := res.IDs[0]

		var keys []keystore.Key
		require.NoError(t, e.ks.List(ctx, func(k keystore.Key) error { keys = append(keys, k); return nil }))
		usage := e.usage(a.ID)

		e.reopen()
		var again []keystore.Key
		require.NoError(t, e.ks.List(ctx, func(k keystore.Key) error { again = append(again, k); return nil }))
		require.Equal(t, keys, again)
		require.Equal(t, usage, e.usage(a.ID))
		require.Equal(t, 1, e.pending())
		_, err = e.ks.Authenticate(ctx, secretA)
		require.NoError(t, err)
		_, err = e.ks.Authenticate(ctx, secretB)
		require.ErrorIs(t, err, keystore.ErrDisabled)
		k, err := e.ks.Authenticate(ctx, "pk_live_x")
		require.NoError(t, err)
		require.Equal(t, legacyID, k.ID)
		require.Equal(t, int64(4), e.usage(legacyID).Used)
		e.reopen()
		require.Equal(t, 0, e.pending())
		require.Equal(t, int64(4), e.usage(legacyID).Used)
	})
}

func TestDurable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		k, secret := e.create("d", 10)
		writes := []struct {
			name string
			f    func() error
		}{
			{"create", func() error { _, _, err := e.ks.Create(ctx, keystore.Spec{TokenLimit: 1}); return err }},
			{"record", func() error { _, err := e.ks.RecordUsage(ctx, k.ID, 1); return err }},
			{"disable", func() error { return e.ks.Disable(ctx, k.ID) }},
			{"enable", func() error { return e.ks.Enable(ctx, k.ID) }},
			{"limit", func() error { return e.ks.SetTokenLimit(ctx, k.ID, 11) }},
			{"expiry", func() error { return e.ks.SetExpiry(ctx, k.ID, t0.Add(time.Hour)) }},
			{"import", func() error {
				_, err := e.ks.Import(ctx, []keystore.Imported{{Secret: "s" + k.ID, TokenLimit: 1}})
				return err
			}},
		}
		reads := []func() error{
			func() error { _, err := e.ks.Get(ctx, k.ID); return err },
			func() error { _, err := e.ks.Authenticate(ctx, secret); return err },
			func() error { _, _, err := e.ks.Check(ctx, secret); return err },
			func() error { _, err := e.ks.Usage(ctx, k.ID); return err },
			func() error { return e.ks.List(ctx, func(keystore.Key) error { return nil }) },
			func() error { _, err := e.ks.PendingLegacy(ctx); return err },
			func() error { return e.ks.Disable(ctx, "key_0000000000000000") }, // nothing to change
		}
		for _, w := range writes {
			before := e.durable.Load()
			require.NoError(t, w.f(), w.name)
			require.Equal(t, before+1, e.durable.Load(), w.name)
		}
		before := e.durable.Load()
		for _, r := range reads {
			_ = r()
		}
		require.NoError(t, e.ks.Disable(ctx, k.ID))
		require.NoError(t, e.ks.Disable(ctx, k.ID)) // unchanged: nothing to wait for
		require.Equal(t, before+1, e.durable.Load())

		// Its error is returned; the change was committed all the same.
		failed := errors.New("fsync failed")
		e.failDur.Store(&failed)
		_, err := e.ks.RecordUsage(ctx, k.ID, 5)
		require.ErrorIs(t, err, failed)
		require.Equal(t, int64(6), e.usage(k.ID).Used)
		require.ErrorIs(t, e.ks.Enable(ctx, k.ID), failed)
		require.ErrorIs(t, e.ks.Delete(ctx, k.ID), failed)
		_, _, err = e.ks.Create(ctx, keystore.Spec{TokenLimit: 1})
		require.ErrorIs(t, err, failed)
		_, err = e.ks.Import(ctx, []keystore.Imported{{Secret: "another", TokenLimit: 1}})
		require.ErrorIs(t, err, failed)
	})
}

func TestCancelledContext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		k, secret := e.create("c", 10)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, _, err := e.ks.Create(cctx, keystore.Spec{TokenLimit: 1})
		require.ErrorIs(t, err, context.Canceled)
		_, err = e.ks.RecordUsage(cctx, k.ID, 1)
		require.ErrorIs(t, err, context.Canceled)
		_, _, err = e.ks.Check(cctx, secret)
		require.ErrorIs(t, err, context.Canceled)
		_, err = e.ks.Import(cctx, []keystore.Imported{{Secret: "x", TokenLimit: 1}})
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, e.ks.List(cctx, func(keystore.Key) error { return nil }), context.Canceled)
		require.Equal(t, int64(0), e.usage(k.ID).Used)
	})
}
