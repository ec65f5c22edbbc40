package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
)

// authenticates reports, opening the database, which of secrets
// authenticate key id.
func (e *env) authenticates(id string, secrets ...string) []bool {
	e.t.Helper()
	db, err := ratestore.Open(e.db, ratestore.Options{Backend: backendOf(e.backend), Now: func() time.Time { return now }})
	require.NoError(e.t, err)
	defer db.Close()
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(e.t, err)
	out := make([]bool, len(secrets))
	for i, s := range secrets {
		k, err := ks.Authenticate(context.Background(), s)
		if err == nil {
			require.Equal(e.t, id, k.ID)
		} else {
			require.ErrorIs(e.t, err, keystore.ErrNotFound)
		}
		out[i] = err == nil
	}
	return out
}

// TestKeysRotate: keys rotate on a database prints the new secret once,
// as keys create does, keeps the key, and the old secret works for
// --grace; without it, it stops at once.
func TestKeysRotate(t *testing.T) {
	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "rot", "--limit", "1000")
	id, old := created.Key.ID, created.Secret
	e.record(id, 7)
	before := jsonOf[admin.Key](e, "keys", "show", id)

	rotated := jsonOf[admin.Created](e, "keys", "rotate", id, "--grace", "24h")
	require.True(t, strings.HasPrefix(rotated.Secret, "rsk_"), rotated.Secret)
	require.NotEqual(t, old, rotated.Secret)
	want := before
	want.PreviousSecretExpiresAt = timePtr(now.Add(24 * time.Hour))
	require.Equal(t, want, rotated.Key, "the same key, with its usage")
	require.Equal(t, []bool{true, true}, e.authenticates(id, old, rotated.Secret))
	r := e.ok("keys", "show", id)
	require.Contains(t, r.stdout, "previous secret: works until 2026-01-19T12:00:00Z")
	require.NotContains(t, r.stdout, "rsk_")

	r = e.ok("keys", "rotate", id)
	require.Equal(t, 1, strings.Count(r.stdout, "rsk_"), r.stdout)
	require.Contains(t, r.stdout, "id:     "+id+"\nsecret: rsk_")
	require.Contains(t, r.stdout, "old:    stopped working\n")
	require.Contains(t, r.stderr, "the new secret of "+id+" is shown only this once")
	require.NotContains(t, r.stderr, "rsk_")
	newest := strings.TrimSpace(strings.SplitN(strings.SplitN(r.stdout, "secret: ", 2)[1], "\n", 2)[0])
	require.Equal(t, []bool{false, false, true}, e.authenticates(id, old, rotated.Secret, newest))
	require.Nil(t, jsonOf[admin.Key](e, "keys", "show", id).PreviousSecretExpiresAt)

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"keys", "rotate", id, "--grace", "-1h"}, exitUsage, "keys rotate: --grace -1h0m0s: want 0 (the old secret stops at once) up to 720h"},
		{[]string{"keys", "rotate", id, "--grace", "721h"}, exitUsage, "up to 720h"},
		{[]string{"keys", "rotate", id, "--grace", "soon"}, exitUsage, `invalid value "soon" for flag -grace`},
		{[]string{"keys", "rotate"}, exitUsage, "want ID"},
		{[]string{"keys", "rotate", "key_0123456789abcdef"}, exitError, "no key has the id key_0123456789abcdef"},
	} {
		r := e.run(c.args...)
		require.Equal(t, c.code, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
	}
	require.Equal(t, []bool{true}, e.authenticates(id, newest), "a refused rotation changes nothing")
}

// TestKeysRotateThroughAdmin: keys rotate --admin rotates the key of a
// running gateway, which takes the new secret at once and the old one for
// the grace; it prints what it prints on a database.
func TestKeysRotateThroughAdmin(t *testing.T) {
	e := newEnv(t)
	g := e.startAdminGateway(testAdminToken)
	t.Setenv(adminTokenEnv, testAdminToken)
	viaAdmin := func(args ...string) []string { return append(args, "--admin", g.url) }
	created := jsonOf[admin.Created](e, viaAdmin("keys", "create", "--name", "ci", "--limit", "1000")...)
	id, old := created.Key.ID, created.Secret
	require.Equal(t, http.StatusOK, g.proxy(t, old))

	rotated := jsonOf[admin.Created](e, viaAdmin("keys", "rotate", id, "--grace", "1h")...)
	require.NotEqual(t, old, rotated.Secret)
	require.Equal(t, id, rotated.Key.ID)
	require.Equal(t, timePtr(now.Add(time.Hour)), rotated.Key.PreviousSecretExpiresAt)
	require.EqualValues(t, 42, rotated.Key.LifetimeTokens)
	require.Equal(t, rotated.Key, jsonOf[admin.Key](e, viaAdmin("keys", "show", id)...))
	require.Equal(t, http.StatusOK, g.proxy(t, rotated.Secret))
	require.Equal(t, http.StatusOK, g.proxy(t, old), "during the grace")

	r := e.ok(viaAdmin("keys", "rotate", id)...)
	require.Contains(t, r.stdout, "old:    stopped working\n")
	require.Contains(t, r.stderr, "is shown only this once")
	newest := strings.TrimSpace(strings.SplitN(strings.SplitN(r.stdout, "secret: ", 2)[1], "\n", 2)[0])
	require.Equal(t, http.StatusUnauthorized, g.proxy(t, old))
	require.Equal(t, http.StatusUnauthorized, g.proxy(t, rotated.Secret))
	require.Equal(t, http.StatusOK, g.proxy(t, newest))

	r = e.run(viaAdmin("keys", "rotate", "key_0123456789abcdef", "--grace", "1h")...)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "404 Not Found: no key has the id key_0123456789abcdef")
}

// TestKeysRotateRedis: keys rotate --redis rotates a key of the key store
// in Redis.
func TestKeysRotateRedis(t *testing.T) {
	url := redistest.Start(t).URL()
	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "shared", "--limit", "10", "--redis", url)
	rotated := jsonOf[admin.Created](e, "keys", "rotate", created.Key.ID, "--grace", "2h", "--redis", url)
	require.NotEqual(t, created.Secret, rotated.Secret)
	require.Equal(t, timePtr(now.Add(2*time.Hour)), rotated.Key.PreviousSecretExpiresAt)
	require.Equal(t, rotated.Key, jsonOf[admin.Key](e, "keys", "show", created.Key.ID, "--redis", url))
}
