package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// adminTokenEnv is the environment variable of the admin token, read by
// the gateway command (which opens its admin API with it) and by the key
// commands given --admin (which send it).
const adminTokenEnv = "RATESTORE_ADMIN_TOKEN"

// adminTimeout bounds one call of the admin API: a key store call is
// milliseconds, so a gateway that takes longer is stuck or unreachable.
const adminTimeout = 30 * time.Second

// adminToken returns the admin token: the content of file when file is
// not "" (--admin-token-file), else $RATESTORE_ADMIN_TOKEN (see
// tokenFrom). Without a file, no token is "" and no error: the gateway
// then runs without its admin API, and a key command says what it lacks.
func adminToken(file string) (string, error) {
	return tokenFrom("--admin-token-file", file, adminTokenEnv)
}

// tokenFrom returns a token: the content of file when file is not "" (the
// flag that named it, which keeps the token out of the process list and
// the environment), else the variable env; surrounding white space (the
// newline an editor leaves) is trimmed. A file that is empty, or cannot be
// read, is an error: it was named to hold a token.
func tokenFrom(flag, file, env string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s %s: the file is empty: want the token", flag, file)
	}
	return token, nil
}

// keyService is what the key commands do with keys: the methods of
// *keystore.Store they call, which adminClient implements over the
// admin API of a running gateway.
type keyService interface {
	Create(ctx context.Context, spec keystore.Spec) (keystore.Key, string, error)
	Get(ctx context.Context, id string) (keystore.Key, error)
	List(ctx context.Context, fn func(keystore.Key) error) error
	Update(ctx context.Context, id string, fn func(*keystore.Spec) error) (keystore.Key, error)
	Usage(ctx context.Context, id string) (keystore.Usage, error)
	Disable(ctx context.Context, id string) error
	Enable(ctx context.Context, id string) error
	Delete(ctx context.Context, id string) error
	Rotate(ctx context.Context, id string, grace time.Duration) (keystore.Key, string, error)
}

// service is what the key and team commands work on: a *keystore.Store,
// or an adminClient.
type service interface {
	keyService
	teamService
}

var (
	_ service = (*keystore.Store)(nil)
	_ service = (*adminClient)(nil)
)

// adminClient is a keyService over the admin API of a running gateway
// (see package gateway, Admin API): for a database the gateway holds,
// which no other process may open.
type adminClient struct {
	base   *url.URL // the gateway, without a trailing slash
	token  string
	client *http.Client
}

// newAdminClient returns the client of the gateway at rawURL, with the
// admin token of tokenFile or the environment (see adminToken). Plain
// http to a host other than loopback sends the token in the clear: warn
// writes a warning about it.
func newAdminClient(rawURL, tokenFile string, warn io.Writer) (*adminClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef("", "--admin %q: want the gateway's http or https URL, as http://%s", rawURL, defaultListen)
	}
	token, err := adminToken(tokenFile)
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, usagef("", "--admin %s: no admin token: set $%s or give --admin-token-file, as the gateway was given", rawURL, adminTokenEnv)
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		fmt.Fprintf(warn, "ratestore: warning: --admin %s: the admin token goes over plain http to a host that is not loopback\n", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &adminClient{base: u, token: token, client: &http.Client{Timeout: adminTimeout}}, nil
}

// loopback reports whether host is a loopback address or localhost.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// adminError is an answer of the admin API other than success: its status
// and error body. It matches keystore.ErrNotFound for an unknown key or
// team, and ratestore.ErrInvalid for a field the gateway refused or a
// team it would not delete while keys belong, as the key store's own
// errors do, so that the commands exit alike either way.
type adminError struct {
	method, url string
	status      int
	code, msg   string
}

func (e *adminError) Error() string {
	msg := e.msg
	if msg == "" {
		msg = "(no message)"
	}
	return fmt.Sprintf("admin API: %s %s: %d %s: %s", e.method, e.url, e.status, http.StatusText(e.status), msg)
}

