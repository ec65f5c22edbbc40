package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
)

// byName returns the ids of the keys by name.
func byName(t *testing.T, keys []admin.Key) map[string]string {
	ids := map[string]string{}
	for _, k := range keys {
		ids[k.Name] = k.ID
	}
	return ids
}

func TestImportThenListAndUsage(t *testing.T) {
	e := newEnv(t)
	r := e.ok("import", validFile)
	require.Contains(t, r.stdout, "imported 3 keys with 5 usage windows from 3 entries")

	r = e.ok("keys", "list")
	for _, name := range []string{"gateway-prod", "batch-jobs", "staging", "ID", "STATUS"} {
		require.Contains(t, r.stdout, name)
	}
	keys := jsonOf[admin.Keys](e, "keys", "list").Keys
	require.Len(t, keys, 3)
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k.ID, "key_"), k.ID)
		require.NotContains(t, r.stdout, "pk_", "no secret is listed")
	}
	ids := byName(t, keys)
	// At noon, the window of 09:30 counts and the one of 04:10 has expired.
	gw := jsonOf[admin.Key](e, "keys", "show", ids["gateway-prod"])
	end := timePtr(time.Date(2026, 1, 18, 14, 30, 0, 0, time.UTC))
	require.Equal(t, admin.Key{Budgets: []admin.Budget{},
		ID: ids["gateway-prod"], Name: "gateway-prod", Model: "glm-4.7", Models: []string{},
		Windows: []admin.Window{{Limit: 100000, Window: "5h0m0s", Bucket: "5m0s",
			Used: 41250, Remaining: 58750, ResetAfterSeconds: 150 * 60, WindowEnd: end}},
		ExpiresAt:      timePtr(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)),
		CreatedAt:      timePtr(time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)),
		LastUsed:       timePtr(time.Date(2026, 1, 18, 11, 58, 30, 250e6, time.UTC)),
		LifetimeTokens: 1834411,
	}, gw)
	require.Equal(t, gw, jsonOf[admin.Key](e, "usage", ids["gateway-prod"]), "usage prints the key as keys show does")
	require.Contains(t, keys, gw, "and keys list")
	r = e.ok("usage", ids["gateway-prod"])
	require.Contains(t, r.stdout, "41250 of 100000 tokens")
	require.Contains(t, r.stdout, "2026-01-18T14:30:00Z (in 2h30m0s)")
	require.Contains(t, r.stdout, "request rate:   no limit")
	require.Regexp(t, `\n  5h +5m +41250 +100000 +58750 +2026-01-18T14:30:00Z \(in 2h30m0s\) +2h30m0s\n`, r.stdout)

	u := jsonOf[admin.Key](e, "usage", ids["staging"])
	require.Equal(t, int64(5000), u.Windows[u.Binding].Used)
	require.Zero(t, u.Windows[u.Binding].Remaining)
	r = e.ok("keys", "show", ids["staging"])
	require.Contains(t, r.stdout, "status:          active")
}

func TestImportTwiceChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.ok("import", validFile)
	list := e.ok("keys", "list", "--json").stdout
	recs := e.records()

	rep := jsonOf[importOut](e, "import", validFile)
	require.Equal(t, 3, rep.Entries)
	require.Zero(t, rep.Keys)
	require.Len(t, rep.Skips, 3)
	require.False(t, rep.Refused)
	require.Equal(t, recs, e.records())
	require.Equal(t, list, e.ok("keys", "list", "--json").stdout)
}

func TestImportRefused(t *testing.T) {
	e := newEnv(t)
	r := e.run("import", malformedFile)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stdout, "legacy file refused, nothing imported")
	require.Contains(t, r.stdout, "refused:\n  keys[")
	require.Contains(t, r.stderr, "ratestore: "+malformedFile+" refused, nothing imported")
	require.NotContains(t, r.stdout+r.stderr, "pk_", "no secret in the report")
	e.requireNoDB()

	r = e.run("import", malformedFile, "--json")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stdout, `"refused": true`)
	require.Contains(t, r.stdout, `"refusals": [`)
	e.requireNoDB()

	// Into an existing database: nothing changes.
	e.ok("import", validFile)
	recs := e.records()
	r = e.run("import", malformedFile)
	require.Equal(t, exitError, r.code)
	require.Equal(t, recs, e.records())
}

