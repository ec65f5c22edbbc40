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

// serveLive answers GET /admin/live: Options.Live.
func (api *API) serveLive(w http.ResponseWriter, r *http.Request) {
	if api.gw == nil {
		writeError(w, http.StatusNotFound, apierror.Invalid, "not_found", "no gateway serves here: there is no live traffic to show")
		return
	}
	reqs, toks, inFlight := api.gw.Traffic()
	writeJSON(w, http.StatusOK, Live{Time: api.now().UTC().Truncate(time.Second), RequestsPerSecond: reqs, TokensPerSecond: toks, InFlight: inFlight})
}
