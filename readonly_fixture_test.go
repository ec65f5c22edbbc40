package ratestore_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/storage/storagetest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/strategies"
)

// The read-only test (TestReadOnlyDatabase) runs two children of this
// test binary: TestReadOnlyBuild, which builds the database, and
// TestReadOnlyChild, which opens it read-only. These name the directory
// both work in and the backend.
const (
	roDirEnv     = "RATESTORE_READONLY_DIR"
	roBackendEnv = "RATESTORE_READONLY_BACKEND"
)

// roNow is the instant the database is read at: its ledger's first
// writer wrote 100 days before, past the default retention of 90 days.
var roNow = time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC)

// The ledger's entries: those of the day past the retention, and today's.
const (
	roOldEntries = 20
	roNewEntries = 30
)

// roFixture is what TestReadOnlyBuild tells TestReadOnlyChild, in
// fixture.json beside the database: the secrets of the keys by id, the
// current key and the teams.
type roFixture struct {
	Secrets map[string]string
	Current string
	Team    string // the current key's
	Empty   string // a team without keys
}

// roPaths are the paths under dir: the database; for badger the same
// database left open, as a crash leaves it; the fixture; what the child
// read.
func roPaths(dir string) (db, crashed, fixture, view string) {
	return filepath.Join(dir, "db"), filepath.Join(dir, "crashed"), filepath.Join(dir, "fixture.json"), filepath.Join(dir, "view.json")
}

// TestReadOnlyBuild is the child of TestReadOnlyDatabase that builds its
// database (see roBuild); run on its own it skips.
func TestReadOnlyBuild(t *testing.T) {
	dir := os.Getenv(roDirEnv)
	if dir == "" {
		t.Skip("a child process of TestReadOnlyDatabase")
	}
	roBuild(t, dir, backendNamed(os.Getenv(roBackendEnv)))
}

// roBuild builds, under dir, a database of backend holding: a key of the
// current version with usage, in a team; a key imported with legacy usage
// pending; keys of record versions 1 (one with legacy usage pending too)
// and 2; a ledger day past the retention and one of today, in chunks not
// compacted; and, on bolt, records in the write-ahead log that no
// checkpoint has applied (the process ends with the database open). On
// badger, where a clean close leaves no log to replay, it makes a copy
// left open as well, which a read-only open must refuse.
func roBuild(t *testing.T, dir string, backend ratestore.Backend) {
	path, crashed, fixturePath, _ := roPaths(dir)
	clock := fakeclock.New(roNow.Add(-100 * 24 * time.Hour))
	open := func(path string) *ratestore.DB {
		db, err := ratestore.Open(path, ratestore.Options{Backend: backend, Now: clock.Now})
		require.NoError(t, err)
		return db
	}
	db := open(path)
	roEntries(t, db, ledger.Options{}, "key_0000000000000old", roOldEntries)
	require.NoError(t, db.Close())

	clock.Set(roNow.Add(-time.Hour))
	db = open(path)
	fx := roKeys(t, db, clock.Now())
	roEntries(t, db, ledger.Options{Retention: 400 * 24 * time.Hour}, fx.Current, roNewEntries)
	require.NoError(t, db.Close())
	b, err := json.Marshal(fx)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(fixturePath, b, 0o600))

	clock.Set(roNow.Add(-30 * time.Minute))
	if backend == ratestore.Bolt {
		roTail(t, open(path), fx.Current) // never closed
		return
	}
	storagetest.CopyDir(t, path, crashed)
	roTail(t, open(crashed), fx.Current) // never closed
}

// roEntries adds n entries for key to the ledger of db, opened with opts,
// which it leaves open: its Close would compact them.
func roEntries(t *testing.T, db *ratestore.DB, opts ledger.Options, key string, n int) {
	l, err := ledger.Open(db, opts)
	require.NoError(t, err)
	for i := range n {
		e := ledger.Entry{Key: key, Model: fmt.Sprint("model-", i%3), Route: "/v1/chat/completions",
			Tokens: ledger.Tokens{Input: int64(100 + i), Output: 7}, Cost: 1000, Status: 200}
		require.NoError(t, l.Add(context.Background(), e))
	}
}

// roTail records usage of key in the token window of the current key,
// a Sync commit that bolt keeps in its log alone until a checkpoint.
func roTail(t *testing.T, db *ratestore.DB, key string) {
	l, err := db.Limiter("keys:w:5h0m0s", strategies.RollingWindow{Limit: 1000, Window: 5 * time.Hour, Bucket: 5 * time.Minute})
	require.NoError(t, err)
	_, err = l.Record(context.Background(), key, 7)
	require.NoError(t, err)
	require.NoError(t, db.Update(context.Background(), nil, func(b backend.Batch) error {
		return b.Put([]byte("x/tail"), []byte("after the checkpoint"))
	}))
}

