package browsertest

import (
	"net/http"
	"testing"
)

// TestConsoleRestart signs in, restarts the gateway (its database closed
// and opened again, a new process's memory) and reloads the page: the
// session is kept in the store, hashed, so the operator is still signed
// in, and a change the page makes (its CSRF token derived from the same
// cookie) is accepted. The cookie is the same one: nothing was issued
// again.
func TestConsoleRestart(t *testing.T) {
	e := newEnv(t, desktop)
	e.open()
	e.signIn()
	before := e.sessionCookie()
	if before == nil {
		t.Fatal("no session cookie after signing in")
	}
	var created struct {
		Key struct {
			ID string `json:"id"`
		} `json:"key"`
	}
	e.api("POST", "/admin/keys", map[string]any{"name": "kept-across-restarts"}, &created, http.StatusCreated)

	e.restart()
	e.reload("keys")
	e.shot("restart-1-still-signed-in")
	if after := e.sessionCookie(); after == nil || after.Value != before.Value {
		t.Errorf("the session cookie after the restart: %+v, want the one from before", after)
	}
	e.disable(created.Key.ID)

	e.restart()
	e.reload("keys")
	e.signOut()
}
