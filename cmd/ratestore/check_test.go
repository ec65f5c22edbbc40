package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/childtest"
	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
	"github.com/ratestore/ratestore/internal/storage/check"
	"github.com/ratestore/ratestore/strategies"
)

// checkDB makes a database with legacy keys, a key made here, and limiter
// states, and returns its env.
func checkDB(t *testing.T, backend string) *env {
	e := newEnv(t)
	if backend == "badger" {
		e.db, e.backend = filepath.Join(e.dir, "test.badger"), backend
	}
	e.ok("import", validFile)
	e.ok("keys", "create", "--name", "new", "--limit", "7")
	writeGCRA(t, e.db, backendOf(backend))
	return e
}

func TestCheckHealthy(t *testing.T) {
	for _, backend := range []string{"bolt", "badger"} {
		t.Run(backend, func(t *testing.T) {
			e := checkDB(t, backend)
			recs := e.records()
			out := jsonOf[check.Result](e, "check")
			require.True(t, out.OK, "%+v", out)
			require.Empty(t, out.Problems)
			require.Equal(t, len(recs), out.Keys)
			require.Equal(t, out.Keys, out.States+out.Records+out.Other)
			require.Positive(t, out.States)
			require.Positive(t, out.Records)
			require.Positive(t, out.Bytes)
			r := e.ok("check")
			require.True(t, strings.HasPrefix(r.stdout, "ok: "+e.db), r.stdout)
			require.Contains(t, r.stdout, "every value decoded")
		})
	}
}

// TestCheckNamesBadValues stores values that do not decode, under the
// keys of a limiter state, a key record and a secret hash, and checks that
// check exits 1 naming each of them.
func TestCheckNamesBadValues(t *testing.T) {
	for _, backend := range []string{"bolt", "badger"} {
		t.Run(backend, func(t *testing.T) {
			e := checkDB(t, backend)
			var s storage.Store
			var err error
			if backend == "badger" {
				s, err = badgerstore.Open(e.db, nil)
			} else {
				s, err = boltstore.Open(e.db)
			}
			require.NoError(t, err)
			hash := "h/" + strings.Repeat("x", 32)
			require.NoError(t, s.Commit([]storage.Op{
				{Key: []byte("s/rps\x00bad"), Value: []byte("not a state")},
				{Key: []byte("k/key_0123456789abcdef"), Value: []byte{0xff, 1, 2}},
				{Key: []byte(hash), Value: []byte("key_nobody")},
			}))
			require.NoError(t, s.Sync())
			require.NoError(t, s.Close())

			r := e.run("check", "--json")
			require.Equal(t, exitError, r.code, r.stderr)
			require.Contains(t, r.stderr, "3 problems found")
			var out check.Result
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
			require.False(t, out.OK)
			var keys []string
			for _, p := range out.Problems {
				keys = append(keys, p.Key)
				require.NotEmpty(t, p.What)
			}
			require.ElementsMatch(t, []string{strconv.Quote("s/rps\x00bad"), strconv.Quote("k/key_0123456789abcdef"), strconv.Quote(hash)}, keys)

			r = e.run("check")
			require.Equal(t, exitError, r.code)
			require.Contains(t, r.stdout, `problem: file `+e.db+`: key "s/rps\x00bad": limiter "rps" key "bad": the stored state cannot be decoded`)
			require.Contains(t, r.stdout, `key_nobody`)
			require.Contains(t, r.stdout, "3 problems: "+e.db)
		})
	}
}

// The damage test runs check on damaged copies of a database in a child
// process (this test binary again, running TestCheckDamageChild), so that
// a crash is a failed test rather than a lost run.
const (
	checkChildEnv = "RATESTORE_CHECK_DAMAGE_DIR"
	checkSeedEnv  = "RATESTORE_CHECK_DAMAGE_SEED"
	checkTrials   = 20 // flipped bytes per kind of file
)

// TestCheckDamagedFiles flips bytes in the bbolt file, its log and a
// badger table, and checks that check never crashes: it exits 0 (the byte
// did not matter: free space, padding) or 1 naming a file, never 2 or a
// signal; and a flipped byte in a stored state is reported under its key.
func TestCheckDamagedFiles(t *testing.T) {
	childtest.Run(t, "TestCheckDamageChild",
		checkChildEnv+"="+t.TempDir(), checkSeedEnv+"="+childtest.Seed(checkSeedEnv))
}