func (e *adminError) Unwrap() error {
	switch {
	case e.status == http.StatusNotFound && (e.code == "key_not_found" || e.code == "team_not_found"):
		return keystore.ErrNotFound
	case e.status == http.StatusBadRequest, e.status == http.StatusConflict && e.code == "team_has_keys":
		return ratestore.ErrInvalid
	}
	return nil
}

// call sends a request of method to path with body as JSON (none when
// nil) and decodes the answer into out (when not nil) if its status is
// want.
func (a *adminClient) call(ctx context.Context, method, path string, body, out any, want int) error {
	u := *a.base
	u.Path += path
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
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("admin API: %s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("admin API: %s %s: reading the answer: %w", method, u.Redacted(), err)
	}
	if resp.StatusCode != want {
		e := &adminError{method: method, url: u.Redacted(), status: resp.StatusCode}
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(b, &eb) == nil && eb.Error.Message != "" {
			e.code, e.msg = eb.Error.Code, eb.Error.Message
		} else {
			e.msg = strings.TrimSpace(string(b[:min(len(b), 200)]))
		}
		if resp.StatusCode == http.StatusNotFound && e.code == "not_found" {
			e.msg += " (is the gateway running with an admin token?)"
		}
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

// keyPath is the path of key id: escaped, so that an id typed wrong stays
// one path segment (and gets 404).
func keyPath(id string) string { return "/admin/keys/" + url.PathEscape(id) }

func (a *adminClient) Create(ctx context.Context, spec keystore.Spec) (keystore.Key, string, error) {
	windows := spec.Policy.Windows
	if len(windows) == 0 && spec.TokenLimit > 0 {
		// --limit: the key store's default window, which the gateway's
		// key store has too (it is opened with the default options).
		windows = []keystore.Window{{Limit: spec.TokenLimit, Window: keystore.DefaultWindow, Bucket: keystore.DefaultBucket}}
	}
	req := gateway.AdminKeyRequest{
		Name: &spec.Name, Models: &spec.Policy.Models, Windows: windowRequests(windows),
		RequestsPerMinute: &spec.Policy.RequestsPerMinute, MaxConcurrent: &spec.Policy.MaxConcurrent,
		Budgets: budgetRequests(spec.Policy.Budgets),
	}
	if spec.Model != "" {
		req.Model = &spec.Model
	}
	if spec.Team != "" {
		req.Team = &spec.Team
	}
	if req.Models != nil && *req.Models == nil {
		req.Models = &[]string{}
	}
	if !spec.ExpiresAt.IsZero() {
		req.ExpiresAt = expiresJSON(spec.ExpiresAt)
	}
	var out gateway.AdminCreated
	if err := a.call(ctx, http.MethodPost, "/admin/keys", req, &out, http.StatusCreated); err != nil {
		return keystore.Key{}, "", err
	}
	k, _, err := fromAdmin(out.Key)
	return k, out.Secret, err
}

func (a *adminClient) get(ctx context.Context, id string) (keystore.Key, keystore.Usage, error) {
	var out gateway.AdminKey
	if err := a.call(ctx, http.MethodGet, keyPath(id), nil, &out, http.StatusOK); err != nil {
		return keystore.Key{}, keystore.Usage{}, err
	}
	return fromAdmin(out)
}

func (a *adminClient) Get(ctx context.Context, id string) (keystore.Key, error) {
	k, _, err := a.get(ctx, id)
	return k, err
}

func (a *adminClient) Usage(ctx context.Context, id string) (keystore.Usage, error) {
	_, u, err := a.get(ctx, id)
	return u, err
}

func (a *adminClient) List(ctx context.Context, fn func(keystore.Key) error) error {
	return a.ListUsage(ctx, func(k keystore.Key, _ keystore.Usage) error { return fn(k) })
}

// usageLister is a keyService that lists the keys with their usage in
// one call, as keys list prints them.
type usageLister interface {
	ListUsage(ctx context.Context, fn func(keystore.Key, keystore.Usage) error) error
}

var _ usageLister = (*adminClient)(nil)

// ListUsage calls fn for every key, in id order, with its usage, both of
// the one answer to GET /admin/keys.
func (a *adminClient) ListUsage(ctx context.Context, fn func(keystore.Key, keystore.Usage) error) error {
	var out gateway.AdminKeys
	if err := a.call(ctx, http.MethodGet, "/admin/keys", nil, &out, http.StatusOK); err != nil {
		return err
	}
	for _, ak := range out.Keys {
		k, u, err := fromAdmin(ak)
		if err != nil {
			return err
		}
		if err := fn(k, u); err != nil {
			return err
		}
	}
	return nil
}

// Update reads key id, lets fn change its Spec as keystore.Store.Update
// does, and sends the fields that changed (windows as the whole list).
// Unlike the key store's, it is not atomic: a change made by someone else
// between the read and the PATCH, to a field fn changes too, is
// overwritten; to the other fields, it stays.
func (a *adminClient) Update(ctx context.Context, id string, fn func(*keystore.Spec) error) (keystore.Key, error) {
	k, err := a.Get(ctx, id)
	if err != nil {
		return keystore.Key{}, err
	}
	old := keystore.Spec{Name: k.Name, Model: k.Model, TokenLimit: k.TokenLimit, Policy: k.Policy, ExpiresAt: k.ExpiresAt, Team: k.Team}
	spec := old
	spec.Policy.Windows = slices.Clone(old.Policy.Windows)
	spec.Policy.Models = slices.Clone(old.Policy.Models)
	if err := fn(&spec); err != nil {
		return keystore.Key{}, err
	}
	if spec.TokenLimit != old.TokenLimit && slices.Equal(spec.Policy.Windows, old.Policy.Windows) && len(spec.Policy.Windows) > 0 {
		spec.Policy.Windows[0].Limit = spec.TokenLimit // as keystore.Store.Update
	}
	var req gateway.AdminKeyRequest
	p := policyRequest(old.Policy, spec.Policy)
	req.Models, req.Windows, req.Budgets, req.RequestsPerMinute, req.MaxConcurrent = p.Models, p.Windows, p.Budgets, p.RequestsPerMinute, p.MaxConcurrent
	changed := p != gateway.AdminTeamRequest{}
	if spec.Name != old.Name {
		req.Name, changed = &spec.Name, true
	}
	if spec.Model != old.Model {
		req.Model, changed = &spec.Model, true
	}
	if spec.Team != old.Team {
		req.Team, changed = &spec.Team, true
	}
	if !spec.ExpiresAt.Equal(old.ExpiresAt) {
		req.ExpiresAt, changed = expiresJSON(spec.ExpiresAt), true
	}
	if !changed {
		return k, nil
	}
	return a.patch(ctx, id, req)
}

func (a *adminClient) patch(ctx context.Context, id string, req gateway.AdminKeyRequest) (keystore.Key, error) {
	var out gateway.AdminKey
	if err := a.call(ctx, http.MethodPatch, keyPath(id), req, &out, http.StatusOK); err != nil {
		return keystore.Key{}, err
	}
	k, _, err := fromAdmin(out)
	return k, err
}

func (a *adminClient) Disable(ctx context.Context, id string) error {
	disabled := true
	_, err := a.patch(ctx, id, gateway.AdminKeyRequest{Disabled: &disabled})
	return err
}

func (a *adminClient) Enable(ctx context.Context, id string) error {
	disabled := false
	_, err := a.patch(ctx, id, gateway.AdminKeyRequest{Disabled: &disabled})
	return err
}

func (a *adminClient) Delete(ctx context.Context, id string) error {
	return a.call(ctx, http.MethodDelete, keyPath(id), nil, nil, http.StatusNoContent)
}

// Rotate gives key id a new secret, as keystore.Store.Rotate does: POST
// /admin/keys/{id}/rotate, with the grace when it is not 0.
func (a *adminClient) Rotate(ctx context.Context, id string, grace time.Duration) (keystore.Key, string, error) {
	var req any
	if grace != 0 {
		req = gateway.AdminRotateRequest{Grace: grace.String()}
	}
	var out gateway.AdminCreated
	if err := a.call(ctx, http.MethodPost, keyPath(id)+"/rotate", req, &out, http.StatusOK); err != nil {
		return keystore.Key{}, "", err
	}
	k, _, err := fromAdmin(out.Key)
	return k, out.Secret, err
}

// windowRequests is ws as the admin API takes them; a Bucket of 0 is left
// out (the key store's default).
func windowRequests(ws []keystore.Window) *[]gateway.AdminWindowRequest {
	out := make([]gateway.AdminWindowRequest, len(ws))
	for i, w := range ws {
		out[i] = gateway.AdminWindowRequest{Limit: w.Limit, Window: w.Window.String()}
		if w.Bucket > 0 {
			out[i].Bucket = w.Bucket.String()
		}
	}
	return &out
}

// policyRequest is the policy fields of a request that changes a policy
// from old to next: those that differ (windows and budgets as whole
// lists), in an AdminTeamRequest, whose Name it leaves nil.
func policyRequest(old, next keystore.Policy) gateway.AdminTeamRequest {
	var req gateway.AdminTeamRequest
	if !slices.Equal(next.Models, old.Models) {
		models := append([]string{}, next.Models...)
		req.Models = &models
	}
	if !slices.Equal(next.Windows, old.Windows) {
		req.Windows = windowRequests(next.Windows)
	}
	if !slices.Equal(next.Budgets, old.Budgets) {
		req.Budgets = budgetRequests(next.Budgets)
	}
	if next.RequestsPerMinute != old.RequestsPerMinute {
		req.RequestsPerMinute = &next.RequestsPerMinute
	}
	if next.MaxConcurrent != old.MaxConcurrent {
		req.MaxConcurrent = &next.MaxConcurrent
	}
	return req
}

// expiresJSON is the expires_at of an AdminKeyRequest: null for never.
func expiresJSON(t time.Time) json.RawMessage {
	if t.IsZero() {
		return json.RawMessage("null")
	}
	b, _ := json.Marshal(t.UTC().Format(time.RFC3339Nano))
	return b
}

// fromAdmin is a key of the admin API as the key store returns it, with
// its usage, so that the commands print it as they print a key of a
// database they open (gateway.NewAdminKey gives a back). The one
// difference: ResetAfter is in whole seconds (rounded up), as the admin
// API gives it.
func fromAdmin(a gateway.AdminKey) (keystore.Key, keystore.Usage, error) {
	k := keystore.Key{
		ID: a.ID, Name: a.Name, Model: a.Model,
		Policy: keystore.Policy{
			Windows:           make([]keystore.Window, len(a.Windows)),
			RequestsPerMinute: a.RequestsPerMinute, MaxConcurrent: a.MaxConcurrent,
		},
		ExpiresAt: timeOf(a.ExpiresAt), CreatedAt: timeOf(a.CreatedAt), LastUsed: timeOf(a.LastUsed),
		LifetimeTokens: a.LifetimeTokens, Disabled: a.Disabled, Team: a.Team,
		PreviousSecretExpiresAt: timeOf(a.PreviousSecretExpiresAt), LifetimeSpend: a.LifetimeUSD,
	}
	u := keystore.Usage{InFlight: a.InFlight}
	if err := fromAdminPolicy("key "+a.ID, a.Models, a.Windows, a.Budgets, &k.Policy, &u); err != nil {
		return keystore.Key{}, keystore.Usage{}, err
	}
	k.TokenLimit = k.Policy.Windows[0].Limit
	return k, u, nil
}

// fromAdminPolicy sets the models, windows and budgets of who's policy
// pol, as the admin API gives them, and their usage in u.
func fromAdminPolicy(who string, models []string, ws []gateway.AdminWindow, bs []gateway.AdminBudget, pol *keystore.Policy, u *keystore.Usage) error {
	if len(models) > 0 {
		pol.Models = models
	}
	pol.Windows, u.Windows = make([]keystore.Window, len(ws)), make([]keystore.WindowUsage, len(ws))
	for i, w := range ws {
		win, bucket := length(w.Window), length(w.Bucket)
		if win <= 0 || bucket <= 0 {
			return fmt.Errorf("admin API: %s: windows[%d]: window %q, bucket %q: want positive Go durations", who, i, w.Window, w.Bucket)
		}
		pol.Windows[i] = keystore.Window{Limit: w.Limit, Window: win, Bucket: bucket}
		u.Windows[i] = keystore.WindowUsage{
			Window: win, Bucket: bucket, Used: w.Used, Limit: w.Limit, Remaining: w.Remaining,
			ResetAfter: time.Duration(w.ResetAfterSeconds) * time.Second, WindowEnd: timeOf(w.WindowEnd),
		}
	}
	if len(pol.Windows) == 0 {
		return errors.New("admin API: " + who + " has no token window")
	}
	if err := fromAdminBudgets(who, bs, pol, u); err != nil {
		return err
	}
	u.Bind()
	return nil
}

// timeOf is *t, or the zero Time for nil.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// budgetRequests is bs as the admin API takes them; nil for none.
func budgetRequests(bs []keystore.Budget) *[]gateway.AdminBudgetRequest {
	out := make([]gateway.AdminBudgetRequest, len(bs))
	for i, b := range bs {
		out[i].LimitUSD = b.Limit
		if b.Period != 0 {
			out[i].Period, out[i].Timezone = b.Period.String(), b.Location.String()
		} else {
			out[i].Window = b.Window.String()
		}
	}
	return &out
}

// fromAdminBudgets sets the budgets bs of who, as the admin API gives
// them, in pol and their spend in u.
func fromAdminBudgets(who string, bs []gateway.AdminBudget, pol *keystore.Policy, u *keystore.Usage) error {
	for i, ab := range bs {
		b := keystore.Budget{Limit: ab.LimitUSD, Window: length(ab.Window)}
		if ab.Period != "" {
			var err error
			if b.Period, err = strategies.ParsePeriod(ab.Period); err != nil {
				return fmt.Errorf("admin API: %s: budgets[%d]: %w", who, i, err)
			}
			if ab.Timezone != "UTC" {
				if b.Location, err = time.LoadLocation(ab.Timezone); err != nil {
					return fmt.Errorf("admin API: %s: budgets[%d]: %w", who, i, err)
				}
			}
		}
		pol.Budgets = append(pol.Budgets, b)
		u.Budgets = append(u.Budgets, keystore.BudgetUsage{Budget: b, Spent: ab.SpentUSD, Remaining: ab.RemainingUSD, ResetsAt: timeOf(ab.ResetsAt)})
	}
	return nil
}

// teamPath is the path of team id, escaped as keyPath escapes a key's.
func teamPath(id string) string { return "/admin/teams/" + url.PathEscape(id) }

// CreateTeam makes a team of spec, as keystore.Store.CreateTeam does:
// POST /admin/teams.
func (a *adminClient) CreateTeam(ctx context.Context, spec keystore.TeamSpec) (keystore.Team, error) {
	req := policyRequest(keystore.Policy{}, spec.Policy)
	req.Name, req.Windows = &spec.Name, windowRequests(spec.Policy.Windows)
	var out gateway.AdminTeam
	if err := a.call(ctx, http.MethodPost, "/admin/teams", req, &out, http.StatusCreated); err != nil {
		return keystore.Team{}, err
	}
	t, _, err := fromAdminTeam(out)
	return t, err
}

// viewTeam returns team id with its usage and keys: GET /admin/teams/{id}.
func (a *adminClient) viewTeam(ctx context.Context, id string) (gateway.AdminTeam, error) {
	var out gateway.AdminTeam
	err := a.call(ctx, http.MethodGet, teamPath(id), nil, &out, http.StatusOK)
	return out, err
}

// viewTeams returns every team with its usage and keys, in id order: GET
// /admin/teams.
func (a *adminClient) viewTeams(ctx context.Context) ([]gateway.AdminTeam, error) {
	var out gateway.AdminTeams
	err := a.call(ctx, http.MethodGet, "/admin/teams", nil, &out, http.StatusOK)
	return out.Teams, err
}

func (a *adminClient) GetTeam(ctx context.Context, id string) (keystore.Team, error) {
	at, err := a.viewTeam(ctx, id)
	if err != nil {
		return keystore.Team{}, err
	}
	t, _, err := fromAdminTeam(at)
	return t, err
}

func (a *adminClient) TeamUsage(ctx context.Context, id string) (keystore.Usage, error) {
	at, err := a.viewTeam(ctx, id)
	if err != nil {
		return keystore.Usage{}, err
	}
	_, u, err := fromAdminTeam(at)
	return u, err
}

func (a *adminClient) TeamKeys(ctx context.Context, id string) ([]string, error) {
	at, err := a.viewTeam(ctx, id)
	return at.Keys, err
}

func (a *adminClient) ListTeams(ctx context.Context, fn func(keystore.Team) error) error {
	teams, err := a.viewTeams(ctx)
	if err != nil {
		return err
	}
	for _, at := range teams {
		t, _, err := fromAdminTeam(at)
		if err == nil {
			err = fn(t)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// UpdateTeam reads team id, lets fn change its TeamSpec, and sends the
// fields that changed, as Update does for a key (and, as it, not
// atomically).
func (a *adminClient) UpdateTeam(ctx context.Context, id string, fn func(*keystore.TeamSpec) error) (keystore.Team, error) {
	t, err := a.GetTeam(ctx, id)
	if err != nil {
		return keystore.Team{}, err
	}
	spec := keystore.TeamSpec{Name: t.Name, Policy: t.Policy}
	spec.Policy.Windows = slices.Clone(t.Policy.Windows)
	spec.Policy.Budgets = slices.Clone(t.Policy.Budgets)
	spec.Policy.Models = slices.Clone(t.Policy.Models)
	if err := fn(&spec); err != nil {
		return keystore.Team{}, err
	}
	req := policyRequest(t.Policy, spec.Policy)
	if spec.Name != t.Name {
		req.Name = &spec.Name
	}
	if req == (gateway.AdminTeamRequest{}) {
		return t, nil
	}
	var out gateway.AdminTeam
	if err := a.call(ctx, http.MethodPatch, teamPath(id), req, &out, http.StatusOK); err != nil {
		return keystore.Team{}, err
	}
	t, _, err = fromAdminTeam(out)
	return t, err
}

func (a *adminClient) DeleteTeam(ctx context.Context, id string) error {
	return a.call(ctx, http.MethodDelete, teamPath(id), nil, nil, http.StatusNoContent)
}

// fromAdminTeam is a team of the admin API as the key store returns it,
// with its usage, as fromAdmin is for a key.
func fromAdminTeam(a gateway.AdminTeam) (keystore.Team, keystore.Usage, error) {
	t := keystore.Team{ID: a.ID, Name: a.Name, CreatedAt: timeOf(a.CreatedAt),
		Policy: keystore.Policy{RequestsPerMinute: a.RequestsPerMinute, MaxConcurrent: a.MaxConcurrent}}
	u := keystore.Usage{InFlight: a.InFlight}
	if err := fromAdminPolicy("team "+a.ID, a.Models, a.Windows, a.Budgets, &t.Policy, &u); err != nil {
		return keystore.Team{}, keystore.Usage{}, err
	}
	return t, u, nil
}
