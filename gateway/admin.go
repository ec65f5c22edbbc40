package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// MaxAdminBody bounds the body of an admin request: a key's fields are a
// few kilobytes at most (keystore.MaxModels patterns of keystore.MaxName
// bytes), so anything larger is a mistake or an attack, refused with 413
// before it is read whole.
const MaxAdminBody = 1 << 20

// isAdminPath reports whether a request path is the admin API's or the
// metrics', which the gateway answers itself and never forwards.
func isAdminPath(p string) bool {
	return p == "/metrics" || p == "/admin" || strings.HasPrefix(p, "/admin/")
}

// AdminKey is the one JSON shape of a key with its usage: the admin API
// answers it (KEY in the package documentation), and the command line's
// --json output prints it, both built by NewAdminKey. It never holds the
// secret. It has one time format for each kind of time: instants are RFC
// 3339 in UTC, null when unset; lengths of windows and buckets are Go
// durations, as a request gives them ("5h"); waits counted down from now
// are whole seconds, rounded up, in fields named _seconds, as Retry-After
// counts them.
type AdminKey struct {
	ID                string        `json:"id"`
	Name              string        `json:"name"`
	Team              string        `json:"team,omitempty"` // its team's id (AdminTeam); left out for none
	Model             string        `json:"model"`          // informational (legacy keys); Models restricts
	Models            []string      `json:"models"`         // [] for any model
	Windows           []AdminWindow `json:"windows"`
	Binding           int           `json:"binding"` // the index in Windows of the binding window (keystore.Usage.Bind)
	Budgets           []AdminBudget `json:"budgets"` // [] for none
	LifetimeUSD       pricing.USD   `json:"lifetime_usd"`
	RequestsPerMinute int64         `json:"requests_per_minute"` // 0: no limit
	MaxConcurrent     int           `json:"max_concurrent"`      // 0: no limit
	ExpiresAt         *time.Time    `json:"expires_at"`          // null: never
	Disabled          bool          `json:"disabled"`
	LifetimeTokens    int64         `json:"lifetime_tokens"`
	LastUsed          *time.Time    `json:"last_used"`  // null: never
	CreatedAt         *time.Time    `json:"created_at"` // null: unknown (an imported key)
	InFlight          int           `json:"in_flight"`  // requests admitted and not finished
	// ReservedTokens are the tokens this gateway's requests of the key in
	// flight hold, counted in every window's used until they finish: the
	// part of used not yet charged. 0 where no gateway serves the key (the
	// command line on a closed database), and other gateways' are not
	// counted.
	ReservedTokens int64 `json:"reserved_tokens"`
	// PreviousSecretExpiresAt is when the secret a rotation replaced stops
	// working; null when there is none (keystore.Key).
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

// AdminWindow is one token window of an AdminKey and its usage. Used
// includes the tokens reserved by requests still in flight
// (keystore.WindowUsage), so that it is what the next request is
// admitted against.
type AdminWindow struct {
	Limit             int64      `json:"limit"`
	Window            string     `json:"window"` // a Go duration, as a request gives it: "5h0m0s"
	Bucket            string     `json:"bucket"` // the same: "5m0s"
	Used              int64      `json:"used"`
	Remaining         int64      `json:"remaining"`
	ResetAfterSeconds int64      `json:"reset_after_seconds"` // until nothing is in use, rounded up
	WindowEnd         *time.Time `json:"window_end"`          // when Used next goes down; null when it is 0
}

// AdminBudget is one budget of an AdminKey and what the key has spent in
// it: a rolling Window, or a calendar Period in Timezone. Spent includes
// the worst-case cost reserved by requests still in flight.
type AdminBudget struct {
	LimitUSD     pricing.USD `json:"limit_usd"`
	Window       string      `json:"window,omitempty"`   // a Go duration: "24h0m0s"
	Period       string      `json:"period,omitempty"`   // "day", "week" or "month"
	Timezone     string      `json:"timezone,omitempty"` // the period's IANA zone: "UTC", "Europe/Paris"
	SpentUSD     pricing.USD `json:"spent_usd"`
	RemainingUSD pricing.USD `json:"remaining_usd"`
	ResetsAt     *time.Time  `json:"resets_at"` // when Spent next goes down; null when nothing is spent
}

// AdminBudgetRequest is a budget of an AdminKeyRequest: a limit in USD
// over a rolling window ("24h"), or per calendar period ("day", "week",
// "month") in an IANA time zone (default UTC).
type AdminBudgetRequest struct {
	LimitUSD pricing.USD `json:"limit_usd"`
	Window   string      `json:"window,omitempty"`
	Period   string      `json:"period,omitempty"`
	Timezone string      `json:"timezone,omitempty"`
}

// AdminKeyRequest is the body of POST /admin/keys and PATCH
// /admin/keys/{id}, for clients: a field left out is not set (POST: the
// key has none). The gateway reads it field by field, so that an error
// names the field (windows[1].window).
type AdminKeyRequest struct {
	Name *string `json:"name,omitempty"`
	// Team is the id of the key's team (POST /admin/teams); "" takes the
	// key out of its team.
	Team              *string               `json:"team,omitempty"`
	Model             *string               `json:"model,omitempty"`
	Models            *[]string             `json:"models,omitempty"` // []: any model
	Windows           *[]AdminWindowRequest `json:"windows,omitempty"`
	RequestsPerMinute *int64                `json:"requests_per_minute,omitempty"`
	MaxConcurrent     *int                  `json:"max_concurrent,omitempty"`
	Budgets           *[]AdminBudgetRequest `json:"budgets,omitempty"` // []: none
	// ExpiresAt is an RFC 3339 instant as a JSON string, or null (or "")
	// for never; left out (nil), the expiry is not changed.
	ExpiresAt json.RawMessage `json:"expires_at,omitempty"`
	Disabled  *bool           `json:"disabled,omitempty"`
}

// AdminWindowRequest is a token window of an AdminKeyRequest. Bucket may
// be left out: the window's length / 60, rounded to a divisor.
type AdminWindowRequest struct {
	Limit  int64  `json:"limit"`
	Window string `json:"window"`
	Bucket string `json:"bucket,omitempty"`
}

// AdminCreated is the answer to POST /admin/keys and POST
// /admin/keys/{id}/rotate: the only ones that hold the key's secret.
type AdminCreated struct {
	Key    AdminKey `json:"key"`
	Secret string   `json:"secret"`
}

// AdminRotateRequest is the body of POST /admin/keys/{id}/rotate: how
// long the secret it replaces keeps working, a Go duration ("24h") of at
// most keystore.MaxGrace; left out (or no body), it stops at once.
type AdminRotateRequest struct {
	Grace string `json:"grace,omitempty"`
}

// AdminKeys is the answer to GET /admin/keys, in id order.
type AdminKeys struct {
	Keys []AdminKey `json:"keys"`
}

// AdminTeam is the one JSON shape of a team with its usage (TEAM in the
// package documentation), built by NewAdminTeam: its policy, as an
// AdminKey's, with the usage of all its keys together, and the ids of its
// keys. The command line's --json output prints it too.
type AdminTeam struct {
	ID                string        `json:"id"`
	Name              string        `json:"name"`
	Models            []string      `json:"models"` // [] for any model
	Windows           []AdminWindow `json:"windows"`
	Binding           int           `json:"binding"`             // the index in Windows of the binding window (keystore.Usage.Bind)
	Budgets           []AdminBudget `json:"budgets"`             // [] for none
	RequestsPerMinute int64         `json:"requests_per_minute"` // 0: no limit
	MaxConcurrent     int           `json:"max_concurrent"`      // 0: no limit
	InFlight          int           `json:"in_flight"`           // requests of its keys admitted and not finished
	CreatedAt         *time.Time    `json:"created_at"`
	Keys              []string      `json:"keys"` // the ids of its keys, in id order; [] for none
}

// AdminTeams is the answer to GET /admin/teams, in id order.
type AdminTeams struct {
	Teams []AdminTeam `json:"teams"`
}

// AdminTeamRequest is the body of POST /admin/teams and PATCH
// /admin/teams/{id}, for clients: a field left out is not set (POST: the
// team has none), as in an AdminKeyRequest.
type AdminTeamRequest struct {
	Name              *string               `json:"name,omitempty"`
	Models            *[]string             `json:"models,omitempty"` // []: any model
	Windows           *[]AdminWindowRequest `json:"windows,omitempty"`
	RequestsPerMinute *int64                `json:"requests_per_minute,omitempty"`
	MaxConcurrent     *int                  `json:"max_concurrent,omitempty"`
	Budgets           *[]AdminBudgetRequest `json:"budgets,omitempty"` // []: none
}

// adminCall is the ResponseWriter of an admin request: it notes the
// status and the key or team the request was about, for the log line.
type adminCall struct {
	statusWriter
	keyID, teamID string
}

// serveAdmin answers the admin API, the console and the metrics: see
// Admin API in the package documentation. Without Options.AdminToken all
// are 404, as if they did not exist, so that a gateway without one does
// not even tell that it has them. The console serves its own routes
// (console.Handles) and authorizes every other one.
func (g *Gateway) serveAdmin(w http.ResponseWriter, r *http.Request) {
	c := &adminCall{statusWriter: statusWriter{ResponseWriter: w}}
	defer g.logAdmin(r, c)
	if g.console == nil {
		writeError(c, http.StatusNotFound, typeInvalid, "not_found", "no such path")
		return
	}
	if hasBody(r) {
		// As for the API's requests: a body that never ends must not hold
		// the connection (and its goroutine) for good, and an answer given
		// before the body was read whole closes the connection, which the
		// server would otherwise drain first, however slowly the rest comes.
		// Admin changes are few: a connection each costs nothing.
		defer g.bodyDeadline(w)()
		w.Header().Set("Connection", "close")
	}
	if console.Handles(r.URL.Path) {
		g.console.ServeHTTP(c, r)
		return
	}
	if !g.authorizeAdmin(c, r) {
		return
	}
	if r.URL.Path == "/metrics" {
		g.metrics.handler().ServeHTTP(c, r)
		return
	}
	mux := g.adminAPI
	if h, pattern := mux.Handler(r); pattern == "" {
		// No route: the mux would answer 404 or 405 in plain text. Answer
		// with the error body instead, and the mux's Allow.
		rec := &headerRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			allow := rec.header.Get("Allow")
			c.Header().Set("Allow", allow)
			writeError(c, http.StatusMethodNotAllowed, typeInvalid, "method_not_allowed",
				fmt.Sprintf("%s %s: method not allowed; allowed: %s", r.Method, r.URL.Path, allow))
			return
		}
		writeError(c, http.StatusNotFound, typeInvalid, "not_found", "no such path: the admin API is /admin/keys, /admin/keys/{id}, /admin/teams, /admin/teams/{id}, /admin/spend and /admin/requests")
		return
	}
	mux.ServeHTTP(c, r)
}

