package migrate

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/storage/dbcopy"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportFixtures: the sample and valid fixtures imported at 11:05, then
// every key checked by its legacy secret. A window counts while its
// window_start is within 5 hours (to the 5-minute bucket that holds it);
// older ones count nothing; LifetimeTokens is total_lifetime_tokens; ci-bot
// has its 20001 tokens, not the 40002 of its rolling_window_cache.
func TestImportFixtures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backendtest.Backend) {
		clk := fakeclock.New(importNow)
		db := openDB(t, b, clk)
		rep, err := ImportLegacyFile(ctx, db, fixture("apikeys.sample.json"))
		require.NoError(t, err)
		assert.Equal(t, Report{Entries: 3, Keys: 3, Windows: 3, IgnoredCaches: 1,
			Notes: []Issue{
				{Index: 1, Name: "ci-bot", Field: "model", Reason: "missing: imported without a model"},
				{Index: 1, Name: "ci-bot", Field: "rolling_window_cache", Reason: "ignored: usage_windows is the source of truth"},
			}}, rep)
		rep, err = ImportLegacyFile(ctx, db, fixture("apikeys.valid.json"))
		require.NoError(t, err)
		assert.Equal(t, Report{Entries: 3, Keys: 3, Windows: 5}, rep)
		pending, err := Pending(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, 5, pending, "intern-sandbox has no windows")

		tests := []struct {
			name     string
			limit    int64
			used     int64 // windows within 5 hours of 11:05
			lifetime int64
			allowed  bool
		}{
			{"research-team", 100000, 61204, 2418733, true}, // 07:40:12.5 counts, 2026-01-17T21:03 does not
			{"ci-bot", 20000, 20001, 150020, false},         // past its limit by 1; the cache's 40002 is not there
			{"intern-sandbox", 5000, 0, 0, true},
			{"gateway-prod", 100000, 41250, 1834411, true}, // 09:30 counts, 04:10 does not
			{"batch-jobs", 250000, 180000, 512000, true},   // 11:00+01:00
			{"staging", 5000, 5000, 9800, true},            // exactly at its limit: allowed; 2026-01-17T20:00 does not count
		}
		for _, tt := range tests {
			k, res, err := keys(t, db).Check(ctx, fixtureSecrets[tt.name])
			require.NoError(t, err, tt.name)
			assert.Equal(t, tt.name, k.Name)
			assert.Equal(t, tt.limit, k.TokenLimit, tt.name)
			assert.Equal(t, tt.lifetime, k.LifetimeTokens, tt.name)
			assert.Equal(t, tt.allowed, res.Allowed, tt.name)
			assert.Equal(t, tt.limit, res.Limit, tt.name)
			assert.Equal(t, max(0, tt.limit-tt.used), res.Remaining, tt.name)
			u, err := keys(t, db).Usage(ctx, k.ID)
			require.NoError(t, err)
			assert.Equal(t, tt.used, u.Used, tt.name)
		}
		pending, err = Pending(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, 0, pending, "Check migrated every key")

		k, err := keys(t, db).Get(ctx, keyID(t, db, fixtureSecrets["research-team"]))
		require.NoError(t, err)
		assert.Equal(t, keystore.Key{ID: k.ID, Name: "research-team", Model: "glm-4.7", TokenLimit: 100000,
			Policy:    keystore.Policy{Windows: []keystore.Window{{Limit: 100000, Window: 5 * time.Hour, Bucket: 5 * time.Minute}}},
			ExpiresAt: ts("2027-06-30T23:59:59Z"), CreatedAt: ts("2026-01-05T09:14:22.318Z"),
			LastUsed: ts("2026-01-18T11:02:41.907Z"), LifetimeTokens: 2418733}, k)

		// research-team's window started at 07:40:12.5: the old check
		// counted it until 12:40:12.5, the 5-minute bucket until 12:40.
		clk.Set(ts("2026-01-18T12:39:59.999Z"))
		u, err := keys(t, db).Usage(ctx, k.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(61204), u.Used)
		assert.Equal(t, ts("2026-01-18T12:40:00Z"), u.WindowEnd)
		clk.Set(ts("2026-01-18T12:40:00Z"))
		u, err = keys(t, db).Usage(ctx, k.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(0), u.Used)
	})
}