// TestCheckDamageChild is the child of TestCheckDamagedFiles; run on its
// own it skips.
func TestCheckDamageChild(t *testing.T) {
	dir := os.Getenv(checkChildEnv)
	if dir == "" {
		t.Skip("the child process of TestCheckDamagedFiles")
	}
	rng := childtest.Rand(t, checkSeedEnv)

	// bolt: a database whose log holds records (a crash before the
	// checkpoint: copied while open).
	bolt := checkDB(t, "bolt")
	tmpl := filepath.Join(dir, "bolt-template")
	require.NoError(t, os.MkdirAll(tmpl, 0o700))
	db, err := ratestore.Open(bolt.db, ratestore.Options{Now: func() time.Time { return now }})
	require.NoError(t, err)
	l, err := db.Limiter("more", strategies.GCRA{Rate: 1, Burst: 100})
	require.NoError(t, err)
	for i := range 50 {
		_, err := l.Allow(context.Background(), fmt.Sprint("k", i))
		require.NoError(t, err)
	}
	copyFile(t, bolt.db, filepath.Join(tmpl, "db"))
	copyFile(t, bolt.db+"-wal", filepath.Join(tmpl, "db-wal"))
	require.NoError(t, db.Close())

	// badger: a closed database, its states in tables.
	badger := checkDB(t, "badger")

	// trial damages a copy of the template and runs check on it: exit 0
	// or 1, and 1 names a file.
	trial := func(name, backend string, damage func(dir string) bool) result {
		e := &env{t: t, dir: dir, db: filepath.Join(dir, name, "db"), backend: backend}
		if backend == "badger" {
			copyDir(t, badger.db, e.db)
		} else {
			require.NoError(t, os.MkdirAll(filepath.Dir(e.db), 0o700))
			copyFile(t, filepath.Join(tmpl, "db"), e.db)
			copyFile(t, filepath.Join(tmpl, "db-wal"), e.db+"-wal")
		}
		if !damage(e.db) {
			return result{code: -1}
		}
		r := e.run("check")
		require.Contains(t, []int{exitOK, exitError}, r.code, "%s: %s%s", name, r.stdout, r.stderr)
		if r.code == exitError {
			require.Contains(t, r.stdout, "problem: file ", "%s: %s%s", name, r.stdout, r.stderr)
		}
		return r
	}
	flip := func(path string) bool {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		end := len(bytes.TrimRight(b, "\x00"))
		if end == 0 {
			return false
		}
		b[rng.IntN(end)] ^= byte(1 + rng.IntN(255))
		require.NoError(t, os.WriteFile(path, b, 0o600))
		return true
	}

	// A flipped byte in a stored state is reported under its key: its
	// checksum fails.
	r := trial("state", "bolt", func(db string) bool {
		b, err := os.ReadFile(db)
		require.NoError(t, err)
		key := []byte("s/rps\x00user-1")
		i := bytes.Index(b, key)
		require.Positive(t, i, "the state of rps/user-1 is in the bbolt file")
		b[i+len(key)] ^= 0xff // bbolt stores the value right after its key
		require.NoError(t, os.WriteFile(db, b, 0o600))
		return true
	})
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stdout, `key "s/rps\x00user-1": stored value fails its checksum`)

	kinds := []struct {
		name, backend string
		file          func(db string) string
	}{
		{"bolt", "bolt", func(db string) string { return db }},
		{"wal", "bolt", func(db string) string { return db + "-wal" }},
		{"sst", "badger", func(db string) string {
			names, err := filepath.Glob(filepath.Join(db, "*.sst"))
			require.NoError(t, err)
			require.NotEmpty(t, names)
			return names[rng.IntN(len(names))]
		}},
	}
	for _, k := range kinds {
		var found int
		trials := checkTrials
		if k.backend == "badger" {
			trials /= 4 // a badger open costs ~0.25 s
		}
		for i := range trials {
			r := trial(fmt.Sprintf("%s-%d", k.name, i), k.backend, func(db string) bool { return flip(k.file(db)) })
			if r.code == exitError {
				found++
			}
		}
		fmt.Printf("SUMMARY %s: %d flipped bytes, %d reported (the others hit unused bytes), no crash\n", k.name, trials, found)
	}
}

func copyFile(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o600))
}

func copyDir(t *testing.T, from, to string) {
	require.NoError(t, os.MkdirAll(to, 0o700))
	entries, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, e := range entries {
		copyFile(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
	}
}
