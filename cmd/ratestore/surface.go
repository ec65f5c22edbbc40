package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/ratestore/ratestore/admin"
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
}

// operatorSurface returns the handler of a serving command's port: the
// console (package console), which serves its page and sessions, guards
// the admin API on keys and l (nil: no ledger) and, with a gateway g, its
// metrics, and hands every other request to g (nil: 404).
func operatorSurface(cfg consoleConfig, keys *keystore.Store, l *ledger.Ledger, g *gateway.Gateway) (http.Handler, error) {
	opts := admin.Options{Keys: keys, Ledger: l, Log: cfg.log, Now: cfg.now, BodyTimeout: cfg.bodyTimeout}
	copts := console.Options{Token: cfg.token, ReadOnly: cfg.readOnly, Now: cfg.now, Log: cfg.log, BodyTimeout: cfg.bodyTimeout}
	if g != nil {
		opts.Gateway = g
		copts.Metrics, copts.Next = g.Metrics(), g
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