// TestImportMigratesAtFirstTouch: a key untouched for hours is migrated at
// its first touch with the clock of then: windows expired by then count
// nothing, and the others count until they would have expired.
func TestImportMigratesAtFirstTouch(t *testing.T) {
	clk := fakeclock.New(importNow)
	db := openDB(t, backendtest.BoltSync, clk)
	importFixtures(t, db)
	clk.Set(ts("2026-01-18T14:32:00Z")) // gateway-prod's 09:30 window counts until 14:30
	k, res, err := keys(t, db).Check(ctx, fixtureSecrets["gateway-prod"])
	require.NoError(t, err)
	assert.Equal(t, int64(100000), res.Remaining)
	clk.Set(ts("2026-01-18T15:59:00Z")) // staging's 11:00 window counts until 16:00
	k2, res, err := keys(t, db).Check(ctx, fixtureSecrets["staging"])
	require.NoError(t, err)
	assert.Equal(t, int64(0), res.Remaining)
	require.NoError(t, MigrateAll(ctx, db, nil))
	for _, id := range []string{k.ID, k2.ID} {
		u, err := keys(t, db).Usage(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, map[string]int64{k.ID: 0, k2.ID: 5000}[id], u.Used)
	}
}

// TestImportTwice: importing a file again changes nothing, before and after
// its keys were touched: no key twice, no window counted twice.
func TestImportTwice(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backendtest.Backend) {
		db := openDB(t, b, fakeclock.New(importNow))
		importFixtures(t, db)
		before := dump(t, db)
		for round := range 2 {
			rep, err := ImportLegacyFile(ctx, db, fixture("apikeys.sample.json"))
			require.NoError(t, err)
			assert.Equal(t, 0, rep.Keys)
			assert.Equal(t, 0, rep.Windows)
			require.Len(t, rep.Skips, 3)
			for i, s := range rep.Skips {
				assert.Equal(t, i, s.Index)
				assert.Equal(t, []string{"research-team", "ci-bot", "intern-sandbox"}[i], s.Name)
				assert.Contains(t, s.Reason, "a key with this secret exists already (key_")
			}
			assert.Contains(t, rep.Summary(), "imported 0 keys with 0 usage windows from 3 entries; 3 skipped")
			for _, secret := range fixtureSecrets {
				assert.NotContains(t, reportTexts(t, rep, err), secret)
			}
			assert.Equal(t, before, dump(t, db), "round %d", round)

			// Touch every key (migrating them), then import again.
			for _, secret := range fixtureSecrets {
				_, _, err := keys(t, db).Check(ctx, secret)
				require.NoError(t, err)
			}
			before = dump(t, db)
		}
		k, res, err := keys(t, db).Check(ctx, fixtureSecrets["ci-bot"])
		require.NoError(t, err)
		assert.Equal(t, int64(150020), k.LifetimeTokens)
		assert.False(t, res.Allowed)
		u, err := keys(t, db).Usage(ctx, k.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(20001), u.Used)
	})
}

// TestImportSkipIndexes: skips name the entry of the file, whether the
// file repeats a key or the database has it.
func TestImportSkipIndexes(t *testing.T) {
	db := openDB(t, backendtest.BoltSync, fakeclock.New(importNow))
	other := func(n int) string { return fmt.Sprintf(`"pk_live_other%030d"`, n) }
	rep, err := ImportLegacy(ctx, db, strings.NewReader(fileJSON(entryJSON())))
	require.NoError(t, err)
	require.Equal(t, 1, rep.Keys)
	rep, err = ImportLegacy(ctx, db, strings.NewReader(fileJSON(
		entryJSON("key", other(1), "name", `"one"`),
		entryJSON(),
		entryJSON("key", other(1), "name", `"one"`),
		entryJSON("key", other(2), "name", `"two"`, "usage_windows", `[]`),
	)))
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Keys)
	assert.Equal(t, 1, rep.Windows)
	require.Len(t, rep.Skips, 2)
	assert.Equal(t, Issue{Index: 1, Name: "team-a", Reason: rep.Skips[0].Reason}, rep.Skips[0])
	assert.Regexp(t, `^a key with this secret exists already \(key_[0-9a-f]{16}\), left out$`, rep.Skips[0].Reason)
	assert.Equal(t, Issue{Index: 2, Name: "one", Reason: "exact duplicate of keys[0], left out"}, rep.Skips[1])
}