func TestImportDryRun(t *testing.T) {
	e := newEnv(t)
	r := e.ok("import", validFile, "--dry-run")
	require.Contains(t, r.stdout, "dry run: the file was checked and nothing was written")
	rep := jsonOf[importOut](e, "import", "--dry-run", validFile)
	require.True(t, rep.DryRun)
	require.Equal(t, 3, rep.Keys)
	e.requireNoDB()

	r = e.run("import", "--dry-run", malformedFile)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stdout, "refused:")
	e.requireNoDB()

	r = e.run("import", "--dry-run", "nope.json")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "nope.json")
	r = e.run("import", "nope.json")
	require.Equal(t, exitError, r.code)
	e.requireNoDB()
}

func TestKeysCreateShowsSecretOnce(t *testing.T) {
	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "team-a", "--limit", "1000", "--model", "glm-4.7")
	secret := created.Secret
	require.True(t, strings.HasPrefix(secret, "rsk_"), secret)
	require.Equal(t, admin.Key{ID: created.Key.ID, Budgets: []admin.Budget{}, Name: "team-a", Model: "glm-4.7", Models: []string{},
		Windows:   []admin.Window{{Limit: 1000, Window: "5h0m0s", Bucket: "5m0s", Remaining: 1000}},
		CreatedAt: timePtr(now)}, created.Key)
	require.Equal(t, created.Key, jsonOf[admin.Key](e, "keys", "show", created.Key.ID), "keys create prints the key as keys show does")

	r := e.ok("keys", "create", "--name", "team-b", "--limit", "5")
	require.Equal(t, 1, strings.Count(r.stdout, "rsk_"), r.stdout)
	require.Contains(t, r.stderr, "is shown only this once")
	require.NotContains(t, r.stderr, "rsk_")

	for _, args := range [][]string{
		{"keys", "list"}, {"keys", "list", "--json"}, {"keys", "show", created.Key.ID}, {"keys", "show", created.Key.ID, "--json"},
		{"usage", created.Key.ID}, {"keys", "disable", created.Key.ID}, {"copy", "--to", e.dir + "/copy.db"},
	} {
		r := e.ok(args...)
		require.NotContains(t, r.stdout+r.stderr, secret, args)
		require.NotContains(t, r.stdout+r.stderr, "rsk_", args)
	}
}

