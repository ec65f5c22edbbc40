package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratestore/ratestore"
)

// BenchmarkAdminSmall is what an operator does at 10 keys, through the
// handler of a gateway's port (operatorSurface) served in process, one
// call at a time, its database Sync (the gateway command's default) or
// Async. This file builds against 786b47c as it is, with
// adminsurface_base786_test.go in place of adminsurface_test.go (build tag
// base786; bench/README.md says how): each names its results impl=head or
// impl=786b47c (surfaceImpl), for benchstat -col /impl. The store holds 10 keys, created through the API, each with
// 10 requests forwarded through the gateway to a fake upstream, so that
// the ledger has entries. The calls, with the admin token as a bearer
// token but the last:
//
//   - create: POST /admin/keys (the key is deleted again, the timer
//     stopped, so the store stays at 10 keys);
//   - get, list: GET /admin/keys/{id}, GET /admin/keys;
//   - patch: PATCH /admin/keys/{id}, requests_per_minute changed every
//     time (a PATCH that changes nothing may be answered for less);
//   - spend: GET /admin/spend?group_by=key (the last 30 days);
//   - requests: GET /admin/requests (the newest 100);
//   - signin: POST /admin/session with the token, as JSON;
//   - console-get: GET /admin/keys with the cookie of a session made
//     just before its first call (newSession), as the
//     console's page makes it (Sec-Fetch-Site: same-origin).
func BenchmarkAdminSmall(b *testing.B) {
	for _, dur := range []ratestore.Durability{ratestore.Sync, ratestore.Async} {
		b.Run("dur="+dur.String(), func(b *testing.B) {
			s := newSmallSurface(b, dur)
			for _, op := range smallOps {
				b.Run("op="+op.name+"/impl="+surfaceImpl, func(b *testing.B) {
					if op.before != nil {
						op.before(s, b)
					}
					i := 0
					for b.Loop() {
						body := s.call(b, op.request(s, i), op.want)
						if op.after != nil {
							b.StopTimer()
							op.after(b, s, body)
							b.StartTimer()
						}
						i++
					}
				})
			}
		})
	}
}

// smallToken is BenchmarkAdminSmall's admin token.
const smallToken = "bench-admin-token-0123456789abcdef0123456789"

// smallKeys is BenchmarkAdminSmall's key count.
const smallKeys = 10

// smallSurface is BenchmarkAdminSmall's port: its handler, the ids and
// secrets of its keys, and a session.
type smallSurface struct {
	h            http.Handler
	ids, secrets []string
	cookie       *http.Cookie
}

// smallOp is one call of BenchmarkAdminSmall: its request (i counts the
// calls), the status it must answer, and what to do before its first call
// and after each, untimed.
type smallOp struct {
	name    string
	request func(s *smallSurface, i int) *http.Request
	want    int
	before  func(s *smallSurface, b *testing.B)
	after   func(b *testing.B, s *smallSurface, body []byte)
}

var smallOps = []smallOp{
	{"create", func(*smallSurface, int) *http.Request {
		return adminCall(http.MethodPost, "/admin/keys", smallKeyBody)
	}, http.StatusCreated, nil, deleteCreated},
	{"get", func(s *smallSurface, i int) *http.Request {
		return adminCall(http.MethodGet, "/admin/keys/"+s.ids[i%smallKeys], "")
	}, http.StatusOK, nil, nil},
	{"list", func(*smallSurface, int) *http.Request {
		return adminCall(http.MethodGet, "/admin/keys", "")
	}, http.StatusOK, nil, nil},
	{"patch", func(s *smallSurface, i int) *http.Request {
		return adminCall(http.MethodPatch, "/admin/keys/"+s.ids[0], fmt.Sprintf(`{"requests_per_minute":%d}`, 1000+i))
	}, http.StatusOK, nil, nil},
	{"spend", func(*smallSurface, int) *http.Request {
		return adminCall(http.MethodGet, "/admin/spend?group_by=key", "")
	}, http.StatusOK, nil, nil},
	{"requests", func(*smallSurface, int) *http.Request {
		return adminCall(http.MethodGet, "/admin/requests", "")
	}, http.StatusOK, nil, nil},
	{"signin", func(*smallSurface, int) *http.Request { return signIn() }, http.StatusOK, nil, nil},
	{"console-get", func(s *smallSurface, _ int) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/admin/keys", nil)
		r.AddCookie(s.cookie)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		return r
	}, http.StatusOK, (*smallSurface).newSession, nil},
}