// adminMux returns the routes of the admin API.
func (g *Gateway) adminMux() *adminRoutes {
	mux := &adminRoutes{ServeMux: http.NewServeMux()}
	mux.HandleFunc("POST /admin/keys", g.adminCreate)
	mux.HandleFunc("GET /admin/keys", g.adminList)
	mux.HandleFunc("GET /admin/keys/{id}", g.adminGet)
	mux.HandleFunc("PATCH /admin/keys/{id}", g.adminPatch)
	mux.HandleFunc("DELETE /admin/keys/{id}", g.adminDelete)
	mux.HandleFunc("POST /admin/keys/{id}/rotate", g.adminRotate)
	mux.HandleFunc("POST /admin/teams", g.adminTeamCreate)
	mux.HandleFunc("GET /admin/teams", g.adminTeamList)
	mux.HandleFunc("GET /admin/teams/{id}", g.adminTeamGet)
	mux.HandleFunc("PATCH /admin/teams/{id}", g.adminTeamPatch)
	mux.HandleFunc("DELETE /admin/teams/{id}", g.adminTeamDelete)
	mux.HandleFunc("GET /admin/spend", g.adminSpend)
	mux.HandleFunc("GET /admin/requests", g.adminRequests)
	return mux
}

// headerRecorder keeps the status and header the mux's own 404 and 405
// would write, and drops the body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerRecorder) WriteHeader(code int)        { h.status = code }

