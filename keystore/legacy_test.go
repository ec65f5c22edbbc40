package keystore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
)

func legacyKeys() []keystore.Imported {
	return []keystore.Imported{
		{
			Secret: "pk_live_aaaaaaaaaaaaaaaaaaaa", Name: "team-a", Model: "glm-4.7", TokenLimit: 100_000,
			ExpiresAt: t0.Add(365 * 24 * time.Hour), CreatedAt: t0.Add(-24 * time.Hour), LastUsed: t0.Add(-time.Hour),
			LifetimeTokens: 1_234_567,
			Windows: []keystore.LegacyWindow{
				{Start: t0.Add(-6 * time.Hour), Tokens: 500},             // expired
				{Start: t0.Add(-time.Hour - 2*time.Minute), Tokens: 300}, // live
			},
		},
		{Secret: "pk_live_bbbbbbbbbbbbbbbbbbbb", Name: "expired", TokenLimit: 10, ExpiresAt: t0.Add(-time.Hour)},
		{Secret: "pk_live_cccccccccccccccccccc", Name: "idle", TokenLimit: 10,
			Windows: []keystore.LegacyWindow{{Start: t0, Tokens: 0}}},
	}
}

// TestImport asserts what Import makes of legacy keys (one window of the
// usage window with their limit, their dates and lifetime kept, windows of
// 0 tokens dropped, expired keys kept), that importing them again, or a
// secret that has a key already, changes nothing, and that a secret twice
// in one import makes one key.
func TestImport(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		keys := legacyKeys()
		res, err := e.ks.Import(ctx, keys)
		require.NoError(t, err)
		require.Equal(t, 3, res.Imported)
		require.Equal(t, 2, res.Windows)
		require.Empty(t, res.Skipped)
		require.Len(t, res.IDs, 3)
		require.Equal(t, 1, e.pending(), "a window of 0 tokens is not stored")

		a, err := e.ks.Authenticate(ctx, keys[0].Secret)
		require.NoError(t, err)
		require.Equal(t, keystore.Key{ID: res.IDs[0], Name: "team-a", Model: "glm-4.7", Policy: onePolicy(100_000),
			TokenLimit: 100_000, ExpiresAt: keys[0].ExpiresAt, CreatedAt: keys[0].CreatedAt, LastUsed: keys[0].LastUsed,
			LifetimeTokens: 1_234_567}, a)
		require.Equal(t, 1, e.pending(), "Authenticate does not migrate")
		b, err := e.ks.Authenticate(ctx, keys[1].Secret)
		require.ErrorIs(t, err, keystore.ErrExpired)
		require.Equal(t, res.IDs[1], b.ID)
		c := e.get(res.IDs[2])
		require.Equal(t, keystore.Key{ID: res.IDs[2], Name: "idle", Policy: onePolicy(10), TokenLimit: 10}, c)

		// The same keys again change nothing.
		before := e.dump()
		again, err := e.ks.Import(ctx, keys)
		require.NoError(t, err)
		require.Equal(t, 0, again.Imported)
		require.Equal(t, res.IDs, again.IDs)
		require.Len(t, again.Skipped, 3)
		for i, s := range again.Skipped {
			require.Equal(t, i, s.Index)
			require.Equal(t, keys[i].Name, s.Name)
			require.Equal(t, res.IDs[i], s.ID)
			require.NotContains(t, fmt.Sprint(s), keys[i].Secret)
		}
		require.Equal(t, before, e.dump())

		// A secret twice in one import: the first entry imports.
		dup, err := e.ks.Import(ctx, []keystore.Imported{
			{Secret: "pk_live_dup", Name: "first", TokenLimit: 1},
			{Secret: "pk_live_dup", Name: "second", TokenLimit: 2},
		})
		require.NoError(t, err)
		require.Equal(t, 1, dup.Imported)
		require.Equal(t, dup.IDs[0], dup.IDs[1])
		require.Equal(t, []keystore.ImportSkip{{Index: 1, Name: "second", ID: dup.IDs[0], Reason: "the same secret as keys[0]"}}, dup.Skipped)
		require.Equal(t, "first", e.get(dup.IDs[0]).Name)

		// A secret that a created key has is skipped too.
		k, secret := e.create("created", 5)
		mine, err := e.ks.Import(ctx, []keystore.Imported{{Secret: secret, Name: "clash", TokenLimit: 7}})
		require.NoError(t, err)
		require.Equal(t, 0, mine.Imported)
		require.Equal(t, []string{k.ID}, mine.IDs)
		require.Equal(t, int64(5), e.get(k.ID).TokenLimit)

		empty, err := e.ks.Import(ctx, nil)
		require.NoError(t, err)
		require.Zero(t, empty.Imported)

		e.reopen()
		got, err := e.ks.Authenticate(ctx, keys[0].Secret)
		require.NoError(t, err)
		require.Equal(t, a, got)
	})
}

