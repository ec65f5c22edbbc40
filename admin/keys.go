package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/keystore"
)

// createKey answers POST /admin/keys.
func (api *API) createKey(w http.ResponseWriter, r *http.Request) {
	if !api.mayChange(w, r) {
		return
	}
	f, ok := readKeyFields(w, r)
	if !ok {
		return
	}
	var spec keystore.Spec
	f.apply(&spec)
	k, secret, err := api.keys.Create(r.Context(), spec)
	if err != nil {
		api.keyFailed(w, r, "", err)
		return
	}
	noteKey(w, k.ID)
	if f.disabled != nil && *f.disabled {
		// Nobody has the secret before the answer: disabling it now
		// leaves no moment in which it works.
		if err = api.keys.Disable(r.Context(), k.ID); err == nil {
			k.Disabled = true
		}
	}
	if !api.recorded(w, r, ActionKeyCreate, k.ID, diff(nil, keyState(k))) {
		return
	}
	if err != nil {
		api.keyFailed(w, r, k.ID, err)
		return
	}
	a, err := api.key(r.Context(), k.ID)
	if err != nil {
		api.keyFailed(w, r, k.ID, err)
		return
	}
	w.Header().Set("Location", "/admin/keys/"+k.ID)
	writeJSON(w, http.StatusCreated, Created{Key: a, Secret: secret})
}

// keyParams are the parameters of GET /admin/keys.
var keyParams = []string{"limit", "cursor", "q", "team", "status", "sort"}

// listKeys answers GET /admin/keys: a page of keys, searched, filtered
// and sorted by the key store (keystore.Store.Keys), each with its usage,
// and the cursor of the next page.
func (api *API) listKeys(w http.ResponseWriter, r *http.Request) {
	v, err := query(r, keyParams)
	var q keystore.KeyQuery
	if err == nil {
		q.Limit, err = intParam(v, "limit", 1, keystore.MaxPageLimit, "a number of keys")
	}
	if err != nil {
		api.pageFailed(w, r, err, api.keyFailed)
		return
	}
	q.Cursor, q.Q, q.Team, q.Status, q.Sort = v.Get("cursor"), v.Get("q"), v.Get("team"), keystore.KeyStatus(v.Get("status")), v.Get("sort")
	page, err := api.keys.Keys(r.Context(), q)
	if err != nil {
		api.pageFailed(w, r, err, api.keyFailed)
		return
	}
	out := Keys{Keys: make([]Key, 0, len(page.Keys)), NextCursor: page.Next}
	for _, ku := range page.Keys {
		out.Keys = append(out.Keys, api.withReserved(NewKey(ku.Key, ku.Usage)))
	}
	writeJSON(w, http.StatusOK, out)
}

// pageFailed answers a page of keys or teams whose query is wrong (a
// ParamError, or the key store's FieldError about a parameter) with 400
// invalid_parameter naming it, and any other failure with failed.
func (api *API) pageFailed(w http.ResponseWriter, r *http.Request, err error, failed func(http.ResponseWriter, *http.Request, string, error)) {
	var pe *ParamError
	var fe *keystore.FieldError
	switch {
	case errors.As(err, &pe):
		apierror.WriteParam(w, http.StatusBadRequest, apierror.Invalid, "invalid_parameter", pe.Param, pe.Error())
	case errors.As(err, &fe):
		apierror.WriteParam(w, http.StatusBadRequest, apierror.Invalid, "invalid_parameter", fe.Field, fe.Field+": "+fe.Msg)
	default:
		failed(w, r, "", err)
	}
}

// query returns the query of r, refusing a parameter not among allowed,
// or given twice, and one that does not parse.
func query(r *http.Request, allowed []string) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &ParamError{Msg: fmt.Sprintf("the query does not parse: %v", err)}
	}
	return v, checkParams(v, allowed, "")
}

// getKey answers GET /admin/keys/{id}.
func (api *API) getKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteKey(w, id)
	api.writeKey(w, r, id)
}

// writeKey answers with key id as it is now, or the error of reading it.
func (api *API) writeKey(w http.ResponseWriter, r *http.Request, id string) {
	a, err := api.key(r.Context(), id)
	if err != nil {
		api.keyFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// patchKey answers PATCH /admin/keys/{id}: it sets the fields given and
// no other. "windows" replaces the key's whole list of token windows
// rather than merging into it, so that a window can be removed; one whose
// length stays keeps its usage (keystore.Store.Update). The fields of the
// key's Spec change in one Update, then "disabled", if given; a field
// that is wrong changes nothing, as every field is checked first.
func (api *API) patchKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteKey(w, id)
	if !api.mayChange(w, r) {
		return
	}
	f, ok := readKeyFields(w, r)
	if !ok {
		return
	}
	changes, err := api.updateKey(r.Context(), id, f)
	if len(changes) > 0 && !api.recorded(w, r, keyAction(changes), id, changes) {
		return
	}
	if err != nil {
		api.keyFailed(w, r, id, err)
		return
	}
	api.writeKey(w, r, id)
}

// deleteKey answers DELETE /admin/keys/{id}.
func (api *API) deleteKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteKey(w, id)
	if !api.mayChange(w, r) {
		return
	}
	before := api.keyBefore(r.Context(), id)
	if err := api.keys.Delete(r.Context(), id); err != nil {
		api.keyFailed(w, r, id, err)
		return
	}
	if api.recorded(w, r, ActionKeyDelete, id, diff(before, nil)) {
		w.WriteHeader(http.StatusNoContent)
	}
}

