//go:build !base786

package bench

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/gateway"
)

// surfaceImpl names the operator's surface of this file in
// BenchmarkAdminSmall's results.
const surfaceImpl = "head"

// operatorSurface is the handler of a gateway's port as `ratestore
// gateway` builds it with an admin token (cmd/ratestore, operatorSurface):
// the console, keeping its sessions in db, guards the admin API over the
// gateway's key store and ledger, which records every change in an audit
// log in db, and hands every other request to the gateway, which forwards
// it to upstream. BenchmarkAdminSmall's baseline replaces this file with
// adminsurface_base786_test.go.
func operatorSurface(tb testing.TB, db *ratestore.DB, upstream *url.URL, token string) http.Handler {
	g, err := gateway.New(db, gateway.Options{Upstream: upstream})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close(context.Background()) })
	alog, err := audit.Open(db, audit.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { alog.Close(context.Background()) })
	api, err := admin.New(admin.Options{Keys: g.Keys(), Ledger: g.Ledger(), Audit: alog, Gateway: g})
	if err != nil {
		tb.Fatal(err)
	}
	c, err := console.New(console.Options{Token: token, API: api, Sessions: console.StoreSessions(db), Metrics: g.Metrics(), Next: g})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