// TestImportUsageWindow asserts that imported keys get one window of
// Options.UsageWindow, and that their legacy usage is merged into it.
func TestImportUsageWindow(t *testing.T) {
	forEachOpts(t, keystore.Options{UsageWindow: time.Hour, UsageBucket: time.Minute}, func(t *testing.T, e *env) {
		res, err := e.ks.Import(ctx, []keystore.Imported{{Secret: "pk_live_h", TokenLimit: 50, Windows: []keystore.LegacyWindow{
			{Start: t0.Add(-2 * time.Hour), Tokens: 100}, // expired in a 1-hour window
			{Start: t0.Add(-30 * time.Minute), Tokens: 20},
		}}})
		require.NoError(t, err)
		k := e.get(res.IDs[0])
		require.Equal(t, keystore.Policy{Windows: []keystore.Window{{Limit: 50, Window: time.Hour, Bucket: time.Minute}}}, k.Policy)
		u := e.usage(k.ID)
		require.Equal(t, int64(20), u.Used)
		require.Equal(t, 30*time.Minute, u.ResetAfter)
	})
}

// TestImportInvalid asserts that one bad entry refuses the whole import
// with ErrInvalid, naming the entry by index and never by secret, and that
// nothing is stored.
func TestImportInvalid(t *testing.T) {
	const secret = "pk_live_topsecret"
	bad := []func(k *keystore.Imported){
		func(k *keystore.Imported) { k.Secret = "" },
		func(k *keystore.Imported) { k.TokenLimit = 0 },
		func(k *keystore.Imported) { k.TokenLimit = -3 },
		func(k *keystore.Imported) { k.Name = "a\tb" },
		func(k *keystore.Imported) { k.Model = strings.Repeat("m", keystore.MaxName+1) },
		func(k *keystore.Imported) { k.LifetimeTokens = -1 },
		func(k *keystore.Imported) { k.CreatedAt = time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(k *keystore.Imported) { k.LastUsed = time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(k *keystore.Imported) { k.ExpiresAt = time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(k *keystore.Imported) { k.Windows = []keystore.LegacyWindow{{Start: t0, Tokens: -1}} },
		func(k *keystore.Imported) { k.Windows = []keystore.LegacyWindow{{Tokens: 1}} },
		func(k *keystore.Imported) {
			k.Windows = []keystore.LegacyWindow{{Start: t0, Tokens: 1 << 62}, {Start: t0, Tokens: 1 << 62}, {Start: t0, Tokens: 1 << 62}}
		},
	}
	forEach(t, func(t *testing.T, e *env) {
		for i, f := range bad {
			k := keystore.Imported{Secret: secret, Name: "victim", TokenLimit: 5}
			f(&k)
			_, err := e.ks.Import(ctx, []keystore.Imported{{Secret: "pk_live_fine", TokenLimit: 1}, k})
			require.ErrorIs(t, err, keystore.ErrInvalid, "case %d", i)
			require.ErrorContains(t, err, "keys[1]")
			require.NotContains(t, err.Error(), secret)
			require.Empty(t, e.dump(), "case %d: all or nothing", i)
			_, err = e.ks.Authenticate(ctx, "pk_live_fine")
			require.ErrorIs(t, err, keystore.ErrNotFound, "case %d", i)
		}
	})
}

// touch is one way to touch a key for the first time after its import.
type touch struct {
	name   string
	tokens int64 // that the touch records
	f      func(e *env, id, secret string) error
}

var touches = []touch{
	{"Check", 0, func(e *env, _, secret string) error { _, _, err := e.ks.Check(ctx, secret); return err }},
	{"RecordUsage", 10, func(e *env, id, _ string) error { _, err := e.ks.RecordUsage(ctx, id, 10); return err }},
	{"Admit", 10, func(e *env, _, secret string) error {
		a, err := e.ks.Admit(ctx, secret, keystore.Request{Reserve: 4})
		if err != nil {
			return err
		}
		_, err = a.Finish(ctx, 10)
		return err
	}},
	{"Get", 0, func(e *env, id, _ string) error { _, err := e.ks.Get(ctx, id); return err }},
	{"Usage", 0, func(e *env, id, _ string) error { _, err := e.ks.Usage(ctx, id); return err }},
	{"MigrateLegacy", 0, func(e *env, id, _ string) error { _, err := e.ks.MigrateLegacy(ctx, id); return err }},
	{"Disable", 0, func(e *env, id, _ string) error { return e.ks.Disable(ctx, id) }},
	{"Update", 0, func(e *env, id, _ string) error {
		_, err := e.ks.Update(ctx, id, func(s *keystore.Spec) error { s.Name += "!"; return nil })
		return err
	}},
}

// TestLazyMigration imports keys with legacy windows, moves the clock,
// touches each key one way, and checks the window it ends up with: every
// legacy window's tokens land in the bucket of its start and expire with
// it, nothing is lost, nothing is counted twice (not by a second touch,
// not after a reopen), and LifetimeTokens is the imported total.
func TestLazyMigration(t *testing.T) {
	w := func(d time.Duration, tokens int64) keystore.LegacyWindow {
		return keystore.LegacyWindow{Start: t0.Add(d), Tokens: tokens}
	}
	cases := []struct {
		name    string
		windows []keystore.LegacyWindow
		later   time.Duration // between Import and the first touch
		used    int64         // at the first touch
		reset   time.Duration
	}{
		{"live", []keystore.LegacyWindow{w(-time.Hour-2*time.Minute, 300)}, 0, 300, 3*time.Hour + 55*time.Minute},
		{"expired", []keystore.LegacyWindow{w(-6*time.Hour, 500)}, 0, 0, 0},
		{"expired at exactly 5h", []keystore.LegacyWindow{w(-5*time.Hour, 500)}, 0, 0, 0},
		{"last bucket", []keystore.LegacyWindow{w(-5*time.Hour+5*time.Minute, 7)}, 0, 7, 5 * time.Minute},
		{"expired by migration time", []keystore.LegacyWindow{w(-time.Hour, 300)}, 4 * time.Hour, 0, 0},
		{"live at migration time", []keystore.LegacyWindow{w(-time.Hour, 300)}, 3 * time.Hour, 300, time.Hour},
		{"future", []keystore.LegacyWindow{w(time.Hour, 9)}, 0, 9, 5 * time.Hour},
		{"mixed, unsorted", []keystore.LegacyWindow{
			w(-2*time.Hour, 20), w(-10*time.Hour, 1000), w(-2*time.Hour+time.Minute, 5),
			w(-30*time.Minute, 1), w(-5*time.Hour-time.Second, 50), w(-4*time.Hour, 0),
		}, 0, 26, 4*time.Hour + 30*time.Minute},
	}
	forEach(t, func(t *testing.T, e *env) {
		for ci, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e.t = t
				e.clock.Set(t0)
				keys := make([]keystore.Imported, len(touches))
				for i, touch := range touches {
					keys[i] = keystore.Imported{Secret: fmt.Sprintf("pk_live_%d_%s", ci, touch.name), Name: c.name,
						TokenLimit: 1000, LifetimeTokens: 5000, Windows: c.windows}
				}
				res, err := e.ks.Import(ctx, keys)
				require.NoError(t, err)
				require.Equal(t, len(touches), e.pending())
				e.clock.Advance(c.later)

				for i, touch := range touches {
					id, secret := res.IDs[i], keys[i].Secret
					require.NoError(t, touch.f(e, id, secret), touch.name)
					require.NotContains(t, e.dump(), "l/"+id, touch.name)
					u := e.usage(id)
					require.Equal(t, c.used+touch.tokens, u.Used, touch.name)
					if touch.tokens == 0 {
						require.Equal(t, c.reset, u.ResetAfter, touch.name)
					}
					require.Equal(t, 5000+touch.tokens, e.get(id).LifetimeTokens, "%s: never recomputed from windows", touch.name)

					// Exactly once.
					ok, err := e.ks.MigrateLegacy(ctx, id)
					require.NoError(t, err)
					require.False(t, ok, touch.name)
					require.NoError(t, touch.f(e, id, secret), touch.name)
					require.Equal(t, c.used+2*touch.tokens, e.usage(id).Used, touch.name)
				}
				require.Equal(t, 0, e.pending())
				e.reopen()
				require.Equal(t, 0, e.pending())
				for i, touch := range touches {
					require.Equal(t, c.used+2*touch.tokens, e.usage(res.IDs[i]).Used, touch.name)
					k, err := e.ks.Authenticate(ctx, keys[i].Secret)
					if touch.name == "Disable" {
						require.ErrorIs(t, err, keystore.ErrDisabled)
					} else {
						require.NoError(t, err, "the old secret keeps working")
					}
					require.Equal(t, res.IDs[i], k.ID)
				}
			})
		}
	})
}

