package admin

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// A client changes a key as keystore.Store.Update does, over the API: it
// reads the key, takes its Spec, changes that, and sends NewKeyRequest of
// the two, which holds only the fields that differ. Unlike Update it is
// not atomic: a change made by someone else in between, to a field the
// client changes too, is overwritten; to the other fields, it stays.

// Spec returns the fields of k that a KeyRequest sets, as the key store
// has them.
func (k Key) Spec() (keystore.Spec, error) {
	p, err := policyOf("key "+k.ID, k.Models, k.Windows, k.Budgets, k.RequestsPerMinute, k.MaxConcurrent)
	if err == nil {
		err = subsOf("key "+k.ID, k.ModelLimits, k.EndUsers, &p)
	}
	if err != nil {
		return keystore.Spec{}, err
	}
	s := keystore.Spec{Name: k.Name, Model: k.Model, Team: k.Team, Policy: p, ExpiresAt: timeOf(k.ExpiresAt)}
	if len(p.Windows) > 0 {
		s.TokenLimit = p.Windows[0].Limit
	}
	return s, nil
}

// Spec returns the fields of t that a TeamRequest sets, as the key store
// has them.
func (t Team) Spec() (keystore.TeamSpec, error) {
	p, err := policyOf("team "+t.ID, t.Models, t.Windows, t.Budgets, t.RequestsPerMinute, t.MaxConcurrent)
	if err == nil {
		err = subsOf("team "+t.ID, t.ModelLimits, t.EndUsers, &p)
	}
	return keystore.TeamSpec{Name: t.Name, Policy: p}, err
}

// policyOf is the policy of who whose fields the API answered.
func policyOf(who string, models []string, ws []Window, bs []Budget, rpm int64, maxConcurrent int) (keystore.Policy, error) {
	p := keystore.Policy{RequestsPerMinute: rpm, MaxConcurrent: maxConcurrent}
	if len(models) > 0 {
		p.Models = slices.Clone(models)
	}
	for i, w := range ws {
		win, err1 := time.ParseDuration(w.Window)
		bucket, err2 := time.ParseDuration(w.Bucket)
		if err1 != nil || err2 != nil || win <= 0 || bucket <= 0 {
			return p, fmt.Errorf("admin API: %s: windows[%d]: window %q, bucket %q: want positive Go durations: %w", who, i, w.Window, w.Bucket, backend.ErrCorrupt)
		}
		p.Windows = append(p.Windows, keystore.Window{Limit: w.Limit, Window: win, Bucket: bucket})
	}
	for i, ab := range bs {
		b, err := budgetOf(ab)
		if err != nil {
			return p, fmt.Errorf("admin API: %s: budgets[%d]: %w: %w", who, i, err, backend.ErrCorrupt)
		}
		p.Budgets = append(p.Budgets, b)
	}
	return p, nil
}

// budgetOf is the budget the API answered as b.
func budgetOf(b Budget) (keystore.Budget, error) {
	out := keystore.Budget{Limit: b.LimitUSD}
	if b.Period == "" {
		d, err := time.ParseDuration(b.Window)
		out.Window = d
		return out, err
	}
	var err error
	if out.Period, err = strategies.ParsePeriod(b.Period); err != nil {
		return out, err
	}
	if b.Timezone != "" && b.Timezone != "UTC" {
		out.Location, err = time.LoadLocation(b.Timezone)
	}
	return out, err
}

// timeOf is *t, or the zero Time for nil.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// NewKeyRequest is the request that changes a key from old to next: the
// fields that differ (windows and budgets as whole lists). From the zero
// Spec, it creates next; a TokenLimit without windows is one window of
// keystore.DefaultWindow, as a key store opened with the default options
// (a gateway's) makes it.
func NewKeyRequest(old, next keystore.Spec) KeyRequest {
	switch {
	case next.TokenLimit == old.TokenLimit:
		// As keystore.Store.Update: TokenLimit counts only when changed.
	case len(next.Policy.Windows) == 0 && next.TokenLimit > 0:
		next.Policy.Windows = []keystore.Window{{Limit: next.TokenLimit, Window: keystore.DefaultWindow, Bucket: keystore.DefaultBucket}}
	case len(next.Policy.Windows) > 0 && slices.Equal(next.Policy.Windows, old.Policy.Windows):
		next.Policy.Windows = slices.Clone(next.Policy.Windows)
		next.Policy.Windows[0].Limit = next.TokenLimit // as keystore.Store.Update
	}
	p := newPolicyRequest(old.Policy, next.Policy)
	req := KeyRequest{Models: p.Models, Windows: p.Windows, RequestsPerMinute: p.RequestsPerMinute, MaxConcurrent: p.MaxConcurrent, Budgets: p.Budgets,
		ModelLimits: p.ModelLimits, EndUsers: p.EndUsers}
	if next.Name != old.Name {
		req.Name = &next.Name
	}
	if next.Model != old.Model {
		req.Model = &next.Model
	}
	if next.Team != old.Team {
		req.Team = &next.Team
	}
	if !next.ExpiresAt.Equal(old.ExpiresAt) {
		req.ExpiresAt = expiresJSON(next.ExpiresAt)
	}
	return req
}

// NewTeamRequest is the request that changes a team from old to next, as
// NewKeyRequest is for a key.
func NewTeamRequest(old, next keystore.TeamSpec) TeamRequest {
	req := newPolicyRequest(old.Policy, next.Policy)
	if next.Name != old.Name {
		req.Name = &next.Name
	}
	return req
}

// newPolicyRequest is the policy fields of a request that changes a
// policy from old to next: those that differ, in a TeamRequest whose Name
// it leaves nil.
func newPolicyRequest(old, next keystore.Policy) TeamRequest {
	var req TeamRequest
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
	newSubsRequest(old, next, &req)
	return req
}

// windowRequests is ws as a request gives them; a Bucket of 0 is left
// out (the key store's default).
func windowRequests(ws []keystore.Window) *[]WindowRequest {
	out := make([]WindowRequest, len(ws))
	for i, w := range ws {
		out[i] = WindowRequest{Limit: w.Limit, Window: w.Window.String()}
		if w.Bucket > 0 {
			out[i].Bucket = w.Bucket.String()
		}
	}
	return &out
}

// budgetRequests is bs as a request gives them.
func budgetRequests(bs []keystore.Budget) *[]BudgetRequest {
	out := make([]BudgetRequest, len(bs))
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

// expiresJSON is the expires_at of a KeyRequest: null for never.
func expiresJSON(t time.Time) json.RawMessage {
	if t.IsZero() {
		return json.RawMessage("null")
	}
	b, _ := json.Marshal(t.UTC().Format(time.RFC3339Nano))
	return b
}
