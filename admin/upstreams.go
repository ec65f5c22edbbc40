package admin

import (
	"net/http"
	"time"

	"github.com/ratestore/ratestore/internal/apierror"
)

// Upstreams is the body of GET /admin/upstreams.
type Upstreams struct {
	Upstreams []Upstream `json:"upstreams"`
}

// Upstream is one upstream of the gateway, as GET /admin/upstreams shows
// it: what it is configured to serve, its provider's quota, how much of it
// is in use now, and how it has answered. An --upstream route is a pool
// of one without limits, named by its path prefix.
type Upstream struct {
	Name string `json:"name"`
	// API is what it speaks: openai, azure-openai, anthropic or gemini;
	// "" for an --upstream route (a pool of one, by path prefix).
	API string `json:"api"`
	// URL is where it is, redacted: a password in its userinfo is not
	// shown.
	URL    string         `json:"url"`
	Prefix string         `json:"prefix,omitempty"` // an --upstream route's path prefix
	Models []string       `json:"models"`           // globs; empty: every model of its api
	Limits UpstreamLimits `json:"limits"`
	Weight int            `json:"weight"`
	Used   UpstreamUsed   `json:"used"`
	// CoolingDownUntil is when it is tried again after a 429, a 5xx or
	// a failed connection; null when it is not cooling down.
	CoolingDownUntil *time.Time `json:"cooling_down_until"`
	Requests         int64      `json:"requests"` // sent to it since the gateway started
	Errors           int64      `json:"errors"`   // of those, the 429, 5xx and failed connections
}

// UpstreamLimits are the provider's quota on an upstream; a limit left out
// (0) is none.
type UpstreamLimits struct {
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int64 `json:"tokens_per_minute,omitempty"`
	MaxConcurrent     int   `json:"max_concurrent,omitempty"`
}

// UpstreamUsed is how much of an upstream's limits is in use now: the
// requests and tokens of the last minute, reservations of the requests in
// flight included, and those requests. Only an upstream with limits is
// counted (each of its limits that is set, and its requests in flight);
// one without shows zeros.
type UpstreamUsed struct {
	RequestsPerMinute int64 `json:"requests_per_minute"`
	TokensPerMinute   int64 `json:"tokens_per_minute"`
	InFlight          int   `json:"in_flight"`
}

// Reloaded is the body of POST /admin/config/reload's 200: how many
// upstreams the configuration now has, and how many models its prices
// price.
type Reloaded struct {
	Upstreams int `json:"upstreams"`
	Models    int `json:"models"`
}

// serveUpstreams answers GET /admin/upstreams: Gateway.Upstreams, an empty
// list when it has none. The list is not paged: it is as long as the
// gateway's configuration, which bounds its upstreams
// (gateway/config.MaxUpstreams), a few hundred bytes each; a poll of it
// that finds nothing changed gets 304 (see revalidated).
func (api *API) serveUpstreams(w http.ResponseWriter, r *http.Request) {
	if api.gw == nil {
		writeError(w, http.StatusNotFound, apierror.Invalid, "not_found", "no gateway serves here: there are no upstreams to show")
		return
	}
	list := api.gw.Upstreams(r.Context())
	if list == nil {
		list = []Upstream{} // [], never null: a client ranges over it
	}
	writeJSON(w, http.StatusOK, Upstreams{Upstreams: list})
}
