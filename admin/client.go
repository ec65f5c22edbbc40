package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/keystore"
)

// Client calls an admin API: a gateway's over HTTP (NewClient), or an API
// in this process (NewLocalClient), the same requests and answers either
// way. It is what the command line's key, team and spend commands use.
type Client struct {
	base  url.URL // the gateway, without a trailing slash
	token string  // the admin token; "" in process
	http  *http.Client
}

// ClientTimeout bounds one call of a Client made by NewClient: a key store
// call is milliseconds, so a gateway that takes longer is stuck or
// unreachable.
const ClientTimeout = 30 * time.Second

// maxAnswer bounds an answer a Client reads: a page of 1000 keys is a
// few megabytes.
const maxAnswer = 64 << 20

// NewClient returns the client of the admin API of the gateway at rawURL
// (http or https, no query), calling it with the admin token.
func NewClient(rawURL, token string) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("admin: %q: want the gateway's http or https URL, as http://127.0.0.1:8080: %w", rawURL, backend.ErrInvalid)
	}
	if token == "" {
		return nil, fmt.Errorf("admin: no admin token: %w", backend.ErrInvalid)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: *u, token: token, http: &http.Client{Timeout: ClientTimeout}}, nil
}

// NewLocalClient returns a client of h, an API (or whatever guards one)
// in this process: each call is served by h directly, with no network and
// no token, as actor (see WithActor) for the audit log.
func NewLocalClient(h http.Handler, actor string) *Client {
	return &Client{base: url.URL{Scheme: "http", Host: "local"}, http: &http.Client{Transport: localTransport{h, actor}}}
}

// localTransport serves a request with a handler in this process.
type localTransport struct {
	h     http.Handler
	actor string
}

func (t localTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := &buffered{header: http.Header{}}
	in := req.WithContext(WithActor(req.Context(), t.actor))
	if in.Body == nil {
		in.Body = http.NoBody // as a server's request has
	}
	in.RequestURI = in.URL.RequestURI()
	t.h.ServeHTTP(rec, in)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		StatusCode: rec.status, Status: strconv.Itoa(rec.status) + " " + http.StatusText(rec.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: rec.header,
		Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// Error is an answer of the admin API other than the one asked for: its
// status and error body. It matches keystore.ErrNotFound for an unknown key
// or team, and backend.ErrInvalid for a field or parameter the API
// refused or a team it would not delete while keys belong, as the key
// store's own errors do.
type Error struct {
	Method, URL string
	Status      int
	Code, Msg   string
	Param       string // the parameter or field the answer names as wrong, if any
	Local       bool   // the API served in this process (NewLocalClient): Error is Msg alone
}

func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = "(no message)"
	}
	if e.Local {
		return msg
	}
	return fmt.Sprintf("admin API: %s %s: %d %s: %s", e.Method, e.URL, e.Status, http.StatusText(e.Status), msg)
}

func (e *Error) Unwrap() error {
	switch {
	case e.Status == http.StatusNotFound && (e.Code == "key_not_found" || e.Code == "team_not_found"):
		return keystore.ErrNotFound
	case e.Status == http.StatusBadRequest, e.Status == http.StatusConflict && e.Code == "team_has_keys":
		return backend.ErrInvalid
	}
	return nil
}

// call sends a request of method to path with the query q and body as
// JSON (none when nil), and decodes the answer into out (when not nil) if
// its status is want.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, body, out any, want int) error {
	u := c.base
	u.Path += path
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin API: %s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("admin API: %s %s: reading the answer: %w", method, u.Redacted(), err)
	}
	if resp.StatusCode != want {
		e := answerError(method, u.Redacted(), resp.StatusCode, b)
		e.Local = c.token == ""
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("admin API: %s %s: the answer is not what the admin API answers: %w", method, u.Redacted(), err)
	}
	return nil
}

// answerError is the Error of an answer of status with body b.
func answerError(method, url string, status int, b []byte) *Error {
	e := &Error{Method: method, URL: url, Status: status}
	var eb struct {
		Error struct{ Code, Message, Param string } `json:"error"`
	}
	if json.Unmarshal(b, &eb) == nil && eb.Error.Message != "" {
		e.Code, e.Msg, e.Param = eb.Error.Code, eb.Error.Message, eb.Error.Param
	} else {
		e.Msg = strings.TrimSpace(string(b[:min(len(b), 200)]))
	}
	if status == http.StatusNotFound && e.Code == "not_found" {
		e.Msg += " (is the gateway running with an admin token?)"
	}
	return e
}

// keyPath is the path of key id: escaped, so that an id typed wrong stays
// one path segment (and gets 404).
func keyPath(id string) string { return "/admin/keys/" + url.PathEscape(id) }

// teamPath is the path of team id, escaped as keyPath.
func teamPath(id string) string { return "/admin/teams/" + url.PathEscape(id) }