// TestImportRefusedChangesNothing: a refused file leaves the database
// exactly as it was, and CheckLegacyFile says the same as the import.
func TestImportRefusedChangesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backendtest.Backend) {
		db := openDB(t, b, fakeclock.New(importNow))
		importFixtures(t, db)
		l, err := db.Limiter("rps", strategies.TokenBucket{Rate: 1, Burst: 5})
		require.NoError(t, err)
		_, err = l.AllowN(ctx, "alice", 3)
		require.NoError(t, err)
		before := dump(t, db)
		for name, data := range refusedInputs(t) {
			path := writeFile(t, data)
			rep, err := ImportLegacyFile(ctx, db, path)
			require.ErrorIs(t, err, ErrRefused, name)
			assert.True(t, rep.Refused(), name)
			assert.Zero(t, rep.Keys, name)
			assert.Zero(t, rep.Windows, name)
			checked, cerr := CheckLegacyFile(path)
			assert.Equal(t, rep, checked, name)
			assert.Equal(t, err.Error(), cerr.Error(), name)
			require.Equal(t, before, dump(t, db), name)
		}
	})
}

// TestImportMalformedFixtures: what the importer says of the malformed
// fixtures this package adds.
func TestImportMalformedFixtures(t *testing.T) {
	db := openDB(t, backendtest.BoltSync, fakeclock.New(importNow))
	rep, err := ImportLegacyFile(ctx, db, fixture("apikeys.malformed-store.json"))
	require.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, []string{
		`keys[0] "ops\tteam": name: holds the control character U+0009: the key store does not keep it`,
		`keys[1] "analytics": model: is 300 bytes long, more than 256: the key store does not keep it`,
		`keys[2] "archive": last_used: after 2262-04-11T23:47:16Z, the last instant the key store holds`,
	}, issueStrings(rep.Refusals))
	assert.Equal(t, []string{
		`keys[1] "analytics": expiry_date: after 2262-04-11T23:47:16Z, the last instant the key store holds: the key expires then`,
		`keys[2] "archive": model: missing: imported without a model`,
	}, issueStrings(rep.Notes))

	rep, err = ImportLegacyFile(ctx, db, fixture("apikeys.malformed-truncated.json"))
	require.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, []string{`keys[1] "batch-jobs": unexpected end of file: the JSON is cut short`}, issueStrings(rep.Refusals))
	assert.Empty(t, dump(t, db))
}