// TestLegacyConcurrentRecordUsage asserts that 256 goroutines recording
// usage on a key whose legacy usage is pending, some checking it, merge
// the legacy windows exactly once and count every token.
func TestLegacyConcurrentRecordUsage(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		const secret = "pk_live_hot"
		res, err := e.ks.Import(ctx, []keystore.Imported{{Secret: secret, TokenLimit: 1_000_000, LifetimeTokens: 1000,
			Windows: []keystore.LegacyWindow{{Start: t0.Add(-time.Hour), Tokens: 300}, {Start: t0.Add(-2 * time.Hour), Tokens: 200}}}})
		require.NoError(t, err)
		id := res.IDs[0]
		const goroutines, tokens = 256, 7
		require.NoError(t, parallel(goroutines, func(i int) error {
			switch i % 4 {
			case 0:
				if _, _, err := e.ks.Check(ctx, secret); err != nil {
					return err
				}
			case 1:
				a, err := e.ks.Admit(ctx, secret, keystore.Request{Reserve: 3})
				if err != nil {
					return err
				}
				_, err = a.Finish(ctx, tokens)
				return err
			}
			_, err := e.ks.RecordUsage(ctx, id, tokens)
			return err
		}))
		require.Equal(t, int64(500+goroutines*tokens), e.usage(id).Used)
		require.Equal(t, int64(1000+goroutines*tokens), e.get(id).LifetimeTokens)
		require.Equal(t, 0, e.pending())
		e.reopen()
		require.Equal(t, int64(500+goroutines*tokens), e.usage(id).Used)
	})
}

