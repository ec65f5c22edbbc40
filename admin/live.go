package admin

import (
	"net/http"
	"time"

	"github.com/ratestore/ratestore/internal/apierror"
)

// reloadPrices answers POST /admin/prices/reload: Options.ReloadPrices,
// and 400 naming the entry when the file does not parse (the running
// table stays).
func (api *API) reloadPrices(w http.ResponseWriter, r *http.Request) {
	if api.gw == nil {
		writeError(w, http.StatusNotFound, apierror.Invalid, "not_found", "no gateway serves here: there are no prices to reload")
		return
	}
	if !api.mayChange(w, r) {
		return
	}
	n, err := api.gw.ReloadPrices()
	if err != nil {
		writeError(w, http.StatusBadRequest, apierror.Invalid, "invalid_prices", err.Error())
		return
	}
	if !api.recorded(w, r, ActionPricesReload, PricesTarget, pricesReloaded(n)) {
		return
	}
	writeJSON(w, http.StatusOK, Prices{Models: n})
}

// reloadConfig answers POST /admin/config/reload: Options.Reload, and 400
// naming the file's line when the file is refused (the running
// configuration stays, whole).
func (api *API) reloadConfig(w http.ResponseWriter, r *http.Request) {
	if api.reload == nil {
		writeError(w, http.StatusNotFound, apierror.Invalid, "not_found", "this gateway was started without --config: there is no configuration file to reload")
		return
	}
	if !api.mayChange(w, r) {
		return
	}
	got, err := api.reload(r.Context())
	if err != nil {
		writeError(w, http.StatusBadRequest, apierror.Invalid, "invalid_config", err.Error())
		return
	}
	if !api.recorded(w, r, ActionConfigReload, ConfigTarget, configReloaded(got)) {
		return
	}
	writeJSON(w, http.StatusOK, got)
}

// serveLive answers GET /admin/live: Options.Live.
func (api *API) serveLive(w http.ResponseWriter, r *http.Request) {
	if api.gw == nil {
		writeError(w, http.StatusNotFound, apierror.Invalid, "not_found", "no gateway serves here: there is no live traffic to show")
		return
	}
	reqs, toks, inFlight := api.gw.Traffic()
	writeJSON(w, http.StatusOK, Live{Time: api.now().UTC().Truncate(time.Second), RequestsPerSecond: reqs, TokensPerSecond: toks, InFlight: inFlight})
}
