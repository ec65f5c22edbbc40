package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/keystore"
)

// The admin API's audit log (package audit): every change made through
// the API is recorded, once it is made and before the API answers, as an
// event of the actor the caller's context names (WithActor), and GET
// /admin/audit pages through them, newest first.

// The actions of the audit log's events, and what their changes hold.
// Changes name a key's or team's fields as a request does ("windows",
// "requests_per_minute", ...), each from and to its value in a request's
// JSON: windows [{"limit","window","bucket"}], budgets [{"limit_usd",
// "window" or "period" and "timezone"}], expires_at an RFC 3339 instant or
// null, team "" for none. Only the fields that changed are there.
const (
	ActionKeyCreate  = "key.create"  // every field, from null
	ActionKeyUpdate  = "key.update"  // a PATCH: the fields it changed (disabled among them, if it did)
	ActionKeyDisable = "key.disable" // a PATCH that changed "disabled" alone, to true
	ActionKeyEnable  = "key.enable"  // the same, to false
	// ActionKeyRotate is a new secret: its changes hold
	// "previous_secret_expires_at", when the secret it replaced stops
	// working (the grace, as an instant; null for none), when that
	// changed. Never a secret, nor a secret's hash.
	ActionKeyRotate    = "key.rotate"
	ActionKeyDelete    = "key.delete"  // every field the key had, to null
	ActionTeamCreate   = "team.create" // as for a key
	ActionTeamUpdate   = "team.update"
	ActionTeamDelete   = "team.delete"
	ActionPricesReload = "prices.reload" // target PricesTarget; "models", to how many the table prices
	// ActionConfigReload is a reload of the gateway's configuration file
	// (POST /admin/config/reload), target ConfigTarget: "upstreams" and
	// "models", to how many upstreams it has and models its prices price.
	ActionConfigReload = "config.reload"
)

// PricesTarget is the target of the events of ActionPricesReload.
const PricesTarget = "prices"

// ConfigTarget is the target of the events of ActionConfigReload.
const ConfigTarget = "config"

