package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/keystore"
)

// ModelLimit is one entry of a policy's "model_limits", in a Key, a Team
// and their requests: limits on the requests for the models its globs
// match (keystore.ModelLimit).
type ModelLimit struct {
	Models            []string        `json:"models"`
	Windows           []WindowRequest `json:"windows"`
	Budgets           []BudgetRequest `json:"budgets"`
	RequestsPerMinute int64           `json:"requests_per_minute"` // 0: no limit
	MaxConcurrent     int             `json:"max_concurrent"`      // 0: no limit
}

// EndUsers is a policy's "end_users": the limits of each end user of the
// key (or of the team's keys together), and whether a request must name
// one (keystore.EndUsers).
type EndUsers struct {
	Windows           []WindowRequest `json:"windows"`
	Budgets           []BudgetRequest `json:"budgets"`
	RequestsPerMinute int64           `json:"requests_per_minute"` // 0: no limit
	MaxConcurrent     int             `json:"max_concurrent"`      // 0: no limit
	Required          bool            `json:"required"`
}

// ModelUsage is the usage of one of a key's model limits
// (keystore.Store.ModelUsage): its windows and budgets with what they
// hold, and its requests in flight where it caps them.
type ModelUsage struct {
	Models   []string `json:"models"`
	Windows  []Window `json:"windows"`
	Binding  int      `json:"binding"` // the index in Windows of the binding window; -1: none
	Budgets  []Budget `json:"budgets"`
	InFlight int      `json:"in_flight"`
}

// modelUsageOf is the usage us of p's model limits, as a Key shows it.
func modelUsageOf(p keystore.Policy, us []keystore.Usage) []ModelUsage {
	if len(us) != len(p.ModelLimits) || len(us) == 0 {
		return nil // the policy changed between the two reads: left out
	}
	out := make([]ModelUsage, len(us))
	for i, u := range us {
		out[i] = ModelUsage{Models: append([]string{}, p.ModelLimits[i].Models...), Windows: windowsOf(u), Binding: u.Binding,
			Budgets: budgetsOf(u), InFlight: u.InFlight}
	}
	return out
}

// modelLimitsOf is p's model limits as a Key or Team shows them: nil
// for none.
func modelLimitsOf(p keystore.Policy) []ModelLimit {
	if len(p.ModelLimits) == 0 {
		return nil
	}
	ms := make([]ModelLimit, len(p.ModelLimits))
	for i, m := range p.ModelLimits {
		ms[i] = ModelLimit{Models: append([]string{}, m.Models...), Windows: *windowRequests(m.Windows),
			Budgets: *budgetRequests(m.Budgets), RequestsPerMinute: m.RequestsPerMinute, MaxConcurrent: m.MaxConcurrent}
	}
	return ms
}

// endUsersOf is p's end users as a Key or Team shows them: nil for none.
func endUsersOf(p keystore.Policy) *EndUsers {
	u := p.EndUsers
	if u.IsZero() {
		return nil
	}
	return &EndUsers{Windows: *windowRequests(u.Windows), Budgets: *budgetRequests(u.Budgets),
		RequestsPerMinute: u.RequestsPerMinute, MaxConcurrent: u.MaxConcurrent, Required: u.Required}
}

// sameSubs reports whether two policies have the same model limits and
// end users.
func sameSubs(a, b keystore.Policy) bool {
	same := func(x, y keystore.ModelLimit) bool {
		return slices.Equal(x.Models, y.Models) && slices.Equal(x.Windows, y.Windows) && slices.Equal(x.Budgets, y.Budgets) &&
			x.RequestsPerMinute == y.RequestsPerMinute && x.MaxConcurrent == y.MaxConcurrent
	}
	u, v := a.EndUsers, b.EndUsers
	return slices.EqualFunc(a.ModelLimits, b.ModelLimits, same) &&
		slices.Equal(u.Windows, v.Windows) && slices.Equal(u.Budgets, v.Budgets) &&
		u.RequestsPerMinute == v.RequestsPerMinute && u.MaxConcurrent == v.MaxConcurrent && u.Required == v.Required
}