// TestMigrateAllLegacy asserts that LegacyIDs lists exactly the keys with
// legacy usage pending, that MigrateLegacy may be called from inside it,
// and that it reports whether there was anything to migrate.
func TestMigrateAllLegacy(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		var keys []keystore.Imported
		for i := range 20 {
			keys = append(keys, keystore.Imported{Secret: fmt.Sprintf("pk_live_%02d", i), TokenLimit: 100,
				Windows: []keystore.LegacyWindow{{Start: t0.Add(-time.Duration(i) * time.Minute), Tokens: int64(i + 1)}}})
		}
		keys = append(keys, keystore.Imported{Secret: "pk_live_none", TokenLimit: 100})
		res, err := e.ks.Import(ctx, keys)
		require.NoError(t, err)
		require.Equal(t, 20, e.pending())
		e.reopen()
		require.Equal(t, 20, e.pending(), "pending survives a reopen")

		var ids []string
		require.NoError(t, e.ks.LegacyIDs(ctx, func(id string) error {
			ids = append(ids, id)
			ok, err := e.ks.MigrateLegacy(ctx, id) // writes from inside the scan
			if err == nil && !ok {
				err = fmt.Errorf("%s: nothing migrated", id)
			}
			return err
		}))
		require.Len(t, ids, 20)
		require.NotContains(t, ids, res.IDs[20])
		require.Equal(t, 0, e.pending())
		for i := range 20 {
			require.Equal(t, int64(i+1), e.usage(res.IDs[i]).Used)
		}
		ok, err := e.ks.MigrateLegacy(ctx, res.IDs[20])
		require.NoError(t, err)
		require.False(t, ok)
		_, err = e.ks.MigrateLegacy(ctx, "key_0000000000000000")
		require.ErrorIs(t, err, keystore.ErrNotFound)
		require.Empty(t, onlyPrefix(e.dump(), "l/"))
		e.reopen()
		require.Equal(t, 0, e.pending())
		for i := range 20 {
			require.Equal(t, int64(i+1), e.usage(res.IDs[i]).Used)
		}
	})
}

