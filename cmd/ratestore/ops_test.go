package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/strategies"
	"github.com/stretchr/testify/require"
)

func TestMigrate(t *testing.T) {
	e := newEnv(t)
	e.ok("import", validFile)
	recs := e.records()
	require.Equal(t, migrateOut{DryRun: true, Pending: 3}, jsonOf[migrateOut](e, "migrate", "--dry-run"))
	r := e.ok("migrate", "--dry-run")
	require.Equal(t, "3 keys with legacy usage pending (dry run: nothing migrated)\n", r.stdout)
	require.Equal(t, recs, e.records(), "a dry run writes nothing")

	// No terminal, no progress.
	r = e.ok("migrate")
	require.Equal(t, "migrated the legacy usage of 3 keys\n", r.stdout)
	require.Empty(t, r.stderr)
	require.Equal(t, migrateOut{}, jsonOf[migrateOut](e, "migrate"))
	u := jsonOf[admin.Key](e, "usage", byName(t, jsonOf[admin.Keys](e, "keys", "list").Keys)["gateway-prod"])
	require.Equal(t, int64(41250), u.Windows[u.Binding].Used)

	// On a terminal, a progress bar on stderr.
	p := newEnv(t)
	p.terminal = true
	p.ok("import", validFile)
	r = p.ok("migrate")
	require.Equal(t, "migrated the legacy usage of 3 keys\n", r.stdout)
	require.Contains(t, r.stderr, "\rmigrating legacy usage [")
	require.True(t, strings.HasSuffix(r.stderr, "] 3/3\n"), "%q", r.stderr)
}

func TestCopyRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.ok("import", validFile)
	e.ok("keys", "create", "--name", "new", "--limit", "7")
	writeGCRA(t, e.db, ratestore.Bolt)
	want := e.ok("keys", "list", "--json").stdout
	recs := e.records()

	badger := filepath.Join(e.dir, "copy.badger")
	rep := jsonOf[copyOut](e, "copy", "--to", badger, "--to-backend", "badger")
	require.Equal(t, copyOut{From: e.db, FromBackend: "bolt", To: badger, ToBackend: "badger",
		Records: len(recs), Bytes: rep.Bytes}, rep)
	require.Positive(t, rep.Bytes)

	b := &env{t: t, dir: e.dir, db: badger, backend: "badger", terminal: true}
	back := filepath.Join(e.dir, "back.db")
	r := b.ok("copy", "--to", back)
	require.Contains(t, r.stdout, "copied "+strconv.Itoa(len(recs))+" records")
	require.Contains(t, r.stderr, "\rcopying: ")

	for _, db := range []*env{b, {t: t, dir: e.dir, db: back}} {
		require.Equal(t, want, db.ok("keys", "list", "--json").stdout, db.db)
		require.Equal(t, recs, db.records(), db.db)
	}
	require.Equal(t, e.ok("inspect", "rps", "user-1").stdout, b.ok("inspect", "rps", "user-1").stdout)
}

func TestCopyRefusesExisting(t *testing.T) {
	e := newEnv(t)
	e.ok("import", validFile)
	dst := filepath.Join(e.dir, "dst.db")
	require.NoError(t, os.WriteFile(dst, []byte("x"), 0o600))
	r := e.run("copy", "--to", dst)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "ratestore: copy: "+dst+" exists and is not empty")
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, "x", string(got), "left as it was")

	// Onto a database that holds records.
	r = e.run("copy", "--to", e.db)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "exists and is not empty")

	// An empty directory is a new badger database.
	dir := filepath.Join(e.dir, "empty")
	require.NoError(t, os.Mkdir(dir, 0o700))
	e.ok("copy", "--to", dir, "--to-backend", "badger")
}

