package gateway

import (
	"net/http"
	"strings"
)

// isAdminPath reports whether a request path is the admin API's or the
// metrics', which the gateway answers itself and never forwards.
func isAdminPath(p string) bool {
	return p == "/metrics" || p == "/admin" || strings.HasPrefix(p, "/admin/")
}

// serveAdmin answers the admin API and the metrics.
func (g *Gateway) serveAdmin(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, typeInvalid, "not_found", "no such path")
}
