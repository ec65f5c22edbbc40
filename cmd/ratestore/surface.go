package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
)

// consoleConfig is what the serving commands configure of the operator's
// surface.
type consoleConfig struct {
	token    string // the admin token; required
	readOnly bool   // the console command: look, never change
	log      *slog.Logger
	// bodyTimeout bounds the wait for a request's body: --body-timeout
	// (negative: no bound; 0: the packages' defaults)
	bodyTimeout time.Duration
	now         func() time.Time
	audit       *audit.Log // the audit log the API records changes in and reads; nil: none
	access      accessFlags
	sessions    *console.Sessions // where the sessions are kept; nil: in memory
	// reload is POST /admin/config/reload's (the gateway's --config);
	// nil: there is none
	reload reloadFunc
}

// accessFlags are the flags of how browsers and proxies reach a serving
// command's console: --trusted-proxy and --secure-cookie.
type accessFlags struct {
	trustedProxies []netip.Prefix
	secureCookie   bool
}

// accessFlagSet registers --trusted-proxy and --secure-cookie on fs.
func accessFlagSet(fs *flag.FlagSet, f *accessFlags) {
	fs.Func("trusted-proxy", "a reverse proxy in front, as a `CIDR` (10.0.0.0/8) or an address: the client of a request it forwards is the last X-Forwarded-For entry not in these ranges, for the count of wrong admin tokens and the logs; repeatable (default: none, and X-Forwarded-For is ignored)", func(v string) error {
		p, err := parseProxy(v)
		f.trustedProxies = append(f.trustedProxies, p)
		return err
	})
	fs.BoolVar(&f.secureCookie, "secure-cookie", false, "mark the console's session cookie Secure: for a proxy in front that serves browsers over TLS (with --tls-cert it always is)")
}

// parseProxy parses a --trusted-proxy: a CIDR, or an address for itself
// alone.
func parseProxy(v string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(v); err == nil {
		return p, nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q: want a CIDR (10.0.0.0/8, fd00::/8) or an IP address", v)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// checkAdminToken refuses an admin token too short to be one (see
// console.CheckToken), naming where it came from: --admin-token-file
// file, or the environment when file is "".
func checkAdminToken(cmd, file, token string) error {
	err := console.CheckToken(token)
	if err == nil {
		return nil
	}
	source := "$" + adminTokenEnv
	if file != "" {
		source = "--admin-token-file " + file
	}
	return usagef(cmd, "%s: %s: %v", cmd, source, err)
}

// operatorSurface returns the handler of a serving command's port: the
// console (package console), which serves its page and sessions, guards
// the admin API on keys and l (nil: no ledger) and, with a gateway g, its
// metrics, and hands every other request to g (nil: 404).
func operatorSurface(cfg consoleConfig, keys *keystore.Store, l *ledger.Ledger, g *gateway.Gateway) (http.Handler, error) {
	opts := admin.Options{Keys: keys, Ledger: l, Audit: cfg.audit, Log: cfg.log, Now: cfg.now, BodyTimeout: cfg.bodyTimeout}
	copts := console.Options{Token: cfg.token, ReadOnly: cfg.readOnly, Now: cfg.now, Log: cfg.log, BodyTimeout: cfg.bodyTimeout,
		Sessions: cfg.sessions, TrustedProxies: cfg.access.trustedProxies, SecureCookie: cfg.access.secureCookie}
	if g != nil {
		opts.Gateway = g
		copts.Metrics, copts.Next = g.Metrics(), g
	}
	if reload := cfg.reload; reload != nil {
		opts.Reload = func(context.Context) (admin.Reloaded, error) {
			ups, models, err := reload()
			return admin.Reloaded{Upstreams: ups, Models: models}, err
		}
	}
	api, err := admin.New(opts)
	if err != nil {
		return nil, err
	}
	copts.API = api
	c, err := console.New(copts)
	if err != nil {
		return nil, err // not a nil *Console in a Handler
	}
	return c, nil
}