func TestKeysLifecycle(t *testing.T) {
	e := newEnv(t)
	id := jsonOf[admin.Created](e, "keys", "create", "--name", "ci", "--limit", "100", "--expires", "720h").Key.ID
	k := jsonOf[admin.Key](e, "keys", "show", id)
	require.Equal(t, now.Add(720*time.Hour), *k.ExpiresAt)

	r := e.ok("keys", "disable", id)
	require.Contains(t, r.stdout, "disabled "+id)
	require.Contains(t, r.stdout, "status:          disabled")
	k = jsonOf[admin.Key](e, "keys", "disable", id)
	require.True(t, k.Disabled)
	k = jsonOf[admin.Key](e, "keys", "enable", id)
	require.False(t, k.Disabled)
	require.Contains(t, e.ok("keys", "show", id).stdout, "status:          active")

	k = jsonOf[admin.Key](e, "keys", "set-limit", id, "5000")
	require.Equal(t, []admin.Window{{Limit: 5000, Window: "5h0m0s", Bucket: "5m0s", Remaining: 5000}}, k.Windows)
	k = jsonOf[admin.Key](e, "keys", "set-expiry", id, "2030-05-01T10:00:00+02:00")
	require.Equal(t, time.Date(2030, 5, 1, 8, 0, 0, 0, time.UTC), *k.ExpiresAt)
	k = jsonOf[admin.Key](e, "keys", "set-expiry", id, "never")
	require.Nil(t, k.ExpiresAt)
	r = e.ok("keys", "set-expiry", id, "2026-01-01T00:00:00Z")
	require.Contains(t, r.stdout, "status:          expired")
	k = jsonOf[admin.Key](e, "keys", "show", id)
	require.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), *k.ExpiresAt, "past: expired")
	require.False(t, k.Disabled)

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"keys", "set-limit", id, "0"}, `token limit "0": want a positive integer`},
		{[]string{"keys", "set-limit", id, "1.5"}, `token limit "1.5"`},
		{[]string{"keys", "set-expiry", id, "tomorrow"}, `expiry "tomorrow"`},
		{[]string{"keys", "set-expiry", id, "-1h"}, "flag provided but not defined"},
		{[]string{"keys", "create", "--limit", "5"}, "--name is required"},
		{[]string{"keys", "create", "--name", "x", "--limit", "many"}, `token limit "many"`},
		{[]string{"keys", "create", "--name", "x", "--limit", "5", "--expires", "2020-01-01T00:00:00Z"}, "expires_at: 2020-01-01 00:00:00 +0000 UTC is not after now"},
		{[]string{"keys", "create", "--name", "x\x01", "--limit", "5"}, "control character"},
	} {
		r := e.run(c.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
	}

	r = e.ok("keys", "delete", id)
	require.Equal(t, "deleted "+id+"\n", r.stdout)
	for _, args := range [][]string{{"keys", "show", id}, {"keys", "delete", id}, {"usage", id}, {"keys", "enable", id}} {
		r = e.run(args...)
		require.Equal(t, exitError, r.code, args)
		require.Equal(t, "ratestore: no key has the id "+id+"\n", r.stderr)
	}
	id = jsonOf[admin.Created](e, "keys", "create", "--name", "other", "--limit", "1").Key.ID
	del := jsonOf[deleteOut](e, "keys", "delete", id)
	require.Equal(t, id, del.ID)
	require.True(t, del.Deleted)
	require.Equal(t, "no keys\n", e.ok("keys", "list").stdout)
	require.Empty(t, jsonOf[admin.Keys](e, "keys", "list").Keys)
	require.Contains(t, e.ok("keys", "list", "--json").stdout, `"keys": []`)
}

// record records tokens of usage against key id, as a gateway would, at
// the tests' clock.
func (e *env) record(id string, tokens int64) {
	e.t.Helper()
	db, err := ratestore.Open(e.db, ratestore.Options{Backend: backendOf(e.backend), Now: func() time.Time { return now }})
	require.NoError(e.t, err)
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(e.t, err)
	_, err = ks.RecordUsage(context.Background(), id, tokens)
	require.NoError(e.t, err)
	require.NoError(e.t, db.Close())
}