// AuditPage is the answer to GET /admin/audit: events newest first, in
// audit.Event's JSON shape, and the cursor of the next page, left out
// when there is none.
type AuditPage struct {
	Events     []audit.Event `json:"events"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// auditParams are the query parameters of GET /admin/audit.
var auditParams = []string{"target", "from", "to", "limit", "cursor"}

// ParseAuditQuery reads the query of GET /admin/audit: target (a key's or
// team's id, PricesTarget or ConfigTarget), from and to as for ParseSpendQuery (left
// out: the audit log's retention, and no bound), limit (1 to
// audit.MaxLimit; left out, 100) and cursor (a page's next_cursor). Its
// errors are ParamErrors; the range's bounds are the log's to check
// (audit.QueryError).
func ParseAuditQuery(v url.Values) (audit.Query, error) {
	var q audit.Query
	if err := checkParams(v, auditParams, ""); err != nil {
		return q, err
	}
	var err error
	if q.From, q.To, err = parseRange(v); err != nil {
		return q, err
	}
	if q.Limit, err = intParam(v, "limit", 1, audit.MaxLimit, "a number of events"); err != nil {
		return q, err
	}
	q.Target, q.Cursor = v.Get("target"), v.Get("cursor")
	return q, nil
}

// serveAudit answers GET /admin/audit: ParseAuditQuery, audit.Log.Events,
// and AuditPage.
func (api *API) serveAudit(w http.ResponseWriter, r *http.Request) {
	if api.audit == nil {
		writeError(w, http.StatusNotFound, apierror.Invalid, "no_audit", "no audit log is kept here: there are no changes to show")
		return
	}
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, apierror.Invalid, "invalid_parameter", fmt.Sprintf("the query does not parse: %v", err))
		return
	}
	q, err := ParseAuditQuery(v)
	var p audit.Page
	if err == nil {
		p, err = api.audit.Events(r.Context(), q)
	}
	if err != nil {
		api.auditFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, AuditPage{Events: p.Events, NextCursor: p.Next})
}

// auditFailed answers a query of the audit log that failed: 400 naming
// the parameter that is wrong; otherwise the failure is logged and the
// answer is 500 (a corrupt record) or 503.
func (api *API) auditFailed(w http.ResponseWriter, r *http.Request, err error) {
	var qe *audit.QueryError
	if errors.As(err, &qe) {
		err = &ParamError{Param: qe.Param, Msg: qe.Msg}
	}
	var pe *ParamError
	if errors.As(err, &pe) {
		apierror.WriteParam(w, http.StatusBadRequest, apierror.Invalid, "invalid_parameter", pe.Param, pe.Error())
		return
	}
	api.readFailed(w, r, err, "audit log", "audit_corrupt")
}

// mayChange reports whether a change may be made for r, or answers 500
// and returns false: with an audit log, a change must have an actor to
// record (WithActor), which whoever mounts the API sets for every call
// (package console does), so that no change is made that the log cannot
// say who made.
func (api *API) mayChange(w http.ResponseWriter, r *http.Request) bool {
	if api.audit == nil || ActorOf(r.Context()) != "" {
		return true
	}
	api.log.LogAttrs(r.Context(), slog.LevelError, "admin: a change with no actor refused: the API is mounted without admin.WithActor",
		slog.String("method", r.Method), slog.String("path", r.URL.Path))
	writeError(w, http.StatusInternalServerError, apierror.API, "no_actor", "the admin API does not know who makes this change, so it cannot record it: nothing was changed (see the gateway's log)")
	return false
}

// recorded records the event of a change made for r, if the API keeps an
// audit log, or answers 500 and returns false when it cannot: the change
// is made, and is not acknowledged.
func (api *API) recorded(w http.ResponseWriter, r *http.Request, action, target string, changes map[string]audit.Change) bool {
	if api.audit == nil {
		return true
	}
	ctx := r.Context()
	e := audit.Event{Actor: ActorOf(ctx), Action: action, Target: target, Changes: changes}
	if addr := ClientOf(ctx); addr.IsValid() {
		e.Address = addr.String()
	}
	// The change is made: its event is written even if the caller has
	// gone, within a bound of its own.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ClientTimeout)
	defer cancel()
	if _, err := api.audit.Record(rctx, e); err != nil {
		api.log.LogAttrs(ctx, slog.LevelError, "admin: a change was made and its audit event not recorded",
			slog.String("action", action), slog.String("target", target), slog.String("actor", e.Actor), slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, apierror.API, "audit_failed",
			fmt.Sprintf("%s of %s was made, but its audit event could not be recorded: see the gateway's log", action, target))
		return false
	}
	return true
}

// state is a key's or team's fields as the audit log records them: by
// the API's names, each as a request's JSON gives it.
type state map[string]json.RawMessage

func (f state) set(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings, numbers, times and lists of them
	}
	f[name] = b
}

// orNull is v, or the JSON of no value for none.
func orNull(v json.RawMessage) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	return v
}

// diff is the changes from before to after: the fields whose JSON
// differs, a field one of them lacks being null (nil before: a
// creation; nil after: a deletion).
func diff(before, after state) map[string]audit.Change {
	out := map[string]audit.Change{}
	add := func(name string) {
		from, to := orNull(before[name]), orNull(after[name])
		if !bytes.Equal(from, to) {
			out[name] = audit.Change{From: from, To: to}
		}
	}
	for name := range after {
		add(name)
	}
	for name := range before {
		add(name)
	}
	return out
}

// specState is the fields of a key's Spec.
func specState(s keystore.Spec) state {
	f := policyState(s.Policy)
	f.set("name", s.Name)
	f.set("model", s.Model)
	f.set("team", s.Team)
	f.set("expires_at", utcPtr(s.ExpiresAt))
	return f
}

// keyState is the fields of key k: its Spec's, "disabled", and
// "previous_secret_expires_at", which a rotation changes.
func keyState(k keystore.Key) state {
	f := specState(specOf(k))
	f.set("disabled", k.Disabled)
	f.set("previous_secret_expires_at", utcPtr(k.PreviousSecretExpiresAt))
	return f
}

// specOf is the Spec of key k, as Update gives it.
func specOf(k keystore.Key) keystore.Spec {
	return keystore.Spec{Name: k.Name, Model: k.Model, Team: k.Team, Policy: k.Policy, ExpiresAt: k.ExpiresAt}
}

// teamState is the fields of a team of name and policy p.
func teamState(name string, p keystore.Policy) state {
	f := policyState(p)
	f.set("name", name)
	return f
}

// policyState is the fields of policy p.
func policyState(p keystore.Policy) state {
	f := state{}
	f.set("models", append([]string{}, p.Models...))
	f.set("windows", windowRequests(p.Windows))
	f.set("budgets", budgetRequests(p.Budgets))
	f.set("requests_per_minute", p.RequestsPerMinute)
	f.set("max_concurrent", p.MaxConcurrent)
	// Left out when none, as the API leaves them out of a KEY: their
	// removal reads as a change to null.
	if ms := modelLimitsOf(p); ms != nil {
		f.set("model_limits", ms)
	}
	if u := endUsersOf(p); u != nil {
		f.set("end_users", u)
	}
	return f
}

// keyAction is the action of a PATCH of a key that made changes.
func keyAction(changes map[string]audit.Change) string {
	if c, ok := changes["disabled"]; ok && len(changes) == 1 {
		if string(c.To) == "true" {
			return ActionKeyDisable
		}
		return ActionKeyEnable
	}
	return ActionKeyUpdate
}

// updateKey makes the changes of a PATCH of key id, f: its Spec's fields
// in one Update, then "disabled". It returns the changes made, those of
// the first step when the second fails, and the error.
func (api *API) updateKey(ctx context.Context, id string, f *keyFields) (map[string]audit.Change, error) {
	before, after := state{}, state{}
	var k keystore.Key
	var err error
	if f.changesSpec() {
		k, err = api.keys.Update(ctx, id, func(s *keystore.Spec) error {
			before = specState(*s) // as Update changes it, read again on a retry
			f.apply(s)
			return nil
		})
		if err == nil {
			after = specState(specOf(k))
		}
	} else {
		k, err = api.keys.Get(ctx, id) // 404 for an unknown key, even with nothing to change
	}
	if err != nil || f.disabled == nil {
		return diff(before, after), err
	}
	if *f.disabled {
		err = api.keys.Disable(ctx, id)
	} else {
		err = api.keys.Enable(ctx, id)
	}
	if err == nil {
		before.set("disabled", k.Disabled)
		after.set("disabled", *f.disabled)
	}
	return diff(before, after), err
}

// updateTeam makes the changes of a PATCH of team id, f, in one
// UpdateTeam, and returns them.
func (api *API) updateTeam(ctx context.Context, id string, f *teamFields) (map[string]audit.Change, error) {
	if f.name == nil && !f.changes() {
		_, err := api.keys.GetTeam(ctx, id) // 404 for an unknown team, even with nothing to change
		return nil, err
	}
	var before state
	t, err := api.keys.UpdateTeam(ctx, id, func(s *keystore.TeamSpec) error {
		before = teamState(s.Name, s.Policy)
		f.apply(s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return diff(before, teamState(t.Name, t.Policy)), nil
}

// keyBefore returns the fields of key id before a change that the change
// does not return (a deletion's, a rotation's), for its event; nil when
// the key cannot be read (the change then fails too, or deletes a corrupt
// key, whose fields are unknown), and when the API keeps no audit log.
// A change made by another caller between the read and the change is
// recorded as this one's.
func (api *API) keyBefore(ctx context.Context, id string) state {
	if api.audit == nil {
		return nil
	}
	k, err := api.keys.Get(ctx, id)
	if err != nil {
		return nil
	}
	return keyState(k)
}

// teamBefore returns the fields of team id before its deletion, as
// keyBefore.
func (api *API) teamBefore(ctx context.Context, id string) state {
	if api.audit == nil {
		return nil
	}
	t, err := api.keys.GetTeam(ctx, id)
	if err != nil {
		return nil
	}
	return teamState(t.Name, t.Policy)
}

// rotation is the changes of a rotation that made key k of before: none
// when before is nil (not read: what changed is not known, and the event
// says that the rotation happened).
func rotation(before state, k keystore.Key) map[string]audit.Change {
	if before == nil {
		return map[string]audit.Change{}
	}
	return diff(before, keyState(k))
}

// pricesReloaded is the changes of a reload of the price table, which
// now prices n models.
func pricesReloaded(n int) map[string]audit.Change {
	f := state{}
	f.set("models", n)
	return diff(nil, f)
}

// configReloaded is the changes of a reload of the configuration file,
// which now has got's upstreams and prices got's models.
func configReloaded(got Reloaded) map[string]audit.Change {
	f := state{}
	f.set("upstreams", got.Upstreams)
	f.set("models", got.Models)
	return diff(nil, f)
}