// TestCorruptLegacy asserts that a damaged legacy record makes every call
// that would merge it fail with ErrCorrupt naming the key (Authenticate,
// which does not merge, still works), and that Delete removes it.
func TestCorruptLegacy(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		for _, v := range [][]byte{nil, []byte("garbage"), {1, 0}, {2, 1, 0, 1}, {1, 1, 0, 0}, {1, 1, 0, 1, 0}} {
			const secret = "pk_live_c"
			res, err := e.ks.Import(ctx, []keystore.Imported{{Secret: secret, TokenLimit: 10,
				Windows: []keystore.LegacyWindow{{Start: t0, Tokens: 1}}}})
			require.NoError(t, err)
			id := res.IDs[0]
			e.rawPut("l/"+id, v) // nil: deleted

			_, _, err = e.ks.Check(ctx, secret)
			require.ErrorIs(t, err, keystore.ErrCorrupt, "%q", v)
			require.ErrorContains(t, err, id)
			_, err = e.ks.MigrateLegacy(ctx, id)
			require.ErrorIs(t, err, keystore.ErrCorrupt)
			_, err = e.ks.RecordUsage(ctx, id, 1)
			require.ErrorIs(t, err, keystore.ErrCorrupt)
			_, err = e.ks.Usage(ctx, id)
			require.ErrorIs(t, err, keystore.ErrCorrupt)
			a, err := e.ks.Admit(ctx, secret, keystore.Request{})
			require.ErrorIs(t, err, keystore.ErrCorrupt)
			require.Nil(t, a)
			_, err = e.ks.Authenticate(ctx, secret) // does not read legacy usage
			require.NoError(t, err)
			require.Equal(t, 1, e.pending())

			require.NoError(t, e.ks.Delete(ctx, id))
			require.Empty(t, e.dump(), "Delete removes the legacy record too")
			require.Equal(t, 0, e.pending())
		}
	})
}

// TestImportAfterDelete asserts that a deleted legacy key can be imported
// again: a new key, with its legacy usage, and nothing left of the old.
func TestImportAfterDelete(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		keys := []keystore.Imported{{Secret: "pk_live_again", Name: "again", TokenLimit: 100, LifetimeTokens: 9,
			Windows: []keystore.LegacyWindow{{Start: t0.Add(-time.Hour), Tokens: 30}}}}
		first, err := e.ks.Import(ctx, keys)
		require.NoError(t, err)
		e.record(first.IDs[0], 5)
		require.NoError(t, e.ks.Delete(ctx, first.IDs[0]))
		require.Empty(t, e.dump())

		second, err := e.ks.Import(ctx, keys)
		require.NoError(t, err)
		require.Equal(t, 1, second.Imported)
		require.NotEqual(t, first.IDs[0], second.IDs[0])
		k, err := e.ks.Authenticate(ctx, "pk_live_again")
		require.NoError(t, err)
		require.Equal(t, second.IDs[0], k.ID)
		require.Equal(t, int64(30), e.usage(k.ID).Used)
		require.Equal(t, int64(9), e.get(k.ID).LifetimeTokens)
	})
}

// TestConcurrentImport asserts that the same keys imported from many
// goroutines at once are created once: one import creates each, every
// other skips it, and all name the same ids.
func TestConcurrentImport(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		var keys []keystore.Imported
		for i := range 8 {
			keys = append(keys, keystore.Imported{Secret: fmt.Sprintf("pk_live_c%d", i), TokenLimit: 10,
				Windows: []keystore.LegacyWindow{{Start: t0, Tokens: int64(i + 1)}}})
		}
		const goroutines = 16
		results := make([]keystore.ImportResult, goroutines)
		require.NoError(t, parallel(goroutines, func(i int) error {
			var err error
			results[i], err = e.ks.Import(ctx, keys)
			return err
		}))
		imported := 0
		for _, r := range results {
			imported += r.Imported
			require.Equal(t, results[0].IDs, r.IDs)
			require.Len(t, r.Skipped, len(keys)-r.Imported)
		}
		require.Equal(t, len(keys), imported)
		require.Len(t, onlyPrefix(e.dump(), "k/"), len(keys))
		for i, id := range results[0].IDs {
			require.Equal(t, int64(i+1), e.usage(id).Used)
		}
	})
}