// smallKeyBody is the key every create makes.
const smallKeyBody = `{"name":"bench","windows":[{"limit":100000,"window":"5h"}]}`

// adminCall is a request of the admin API with the admin token.
func adminCall(method, target, body string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+smallToken)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// signIn is a console's sign-in with the admin token.
func signIn() *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/admin/session", strings.NewReader(`{"token":"`+smallToken+`"}`))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// deleteCreated deletes the key whose creation answered body.
func deleteCreated(b *testing.B, s *smallSurface, body []byte) {
	var created struct {
		Key struct {
			ID string `json:"id"`
		} `json:"key"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.Key.ID == "" {
		b.Fatalf("POST /admin/keys answered %q: %v", body, err)
	}
	s.call(b, adminCall(http.MethodDelete, "/admin/keys/"+created.Key.ID, ""), http.StatusNoContent)
}

// call serves r and returns the answer's body, failing b unless its
// status is want.
func (s *smallSurface) call(b *testing.B, r *http.Request, want int) []byte {
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	if w.Code != want {
		b.Fatalf("%s %s: %d %s, want %d", r.Method, r.URL, w.Code, strings.TrimSpace(w.Body.String()), want)
	}
	return w.Body.Bytes()
}

// newSmallSurface opens a database of durability dur in a temporary
// directory and builds BenchmarkAdminSmall's port over it: smallKeys keys,
// 10 requests of each forwarded to a fake upstream.
func newSmallSurface(b *testing.B, dur ratestore.Durability) *smallSurface {
	db, err := ratestore.Open(filepath.Join(b.TempDir(), "small.db"), ratestore.Options{Durability: dur})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() }) // after the surface's own cleanups
	upstream := httptest.NewServer(http.HandlerFunc(fakeCompletion))
	b.Cleanup(upstream.Close)
	u, err := url.Parse(upstream.URL)
	if err != nil {
		b.Fatal(err)
	}
	s := &smallSurface{h: operatorSurface(b, db, u, smallToken)}
	for range smallKeys {
		var created struct {
			Key struct {
				ID string `json:"id"`
			} `json:"key"`
			Secret string `json:"secret"`
		}
		if err := json.Unmarshal(s.call(b, adminCall(http.MethodPost, "/admin/keys", smallKeyBody), http.StatusCreated), &created); err != nil {
			b.Fatal(err)
		}
		s.ids, s.secrets = append(s.ids, created.Key.ID), append(s.secrets, created.Secret)
	}
	for i := range smallKeys * 10 {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		r.Header.Set("Authorization", "Bearer "+s.secrets[i%smallKeys])
		r.Header.Set("Content-Type", "application/json")
		s.call(b, r, http.StatusOK)
	}
	return s
}

// newSession signs in and keeps the session's cookie, just before the
// calls that use it: 786b47c kept at most 10,000 sessions in memory, the
// oldest forgotten, so that signin's calls forget a session made before
// them.
func (s *smallSurface) newSession(b *testing.B) {
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, signIn())
	s.cookie = nil
	for _, c := range w.Result().Cookies() {
		if c.Value != "" {
			s.cookie = c
		}
	}
	if w.Code != http.StatusOK || s.cookie == nil {
		b.Fatalf("POST /admin/session: %d, cookies %v", w.Code, w.Result().Cookies())
	}
}

// fakeCompletion answers a chat completion with its usage, as OpenAI does.
func fakeCompletion(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`)
}