// newSubsRequest sets in req the model limits and end users of next
// where they differ from old's: both whole, as the API replaces them.
func newSubsRequest(old, next keystore.Policy, req *TeamRequest) {
	if sameSubs(old, next) {
		return
	}
	ms := append([]ModelLimit{}, modelLimitsOf(next)...)
	req.ModelLimits = &ms
	req.EndUsers = endUsersOf(next)
	if req.EndUsers == nil {
		req.EndUsers = &EndUsers{}
	}
}

// modelLimitBody is an element of "model_limits" as the API decodes it.
type modelLimitBody struct {
	Models json.RawMessage `json:"models"`
	limitsBody
}

// endUsersBody is "end_users" as the API decodes it.
type endUsersBody struct {
	limitsBody
	Required *bool `json:"required"`
}

// readSubs reads "model_limits" and "end_users" of b into f. Each
// replaces the policy's whole: "model_limits": [] removes them all,
// "end_users": null (or {}) removes the end users' limits.
func readSubs(b *policyBody, f *policyFields) problem {
	elems, msg := readList(b.ModelLimits, "model_limits", keystore.MaxModelLimits)
	if msg != "" {
		return badField("%s", msg)
	}
	if elems != nil {
		ms := make([]keystore.ModelLimit, len(elems))
		for i, raw := range elems {
			if p := readModelLimit(raw, fmt.Sprintf("model_limits[%d]", i), &ms[i]); p.status != 0 {
				return p
			}
		}
		f.modelLimits = &ms
	}
	if len(b.EndUsers) == 0 {
		return problem{}
	}
	f.endUsers = new(keystore.EndUsers)
	if string(b.EndUsers) == "null" {
		return problem{}
	}
	var eb endUsersBody
	var p problem
	if p.status, p.code, p.msg = decodeStrict(bytes.NewReader(b.EndUsers), &eb, "end_users"); p.status != 0 {
		return p
	}
	var lf limitsFields
	if p = readLimits(&eb.limitsBody, "end_users.", &lf); p.status != 0 {
		return p
	}
	u := f.endUsers
	lf.applyTo(&u.Windows, &u.Budgets, &u.RequestsPerMinute, &u.MaxConcurrent)
	u.Required = eb.Required != nil && *eb.Required
	return problem{}
}

// readModelLimit reads the model limit at field into m.
func readModelLimit(raw json.RawMessage, field string, m *keystore.ModelLimit) problem {
	var mb modelLimitBody
	var p problem
	if p.status, p.code, p.msg = decodeStrict(bytes.NewReader(raw), &mb, field); p.status != 0 {
		return p
	}
	models, msg := readList(mb.Models, field+".models", keystore.MaxModels)
	if msg == "" && models != nil {
		var ms *[]string
		if ms, msg = readModels(models, field+".models"); ms != nil {
			m.Models = *ms
		}
	}
	if msg != "" {
		return badField("%s", msg)
	}
	var lf limitsFields
	if p = readLimits(&mb.limitsBody, field+".", &lf); p.status != 0 {
		return p
	}
	lf.applyTo(&m.Windows, &m.Budgets, &m.RequestsPerMinute, &m.MaxConcurrent)
	return problem{}
}

// subsOf sets in p the model limits and end users of who as the API
// answered them, read back as a request's are.
func subsOf(who string, ms []ModelLimit, u *EndUsers, p *keystore.Policy) error {
	raw, err := json.Marshal(struct {
		ModelLimits []ModelLimit `json:"model_limits"`
		EndUsers    *EndUsers    `json:"end_users"`
	}{ms, u})
	if err == nil {
		err = ReadPolicy(bytes.NewReader(raw), p)
	}
	if err != nil {
		return fmt.Errorf("admin API: %s: %w: %w", who, err, backend.ErrCorrupt)
	}
	return nil
}
