package admin

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// EndUser is the one JSON shape of an end user of a key (END USER in the
// package documentation): its usage under the key's end-user limits (or
// its team's: keystore.Store.EndUserUsage), and its totals over all time
// as the ledger keeps them (ledger.EndUserTotals).
type EndUser struct {
	ID       string      `json:"id"` // its name, as the requests gave it
	Windows  []Window    `json:"windows"`
	Binding  int         `json:"binding"` // the index in Windows of the binding window; -1: none
	Budgets  []Budget    `json:"budgets"`
	InFlight int         `json:"in_flight"` // counted where its limits cap them
	Requests int64       `json:"requests"`
	Tokens   int64       `json:"tokens"` // input, output, cache and reasoning tokens together
	CostUSD  pricing.USD `json:"cost_usd"`
	Refused  int64       `json:"refused"`
	LastUsed *time.Time  `json:"last_used"` // its latest request's end; null: none known
}

// EndUserPage is the answer to GET /admin/keys/{id}/end-users: a page of
// a key's end users, by name, and the cursor of the next one, left out
// on the last.
type EndUserPage struct {
	EndUsers   []EndUser `json:"end_users"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// endUserParams are the parameters of GET /admin/keys/{id}/end-users.
var endUserParams = []string{"limit", "cursor", "q"}

// listEndUsers answers GET /admin/keys/{id}/end-users: a page of the end
// users the ledger has seen of the key (ledger.Ledger.EndUsers), those
// whose name starts with q, each with its usage now. A page reads at most
// limit+1 of the ledger's records and limit end users' states.
func (api *API) listEndUsers(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteKey(w, id)
	if _, err := api.keys.Get(r.Context(), id); err != nil {
		api.keyFailed(w, r, id, err)
		return
	}
	if !api.hasLedger(w, "it keeps no list of end users") {
		return
	}
	v, err := query(r, endUserParams)
	q := ledger.EndUserQuery{Key: id}
	if err == nil {
		q.Limit, err = intParam(v, "limit", 1, ledger.MaxLimit, "a number of end users")
	}
	if err != nil {
		api.spendFailed(w, r, err)
		return
	}
	q.Cursor, q.Q = v.Get("cursor"), v.Get("q")
	page, err := api.ledger.EndUsers(r.Context(), q)
	if err != nil {
		api.spendFailed(w, r, err)
		return
	}
	out := EndUserPage{EndUsers: make([]EndUser, 0, len(page.EndUsers)), NextCursor: page.Next}
	for _, t := range page.EndUsers {
		eu, err := api.endUser(r.Context(), id, t)
		if err != nil {
			api.keyFailed(w, r, id, err)
			return
		}
		out.EndUsers = append(out.EndUsers, eu)
	}
	if out.NextCursor != "" {
		w.Header().Set(NextCursorHeader, out.NextCursor)
	}
	writeJSON(w, http.StatusOK, out)
}

// getEndUser answers GET /admin/keys/{id}/end-users/{name}: 404 for an
// end user the ledger has not seen; without a ledger, its usage alone.
func (api *API) getEndUser(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	noteKey(w, id)
	if _, err := api.keys.Get(r.Context(), id); err != nil {
		api.keyFailed(w, r, id, err)
		return
	}
	t := ledger.EndUserTotals{Key: id, EndUser: name}
	if api.ledger != nil {
		var err error
		t, err = api.ledger.EndUser(r.Context(), id, name)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			writeError(w, http.StatusNotFound, apierror.Invalid, "end_user_not_found", "key "+id+" has no end user of that name in the ledger")
			return
		case errors.Is(err, ledger.ErrInvalid):
			writeError(w, http.StatusBadRequest, apierror.Invalid, "invalid_parameter", "the end user's name: "+err.Error())
			return
		case err != nil:
			api.spendFailed(w, r, err)
			return
		}
	}
	eu, err := api.endUser(r.Context(), id, t)
	if err != nil {
		api.keyFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, eu)
}

// endUser is the end user t of key id with its usage now.
func (api *API) endUser(ctx context.Context, id string, t ledger.EndUserTotals) (EndUser, error) {
	u, err := api.keys.EndUserUsage(ctx, id, t.EndUser)
	if err != nil {
		return EndUser{}, err
	}
	tk := t.Tokens
	return EndUser{
		ID: t.EndUser, Windows: windowsOf(u), Binding: u.Binding, Budgets: budgetsOf(u), InFlight: u.InFlight,
		Requests: t.Requests, CostUSD: t.Cost, Refused: t.Refused, LastUsed: utcPtr(t.LastUsed),
		Tokens: sat.Add(sat.Add(sat.Add(tk.Input, tk.Output), sat.Add(tk.CacheRead, tk.CacheWrite)), tk.Reasoning),
	}, nil
}

// hasLedger answers 404 no_ledger, saying what the route therefore
// lacks, and returns false when the gateway keeps no ledger.
func (api *API) hasLedger(w http.ResponseWriter, lacks string) bool {
	if api.ledger == nil {
		writeError(w, http.StatusNotFound, apierror.Invalid, "no_ledger",
			"the gateway runs without a spend ledger (Options.NoLedger, --no-ledger): "+lacks)
		return false
	}
	return true
}

// EndUsers is GET /admin/keys/{id}/end-users with the query q (limit,
// cursor, q): a page of the key's end users.
func (c *Client) EndUsers(ctx context.Context, id string, q url.Values) (EndUserPage, error) {
	var out EndUserPage
	err := c.call(ctx, http.MethodGet, keyPath(id)+"/end-users", q, nil, &out, http.StatusOK)
	return out, err
}

// EndUser is GET /admin/keys/{id}/end-users/{name}.
func (c *Client) EndUser(ctx context.Context, id, name string) (EndUser, error) {
	var out EndUser
	err := c.call(ctx, http.MethodGet, keyPath(id)+"/end-users/"+url.PathEscape(name), nil, nil, &out, http.StatusOK)
	return out, err
}