// rotateKey answers POST /admin/keys/{id}/rotate: the key with a new
// secret, as Created (keystore.Store.Rotate). The log line, as every
// admin call's, names the key and not the secret.
func (api *API) rotateKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	noteKey(w, id)
	if !api.mayChange(w, r) {
		return
	}
	grace, ok := readGrace(w, r)
	if !ok {
		return
	}
	before := api.keyBefore(r.Context(), id)
	k, secret, err := api.keys.Rotate(r.Context(), id, grace)
	if err != nil {
		api.keyFailed(w, r, id, err)
		return
	}
	if !api.recorded(w, r, ActionKeyRotate, id, rotation(before, k)) {
		return
	}
	a, err := api.key(r.Context(), id)
	if err != nil {
		api.keyFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, Created{Key: a, Secret: secret})
}

// readGrace reads the body of a rotation, an RotateRequest or
// nothing, and returns its grace (0 when left out), or answers 400 or 413
// and returns false. Its range is the key store's to check.
func readGrace(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, apierror.Invalid, "request_too_large", fmt.Sprintf("the body is larger than %d bytes", mbe.Limit))
		return 0, false
	case err != nil:
		writeError(w, http.StatusBadRequest, apierror.Invalid, "invalid_json", fmt.Sprintf("reading the body: %v", err))
		return 0, false
	case len(bytes.TrimSpace(body)) == 0:
		return 0, true
	}
	var req RotateRequest
	if status, code, msg := decodeStrict(bytes.NewReader(body), &req, ""); status != 0 {
		writeError(w, status, apierror.Invalid, code, msg)
		return 0, false
	}
	if req.Grace == "" {
		return 0, true
	}
	grace, err := time.ParseDuration(req.Grace)
	if err != nil {
		writeError(w, http.StatusBadRequest, apierror.Invalid, "invalid_field",
			fmt.Sprintf("grace: %q: not a duration: want a Go duration, as 24h or 90m", req.Grace))
		return 0, false
	}
	return grace, true
}

// key returns key id and its usage now.
func (api *API) key(ctx context.Context, id string) (Key, error) {
	k, err := api.keys.Get(ctx, id)
	if err != nil {
		return Key{}, err
	}
	u, err := api.keys.Usage(ctx, id)
	if err != nil {
		return Key{}, err
	}
	mu, err := api.keys.ModelUsage(ctx, id)
	if err != nil {
		return Key{}, err
	}
	a := NewKey(k, u)
	a.ModelUsage = modelUsageOf(k.Policy, mu)
	return api.withReserved(a), nil
}

// withReserved sets a's reserved tokens: those of the key's requests in
// flight in this process, as the key store that admitted them keeps them.
func (api *API) withReserved(a Key) Key {
	a.ReservedTokens = api.keys.Reserved(a.ID)
	return a
}

// keyFailed answers an admin call whose key store call failed: 404 for
// an unknown key, 400 for a field the key store refuses, with its message
// in the request's terms; otherwise the failure is logged and the answer
// is 500 (a corrupt record) or 503.
func (api *API) keyFailed(w http.ResponseWriter, r *http.Request, id string, err error) {
	switch {
	case errors.Is(err, keystore.ErrNotFound):
		msg := "no key has the id " + id
		if id == "" {
			msg = "no such key"
		}
		writeError(w, http.StatusNotFound, apierror.Invalid, "key_not_found", msg)
		return
	case errors.Is(err, backend.ErrInvalid):
		writeError(w, http.StatusBadRequest, apierror.Invalid, "invalid_field", fieldMessage(err))
		return
	}
	api.log.LogAttrs(r.Context(), slog.LevelError, "gateway admin: key store failed",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("key_id", id), slog.String("error", err.Error()))
	if errors.Is(err, backend.ErrCorrupt) {
		writeError(w, http.StatusInternalServerError, apierror.API, "key_corrupt", "a key's record cannot be read: see the gateway's log")
		return
	}
	writeError(w, http.StatusServiceUnavailable, apierror.API, "store_unavailable", "the gateway's key store failed; retry later")
}
