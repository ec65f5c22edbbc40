package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
)

// testStore is a store of the contract the tests keep sessions in, with
// what they read and write of it directly.
type testStore struct {
	sessions *Sessions
	records  func() map[string][]byte // every record under console/
	put      func(key, value []byte)
}

func backendOf(t *testing.T, db backend.Store) testStore {
	return testStore{
		sessions: StoreSessions(db),
		records: func() map[string][]byte {
			m := map[string][]byte{}
			require.NoError(t, db.Scan(context.Background(), []byte("console/"), func(k, v []byte) error {
				m[string(k)] = bytes.Clone(v)
				return nil
			}))
			return m
		},
		put: func(key, value []byte) {
			require.NoError(t, db.Update(context.Background(), nil, func(b backend.Batch) error { return b.Put(key, value) }))
		},
	}
}

// TestSessionsRestart: a session signed in at one console opens a new
// console on the same database, as after a restart, with the same CSRF
// token.
func TestSessionsRestart(t *testing.T) {
	clock := fakeclock.New(t0)
	st := backendtest.BoltSync.Open(t, clock)
	before := newConsole(t, Options{Now: clock.Now, Sessions: StoreSessions(st.Store)})
	cookie, csrf := signIn(t, before, "127.0.0.1:1")
	st.Reopen()

	after := newConsole(t, Options{Now: clock.Now, Sessions: StoreSessions(st.Store)})
	w := call(after, "GET", "/admin/session", "127.0.0.1:1", "", cookie, "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"csrf":"`+csrf+`"`)
	w = call(after, "PATCH", "/admin/keys/k", "127.0.0.1:1", `{}`, cookie, csrf)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, 1, sessions(t, after))
}

// TestSessionsShared: two consoles on one Redis, as two gateways: a
// session signed in at one opens the other, and a sign-out at the other
// ends it at both.
func TestSessionsShared(t *testing.T) {
	clock := fakeclock.New(t0)
	st := backendtest.Redis.Open(t, clock)
	a := newConsole(t, Options{Now: clock.Now, Sessions: StoreSessions(st.Store)})
	b := newConsole(t, Options{Now: clock.Now, Sessions: StoreSessions(st.Another())})
	cookie, csrf := signIn(t, a, "127.0.0.1:1")
	w := call(b, "GET", "/admin/keys", "127.0.0.1:1", "", cookie, "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = call(b, "DELETE", "/admin/session", "127.0.0.1:1", "", cookie, csrf)
	require.Equal(t, http.StatusNoContent, w.Code)
	for _, c := range []*Console{a, b} {
		w = call(c, "GET", "/admin/keys", "127.0.0.1:1", "", cookie, "")
		require.Equal(t, http.StatusUnauthorized, w.Code)
		require.Contains(t, w.Body.String(), codeNoSess)
	}
	require.Zero(t, sessions(t, a))
}

// TestSessionRecords: the store holds each session's id (the SHA-256 of
// its cookie) and expiry, never the cookie or the CSRF token; MaxSessions
// forgets the oldest, and expired sessions are swept.
func TestSessionRecords(t *testing.T) {
	backendtest.Run(t, backendtest.All(), func(t *testing.T, b backendtest.Backend) {
		clock := fakeclock.New(t0)
		be := backendOf(t, b.Open(t, clock).Store)
		c := newConsole(t, Options{Now: clock.Now, Sessions: be.sessions, MaxSessions: 3, SessionTTL: time.Hour})
		var cookies []string
		for i := range 4 {
			cookie, csrf := signIn(t, c, "127.0.0.1:1")
			cookies = append(cookies, cookie)
			for k, v := range be.records() {
				for _, secret := range []string{cookie, csrf} {
					require.NotContains(t, k, secret)
					require.False(t, bytes.Contains(v, []byte(secret)))
				}
			}
			id := sha256.Sum256([]byte(cookie))
			require.Contains(t, be.records(), "console/s/"+hex.EncodeToString(id[:])+"/sessions")
			clock.Advance(time.Duration(i+1) * time.Minute) // signed in at 0, 1, 3 and 6 minutes
		}
		require.Equal(t, 3, sessions(t, c))
		require.False(t, isLive(c, cookies[0]), "the oldest, forgotten for the fourth")
		require.Len(t, be.records(), 2*3+1, "a record and its expiry each, and the count")

		clock.Advance(52 * time.Minute) // 1h2m: the second has expired, not the third
		require.Equal(t, 2, sessions(t, c))
		require.False(t, isLive(c, cookies[1]))
		require.True(t, isLive(c, cookies[2]))
		clock.Advance(time.Hour)
		require.Zero(t, sessions(t, c))
		require.Len(t, be.records(), 1, "only the count is left")
	})
}

// TestSessionCorrupt: a session record that does not decode fails the
// requests of its cookie with 500, and is forgotten by its sign-out.
func TestSessionCorrupt(t *testing.T) {
	clock := fakeclock.New(t0)
	be := backendOf(t, backendtest.BoltSync.Open(t, clock).Store)
	c := newConsole(t, Options{Now: clock.Now, Sessions: be.sessions})
	cookie, csrf := signIn(t, c, "127.0.0.1:1")
	id := sha256.Sum256([]byte(cookie))
	be.put(sessionKey(id), []byte("bad"))
	w := call(c, "GET", "/admin/keys", "127.0.0.1:1", "", cookie, "")
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Contains(t, w.Body.String(), `"code":"session_store"`)
	w = call(c, "POST", "/admin/session", "127.0.0.1:1", `{"token":"`+token+`"}`, cookie, csrf)
	require.Equal(t, http.StatusOK, w.Code, "a sign-in forgets the session it came with: %s", w.Body.String())
	require.NotContains(t, be.records(), string(sessionKey(id)))
}
