package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/keystore"
)

// The admin API's teams: /admin/teams and /admin/teams/{id}, answered as
// those of keys are, with AdminTeam for a team (see Admin API in the
// package documentation).

// adminTeamCreate answers POST /admin/teams: 201 with the team, and its
// path in Location.
func (g *Gateway) adminTeamCreate(w http.ResponseWriter, r *http.Request) {
	f, ok := readTeamFields(w, r, true)
	if !ok {
		return
	}
	var spec keystore.TeamSpec
	f.apply(&spec)
	t, err := g.keys.CreateTeam(r.Context(), spec)
	if err != nil {
		g.teamFailed(w, r, "", err)
		return
	}
	noteTeam(w, t.ID)
	a, err := g.adminTeam(r.Context(), t.ID)
	if err != nil {
		g.teamFailed(w, r, t.ID, err)
		return
	}
	w.Header().Set("Location", "/admin/teams/"+t.ID)
	writeJSON(w, http.StatusCreated, a)
}

// adminTeamList answers GET /admin/teams, in id order; a team deleted
// while the list is read is left out.
func (g *Gateway) adminTeamList(w http.ResponseWriter, r *http.Request) {
	out := AdminTeams{Teams: []AdminTeam{}}
	byTeam, err := g.keys.KeysByTeam(r.Context())
	if err != nil {
		g.teamFailed(w, r, "", err)
		return
	}
	err = g.keys.ListTeams(r.Context(), func(t keystore.Team) error {
		a, err := g.teamWithKeys(r.Context(), t, byTeam[t.ID])
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
		g.teamFailed(w, r, "", err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// adminTeamGet answers GET /admin/teams/{id}.
func (g *Gateway) adminTeamGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteTeam(w, id)
	g.writeTeam(w, r, id)
}

// writeTeam answers with team id as it is now, or the error of reading
// it.
func (g *Gateway) writeTeam(w http.ResponseWriter, r *http.Request, id string) {
	a, err := g.adminTeam(r.Context(), id)
	if err != nil {
		g.teamFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// adminTeamPatch answers PATCH /admin/teams/{id}: it sets the fields
// given and no other, in one keystore.Store.UpdateTeam. "windows" and
// "budgets" replace the team's whole lists, as for a key.
func (g *Gateway) adminTeamPatch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteTeam(w, id)
	f, ok := readTeamFields(w, r, false)
	if !ok {
		return
	}
	var err error
	if f.name != nil || f.changes() {
		_, err = g.keys.UpdateTeam(r.Context(), id, func(s *keystore.TeamSpec) error {
			f.apply(s)
			return nil
		})
	} else {
		_, err = g.keys.GetTeam(r.Context(), id) // 404 for an unknown team, even with nothing to change
	}
	if err != nil {
		g.teamFailed(w, r, id, err)
		return
	}
	g.writeTeam(w, r, id)
}

// adminTeamDelete answers DELETE /admin/teams/{id}: 204, or 409
// team_has_keys, naming one, while keys belong to the team
// (keystore.Store.DeleteTeam).
func (g *Gateway) adminTeamDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteTeam(w, id)
	err := g.keys.DeleteTeam(r.Context(), id)
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, ratestore.ErrInvalid) && !errors.Is(err, keystore.ErrNotFound):
		msg := strings.TrimPrefix(err.Error(), "keystore: ")
		msg = strings.TrimSuffix(msg, ": "+ratestore.ErrInvalid.Error())
		writeError(w, http.StatusConflict, typeInvalid, "team_has_keys",
			msg+` (PATCH /admin/keys/{id} {"team": ""} takes a key out of its team)`)
	default:
		g.teamFailed(w, r, id, err)
	}
}

// adminTeam returns team id with its usage and keys now.
func (g *Gateway) adminTeam(ctx context.Context, id string) (AdminTeam, error) {
	t, err := g.keys.GetTeam(ctx, id)
	if err != nil {
		return AdminTeam{}, err
	}
	return g.teamWith(ctx, t)
}

// teamWith returns team t with its usage and keys now.
func (g *Gateway) teamWith(ctx context.Context, t keystore.Team) (AdminTeam, error) {
	keys, err := g.keys.TeamKeys(ctx, t.ID)
	if err != nil {
		return AdminTeam{}, err
	}
	return g.teamWithKeys(ctx, t, keys)
}

// teamWithKeys returns team t with its usage now and keys, its keys' ids.
func (g *Gateway) teamWithKeys(ctx context.Context, t keystore.Team, keys []string) (AdminTeam, error) {
	u, err := g.keys.TeamUsage(ctx, t.ID)
	if err != nil {
		return AdminTeam{}, err
	}
	return NewAdminTeam(t, u, keys), nil
}

// teamFailed answers an admin call about team id whose key store call
// failed: 404 team_not_found for an unknown team, else as adminFailed.
func (g *Gateway) teamFailed(w http.ResponseWriter, r *http.Request, id string, err error) {
	if errors.Is(err, keystore.ErrNotFound) {
		msg := "no team has the id " + id
		if id == "" {
			msg = "no such team"
		}
		writeError(w, http.StatusNotFound, typeInvalid, "team_not_found", msg)
		return
	}
	g.adminFailed(w, r, "", err)
}