// roKeys makes the keys of the fixture in db at now.
func roKeys(t *testing.T, db *ratestore.DB, now time.Time) roFixture {
	ctx := context.Background()
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(t, err)
	team, err := ks.CreateTeam(ctx, keystore.TeamSpec{Name: "team", Policy: keystore.Policy{
		Windows: []keystore.Window{{Limit: 1_000_000, Window: 24 * time.Hour}}}})
	require.NoError(t, err)
	cur, secret, err := ks.Create(ctx, keystore.Spec{Name: "current", TokenLimit: 1000, Team: team.ID})
	require.NoError(t, err)
	_, err = ks.RecordUsage(ctx, cur.ID, 120)
	require.NoError(t, err)
	empty, err := ks.CreateTeam(ctx, keystore.TeamSpec{Name: "empty", Policy: team.Policy})
	require.NoError(t, err)
	fx := roFixture{Secrets: map[string]string{cur.ID: secret}, Current: cur.ID, Team: team.ID, Empty: empty.ID}
	res, err := ks.Import(ctx, []keystore.Imported{{Secret: "pk_live_imported", Name: "imported", TokenLimit: 500,
		Windows: []keystore.LegacyWindow{{Start: now.Add(-2 * time.Hour), Tokens: 50}, {Start: now.Add(-7 * time.Hour), Tokens: 999}}}})
	require.NoError(t, err)
	fx.Secrets[res.IDs[0]] = "pk_live_imported"

	window := roWindow(t, 800, now.Add(-90*time.Minute), 300)
	old := []struct {
		id, secret string
		record     []byte
		legacy     []byte
	}{
		{"key_00000000000000a1", "pk_live_v1", roV1(0, 800, "v1", window), nil},
		{"key_00000000000000a2", "pk_live_v1_legacy", roV1(1<<4, 600, "v1 legacy", window),
			roLegacy(now.Add(-time.Hour).UnixNano(), 40)},
		{"key_00000000000000a3", "pk_live_v2", roV2(900, "v2"), nil},
	}
	require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error {
		for _, k := range old {
			h := sha256.Sum256([]byte(k.secret))
			fx.Secrets[k.id] = k.secret
			// A version 1 and 2 record hold the secret's hash after
			// their version and flags.
			copy(k.record[2:], h[:])
			require.NoError(t, b.Put([]byte("k/"+k.id), k.record))
			require.NoError(t, b.Put(append([]byte("h/"), h[:]...), []byte(k.id)))
			if k.legacy != nil {
				require.NoError(t, b.Put([]byte("l/"+k.id), k.legacy))
			}
		}
		return nil
	}))
	return fx
}

// roWindow is the encoding of a RollingWindow state of the default usage
// window, limit tokens, with n recorded at at: what a version 1 record
// holds.
func roWindow(t *testing.T, limit int64, at time.Time, n int64) []byte {
	d := strategies.RollingWindow{Limit: limit, Window: 5 * time.Hour, Bucket: 5 * time.Minute}.Prepare()
	st := d.NewState()
	_, err := d.Decide(st, strategies.Call{Now: at.UnixNano(), N: n, Record: true})
	require.NoError(t, err)
	return st.AppendEncode(nil)
}

// roV1 is a version 1 record (keystore's package doc): version, flags, a
// hash (zero: roKeys fills it in), the token limit, the lifetime tokens
// (here 5), no instants, then name, model and usage window.
func roV1(flags byte, limit int64, name string, window []byte) []byte {
	b := append([]byte{1, flags}, make([]byte, sha256.Size)...)
	b = binary.AppendUvarint(binary.AppendUvarint(b, uint64(limit)), 5)
	for _, s := range []string{name, "", string(window)} {
		b = append(binary.AppendUvarint(b, uint64(len(s))), s...)
	}
	return b
}

// roV2 is a version 2 record: version, no flags, the hash (see roV1), the
// lifetime tokens (9), then name, model and a policy of one window of
// limit tokens per 5 hours in 5-minute buckets, without budgets.
func roV2(limit int64, name string) []byte {
	b := append([]byte{2, 0}, make([]byte, sha256.Size)...)
	b = binary.AppendUvarint(b, 9)
	pol := binary.AppendUvarint([]byte{1}, uint64(limit))
	pol = binary.AppendUvarint(binary.AppendUvarint(pol, uint64(5*time.Hour)), uint64(5*time.Minute))
	pol = append(pol, 0, 0, 0) // no request rate, concurrency cap or models
	for _, s := range []string{name, "", string(pol)} {
		b = append(binary.AppendUvarint(b, uint64(len(s))), s...)
	}
	return b
}

// roLegacy is a legacy usage record of one window: version 1, the count,
// the window's start (zigzag) and tokens.
func roLegacy(start, tokens int64) []byte {
	return binary.AppendUvarint(binary.AppendVarint([]byte{1, 1}, start), uint64(tokens))
}
