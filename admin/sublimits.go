package admin

import (
	"bytes"
	"encoding/json"
	"fmt"

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

// modelLimitsOf is p's model limits as a Key or Team shows them: []
// for none.
func modelLimitsOf(p keystore.Policy) []ModelLimit {
	ms := make([]ModelLimit, len(p.ModelLimits))
	for i, m := range p.ModelLimits {
		ms[i] = ModelLimit{Models: append([]string{}, m.Models...), Windows: windowSpecs(m.Windows),
			Budgets: budgetSpecs(m.Budgets), RequestsPerMinute: m.RequestsPerMinute, MaxConcurrent: m.MaxConcurrent}
	}
	return ms
}

// endUsersOf is p's end users as a Key or Team shows them: nil for none.
func endUsersOf(p keystore.Policy) *EndUsers {
	u := p.EndUsers
	if u.IsZero() {
		return nil
	}
	return &EndUsers{Windows: windowSpecs(u.Windows), Budgets: budgetSpecs(u.Budgets),
		RequestsPerMinute: u.RequestsPerMinute, MaxConcurrent: u.MaxConcurrent, Required: u.Required}
}

// windowSpecs is ws as a request gives them.
func windowSpecs(ws []keystore.Window) []WindowRequest {
	out := make([]WindowRequest, len(ws))
	for i, w := range ws {
		out[i] = WindowRequest{Limit: w.Limit, Window: w.Window.String(), Bucket: w.Bucket.String()}
	}
	return out
}

// budgetSpecs is bs as a request gives them.
func budgetSpecs(bs []keystore.Budget) []BudgetRequest {
	out := make([]BudgetRequest, len(bs))
	for i, b := range bs {
		out[i] = BudgetRequest{LimitUSD: b.Limit}
		if b.Period == 0 {
			out[i].Window = b.Window.String()
			continue
		}
		out[i].Period, out[i].Timezone = b.Period.String(), "UTC"
		if b.Location != nil {
			out[i].Timezone = b.Location.String()
		}
	}
	return out
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