// noteKey notes the key id an admin call is about, for its log line.
func noteKey(w http.ResponseWriter, id string) {
	if c, ok := w.(*adminCall); ok {
		c.keyID = id
	}
}

// noteTeam notes the team id an admin call is about, for its log line.
func noteTeam(w http.ResponseWriter, id string) {
	if c, ok := w.(*adminCall); ok {
		c.teamID = id
	}
}

// logAdmin logs admin call r at its end: method, path, status, key id and,
// for a team's call, team id; never a body, which may hold a secret. A
// successful scrape of the metrics, poll of /admin/live or read of the
// console's page and assets is logged at level Debug: they come every few
// seconds, or with every page load.
func (g *Gateway) logAdmin(r *http.Request, c *adminCall) {
	level := slog.LevelInfo
	p := r.URL.Path
	quiet := p == "/metrics" || p == "/admin/live" || console.Handles(p) && p != "/admin/session"
	if quiet && c.status < http.StatusBadRequest || g.console == nil {
		level = slog.LevelDebug
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", c.status), slog.String("key_id", c.keyID)}
	if c.teamID != "" {
		attrs = append(attrs, slog.String("team_id", c.teamID))
	}
	g.log.LogAttrs(r.Context(), level, "gateway admin", attrs...)
}

// adminCreate answers POST /admin/keys.
func (g *Gateway) adminCreate(w http.ResponseWriter, r *http.Request) {
	f, ok := readKeyFields(w, r, true)
	if !ok {
		return
	}
	var spec keystore.Spec
	f.apply(&spec)
	k, secret, err := g.keys.Create(r.Context(), spec)
	if err != nil {
		g.adminFailed(w, r, "", err)
		return
	}
	noteKey(w, k.ID)
	if f.disabled != nil && *f.disabled {
		// Nobody has the secret before the answer: disabling it now
		// leaves no moment in which it works.
		if err := g.keys.Disable(r.Context(), k.ID); err != nil {
			g.adminFailed(w, r, k.ID, err)
			return
		}
	}
	a, err := g.adminKey(r.Context(), k.ID)
	if err != nil {
		g.adminFailed(w, r, k.ID, err)
		return
	}
	w.Header().Set("Location", "/admin/keys/"+k.ID)
	writeJSON(w, http.StatusCreated, AdminCreated{Key: a, Secret: secret})
}

// adminList answers GET /admin/keys.
func (g *Gateway) adminList(w http.ResponseWriter, r *http.Request) {
	out := AdminKeys{Keys: []AdminKey{}}
	err := g.keys.List(r.Context(), func(k keystore.Key) error {
		u, err := g.keys.Usage(r.Context(), k.ID)
		switch {
		case errors.Is(err, keystore.ErrNotFound):
			return nil // deleted meanwhile
		case err != nil:
			return err
		}
		out.Keys = append(out.Keys, g.withReserved(NewAdminKey(k, u)))
		return nil
	})
	if err != nil {
		g.adminFailed(w, r, "", err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// adminGet answers GET /admin/keys/{id}.
func (g *Gateway) adminGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteKey(w, id)
	g.writeKey(w, r, id)
}

// writeKey answers with key id as it is now, or the error of reading it.
func (g *Gateway) writeKey(w http.ResponseWriter, r *http.Request, id string) {
	a, err := g.adminKey(r.Context(), id)
	if err != nil {
		g.adminFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// adminPatch answers PATCH /admin/keys/{id}: it sets the fields given and
// no other. "windows" replaces the key's whole list of token windows
// rather than merging into it, so that a window can be removed; one whose
// length stays keeps its usage (keystore.Store.Update). The fields of the
// key's Spec change in one Update, then "disabled", if given; a field
// that is wrong changes nothing, as every field is checked first.
func (g *Gateway) adminPatch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteKey(w, id)
	f, ok := readKeyFields(w, r, false)
	if !ok {
		return
	}
	ctx := r.Context()
	var err error
	if f.changesSpec() {
		_, err = g.keys.Update(ctx, id, func(s *keystore.Spec) error {
			f.apply(s)
			return nil
		})
	} else {
		_, err = g.keys.Get(ctx, id) // 404 for an unknown key, even with nothing to change
	}
	if err == nil && f.disabled != nil {
		if *f.disabled {
			err = g.keys.Disable(ctx, id)
		} else {
			err = g.keys.Enable(ctx, id)
		}
	}
	if err != nil {
		g.adminFailed(w, r, id, err)
		return
	}
	g.writeKey(w, r, id)
}

// adminDelete answers DELETE /admin/keys/{id}.
func (g *Gateway) adminDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteKey(w, id)
	if err := g.keys.Delete(r.Context(), id); err != nil {
		g.adminFailed(w, r, id, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// adminRotate answers POST /admin/keys/{id}/rotate: the key with a new
// secret, as AdminCreated (keystore.Store.Rotate). The log line, as every
// admin call's, names the key and not the secret.
func (g *Gateway) adminRotate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteKey(w, id)
	grace, ok := readGrace(w, r)
	if !ok {
		return
	}
	_, secret, err := g.keys.Rotate(r.Context(), id, grace)
	if err != nil {
		g.adminFailed(w, r, id, err)
		return
	}
	a, err := g.adminKey(r.Context(), id)
	if err != nil {
		g.adminFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, AdminCreated{Key: a, Secret: secret})
}

// readGrace reads the body of a rotation, an AdminRotateRequest or
// nothing, and returns its grace (0 when left out), or answers 400 or 413
// and returns false. Its range is the key store's to check.
func readGrace(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxAdminBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, typeInvalid, "request_too_large", fmt.Sprintf("the body is larger than %d bytes", mbe.Limit))
		return 0, false
	case err != nil:
		writeError(w, http.StatusBadRequest, typeInvalid, "invalid_json", fmt.Sprintf("reading the body: %v", err))
		return 0, false
	case len(bytes.TrimSpace(body)) == 0:
		return 0, true
	}
	var req AdminRotateRequest
	if status, code, msg := decodeStrict(bytes.NewReader(body), &req, ""); status != 0 {
		writeError(w, status, typeInvalid, code, msg)
		return 0, false
	}
	if req.Grace == "" {
		return 0, true
	}
	grace, err := time.ParseDuration(req.Grace)
	if err != nil {
		writeError(w, http.StatusBadRequest, typeInvalid, "invalid_field",
			fmt.Sprintf("grace: %q: not a duration: want a Go duration, as 24h or 90m", req.Grace))
		return 0, false
	}
	return grace, true
}

// adminKey returns key id and its usage now.
func (g *Gateway) adminKey(ctx context.Context, id string) (AdminKey, error) {
	k, err := g.keys.Get(ctx, id)
	if err != nil {
		return AdminKey{}, err
	}
	u, err := g.keys.Usage(ctx, id)
	if err != nil {
		return AdminKey{}, err
	}
	return g.withReserved(NewAdminKey(k, u)), nil
}

// withReserved sets a's reserved tokens: those of the gateway's requests
// of the key in flight.
func (g *Gateway) withReserved(a AdminKey) AdminKey {
	a.ReservedTokens = g.metrics.reserved(a.ID)
	return a
}

// NewAdminKey is key k with its usage u, as keystore.Store.Usage returns
// it (u.Binding set by keystore.Usage.Bind): the one builder of an
// AdminKey. The windows are u's, which hold their policy too: the key's
// policy may have changed between the two reads.
func NewAdminKey(k keystore.Key, u keystore.Usage) AdminKey {
	a := AdminKey{
		ID: k.ID, Name: k.Name, Team: k.Team, Model: k.Model,
		Models:            append([]string{}, k.Policy.Models...),
		Windows:           adminWindows(u),
		Binding:           u.Binding,
		RequestsPerMinute: k.Policy.RequestsPerMinute, MaxConcurrent: k.Policy.MaxConcurrent,
		ExpiresAt: utcPtr(k.ExpiresAt), Disabled: k.Disabled, LifetimeTokens: k.LifetimeTokens,
		LastUsed: utcPtr(k.LastUsed), CreatedAt: utcPtr(k.CreatedAt), InFlight: u.InFlight,
		Budgets: adminBudgets(u), LifetimeUSD: k.LifetimeSpend,
		PreviousSecretExpiresAt: utcPtr(k.PreviousSecretExpiresAt),
	}
	return a
}

// NewAdminTeam is team t with its usage u, as keystore.Store.TeamUsage
// returns it, and the ids of its keys (keystore.Store.TeamKeys): the one
// builder of an AdminTeam. Its windows and budgets are u's, as an
// AdminKey's are.
func NewAdminTeam(t keystore.Team, u keystore.Usage, keys []string) AdminTeam {
	return AdminTeam{
		ID: t.ID, Name: t.Name,
		Models:  append([]string{}, t.Policy.Models...),
		Windows: adminWindows(u), Binding: u.Binding, Budgets: adminBudgets(u),
		RequestsPerMinute: t.Policy.RequestsPerMinute, MaxConcurrent: t.Policy.MaxConcurrent,
		InFlight: u.InFlight, CreatedAt: utcPtr(t.CreatedAt),
		Keys: append([]string{}, keys...),
	}
}

// adminWindows is the token windows of u with their usage, as an AdminKey
// or AdminTeam shows them.
func adminWindows(u keystore.Usage) []AdminWindow {
	ws := make([]AdminWindow, len(u.Windows))
	for i, w := range u.Windows {
		ws[i] = AdminWindow{
			Limit: w.Limit, Window: w.Window.String(), Bucket: w.Bucket.String(),
			Used: w.Used, Remaining: w.Remaining, ResetAfterSeconds: ceilSeconds(w.ResetAfter),
			WindowEnd: utcPtr(w.WindowEnd),
		}
	}
	return ws
}

// adminBudgets is the budgets of u with their spend, as an AdminKey or
// AdminTeam shows them.
func adminBudgets(u keystore.Usage) []AdminBudget {
	bs := make([]AdminBudget, len(u.Budgets))
	for i, b := range u.Budgets {
		bs[i] = AdminBudget{LimitUSD: b.Limit, SpentUSD: b.Spent, RemainingUSD: b.Remaining, ResetsAt: utcPtr(b.ResetsAt)}
		if b.Period != 0 {
			bs[i].Period, bs[i].Timezone = b.Period.String(), "UTC"
			if b.Location != nil {
				bs[i].Timezone = b.Location.String()
			}
		} else {
			bs[i].Window = b.Window.String()
		}
	}
	return bs
}

// utcPtr is t in UTC, nil for the zero Time (unset).
func utcPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// adminFailed answers an admin call whose key store call failed: 404 for
// an unknown key, 400 for a field the key store refuses, with its message
// in the request's terms; otherwise the failure is logged and the answer
// is 500 (a corrupt record) or 503.
func (g *Gateway) adminFailed(w http.ResponseWriter, r *http.Request, id string, err error) {
	switch {
	case errors.Is(err, keystore.ErrNotFound):
		msg := "no key has the id " + id
		if id == "" {
			msg = "no such key"
		}
		writeError(w, http.StatusNotFound, typeInvalid, "key_not_found", msg)
		return
	case errors.Is(err, ratestore.ErrInvalid):
		writeError(w, http.StatusBadRequest, typeInvalid, "invalid_field", fieldMessage(err))
		return
	}
	g.log.LogAttrs(r.Context(), slog.LevelError, "gateway admin: key store failed",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("key_id", id), slog.String("error", err.Error()))
	if errors.Is(err, ratestore.ErrCorrupt) {
		writeError(w, http.StatusInternalServerError, typeAPI, "key_corrupt", "a key's record cannot be read: see the gateway's log")
		return
	}
	writeError(w, http.StatusServiceUnavailable, typeAPI, "store_unavailable", "the gateway's key store failed; retry later")
}

// fieldNames are the admin API's names of a keystore.Spec's fields, by
// the names of a keystore.FieldError's path ("" for a step the API does
// not have: Policy).
var fieldNames = map[string]string{
	"Policy": "", "Windows": "windows", "Limit": "limit", "Window": "window", "Bucket": "bucket",
	"RequestsPerMinute": "requests_per_minute", "MaxConcurrent": "max_concurrent", "Models": "models",
	"Name": "name", "Model": "model", "ExpiresAt": "expires_at", "TokenLimit": "windows",
	"Budgets": "budgets", "Period": "period", "Location": "timezone", "Grace": "grace", "Team": "team",
}

// fieldMessage is the message of err, an error of the key store about a
// field (keystore.FieldError), in the admin API's terms: "windows[1].limit:
// must be positive, got 0".
func fieldMessage(err error) string {
	var fe *keystore.FieldError
	if !errors.As(err, &fe) {
		return strings.TrimPrefix(err.Error(), "keystore: ")
	}
	var path []string
	for _, step := range strings.Split(fe.Field, ".") {
		name, index, _ := strings.Cut(step, "[")
		if api, ok := fieldNames[name]; ok {
			name = api
		}
		if index != "" {
			name += "[" + index
		}
		if name != "" {
			path = append(path, name)
		}
	}
	msg := strings.Join(path, ".") + ": " + fe.Msg
	if fe.Err != nil {
		msg += ": " + fe.Err.Error()
	}
	return msg
}

// policyFields are the policy fields of an AdminKeyRequest or an
// AdminTeamRequest as read and checked: nil for a field left out.
type policyFields struct {
	models        *[]string
	windows       []keystore.Window // nil: left out
	rpm           *int64
	maxConcurrent *int
	budgets       *[]keystore.Budget
}

// changes reports whether f changes a field of a keystore.Policy.
func (f *policyFields) changes() bool {
	return f.models != nil || f.windows != nil || f.rpm != nil || f.maxConcurrent != nil || f.budgets != nil
}

// applyTo sets the fields of p that f gives. Windows and budgets replace
// p's whole lists.
func (f *policyFields) applyTo(p *keystore.Policy) {
	if f.models != nil {
		p.Models = *f.models
	}
	if f.windows != nil {
		p.Windows = f.windows
	}
	if f.rpm != nil {
		p.RequestsPerMinute = *f.rpm
	}
	if f.maxConcurrent != nil {
		p.MaxConcurrent = *f.maxConcurrent
	}
	if f.budgets != nil {
		p.Budgets = *f.budgets
	}
}

// keyFields is an AdminKeyRequest as read and checked: nil for a field
// left out.
type keyFields struct {
	policyFields
	name, model, team *string
	expiresAt         *time.Time // the zero Time: never
	disabled          *bool
}

// changesSpec reports whether f changes a field of a keystore.Spec.
func (f *keyFields) changesSpec() bool {
	return f.name != nil || f.model != nil || f.team != nil || f.expiresAt != nil || f.changes()
}

// apply sets the fields of s that f gives. Windows replace the key's
// whole list.
func (f *keyFields) apply(s *keystore.Spec) {
	if f.name != nil {
		s.Name = *f.name
	}
	if f.model != nil {
		s.Model = *f.model
	}
	if f.team != nil {
		s.Team = *f.team
	}
	if f.expiresAt != nil {
		s.ExpiresAt = *f.expiresAt
	}
	f.applyTo(&s.Policy)
}

// teamFields is an AdminTeamRequest as read and checked: nil for a field
// left out.
type teamFields struct {
	policyFields
	name *string
}

// apply sets the fields of s that f gives, as keyFields.apply does.
func (f *teamFields) apply(s *keystore.TeamSpec) {
	if f.name != nil {
		s.Name = *f.name
	}
	f.applyTo(&s.Policy)
}

// policyBody is the policy fields of AdminKeyRequest and AdminTeamRequest
// as the gateway decodes them: each window and budget apart, so that an
// error names its index.
type policyBody struct {
	Models            *[]string          `json:"models"`
	Windows           *[]json.RawMessage `json:"windows"`
	RequestsPerMinute *int64             `json:"requests_per_minute"`
	MaxConcurrent     *int               `json:"max_concurrent"`
	Budgets           *[]json.RawMessage `json:"budgets"`
}

// keyBody is AdminKeyRequest as the gateway decodes it.
type keyBody struct {
	Name  *string `json:"name"`
	Model *string `json:"model"`
	Team  *string `json:"team"`
	policyBody
	ExpiresAt json.RawMessage `json:"expires_at"`
	Disabled  *bool           `json:"disabled"`
}

// teamBody is AdminTeamRequest as the gateway decodes it.
type teamBody struct {
	Name *string `json:"name"`
	policyBody
}

// readBody decodes the body of r, one JSON object, into v strictly
// (decodeStrict), or answers 400 or 413 and returns false.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if status, code, msg := decodeStrict(http.MaxBytesReader(w, r.Body, MaxAdminBody), v, ""); status != 0 {
		writeError(w, status, typeInvalid, code, msg)
		return false
	}
	return true
}

// readKeyFields reads the body of r, an AdminKeyRequest, and checks what
// can be checked without the key: the types, the durations, the instant,
// and (create) that there is a token window. It answers 400 or 413 and
// returns false when the body is wrong.
func readKeyFields(w http.ResponseWriter, r *http.Request, create bool) (*keyFields, bool) {
	var b keyBody
	if !readBody(w, r, &b) {
		return nil, false
	}
	f := &keyFields{name: b.Name, model: b.Model, team: b.Team, disabled: b.Disabled}
	if !readPolicy(w, &b.policyBody, create, "key", &f.policyFields) {
		return nil, false
	}
	if b.ExpiresAt != nil {
		at, msg := readInstant(b.ExpiresAt)
		if msg != "" {
			writeError(w, http.StatusBadRequest, typeInvalid, "invalid_field", "expires_at: "+msg)
			return nil, false
		}
		f.expiresAt = &at
	}
	return f, true
}

// readTeamFields reads the body of r, an AdminTeamRequest, as
// readKeyFields reads a key's.
func readTeamFields(w http.ResponseWriter, r *http.Request, create bool) (*teamFields, bool) {
	var b teamBody
	if !readBody(w, r, &b) {
		return nil, false
	}
	f := &teamFields{name: b.Name}
	if !readPolicy(w, &b.policyBody, create, "team", &f.policyFields) {
		return nil, false
	}
	return f, true
}

// readPolicy reads the policy fields b of a request about a key or a team
// (what) into f, checking what can be checked without the key store:
// the types, the durations and (create) that there is a token window. It
// answers 400 and returns false when a field is wrong.
func readPolicy(w http.ResponseWriter, b *policyBody, create bool, what string, f *policyFields) bool {
	bad := func(format string, args ...any) bool {
		writeError(w, http.StatusBadRequest, typeInvalid, "invalid_field", fmt.Sprintf(format, args...))
		return false
	}
	f.models, f.rpm, f.maxConcurrent = b.Models, b.RequestsPerMinute, b.MaxConcurrent
	if b.Windows != nil {
		if len(*b.Windows) == 0 {
			return bad("windows: empty: a %s needs at least one token window", what)
		}
		f.windows = make([]keystore.Window, len(*b.Windows))
		for i, raw := range *b.Windows {
			var status int
			var code, msg string
			if f.windows[i], status, code, msg = readWindow(raw, i, f.windows[:i]); status != 0 {
				writeError(w, status, typeInvalid, code, msg)
				return false
			}
		}
	} else if create {
		return bad(`windows: required: a %s needs at least one token window, as [{"limit":100000,"window":"5h"}]`, what)
	}
	if b.Budgets != nil {
		bs := make([]keystore.Budget, len(*b.Budgets))
		for i, raw := range *b.Budgets {
			if !readBudget(w, raw, i, &bs[i]) {
				return false
			}
		}
		f.budgets = &bs
	}
	if f.rpm != nil && *f.rpm < 0 {
		return bad("requests_per_minute: want 0 (no limit) or more, got %d", *f.rpm)
	}
	if f.maxConcurrent != nil && *f.maxConcurrent < 0 {
		return bad("max_concurrent: want 0 (no limit) or more, got %d", *f.maxConcurrent)
	}
	if f.models != nil {
		for i, m := range *f.models {
			if strings.TrimSpace(m) == "" {
				return bad("models[%d]: empty: want a model name or glob (gpt-4o, claude-*)", i)
			}
		}
	}
	return true
}

// readWindow reads windows[i] of a key request, the windows before it
// read already: the answer's status, code and message when it is wrong.
func readWindow(raw json.RawMessage, i int, before []keystore.Window) (win keystore.Window, status int, code, msg string) {
	field := fmt.Sprintf("windows[%d]", i)
	var wr AdminWindowRequest
	if status, code, msg := decodeStrict(bytes.NewReader(raw), &wr, field); status != 0 {
		return win, status, code, msg
	}
	bad := func(format string, args ...any) (keystore.Window, int, string, string) {
		return win, http.StatusBadRequest, "invalid_field", fmt.Sprintf(format, args...)
	}
	var err error
	if win.Window, err = positiveDuration(wr.Window); err != nil {
		return bad("%s.window: %q: %v", field, wr.Window, err)
	}
	if wr.Limit <= 0 {
		return bad("%s.limit: want a positive number of tokens, got %d", field, wr.Limit)
	}
	win.Limit = wr.Limit
	if wr.Bucket != "" {
		if win.Bucket, err = positiveDuration(wr.Bucket); err != nil {
			return bad("%s.bucket: %q: %v", field, wr.Bucket, err)
		}
	}
	if j := slices.IndexFunc(before, func(o keystore.Window) bool { return o.Window == win.Window }); j >= 0 {
		return bad("%s.window: %q: windows[%d] is a %v window already: give each length once", field, wr.Window, j, win.Window)
	}
	return win, 0, "", ""
}

// readBudget reads budgets[i] of a key request into b, or answers 400
// naming the field and returns false. What the key store checks (a
// positive limit, a bucket dividing the window) it reports itself.
func readBudget(w http.ResponseWriter, raw json.RawMessage, i int, b *keystore.Budget) bool {
	var status int
	var code, msg string
	if *b, status, code, msg = parseBudget(raw, i); status != 0 {
		writeError(w, status, typeInvalid, code, msg)
		return false
	}
	return true
}

// parseBudget is readBudget's parse: the answer's status, code and
// message when budgets[i] is wrong.
func parseBudget(raw json.RawMessage, i int) (b keystore.Budget, status int, code, msg string) {
	field := fmt.Sprintf("budgets[%d]", i)
	var br struct { // AdminBudgetRequest, the limit read apart to name it in errors
		LimitUSD json.RawMessage `json:"limit_usd"`
		Window   string          `json:"window"`
		Period   string          `json:"period"`
		Timezone string          `json:"timezone"`
	}
	if status, code, msg := decodeStrict(bytes.NewReader(raw), &br, field); status != 0 {
		return b, status, code, msg
	}
	bad := func(format string, args ...any) (keystore.Budget, int, string, string) {
		return b, http.StatusBadRequest, "invalid_field", fmt.Sprintf(format, args...)
	}
	if err := b.Limit.UnmarshalJSON(br.LimitUSD); err != nil || br.LimitUSD == nil {
		return bad("%s.limit_usd: %s: want an amount in USD, to the nano-dollar (0.000000001)", field, br.LimitUSD)
	}
	var err error
	switch {
	case (br.Window == "") == (br.Period == ""):
		return bad(`%s: give "window" (a Go duration, as "24h") or "period" ("day", "week" or "month"), one of them`, field)
	case br.Window != "":
		if br.Timezone != "" {
			return bad("%s.timezone: a rolling window has no time zone: give a period", field)
		}
		if b.Window, err = positiveDuration(br.Window); err != nil {
			return bad("%s.window: %q: %v", field, br.Window, err)
		}
	default:
		if b.Period, err = strategies.ParsePeriod(br.Period); err != nil {
			return bad(`%s.period: %q: want "day", "week" or "month"`, field, br.Period)
		}
		if br.Timezone != "" {
			if b.Location, err = time.LoadLocation(br.Timezone); err != nil || br.Timezone == "Local" {
				return bad("%s.timezone: %q: want an IANA time zone, as Europe/Paris or UTC", field, br.Timezone)
			}
		}
	}
	return b, 0, "", ""
}

// readInstant reads an RFC 3339 instant or null (the zero instant: never),
// and what is wrong with it, if anything.
func readInstant(raw json.RawMessage) (time.Time, string) {
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, "want an RFC 3339 instant as a string, or null for never"
	}
	if s == nil || *s == "" {
		return time.Time{}, ""
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		return time.Time{}, fmt.Sprintf("%q: want an RFC 3339 instant (2027-01-01T00:00:00Z), or null for never", *s)
	}
	return t.UTC(), ""
}

