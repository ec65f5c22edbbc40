package migrate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/legacytest"
	"github.com/ratestore/ratestore/keystore"
)

var ctx = context.Background()

// The legacy files the tests import are legacytest's.
const secret = legacytest.Secret

var (
	entryJSON      = legacytest.EntryJSON
	fileJSON       = legacytest.FileJSON
	issueStrings   = legacytest.IssueStrings[Issue]
	reportTexts    = legacytest.ReportTexts
	genFile        = legacytest.GenFile
	genTokens      = legacytest.GenTokens
	genWindowStart = legacytest.GenWindowStart
	ts             = legacytest.Time
)

// importNow is the instant of the legacy fixtures' users: the sample's
// last_used are a few minutes before it.
var importNow = ts("2026-01-18T11:05:00Z")

// forEachBackend runs fn as a subtest on each embedded backend of the
// matrix: the package moves records between databases, which Redis has
// none of.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backendtest.Backend)) {
	backendtest.Run(t, backendtest.Embedded(), fn)
}

// openDB opens a new database of b with clock c, closed at the end of the
// test.
func openDB(t testing.TB, b backendtest.Backend, c *fakeclock.Clock) *ratestore.DB {
	t.Helper()
	return b.Open(t, c).DB
}

// keys is the key store of db, as the package opens it.
func keys(t testing.TB, db *ratestore.DB) *keystore.Store {
	t.Helper()
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(t, err)
	return ks
}

// dump is every record of db, copied.
func dump(t testing.TB, db *ratestore.DB) []ratestore.Entry {
	t.Helper()
	recs := []ratestore.Entry{}
	require.NoError(t, db.Export(ctx, func(r ratestore.Entry) error {
		recs = append(recs, ratestore.Entry{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
		return nil
	}))
	return recs
}

// fixture is the path of a legacy fixture.
func fixture(name string) string { return filepath.Join("..", "testdata", "legacy", name) }

// fixtureSecrets are the secrets of the sample and valid fixtures, by name.
var fixtureSecrets = map[string]string{
	"research-team":  "pk_live_7f3a9c2e41d84b0f9a6e5d3c2b1a0f9e",
	"ci-bot":         "pk_live_0b8d6f4e2c1a3957e8d7c6b5a4f3e2d1",
	"intern-sandbox": "pk_test_5e4d3c2b1a09f8e7d6c5b4a392817060",
	"gateway-prod":   "pk_live_3c9e1f7a2b8d4e6f0a1b2c3d4e5f6a7b",
	"batch-jobs":     "pk_live_9a8b7c6d5e4f30211203f4e5d6c7b8a9",
	"staging":        "pk_test_0f1e2d3c4b5a69788796a5b4c3d2e1f0",
}

// importFixtures imports the sample and valid fixtures into db.
func importFixtures(t testing.TB, db *ratestore.DB) {
	t.Helper()
	for _, name := range []string{"apikeys.sample.json", "apikeys.valid.json"} {
		rep, err := ImportLegacyFile(ctx, db, fixture(name))
		require.NoError(t, err)
		require.Equal(t, 3, rep.Keys)
	}
}

// keyID is the id of the key of secret, found without touching it.
func keyID(t testing.TB, db *ratestore.DB, secret string) string {
	t.Helper()
	k, err := keys(t, db).Authenticate(ctx, secret)
	if err != nil {
		require.NotEmpty(t, k.ID, "%v", err) // expired or disabled: still found
	}
	return k.ID
}

// writeFile writes data to a file of the test and returns its path.
func writeFile(t testing.TB, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "apikeys.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// refusedInputs are every malformed fixture and every refused case of the
// parser's table.
func refusedInputs(t *testing.T) map[string][]byte {
	in := map[string][]byte{}
	files, err := filepath.Glob(fixture("apikeys.malformed*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 3)
	for _, f := range files {
		in[filepath.Base(f)] = readFile(t, f)
	}
	for _, c := range legacytest.Cases() {
		if len(c.Refused) > 0 {
			in[c.Name] = []byte(c.In)
		}
	}
	return in
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}