// TestKeysPolicy: a key of two windows, a request rate, a concurrency cap
// and models, shown by keys show and usage in text and JSON; set-limit
// changes what it names and nothing else, usage included.
func TestKeysPolicy(t *testing.T) {
	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "team", "--window", "5h=1000", "--window", "168h=5000/1h",
		"--rpm", "60", "--max-concurrent", "4", "--models", "gpt-4o, claude-*")
	id := created.Key.ID
	want := admin.Key{ID: id, Name: "team", Budgets: []admin.Budget{},
		Windows: []admin.Window{
			{Limit: 1000, Window: "5h0m0s", Bucket: "5m0s", Remaining: 1000},
			{Limit: 5000, Window: "168h0m0s", Bucket: "1h0m0s", Remaining: 5000},
		},
		RequestsPerMinute: 60, MaxConcurrent: 4, Models: []string{"gpt-4o", "claude-*"},
		CreatedAt: timePtr(now)}
	require.Equal(t, want, created.Key)
	e.record(id, 300)

	// Both windows, with their usage: the bucket of 12:00 ends 5 hours and
	// a week on. The binding window is the 5h one, with the least left.
	end5h, endWeek := timePtr(now.Add(5*time.Hour)), timePtr(now.Add(168*time.Hour))
	want.Windows = []admin.Window{
		{Limit: 1000, Window: "5h0m0s", Bucket: "5m0s", Used: 300, Remaining: 700, ResetAfterSeconds: 5 * 3600, WindowEnd: end5h},
		{Limit: 5000, Window: "168h0m0s", Bucket: "1h0m0s", Used: 300, Remaining: 4700, ResetAfterSeconds: 168 * 3600, WindowEnd: endWeek},
	}
	want.LifetimeTokens, want.LastUsed = 300, timePtr(now)
	require.Equal(t, want, jsonOf[admin.Key](e, "usage", id))
	require.Equal(t, want, jsonOf[admin.Key](e, "keys", "show", id))
	require.Equal(t, []admin.Key{want}, jsonOf[admin.Keys](e, "keys", "list").Keys)
	for _, args := range [][]string{{"keys", "show", id}, {"usage", id}} {
		r := e.ok(args...)
		for _, line := range []string{
			"request rate:", "60 per minute", "max concurrent:", "4 requests", "models:", "gpt-4o, claude-*",
			"  WINDOW  BUCKET  USED  LIMIT  REMAINING  WINDOW END",
			"  5h      5m      300   1000   700        2026-01-18T17:00:00Z (in 5h0m0s)    5h0m0s\n",
			"  168h    1h      300   5000   4700       2026-01-25T12:00:00Z (in 168h0m0s)  168h0m0s\n",
		} {
			require.Contains(t, r.stdout, line, args)
		}
	}
	require.Contains(t, e.ok("usage", id).stdout, "used:           300 of 1000 tokens in its 5h window (of its 2 windows, the one with the least left)\n")
	require.Contains(t, e.ok("keys", "list").stdout, "1000/5h, 5000/168h")

	// Each change changes what it names; the usage stays counted while a
	// window's length stays, and the binding window follows.
	for _, c := range []struct {
		args   []string
		done   string
		change func(k *admin.Key)
	}{
		{[]string{"--rpm", "30"}, "set its request rate to 30 per minute", func(k *admin.Key) { k.RequestsPerMinute = 30 }},
		{[]string{"--max-concurrent", "0"}, "set its max concurrent requests to no limit", func(k *admin.Key) { k.MaxConcurrent = 0 }},
		{[]string{"--models", "o3*"}, "set its models to o3*", func(k *admin.Key) { k.Models = []string{"o3*"} }},
		{[]string{"--models", ""}, "set its models to any", func(k *admin.Key) { k.Models = []string{} }},
		{[]string{"--window", "5h=2000"}, "set the limit of its 5h window to 2000 tokens", func(k *admin.Key) {
			k.Windows[0].Limit, k.Windows[0].Remaining = 2000, 1700
		}},
		{[]string{"1500"}, "set the limit of its 5h window to 1500 tokens", func(k *admin.Key) {
			k.Windows[0].Limit, k.Windows[0].Remaining = 1500, 1200
		}},
		{[]string{"--window", "168h=6000/30m", "--window", "24h=400"}, "set the limit of its 168h window to 6000 tokens, in 30m buckets; added a 24h window of 400 tokens", func(k *admin.Key) {
			k.Windows[1].Limit, k.Windows[1].Remaining, k.Windows[1].Bucket = 6000, 5700, "30m0s"
			k.Windows = append(k.Windows, admin.Window{Limit: 400, Window: "24h0m0s", Bucket: "24m0s", Remaining: 400})
			k.Binding = 2 // a new window starts empty, and has the least left
		}},
		{[]string{"--drop-window", "5h"}, "dropped its 5h window", func(k *admin.Key) {
			k.Windows = k.Windows[1:]
			k.Binding = 1
		}},
	} {
		args := append([]string{"keys", "set-limit", id}, c.args...)
		r := e.ok(args...)
		require.True(t, strings.HasPrefix(r.stdout, "changed "+id+": "+c.done+"\n"), "%v: %s", args, r.stdout)
		c.change(&want)
		require.Equal(t, want, jsonOf[admin.Key](e, "keys", "show", id), args)
	}
	k := jsonOf[admin.Key](e, "keys", "set-expiry", id, "720h")
	want.ExpiresAt = timePtr(now.Add(720 * time.Hour))
	require.Equal(t, want, k, "set-expiry changes the expiry only")
}