// positiveDuration parses a Go duration that must be positive.
func positiveDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, errors.New("not a duration: want a Go duration, as 5h, 90m or 168h")
	case d <= 0:
		return 0, errors.New("want a positive duration")
	}
	return d, nil
}

// decodeStrict decodes the one JSON object of rd into v, refusing fields
// v does not have. It returns the status, error code and message of the
// answer when it cannot: 400 invalid_field for a field of the wrong type
// or unknown, 400 invalid_json for a body that is not one JSON value, 413
// for a body over MaxAdminBody. field, when not "", is the field rd is the
// value of, for messages.
func decodeStrict(rd io.Reader, v any, field string) (status int, code, msg string) {
	at := func(name string) string {
		switch {
		case field == "":
			return name
		case name == "":
			return field
		}
		return field + "." + name
	}
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			var mbe *http.MaxBytesError
			if errors.As(terr, &mbe) {
				err = terr
			} else {
				return http.StatusBadRequest, "invalid_json", "the body holds more than one JSON value: want one object"
			}
		}
	}
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	switch {
	case err == nil:
		return 0, "", ""
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("the body is larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF) && field == "":
		return http.StatusBadRequest, "invalid_json", "the body is empty: want a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest, "invalid_json", "the body is not valid JSON: it ends too early"
	case errors.As(err, &se):
		return http.StatusBadRequest, "invalid_json", fmt.Sprintf("the body is not valid JSON: %v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		want := "an object"
		if te.Type != nil {
			want = jsonKind(te.Type.String())
		}
		where := at(te.Field)
		if where == "" {
			where = "the body"
		}
		return http.StatusBadRequest, "invalid_field", fmt.Sprintf("%s: want %s, got a JSON %s", where, want, te.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if field == "" {
			return http.StatusBadRequest, "invalid_field", "unknown field " + name
		}
		return http.StatusBadRequest, "invalid_field", fmt.Sprintf("%s: unknown field %s", field, name)
	}
	return http.StatusBadRequest, "invalid_json", fmt.Sprintf("the body is not a valid key request: %v", err)
}

// jsonKind names the JSON a Go type of the requests is read from.
func jsonKind(goType string) string {
	goType = strings.TrimLeft(goType, "*")
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"):
		return "a whole number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}
