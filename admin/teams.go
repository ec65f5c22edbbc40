package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/ratestore/ratestore"
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

// listTeams answers GET /admin/teams, in id order; a team deleted
// while the list is read is left out.
func (api *API) listTeams(w http.ResponseWriter, r *http.Request) {
	out := Teams{Teams: []Team{}}
	byTeam, err := api.keys.KeysByTeam(r.Context())
	if err != nil {
		api.teamFailed(w, r, "", err)
		return
	}
	err = api.keys.ListTeams(r.Context(), func(t keystore.Team) error {
		a, err := api.teamWithKeys(r.Context(), t, len(byTeam[t.ID]))
		switch {
		case errors.Is(err, keystore.ErrNotFound):
			return nil // deleted meanwhile
		case err != nil:
			return err
		}
		out.Teams = append(out.Teams, a)
		return nil
	})
	if err != nil {
		api.teamFailed(w, r, "", err)
		return
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
	switch {
	case err == nil:
		if api.recorded(w, r, ActionTeamDelete, id, diff(before, nil)) {
			w.WriteHeader(http.StatusNoContent)
		}
	case errors.Is(err, ratestore.ErrInvalid) && !errors.Is(err, keystore.ErrNotFound):
		msg := strings.TrimPrefix(err.Error(), "keystore: ")
		msg = strings.TrimSuffix(msg, ": "+ratestore.ErrInvalid.Error())
		writeError(w, http.StatusConflict, apierror.Invalid, "team_has_keys",
			msg+` (PATCH /admin/keys/{id} {"team": ""} takes a key out of its team)`)
	default:
		api.teamFailed(w, r, id, err)
	}
}

// team returns team id with its usage and keys now.
func (api *API) team(ctx context.Context, id string) (Team, error) {
	t, err := api.keys.GetTeam(ctx, id)
	if err != nil {
		return Team{}, err
	}
	return api.teamWith(ctx, t)
}

// teamWith returns team t with its usage and keys now.
func (api *API) teamWith(ctx context.Context, t keystore.Team) (Team, error) {
	keys, err := api.keys.TeamKeys(ctx, t.ID)
	if err != nil {
		return Team{}, err
	}
	return api.teamWithKeys(ctx, t, len(keys))
}

// teamWithKeys returns team t with its usage now and keyCount, the number
// of its keys.
func (api *API) teamWithKeys(ctx context.Context, t keystore.Team, keyCount int) (Team, error) {
	u, err := api.keys.TeamUsage(ctx, t.ID)
	if err != nil {
		return Team{}, err
	}
	return NewTeam(t, u, keyCount), nil
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