// TestKeysPolicyErrors: a bad policy flag is a usage error (exit 2) that
// names the flag and the value, and changes nothing.
func TestKeysPolicyErrors(t *testing.T) {
	e := newEnv(t)
	id := jsonOf[admin.Created](e, "keys", "create", "--name", "k", "--window", "5h=100", "--window", "168h=1000").Key.ID
	before := e.records()
	create := []string{"keys", "create", "--name", "x"}
	setLimit := []string{"keys", "set-limit", id}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{append(create, "--window", "5h"), `--window "5h": want DURATION=LIMIT or DURATION=LIMIT/BUCKET`},
		{append(create, "--window", "5 hours=10"), `--window "5 hours=10": window "5 hours": want a positive duration`},
		{append(create, "--window", "-5h=10"), `--window "-5h=10": window "-5h": want a positive duration`},
		{append(create, "--window", "5h=0"), `--window "5h=0": limit "0": want a positive whole number of tokens`},
		{append(create, "--window", "5h=-3"), `--window "5h=-3": limit "-3"`},
		{append(create, "--window", "5h=1e3"), `--window "5h=1e3": limit "1e3"`},
		{append(create, "--window", "5h=10/7m"), `--window "5h=10/7m": bucket 7m0s does not divide the window 5h0m0s`},
		{append(create, "--window", "5h=10/0s"), `--window "5h=10/0s": bucket "0s": want a positive duration`},
		{append(create, "--window", "5h=10/1ms"), `--window "5h=10/1ms": bucket 1ms makes 18000000 buckets of the window, more than 65536`},
		{append(create, "--window", "5h=10", "--window", "300m=20"), `--window "5h=10" and --window "300m=20": both are 5h windows`},
		{append(create, "--window", "5h=10", "--limit", "10"), "--limit and --window: give one or the other"},
		{append(create, "--limit", "10", "--rpm", "-1"), `--rpm "-1": want a whole number of requests per minute`},
		{append(create, "--limit", "10", "--rpm", "fast"), `--rpm "fast"`},
		{append(create, "--limit", "10", "--max-concurrent", "-2"), `--max-concurrent "-2": want a whole number of requests`},
		{append(create, "--limit", "10", "--max-concurrent", "9999999999"), `--max-concurrent "9999999999"`},
		{append(create, "--limit", "10", "--models", "gpt-["), `--models "gpt-[": "gpt-[" is not a valid glob`},
		{append(create, "--limit", "10", "--models", "gpt-4o,,o3"), `--models "gpt-4o,,o3": an empty model name`},
		{append(create, "--limit", "10", "--models", "a\tb"), "models[0]: holds the control character"}, // the key store's ErrInvalid, in the API's terms
		{append(setLimit, "--window", "5h=0"), `--window "5h=0": limit "0"`},
		{append(setLimit, "--window", "5h=10/7m"), `bucket 7m0s does not divide the window 5h0m0s`},
		{append(setLimit, "--drop-window", "24h"), "--drop-window 24h: key " + id + " has no 24h window (it has 5h, 168h)"},
		{append(setLimit, "--drop-window", "soon"), `--drop-window "soon": want the duration of a window of the key`},
		{append(setLimit, "--drop-window", "5h", "--window", "5h=10"), `--drop-window "5h" and a --window of that length`},
		{append(setLimit, "100", "--window", "5h=10"), "TOKENS and --window or --drop-window: give one or the other"},
		{append(setLimit, "--rpm", "1.5"), `--rpm "1.5"`},
		{append(setLimit, "--models", "["), `--models "[": "[" is not a valid glob`},
		{append(setLimit, "0"), `token limit "0": want a positive integer`},
	} {
		r := e.run(c.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
		require.Empty(t, r.stdout, c.args)
	}
	require.Equal(t, before, e.records(), "a refused change changes nothing")
	require.Len(t, jsonOf[admin.Keys](e, "keys", "list").Keys, 1, "a refused create creates nothing")
}

