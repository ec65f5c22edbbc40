package admin

import (
	"net/http"
	"time"

	"github.com/ratestore/ratestore/audit"
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
	api.reloadFile(w, r, "invalid_prices", ActionPricesReload, PricesTarget, func() (any, map[string]audit.Change, error) {
		n, err := api.gw.ReloadPrices()
		return Prices{Models: n}, pricesReloaded(n), err
	})
}

// reloadConfig answers POST /admin/config/reload: Options.Reload, and 400
// naming the file's line when the file is refused (the running
// configuration stays, whole).
func (api *API) reloadConfig(w http.ResponseWriter, r *http.Request) {
	if api.reload == nil {
		writeError(w, http.StatusNotFound, apierror.Invalid, "not_found", "this gateway was started without --config: there is no configuration file to reload")
		return
	}
	api.reloadFile(w, r, "invalid_config", ActionConfigReload, ConfigTarget, func() (any, map[string]audit.Change, error) {
		got, err := api.reload(r.Context())
		return got, configReloaded(got), err
	})
}

// reloadFile answers a reload of a file the gateway reads, once a change
// may be made for r: reload makes it and returns the answer and the
// changes of its event, of action on target; a file refused is 400 with
// code and its error, which names what is wrong in it, and records
// nothing.
func (api *API) reloadFile(w http.ResponseWriter, r *http.Request, code, action, target string, reload func() (any, map[string]audit.Change, error)) {
	if !api.mayChange(w, r) {
		return
	}
	out, changes, err := reload()
	if err != nil {
		writeError(w, http.StatusBadRequest, apierror.Invalid, code, err.Error())
		return
	}
	if api.recorded(w, r, action, target, changes) {
		writeJSON(w, http.StatusOK, out)
	}
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
