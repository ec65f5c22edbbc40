package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// byName returns the ids of the keys by name.
func byName(t *testing.T, keys []keyOut) map[string]string {
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
	keys := jsonOf[keysOut](e, "keys", "list").Keys
	require.Len(t, keys, 3)
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k.ID, "key_"), k.ID)
		require.NotContains(t, r.stdout, "pk_", "no secret is listed")
	}
	ids := byName(t, keys)
	gw := jsonOf[keyResultOut](e, "keys", "show", ids["gateway-prod"]).Key
	require.Equal(t, keyOut{
		ID: ids["gateway-prod"], Name: "gateway-prod", Model: "glm-4.7", TokenLimit: 100000,
		ExpiresAt:      timePtr(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)),
		CreatedAt:      timePtr(time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)),
		LastUsed:       timePtr(time.Date(2026, 1, 18, 11, 58, 30, 250e6, time.UTC)),
		LifetimeTokens: 1834411, Status: "active",
	}, gw)

	// At noon, the window of 09:30 counts and the one of 04:10 has expired.
	u := jsonOf[usageOut](e, "usage", ids["gateway-prod"])
	require.Equal(t, usageOut{ID: ids["gateway-prod"], Used: 41250, Limit: 100000, Remaining: 58750,
		ResetAfter: int64(150 * time.Minute), WindowEnd: timePtr(time.Date(2026, 1, 18, 14, 30, 0, 0, time.UTC))}, u)
	r = e.ok("usage", ids["gateway-prod"])
	require.Contains(t, r.stdout, "41250 of 100000 tokens")
	require.Contains(t, r.stdout, "2026-01-18T14:30:00Z (in 2h30m0s)")

	u = jsonOf[usageOut](e, "usage", ids["staging"])
	require.Equal(t, int64(5000), u.Used)
	require.Zero(t, u.Remaining)
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
	created := jsonOf[createOut](e, "keys", "create", "--name", "team-a", "--limit", "1000", "--model", "glm-4.7")
	secret := created.Secret
	require.True(t, strings.HasPrefix(secret, "rsk_"), secret)
	require.Equal(t, keyOut{ID: created.Key.ID, Name: "team-a", Model: "glm-4.7", TokenLimit: 1000,
		CreatedAt: timePtr(now), Status: "active"}, created.Key)

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
	id := jsonOf[createOut](e, "keys", "create", "--name", "ci", "--limit", "100", "--expires", "720h").Key.ID
	k := jsonOf[keyResultOut](e, "keys", "show", id).Key
	require.Equal(t, now.Add(720*time.Hour), *k.ExpiresAt)

	r := e.ok("keys", "disable", id)
	require.Contains(t, r.stdout, "disabled "+id)
	k = jsonOf[keyResultOut](e, "keys", "disable", id).Key
	require.True(t, k.Disabled)
	require.Equal(t, "disabled", k.Status)
	k = jsonOf[keyResultOut](e, "keys", "enable", id).Key
	require.False(t, k.Disabled)
	require.Equal(t, "active", k.Status)

	k = jsonOf[keyResultOut](e, "keys", "set-limit", id, "5000").Key
	require.Equal(t, int64(5000), k.TokenLimit)
	k = jsonOf[keyResultOut](e, "keys", "set-expiry", id, "2030-05-01T10:00:00+02:00").Key
	require.Equal(t, time.Date(2030, 5, 1, 8, 0, 0, 0, time.UTC), *k.ExpiresAt)
	k = jsonOf[keyResultOut](e, "keys", "set-expiry", id, "never").Key
	require.Nil(t, k.ExpiresAt)
	r = e.ok("keys", "set-expiry", id, "2026-01-01T00:00:00Z")
	require.Contains(t, r.stdout, "status:          expired")
	k = jsonOf[keyResultOut](e, "keys", "show", id).Key
	require.True(t, k.Expired)
	require.Equal(t, "expired", k.Status)

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"keys", "set-limit", id, "0"}, `token limit "0": want a positive integer`},
		{[]string{"keys", "set-limit", id, "1.5"}, `token limit "1.5"`},
		{[]string{"keys", "set-expiry", id, "tomorrow"}, `expiry "tomorrow"`},
		{[]string{"keys", "set-expiry", id, "-1h"}, "flag provided but not defined"},
		{[]string{"keys", "create", "--name", "x"}, "--name and --limit are required"},
		{[]string{"keys", "create", "--limit", "5"}, "--name and --limit are required"},
		{[]string{"keys", "create", "--name", "x", "--limit", "many"}, `token limit "many"`},
		{[]string{"keys", "create", "--name", "x", "--limit", "5", "--expires", "2020-01-01T00:00:00Z"}, "ExpiresAt"},
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
		require.Equal(t, "ratestore: keystore: key "+id+": key not found\n", r.stderr)
	}
	id = jsonOf[createOut](e, "keys", "create", "--name", "other", "--limit", "1").Key.ID
	del := jsonOf[deleteOut](e, "keys", "delete", id)
	require.Equal(t, id, del.ID)
	require.True(t, del.Deleted)
	require.Equal(t, "no keys\n", e.ok("keys", "list").stdout)
	require.Empty(t, jsonOf[keysOut](e, "keys", "list").Keys)
	require.Contains(t, e.ok("keys", "list", "--json").stdout, `"keys": []`)
}