// TestKeysRedis: import, migrate, keys and usage given --redis work on the
// key store in that Redis: a legacy file imported once (a second import
// skips every key) and its usage migrated, a key created, listed, limited
// and shown, and no database file made. --redis with --admin is a usage
// error.
func TestKeysRedis(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t)
	url := srv.URL()
	r := e.ok("--json", "import", validFile, "--redis", url)
	var imp importOut
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &imp))
	require.Equal(t, 3, imp.Keys)
	r = e.ok("--json", "import", validFile, "--redis", url)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &imp))
	require.Zero(t, imp.Keys)
	require.Len(t, imp.Skips, 3)
	require.Equal(t, migrateOut{DryRun: true, Pending: 3}, jsonOf[migrateOut](e, "migrate", "--dry-run", "--redis", url))
	r = e.ok("migrate", "--redis", url)
	require.Equal(t, "migrated the legacy usage of 3 keys\n", r.stdout)
	require.Equal(t, migrateOut{}, jsonOf[migrateOut](e, "migrate", "--redis", url))
	prod := byName(t, jsonOf[admin.Keys](e, "keys", "list", "--redis", url).Keys)["gateway-prod"]
	u := jsonOf[admin.Key](e, "usage", prod, "--redis", url)
	require.Equal(t, int64(41250), u.Windows[u.Binding].Used)

	r = e.ok("--json", "keys", "create", "--name", "shared", "--window", "5h=1000", "--redis", url)
	var created admin.Created
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &created))
	e.ok("keys", "set-limit", created.Key.ID, "--window", "5h=2000", "--redis", url)
	r = e.ok("--json", "usage", created.Key.ID, "--redis", url)
	require.Contains(t, r.stdout, `"limit": 2000`)
	r = e.ok("keys", "list", "--redis", url)
	for _, name := range []string{"shared", "gateway-prod", "batch-jobs", "staging"} {
		require.Contains(t, r.stdout, name)
	}
	r = e.run("keys", "list", "--redis", url, "--admin", "http://127.0.0.1:1")
	require.Equal(t, exitUsage, r.code, r.stderr)
	_, err := os.Stat(e.db)
	require.True(t, os.IsNotExist(err), "--redis opens no database file")
}

// TestKeysMeteredOnly: a key or team may have no limit at all, or budgets
// alone; a key with no limit of its own is created with a note saying it
// is metered only, and its windows can be dropped to none and added back.
func TestKeysMeteredOnly(t *testing.T) {
	e := newEnv(t)
	r := e.ok("keys", "create", "--name", "free", "--json")
	require.Contains(t, r.stderr, "has no limit: it is metered only")
	var created admin.Created
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &created))
	require.Empty(t, created.Key.Windows)
	require.Contains(t, e.ok("usage", created.Key.ID).stdout, "used:           0 tokens in all (no token window)")
	r = e.ok("keys", "create", "--name", "budgeted", "--budget", "5=24h")
	require.NotContains(t, r.stderr, "metered only")
	k := jsonOf[admin.Key](e, "keys", "set-limit", created.Key.ID, "--window", "5h=100")
	require.Len(t, k.Windows, 1)
	k = jsonOf[admin.Key](e, "keys", "set-limit", created.Key.ID, "--drop-window", "5h")
	require.Empty(t, k.Windows)
	team := jsonOf[admin.Team](e, "teams", "create", "--name", "money", "--budget", "50=month")
	require.Empty(t, team.Windows)
	require.Len(t, team.Budgets, 1)
	list := e.ok("keys", "list").stdout
	require.Contains(t, list, "free")
}