// writeGCRA records usage through a GCRA limiter "rps" for key "user-1"
// at the tests' clock, and returns the stored TAT.
func writeGCRA(t *testing.T, path string, backend ratestore.Backend) time.Time {
	db, err := ratestore.Open(path, ratestore.Options{Backend: backend, Now: func() time.Time { return now }})
	require.NoError(t, err)
	l, err := db.Limiter("rps", strategies.GCRA{Rate: 2, Burst: 5})
	require.NoError(t, err)
	for range 3 {
		res, err := l.Allow(context.Background(), "user-1")
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	require.NoError(t, db.Close())
	return now.Add(1500 * time.Millisecond) // 3 calls at 500ms each
}

func TestInspect(t *testing.T) {
	e := newEnv(t)
	tat := writeGCRA(t, e.db, ratestore.Bolt)
	raw := "42|" + strconv.FormatInt(tat.UnixNano(), 10)

	got := jsonOf[stateOut](e, "inspect", "rps", "user-1")
	require.Equal(t, "rps", got.Limiter)
	require.Equal(t, "user-1", got.Key)
	require.True(t, got.Found)
	require.Equal(t, raw, got.Raw)
	require.NotEmpty(t, got.RawHex)
	require.Empty(t, got.Error)
	require.Equal(t, "gcra", got.State.Kind)
	require.Equal(t, "42", got.State.Header)
	require.Equal(t, tat.Format(time.RFC3339Nano), got.State.Fields["tat"])

	r := e.ok("inspect", "rps", "user-1")
	require.Equal(t, `limiter: rps
key:     "user-1"
raw:     "`+raw+`"
state:   gcra (header 42)
  tat: 2026-01-18T12:00:01.5Z
`, r.stdout)

	// No state: another key, another limiter, a name that sorts last.
	for _, args := range [][]string{{"rps", "user-2"}, {"rpm", "user-1"}, {"zzz", "k"}} {
		got := jsonOf[stateOut](e, append([]string{"inspect"}, args...)...)
		require.False(t, got.Found, args)
		require.Nil(t, got.State, args)
		r := e.ok(append([]string{"inspect"}, args...)...)
		require.Contains(t, r.stdout, "no stored state")
	}
}

func TestInspectDecodesEveryKind(t *testing.T) {
	e := newEnv(t)
	states := map[string]string{
		"tb":  "12|4.5|1768723200000000000",
		"fw":  "23|2|second|1|1768723201000000000|minute|3|1768723200000000000",
		"lb":  "32|15|1768723200000000000",
		"cs":  "cmp1|v2|3|1768723200000000000|$42|1768723200000000000",
		"rw":  "72|18000000000000|300000000000|1768723200000000000|60000|59|50000",
		"sw":  "62|6|5|1768723210000000000",
		"v1":  "v1|3.5|1768723200000000000|10|2",
		"bad": "42|NaN",
	}
	restore(t, e.db, states)
	for name, raw := range states {
		r := e.run("inspect", name, "k")
		got := stateOut{}
		if name == "bad" {
			require.Equal(t, exitError, r.code)
			require.Contains(t, r.stdout, `raw:     "42|NaN"`)
			require.Contains(t, r.stderr, `ratestore: limiter "bad" key "k": the stored state cannot be decoded: strategies: gcra: field 2 (tat) "NaN" is not a decimal integer: corrupt state`)
			r = e.run("inspect", name, "k", "--json")
			require.Equal(t, exitError, r.code)
			require.Contains(t, r.stdout, `"error": "strategies: gcra: field 2 (tat)`)
			require.Contains(t, r.stdout, `"state": null`)
			continue
		}
		require.Equal(t, exitOK, r.code, r.stderr)
		got = jsonOf[stateOut](e, "inspect", name, "k")
		require.Equal(t, raw, got.Raw)
		want, err := strategies.Describe([]byte(raw))
		require.NoError(t, err)
		require.Equal(t, want.Kind, got.State.Kind)
		require.Contains(t, r.stdout, "state:   "+want.Kind)
	}
	r := e.ok("inspect", "cs", "k")
	require.Contains(t, r.stdout, `state:   composite (header cmp1, legacy: rewritten by the next write)
  primary:
    state:   legacy (header v2, legacy: rewritten by the next write)
      raw: "v2|3|1768723200000000000|"
  secondary:
    state:   gcra (header 42)
      tat: 2026-01-18T08:00:00Z
`)
	r = e.ok("inspect", "rw", "k")
	require.Contains(t, r.stdout, `  buckets: 2
    count=60000 start=2026-01-18T08:00:00Z
    count=50000 start=2026-01-18T12:55:00Z
  total: 110000
  window: 5h0m0s
`)
}

// restore writes raw states of key "k" under the limiter names given.
func restore(t *testing.T, path string, states map[string]string) {
	db, err := ratestore.Open(path, ratestore.Options{})
	require.NoError(t, err)
	var recs []ratestore.Entry
	for name, raw := range states {
		recs = append(recs, ratestore.Entry{Key: []byte("s/" + name + "\x00k"), Value: []byte(raw)})
	}
	require.NoError(t, db.Restore(context.Background(), recs))
	require.NoError(t, db.Close())
}

// TestImportBigIntoBadger: a file of more keys than one badger
// transaction holds imports all the same (the engine splits the commit),
// every key is there, and the database copies to bolt. (It used to fail,
// leaving no database behind.)
func TestImportBigIntoBadger(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"keys": [`)
	const n = 12000
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"key": "pk_live_%08d", "name": "k%d", "token_limit_per_5h": %d, "usage_windows": []}`, i, i, 1000+i)
	}
	b.WriteString("]}")
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "big.json")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o600))

	e.backend = "badger"
	rep := jsonOf[importOut](e, "import", file)
	require.Equal(t, n, rep.Keys)
	keys := e.allKeys()
	require.Len(t, keys, n, "keys list --all prints every page, a KEY a line")
	for _, k := range keys {
		i, err := strconv.Atoi(strings.TrimPrefix(k.Name, "k"))
		require.NoError(t, err, k.Name)
		if len(k.Windows) != 1 || k.Windows[0].Limit != int64(1000+i) || k.Windows[0].Window != "5h0m0s" || k.Windows[0].Used != 0 {
			t.Fatalf("key %d: %+v", i, k) // no testify per key: 12,000 of them
		}
	}
	require.Equal(t, keys[0], jsonOf[admin.Key](e, "keys", "show", keys[0].ID))

	bolt := filepath.Join(e.dir, "big.bolt")
	crep := jsonOf[copyOut](e, "copy", "--to", bolt, "--to-backend", "bolt")
	require.Equal(t, 2*n, crep.Records) // the record and hash index entry of each key
	c := &env{t: t, dir: e.dir, db: bolt}
	require.Len(t, c.allKeys(), n)
}

// allKeys lists every key of e's database, every page (keys list --all).
func (e *env) allKeys() []admin.Key {
	e.t.Helper()
	var keys []admin.Key
	for line := range strings.Lines(e.ok("keys", "list", "--all", "--json").stdout) {
		var k admin.Key
		require.NoError(e.t, json.Unmarshal([]byte(line), &k), line)
		keys = append(keys, k)
	}
	return keys
}