// TestImportStoreLimits: what the key store cannot keep is refused before
// anything is written; an expiry past 2262 (a "never") is kept as 2262.
func TestImportStoreLimits(t *testing.T) {
	db := openDB(t, backendtest.BoltSync, fakeclock.New(importNow))
	k0 := `keys[0] "team-a": `
	for _, tt := range []struct {
		in      string
		refused string
	}{
		{fileJSON(entryJSON("name", `"team\u0000a"`)), `keys[0] "team\x00a": name: holds the control character U+0000: the key store does not keep it`},
		{fileJSON(entryJSON("model", `"glm\n4.7"`)), k0 + `model: holds the control character U+000A: the key store does not keep it`},
		{fileJSON(entryJSON("name", `"admin\u200b"`)), `keys[0] "admin\u200b": name: holds the format character U+200B: the key store does not keep it`},
		{fileJSON(entryJSON("model", `"glm\u202e4.7"`)), k0 + `model: holds the format character U+202E: the key store does not keep it`},
		{fileJSON(entryJSON("name", "\"ops\u2028team\"")), `keys[0] "ops\u2028team": name: holds the line separator U+2028: the key store does not keep it`},
		{fileJSON(entryJSON("name", `"`+strings.Repeat("é", 129)+`"`)), `keys[0] "` + strings.Repeat("é", 32) + `...": name: is 258 bytes long, more than 256: the key store does not keep it`},
		{fileJSON(entryJSON("created_at", `"2262-04-12T00:00:00Z"`)), k0 + `created_at: after 2262-04-11T23:47:16Z, the last instant the key store holds`},
	} {
		rep, err := ImportLegacy(ctx, db, strings.NewReader(tt.in))
		require.ErrorIs(t, err, ErrRefused)
		assert.Equal(t, []string{tt.refused}, issueStrings(rep.Refusals))
		assert.Zero(t, rep.Keys)
		rep2, err2 := CheckLegacy(strings.NewReader(tt.in))
		assert.Equal(t, rep, rep2)
		assert.Equal(t, err.Error(), err2.Error())
	}
	assert.Empty(t, dump(t, db))

	in := fileJSON(entryJSON("expiry_date", `"9999-12-31T23:59:59Z"`, "name", `"`+strings.Repeat("n", 256)+`"`))
	rep, err := ImportLegacy(ctx, db, strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Keys)
	assert.Equal(t, []Issue{{Index: 0, Name: strings.Repeat("n", 64) + "...", Field: "expiry_date",
		Reason: "after 2262-04-11T23:47:16Z, the last instant the key store holds: the key expires then"}}, rep.Notes)
	k, err := keys(t, db).Authenticate(ctx, secret)
	require.NoError(t, err)
	assert.Equal(t, maxStored, k.ExpiresAt)
}

// TestImportBigIntoBadger: a file of 10,000 keys is more than one badger
// transaction holds; the engine splits the import's commit, so it
// succeeds, whole: after the database is closed and opened again, every
// key authenticates by its legacy secret with its usage, and the database
// copies to bolt. (Before the engine split commits, this import failed
// with ErrTooBig and wrote nothing.)
func TestImportBigIntoBadger(t *testing.T) {
	const n = 10_000
	var b bytes.Buffer
	b.WriteString(`{"keys":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"key":"pk_live_%032d","name":"k%d","token_limit_per_5h":1000,"usage_windows":[{"window_start":"2026-01-18T10:00:00Z","tokens_used":%d}]}`, i, i, i%1000)
	}
	b.WriteString(`]}`)
	path := writeFile(t, b.Bytes())
	clk := fakeclock.New(importNow)
	// Async: the checks below each merge a key's legacy usage in a commit
	// of its own, which Sync mode would wait an fsync for, 10,000 times.
	opts := ratestore.Options{Backend: badger.Backend, Durability: ratestore.Async, Now: clk.Now}
	dir := filepath.Join(t.TempDir(), "badger")

	db, err := ratestore.Open(dir, opts)
	require.NoError(t, err)
	rep, err := ImportLegacyFile(ctx, db, path)
	require.NoError(t, err)
	assert.Equal(t, n, rep.Entries)
	assert.Equal(t, n, rep.Keys)
	assert.Equal(t, n, rep.Windows)
	assert.Empty(t, rep.Refusals)
	assert.Empty(t, rep.Skips)
	assert.Len(t, dump(t, db), 3*n-n/1000, "a record, an index entry and a legacy record a key; no legacy record for 0 tokens")
	require.NoError(t, db.Close())

	db, err = ratestore.Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	pending, err := Pending(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, n-n/1000, pending)
	ks := keys(t, db)
	for i := range n {
		k, res, err := ks.Check(ctx, fmt.Sprintf("pk_live_%032d", i))
		if err != nil || k.Name != fmt.Sprintf("k%d", i) || !res.Allowed || res.Remaining != int64(1000-i%1000) {
			t.Fatalf("key %d: %+v, %+v, %v", i, k, res, err) // no testify per key: 10,000 of them
		}
	}
	pending, err = Pending(ctx, db)
	require.NoError(t, err)
	assert.Zero(t, pending, "Check migrated every key")

	bolt := openDB(t, backendtest.BoltSync, clk)
	crep, err := dbcopy.Copy(ctx, bolt, db, nil)
	require.NoError(t, err)
	assert.Equal(t, 3*n-n/1000, crep.Records, "a record, an index entry and a token window a key; no window for 0 tokens")
	_, res, err := keys(t, bolt).Check(ctx, fmt.Sprintf("pk_live_%032d", 1999))
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Remaining)
}

