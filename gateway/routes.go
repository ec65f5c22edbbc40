package gateway

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/gateway/pool"
)

// Route sends the requests under a path prefix to an upstream of its own,
// with a credential of its own: one gateway in front of, say, OpenAI's API
// for /v1/chat/completions and Anthropic's for /v1/messages, each of which
// only accepts its own key.
type Route struct {
	// Prefix is the path the route serves, starting with "/", matched on
	// path-segment boundaries: "/v1/messages" matches /v1/messages and
	// /v1/messages/count_tokens, not /v1/messagesX. A trailing "/" is
	// ignored; "/" matches every path, as the default route does.
	Prefix string
	// Upstream, UpstreamKey and UpstreamKeyHeader are those of Options,
	// for this route's requests: the request's whole path (prefix
	// included) is appended to Upstream's.
	Upstream          *url.URL
	UpstreamKey       string
	UpstreamKeyHeader string
}

// route is a Route as the gateway uses it: a pool of one upstream, for
// the paths under its prefix.
type route struct {
	prefix string // without a trailing "/"; "" matches every path
	m      *member
}

// newRoute checks the upstream and credential of r and returns the route
// of prefix (r.Prefix, normalized) they make; name names it in errors.
// Its upstream is named by its prefix ("/" for the default route) in the
// metrics, the ledger and /admin/upstreams.
func newRoute(name, prefix string, r Route) (route, error) {
	u := r.Upstream
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return route{}, fmt.Errorf("gateway: %s: upstream %s: want an http or https URL with a host: %w", name, redacted(u), backend.ErrInvalid)
	}
	m := &member{name: cmp.Or(prefix, "/"), url: u}
	m.pu = &pool.Upstream{Name: m.name}
	if r.UpstreamKey != "" {
		m.keyField, m.keyValue = http.CanonicalHeaderKey(r.UpstreamKeyHeader), r.UpstreamKey
		if m.keyField == "" || m.keyField == "Authorization" {
			m.keyField, m.keyValue = "Authorization", "Bearer "+r.UpstreamKey
		}
	}
	return route{prefix: prefix, m: m}, nil
}

// newRoutes returns the routes of opts, longest prefix first, the default
// route (opts.Upstream), if any, last.
func newRoutes(opts Options) ([]route, error) {
	routes := make([]route, 0, len(opts.Routes)+1)
	seen := make(map[string]bool, len(opts.Routes)+1)
	if opts.Upstream != nil || (len(opts.Routes) == 0 && len(opts.Upstreams) == 0) {
		rt, err := newRoute("default route", "", Route{Upstream: opts.Upstream, UpstreamKey: opts.UpstreamKey, UpstreamKeyHeader: opts.UpstreamKeyHeader})
		if err != nil {
			return nil, err
		}
		routes = append(routes, rt)
		seen[""] = true
	}
	for _, r := range opts.Routes {
		name := fmt.Sprintf("route %q", r.Prefix)
		if !strings.HasPrefix(r.Prefix, "/") {
			return nil, fmt.Errorf("gateway: %s: want a path prefix starting with /: %w", name, backend.ErrInvalid)
		}
		prefix := strings.TrimRight(r.Prefix, "/")
		if prefix != "" && path.Clean(prefix) != prefix {
			return nil, fmt.Errorf("gateway: %s: want a clean path, without . or .. segments or //: %w", name, backend.ErrInvalid)
		}
		if seen[prefix] {
			return nil, fmt.Errorf("gateway: %s: another route has the same prefix (a trailing / is ignored; / is the default route's): %w", name, backend.ErrInvalid)
		}
		seen[prefix] = true
		rt, err := newRoute(name, prefix, r)
		if err != nil {
			return nil, err
		}
		routes = append(routes, rt)
	}
	slices.SortStableFunc(routes, func(a, b route) int { return len(b.prefix) - len(a.prefix) })
	return routes, nil
}

// match returns the route of a request path, clean (see lookup): that of
// the longest prefix that matches it, or nil when none does.
func match(routes []route, p string) *route {
	for i := range routes {
		pre := routes[i].prefix
		if pre == "" || p == pre || (strings.HasPrefix(p, pre) && p[len(pre)] == '/') {
			return &routes[i]
		}
	}
	return nil
}
