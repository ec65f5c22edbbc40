package admin

import (
	"errors"
	"strings"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/keystore"
)

// NewKey is key k with its usage u, as keystore.Store.Usage returns
// it (u.Binding set by keystore.Usage.Bind): the one builder of an
// Key. The windows are u's, which hold their policy too: the key's
// policy may have changed between the two reads.
func NewKey(k keystore.Key, u keystore.Usage) Key {
	a := Key{
		ID: k.ID, Name: k.Name, Team: k.Team, Model: k.Model,
		Models:            append([]string{}, k.Policy.Models...),
		Windows:           windowsOf(u),
		Binding:           u.Binding,
		RequestsPerMinute: k.Policy.RequestsPerMinute, MaxConcurrent: k.Policy.MaxConcurrent,
		ExpiresAt: utcPtr(k.ExpiresAt), Disabled: k.Disabled, LifetimeTokens: k.LifetimeTokens,
		LastUsed: utcPtr(k.LastUsed), CreatedAt: utcPtr(k.CreatedAt), InFlight: u.InFlight,
		Budgets: budgetsOf(u), LifetimeUSD: k.LifetimeSpend,
		PreviousSecretExpiresAt: utcPtr(k.PreviousSecretExpiresAt),
		ModelLimits:             modelLimitsOf(k.Policy), EndUsers: endUsersOf(k.Policy),
	}
	return a
}

// NewTeam is team t with its usage u, as keystore.Store.TeamUsage
// returns it, and the number of its keys: the one builder of a Team. Its
// windows and budgets are u's, as a Key's are.
func NewTeam(t keystore.Team, u keystore.Usage, keyCount int) Team {
	return Team{
		ID: t.ID, Name: t.Name,
		Models:  append([]string{}, t.Policy.Models...),
		Windows: windowsOf(u), Binding: u.Binding, Budgets: budgetsOf(u),
		RequestsPerMinute: t.Policy.RequestsPerMinute, MaxConcurrent: t.Policy.MaxConcurrent,
		InFlight: u.InFlight, CreatedAt: utcPtr(t.CreatedAt),
		KeyCount:    keyCount,
		ModelLimits: modelLimitsOf(t.Policy), EndUsers: endUsersOf(t.Policy),
	}
}

// windows is the token windows of u with their usage, as an Key
// or Team shows them.
func windowsOf(u keystore.Usage) []Window {
	ws := make([]Window, len(u.Windows))
	for i, w := range u.Windows {
		ws[i] = Window{
			Limit: w.Limit, Window: w.Window.String(), Bucket: w.Bucket.String(),
			Used: w.Used, Remaining: w.Remaining, ResetAfterSeconds: sat.CeilDiv(int64(w.ResetAfter), int64(time.Second)),
			WindowEnd: utcPtr(w.WindowEnd),
		}
	}
	return ws
}

// budgets is the budgets of u with their spend, as an Key or
// Team shows them.
func budgetsOf(u keystore.Usage) []Budget {
	bs := make([]Budget, len(u.Budgets))
	for i, b := range u.Budgets {
		bs[i] = Budget{LimitUSD: b.Limit, SpentUSD: b.Spent, RemainingUSD: b.Remaining, ResetsAt: utcPtr(b.ResetsAt)}
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

// fieldNames are the admin API's names of a keystore.Spec's fields, by
// the names of a keystore.FieldError's path ("" for a step the API does
// not have: Policy).
var fieldNames = map[string]string{
	"Policy": "", "Windows": "windows", "Limit": "limit", "Window": "window", "Bucket": "bucket",
	"RequestsPerMinute": "requests_per_minute", "MaxConcurrent": "max_concurrent", "Models": "models",
	"Name": "name", "Model": "model", "ExpiresAt": "expires_at", "TokenLimit": "windows",
	"Budgets": "budgets", "Period": "period", "Location": "timezone", "Grace": "grace", "Team": "team",
	"ModelLimits": "model_limits", "EndUsers": "end_users", "Required": "required",
}

// fieldMessage is the message of err, an error of the key store about a
// field (keystore.FieldError), in the admin API's terms: "windows[1].limit:
// must be positive, got 0"; or about an argument (keystore.InvalidError),
// as the key store words it.
func fieldMessage(err error) string {
	var ie *keystore.InvalidError
	if errors.As(err, &ie) {
		return ie.Msg
	}
	var fe *keystore.FieldError
	if !errors.As(err, &fe) {
		return err.Error()
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

// policyFields are the policy fields of an KeyRequest or an
// TeamRequest as read and checked: nil for a field left out.
type policyFields struct {
	models *[]string
	limitsFields
	modelLimits *[]keystore.ModelLimit
	endUsers    *keystore.EndUsers
}

// limitsFields are the limits of a policy, a model limit or the end
// users, as read and checked: nil for a field left out.
type limitsFields struct {
	windows       []keystore.Window // nil: left out
	rpm           *int64
	maxConcurrent *int
	budgets       *[]keystore.Budget
}

// changes reports whether f changes a field of a keystore.Policy.
func (f *policyFields) changes() bool {
	return f.models != nil || f.windows != nil || f.rpm != nil || f.maxConcurrent != nil || f.budgets != nil ||
		f.modelLimits != nil || f.endUsers != nil
}

// applyTo sets the fields of p that f gives. Lists (windows, budgets,
// model limits) and the end users replace p's whole.
func (f *policyFields) applyTo(p *keystore.Policy) {
	if f.models != nil {
		p.Models = *f.models
	}
	f.limitsFields.applyTo(&p.Windows, &p.Budgets, &p.RequestsPerMinute, &p.MaxConcurrent)
	if f.modelLimits != nil {
		p.ModelLimits = *f.modelLimits
	}
	if f.endUsers != nil {
		p.EndUsers = *f.endUsers
	}
}

// applyTo sets the limits f gives.
func (f *limitsFields) applyTo(windows *[]keystore.Window, budgets *[]keystore.Budget, rpm *int64, maxConcurrent *int) {
	if f.windows != nil {
		*windows = f.windows
	}
	if f.rpm != nil {
		*rpm = *f.rpm
	}
	if f.maxConcurrent != nil {
		*maxConcurrent = *f.maxConcurrent
	}
	if f.budgets != nil {
		*budgets = *f.budgets
	}
}

// keyFields is an KeyRequest as read and checked: nil for a field
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

// teamFields is an TeamRequest as read and checked: nil for a field
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