// TestGeneratedImportMigrate: a key with 0, 1, 500 and 100,000 windows, one
// every 5 minutes back from 12:00, imported at 12:02 into badger and copied,
// still pending, to bolt (the file is parsed once: that is most of the
// time), then migrated in both: the 60 windows from 07:05 on count,
// exactly; the lifetime total is the file's.
func TestGeneratedImportMigrate(t *testing.T) {
	now := ts("2026-01-18T12:02:00Z")
	for _, n := range []int{0, 1, 500, 100_000} {
		var want int64
		for i := range n {
			if !genWindowStart(i).Before(now.Add(-5 * time.Hour)) { // the old check: window_start >= now - 5h
				want += genTokens(i)
			}
		}
		wantPending := 0
		if n > 1 {
			wantPending = 1 // window 0 has 0 tokens: not stored
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			clk := fakeclock.New(now)
			bdg, bolt := openDB(t, backendtest.BadgerSync, clk), openDB(t, backendtest.BoltSync, clk)
			rep, err := ImportLegacy(ctx, bdg, bytes.NewReader(genFile(n)))
			require.NoError(t, err)
			assert.Equal(t, Report{Entries: 1, Keys: 1, Windows: n}, rep)
			_, err = dbcopy.Copy(ctx, bolt, bdg, nil)
			require.NoError(t, err)
			for _, db := range []*ratestore.DB{bdg, bolt} {
				pending, err := Pending(ctx, db)
				require.NoError(t, err)
				assert.Equal(t, wantPending, pending)
				var calls [][2]int
				require.NoError(t, MigrateAll(ctx, db, func(done, total int) { calls = append(calls, [2]int{done, total}) }))
				wantCalls := [][2]int{{0, wantPending}}
				if wantPending > 0 {
					wantCalls = append(wantCalls, [2]int{1, 1})
				}
				assert.Equal(t, wantCalls, calls)
				pending, err = Pending(ctx, db)
				require.NoError(t, err)
				assert.Zero(t, pending)
				k, err := keys(t, db).Authenticate(ctx, secret)
				require.NoError(t, err)
				assert.Equal(t, int64(9_000_000_000), k.LifetimeTokens)
				u, err := keys(t, db).Usage(ctx, k.ID)
				require.NoError(t, err)
				assert.Equal(t, want, u.Used, db.Backend())
			}
		})
	}
}

// TestNoSecretInDatabase: no record holds a legacy secret, in any form
// that copies it, before or after migration.
func TestNoSecretInDatabase(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backendtest.Backend) {
		db := openDB(t, b, fakeclock.New(importNow))
		importFixtures(t, db)
		_, err := ImportLegacy(ctx, db, bytes.NewReader(genFile(3)))
		require.NoError(t, err)
		secrets := []string{secret}
		for _, s := range fixtureSecrets {
			secrets = append(secrets, s)
		}
		check := func() {
			recs := dump(t, db)
			require.NotEmpty(t, recs)
			for _, r := range recs {
				for _, s := range secrets {
					for _, form := range []string{s, s[8:], strings.ToUpper(s), fmt.Sprintf("%x", s)} {
						require.False(t, bytes.Contains(r.Key, []byte(form)), "a key holds a secret")
						require.False(t, bytes.Contains(r.Value, []byte(form)), "a value holds a secret")
					}
				}
			}
		}
		check()
		require.NoError(t, MigrateAll(ctx, db, nil))
		check()
	})
}