// CreateKey is POST /admin/keys: the key and its secret.
func (c *Client) CreateKey(ctx context.Context, req KeyRequest) (Created, error) {
	var out Created
	err := c.call(ctx, http.MethodPost, "/admin/keys", nil, req, &out, http.StatusCreated)
	return out, err
}

// Key is GET /admin/keys/{id}.
func (c *Client) Key(ctx context.Context, id string) (Key, error) {
	var out Key
	err := c.call(ctx, http.MethodGet, keyPath(id), nil, nil, &out, http.StatusOK)
	return out, err
}

// Keys is GET /admin/keys: a page of keys.
func (c *Client) Keys(ctx context.Context, q url.Values) (Keys, error) {
	var out Keys
	err := c.call(ctx, http.MethodGet, "/admin/keys", q, nil, &out, http.StatusOK)
	return out, err
}

// PatchKey is PATCH /admin/keys/{id}: the fields req gives change.
func (c *Client) PatchKey(ctx context.Context, id string, req KeyRequest) (Key, error) {
	var out Key
	err := c.call(ctx, http.MethodPatch, keyPath(id), nil, req, &out, http.StatusOK)
	return out, err
}

// DeleteKey is DELETE /admin/keys/{id}.
func (c *Client) DeleteKey(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, keyPath(id), nil, nil, nil, http.StatusNoContent)
}

// RotateKey is POST /admin/keys/{id}/rotate: the key with a new secret;
// the old one works for grace more (0: not at all).
func (c *Client) RotateKey(ctx context.Context, id string, grace time.Duration) (Created, error) {
	var req any
	if grace != 0 {
		req = RotateRequest{Grace: grace.String()}
	}
	var out Created
	err := c.call(ctx, http.MethodPost, keyPath(id)+"/rotate", nil, req, &out, http.StatusOK)
	return out, err
}

// CreateTeam is POST /admin/teams.
func (c *Client) CreateTeam(ctx context.Context, req TeamRequest) (Team, error) {
	var out Team
	err := c.call(ctx, http.MethodPost, "/admin/teams", nil, req, &out, http.StatusCreated)
	return out, err
}

// Team is GET /admin/teams/{id}.
func (c *Client) Team(ctx context.Context, id string) (Team, error) {
	var out Team
	err := c.call(ctx, http.MethodGet, teamPath(id), nil, nil, &out, http.StatusOK)
	return out, err
}

// Teams is GET /admin/teams: a page of teams.
func (c *Client) Teams(ctx context.Context, q url.Values) (Teams, error) {
	var out Teams
	err := c.call(ctx, http.MethodGet, "/admin/teams", q, nil, &out, http.StatusOK)
	return out, err
}

// PatchTeam is PATCH /admin/teams/{id}.
func (c *Client) PatchTeam(ctx context.Context, id string, req TeamRequest) (Team, error) {
	var out Team
	err := c.call(ctx, http.MethodPatch, teamPath(id), nil, req, &out, http.StatusOK)
	return out, err
}

// DeleteTeam is DELETE /admin/teams/{id}.
func (c *Client) DeleteTeam(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, teamPath(id), nil, nil, nil, http.StatusNoContent)
}

// Spend is GET /admin/spend with the query q.
func (c *Client) Spend(ctx context.Context, q url.Values) (Spend, error) {
	var out Spend
	err := c.call(ctx, http.MethodGet, "/admin/spend", q, nil, &out, http.StatusOK)
	return out, err
}

// Requests is GET /admin/requests with the query q.
func (c *Client) Requests(ctx context.Context, q url.Values) (Requests, error) {
	var out Requests
	err := c.call(ctx, http.MethodGet, "/admin/requests", q, nil, &out, http.StatusOK)
	return out, err
}

// ReloadPrices is POST /admin/prices/reload.
func (c *Client) ReloadPrices(ctx context.Context) (Prices, error) {
	var out Prices
	err := c.call(ctx, http.MethodPost, "/admin/prices/reload", nil, nil, &out, http.StatusOK)
	return out, err
}

// Upstreams is GET /admin/upstreams: the gateway's upstreams, in the order
// of its configuration.
func (c *Client) Upstreams(ctx context.Context) ([]Upstream, error) {
	var out Upstreams
	err := c.call(ctx, http.MethodGet, "/admin/upstreams", nil, nil, &out, http.StatusOK)
	return out.Upstreams, err
}

// ReloadConfig is POST /admin/config/reload.
func (c *Client) ReloadConfig(ctx context.Context) (Reloaded, error) {
	var out Reloaded
	err := c.call(ctx, http.MethodPost, "/admin/config/reload", nil, nil, &out, http.StatusOK)
	return out, err
}

// Audit is GET /admin/audit with the query q: a page of the audit log.
func (c *Client) Audit(ctx context.Context, q url.Values) (AuditPage, error) {
	var out AuditPage
	err := c.call(ctx, http.MethodGet, "/admin/audit", q, nil, &out, http.StatusOK)
	return out, err
}
