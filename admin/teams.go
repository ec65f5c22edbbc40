package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/keystore"
)

// The admin API's teams: /admin/teams and /admin/teams/{id}, answered as
// those of keys are, with Team for a team (see Admin API in the
// package documentation).

// createTeam answers POST /admin/teams: 201 with the team, and its
// path in Location.
func (api *API) createTeam(w http.ResponseWriter, r *http.Request) {
	if !api.mayChange(w, r) {
		return
	}
	f, ok := readTeamFields(w, r)
	if !ok {
		return
	}
	var spec keystore.TeamSpec
	f.apply(&spec)
	t, err := api.keys.CreateTeam(r.Context(), spec)
	if err != nil {
		api.teamFailed(w, r, "", err)
		return
	}
	noteTeam(w, t.ID)
	if !api.recorded(w, r, ActionTeamCreate, t.ID, diff(nil, teamState(t.Name, t.Policy))) {
		return
	}
	a, err := api.team(r.Context(), t.ID)
	if err != nil {
		api.teamFailed(w, r, t.ID, err)
		return
	}
	w.Header().Set("Location", "/admin/teams/"+t.ID)
	writeJSON(w, http.StatusCreated, a)
}

// teamParams are the parameters of GET /admin/teams.
var teamParams = []string{"limit", "cursor", "q", "sort"}

// listTeams answers GET /admin/teams: a page of teams, searched and
// sorted by the key store (keystore.Store.Teams), each with its usage and
// key count, and the cursor of the next page.
func (api *API) listTeams(w http.ResponseWriter, r *http.Request) {
	v, err := query(r, teamParams)
	var q keystore.TeamQuery
	if err == nil {
		q.Limit, err = intParam(v, "limit", 1, keystore.MaxPageLimit, "a number of teams")
	}
	if err != nil {
		api.pageFailed(w, r, err, api.teamFailed)
		return
	}
	q.Cursor, q.Q, q.Sort = v.Get("cursor"), v.Get("q"), v.Get("sort")
	page, err := api.keys.Teams(r.Context(), q)
	if err != nil {
		api.pageFailed(w, r, err, api.teamFailed)
		return
	}
	out := Teams{Teams: make([]Team, 0, len(page.Teams)), NextCursor: page.Next}
	for _, tu := range page.Teams {
		out.Teams = append(out.Teams, NewTeam(tu.Team, tu.Usage, tu.KeyCount))
	}
	writeJSON(w, http.StatusOK, out)
}

// getTeam answers GET /admin/teams/{id}.
func (api *API) getTeam(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteTeam(w, id)
	api.writeTeam(w, r, id)
}

// writeTeam answers with team id as it is now, or the error of reading
// it.
func (api *API) writeTeam(w http.ResponseWriter, r *http.Request, id string) {
	a, err := api.team(r.Context(), id)
	if err != nil {
		api.teamFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// patchTeam answers PATCH /admin/teams/{id}: it sets the fields
// given and no other, in one keystore.Store.UpdateTeam. "windows" and
// "budgets" replace the team's whole lists, as for a key.
func (api *API) patchTeam(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteTeam(w, id)
	if !api.mayChange(w, r) {
		return
	}
	f, ok := readTeamFields(w, r)
	if !ok {
		return
	}
	changes, err := api.updateTeam(r.Context(), id, f)
	if len(changes) > 0 && !api.recorded(w, r, ActionTeamUpdate, id, changes) {
		return
	}
	if err != nil {
		api.teamFailed(w, r, id, err)
		return
	}
	api.writeTeam(w, r, id)
}

// deleteTeam answers DELETE /admin/teams/{id}: 204, or 409
// team_has_keys, naming one, while keys belong to the team
// (keystore.Store.DeleteTeam).
func (api *API) deleteTeam(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteTeam(w, id)
	if !api.mayChange(w, r) {
		return
	}
	before := api.teamBefore(r.Context(), id)
	err := api.keys.DeleteTeam(r.Context(), id)
	var inUse *keystore.TeamInUseError
	switch {
	case err == nil:
		if api.recorded(w, r, ActionTeamDelete, id, diff(before, nil)) {
			w.WriteHeader(http.StatusNoContent)
		}
	case errors.As(err, &inUse):
		writeError(w, http.StatusConflict, apierror.Invalid, "team_has_keys",
			inUse.Reason()+` (PATCH /admin/keys/{id} {"team": ""} takes a key out of its team)`)
	default:
		api.teamFailed(w, r, id, err)
	}
}

// team returns team id with its usage and key count now.
func (api *API) team(ctx context.Context, id string) (Team, error) {
	t, err := api.keys.GetTeam(ctx, id)
	if err != nil {
		return Team{}, err
	}
	n, err := api.keys.TeamKeyCount(ctx, id)
	if err != nil {
		return Team{}, err
	}
	u, err := api.keys.TeamUsage(ctx, id)
	if err != nil {
		return Team{}, err
	}
	return NewTeam(t, u, n), nil
}

// teamFailed answers an admin call about team id whose key store call
// failed: 404 team_not_found for an unknown team, else as keyFailed.
func (api *API) teamFailed(w http.ResponseWriter, r *http.Request, id string, err error) {
	if errors.Is(err, keystore.ErrNotFound) {
		msg := "no team has the id " + id
		if id == "" {
			msg = "no such team"
		}
		writeError(w, http.StatusNotFound, apierror.Invalid, "team_not_found", msg)
		return
	}
	api.keyFailed(w, r, "", err)
}
