package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/keystore"
)

// endUserKey is a key whose end users have 100 tokens an hour each, and
// whose gpt-4o requests have 150 an hour together.
func endUserKey(t *testing.T, e *env, required bool) (keystore.Key, string) {
	t.Helper()
	k, secret, err := e.keys().Create(context.Background(), keystore.Spec{Name: "eu", Policy: keystore.Policy{
		Windows:     []keystore.Window{{Limit: 10000, Window: time.Hour}},
		ModelLimits: []keystore.ModelLimit{{Models: []string{"gpt-4o*"}, Windows: []keystore.Window{{Limit: 150, Window: time.Hour}}}},
		EndUsers:    keystore.EndUsers{Windows: []keystore.Window{{Limit: 100, Window: time.Hour}}, Required: required},
	}})
	require.NoError(t, err)
	return k, secret
}

// userChat is a chat request body of testModel with the fields extra.
func userChat(input, output int64, extra map[string]any) map[string]any {
	m := map[string]any{"model": testModel, "input": input, "output": output, "max_tokens": 50}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestEndUsersNamed: the end user is named by the header, else OpenAI's
// user, else its safety_identifier, else Anthropic's metadata.user_id;
// each has its own window, the refusal names it, and the rate-limit
// fields report the binding limit, the end user's.
func TestEndUsersNamed(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := endUserKey(t, e, false)
	send := func(path string, body map[string]any, header string) (*http.Response, []byte) {
		req := e.request("POST", path, secret, body)
		if header != "" {
			req.Header.Set(EndUserHeader, header)
		}
		return e.do(req)
	}
	resp, body := send("/v1/chat/completions", userChat(10, 20, map[string]any{"user": "alice"}), "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	left, err := strconv.Atoi(resp.Header.Get("X-Ratelimit-Remaining-Tokens"))
	require.NoError(t, err)
	require.Less(t, left, 100, "alice's window binds (100 less the reservation), not the key's 10000")
	require.Equal(t, "100", resp.Header.Get("X-Ratelimit-Limit-Tokens"))
	resp, _ = send("/v1/chat/completions", userChat(10, 20, map[string]any{"user": "bob", "safety_identifier": "carol"}), "dave")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = send("/v1/chat/completions", userChat(10, 20, map[string]any{"safety_identifier": "carol"}), "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, body = send("/v1/messages", userChat(5, 5, map[string]any{"metadata": map[string]any{"user_id": "erin"}}), "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	for name, used := range map[string]int64{"alice": 30, "dave": 30, "bob": 0, "carol": 30, "erin": 10} {
		u, err := e.keys().EndUserUsage(context.Background(), k.ID, name)
		require.NoError(t, err)
		require.Equal(t, used, u.Used, name)
	}

	// alice has 70 left: a request that may use 10/4 + 80 is refused, by name.
	big := userChat(10, 20, map[string]any{"user": "alice", "max_tokens": 80})
	resp, body = send("/v1/chat/completions", big, "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	msg := apiError(t, body, typeRate)["message"].(string)
	require.Contains(t, msg, `end user "alice" of key `+k.ID+` is over its 1h0m0s token window: 100 tokens`)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	// The model limit: 150 for gpt-4o* together, 120 used by the first.
	resp, body = send("/v1/chat/completions", userChat(60, 60, map[string]any{"model": "gpt-4o", "max_tokens": 100}), "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, body = send("/v1/chat/completions", userChat(10, 10, map[string]any{"model": "gpt-4o-mini", "max_tokens": 60}), "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
	require.Contains(t, apiError(t, body, typeRate)["message"], "key "+k.ID+"'s limit on models gpt-4o* is over its 1h0m0s token window: 150 tokens")
}

// TestEndUsersInvalid: a name over 256 bytes, not printable UTF-8, not a
// string, or given twice is refused with 400 before the upstream sees
// it; a key that requires an end user refuses a request naming none.
func TestEndUsersInvalid(t *testing.T) {
	e := newEnv(t, Options{})
	k, secret := endUserKey(t, e, true)
	for _, c := range []struct {
		body   map[string]any
		header []string
		code   string
	}{
		{userChat(1, 1, map[string]any{"user": strings.Repeat("u", 257)}), nil, "invalid_end_user"},
		{userChat(1, 1, map[string]any{"user": "a\u202eb"}), nil, "invalid_end_user"},
		{userChat(1, 1, map[string]any{"user": 17}), nil, "invalid_body"},
		{userChat(1, 1, map[string]any{"safety_identifier": []int{1}}), nil, "invalid_body"},
		{userChat(1, 1, nil), []string{"a", "b"}, "invalid_end_user"},
		{userChat(1, 1, nil), []string{"tab\there"}, "invalid_end_user"},
		{userChat(1, 1, map[string]any{"user": ""}), nil, "end_user_required"},
		{userChat(1, 1, nil), nil, "end_user_required"},
	} {
		req := e.request("POST", "/v1/chat/completions", secret, c.body)
		for _, h := range c.header {
			req.Header.Add(EndUserHeader, h)
		}
		resp, body := e.do(req)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v %v: %s", c.body, c.header, body)
		require.Equal(t, c.code, apiError(t, body, typeInvalid)["code"], string(body))
	}
	for _, body := range []map[string]any{
		{"model": testModel, "metadata": map[string]any{"user_id": 5}},
		{"model": testModel, "metadata": "x"},
	} {
		resp, b := e.call("POST", "/v1/messages", secret, body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(b))
	}
	require.Zero(t, e.up.hits.Load(), "the upstream saw none of them")
	require.Zero(t, e.usage(k.ID).Used)
	req := e.request("POST", "/v1/chat/completions", secret, userChat(1, 1, nil))
	req.Header.Set(EndUserHeader, "ok")
	resp, body := e.do(req)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Empty(t, e.up.lastHeaders().Get(EndUserHeader), "the header is the gateway's, not forwarded")
}

// TestAdminEndUsers: the end users of a key are listed by the admin API,
// a page at a time, searched by the start of their names, each with its
// window and its totals; one is read by name; spend groups by end user
// and the ledger's requests are filtered by one.
func TestAdminEndUsers(t *testing.T) {
	e := newAdminEnv(t, Options{})
	k, secret := endUserKey(t, e, false)
	send := func(name string, in, out int64) {
		req := e.request("POST", "/v1/chat/completions", secret, userChat(in, out, nil))
		if name != "" {
			req.Header.Set(EndUserHeader, name)
		}
		resp, body := e.do(req)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	for i := range 5 {
		send(fmt.Sprintf("u-%d", i), 10, int64(i))
	}
	send("u-3", 1, 1)
	send("v/with slash", 2, 2)
	send("", 7, 7)

	base := "/admin/keys/" + k.ID + "/end-users"
	p := adminOK[admin.EndUserPage](e, "GET", base+"?limit=2&q=u-", nil, http.StatusOK)
	var names []string
	for {
		for _, u := range p.EndUsers {
			names = append(names, u.ID)
		}
		if p.NextCursor == "" {
			break
		}
		p = adminOK[admin.EndUserPage](e, "GET", base+"?limit=2&q=u-&cursor="+url.QueryEscape(p.NextCursor), nil, http.StatusOK)
	}
	require.Equal(t, []string{"u-0", "u-1", "u-2", "u-3", "u-4"}, names)

	u3 := adminOK[admin.EndUser](e, "GET", base+"/u-3", nil, http.StatusOK)
	require.EqualValues(t, 2, u3.Requests)
	require.EqualValues(t, 15, u3.Tokens)
	require.EqualValues(t, 15, u3.Windows[0].Used)
	require.EqualValues(t, 100, u3.Windows[0].Limit)
	require.NotNil(t, u3.LastUsed)
	slash := adminOK[admin.EndUser](e, "GET", base+"/"+url.PathEscape("v/with slash"), nil, http.StatusOK)
	require.EqualValues(t, 4, slash.Tokens)
	resp, body := e.admin("GET", base+"/nobody", adminToken, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(body))
	resp, body = e.admin("GET", "/admin/keys/key_0123456789abcdef/end-users", adminToken, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(body))
	resp, body = e.admin("GET", base+"?cursor=forged", adminToken, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))

	s := adminOK[admin.Spend](e, "GET", "/admin/spend?group_by=end_user&key="+k.ID, nil, http.StatusOK)
	byName := map[string]int64{}
	for _, r := range s.Rows {
		byName[*r.EndUser] = r.Requests
	}
	require.Equal(t, map[string]int64{"u-0": 1, "u-1": 1, "u-2": 1, "u-3": 2, "u-4": 1, "v/with slash": 1, "": 1}, byName)
	reqs := adminOK[admin.Requests](e, "GET", "/admin/requests?end_user=u-3", nil, http.StatusOK)
	require.Len(t, reqs.Requests, 2)
	require.Equal(t, "u-3", reqs.Requests[0].EndUser)
}

// TestEndUserOtherName: the ledger's name of the row of end users past a
// day's top ones is no end user's name.
func TestEndUserOtherName(t *testing.T) {
	e := newEnv(t, Options{})
	_, secret := endUserKey(t, e, false)
	resp, body := e.call("POST", "/v1/chat/completions", secret, userChat(1, 1, map[string]any{"user": "(other)"}))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
	require.Equal(t, "invalid_end_user", apiError(t, body, typeInvalid)["code"])
}
