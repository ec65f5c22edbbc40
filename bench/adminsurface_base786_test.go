//go:build base786

package bench

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/gateway"
)

// This file is BenchmarkAdminSmall's baseline: it builds only with the tag
// base786, in a checkout of 786b47c (the commit before the operator's
// surface was rebuilt) with adminsmall_test.go beside it; see
// bench/README.md. In this tree it does not build: gateway.Options has no
// AdminToken any more.

// surfaceImpl names the operator's surface of this file in
// BenchmarkAdminSmall's results.
const surfaceImpl = "786b47c"

// operatorSurface is the handler of a gateway's port at 786b47c: the
// gateway served the admin API and the console, its sessions in memory,
// itself, and had no audit log.
func operatorSurface(tb testing.TB, db *ratestore.DB, upstream *url.URL, token string) http.Handler {
	g, err := gateway.New(db, gateway.Options{Upstream: upstream, AdminToken: token})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close(context.Background()) })
	return g
}
