//go:build base9006258

package bench

import (
	"net/url"
	"testing"

	"github.com/ratestore/ratestore/gateway"
)

// This file is BenchmarkGatewayPools' baseline: it builds only with the
// tag base9006258, in a checkout of 9006258 (the commit before the pools
// of upstreams) with pools_test.go beside it; see bench/README.md. It has
// impl=route alone: 9006258 has no pools.

// poolsImpls are BenchmarkGatewayPools' sides at 9006258.
var poolsImpls = []string{"route"}

// poolsOptions sets impl's upstream, the default route, in opts.
func poolsOptions(b *testing.B, impl string, opts *gateway.Options, up *url.URL) {
	if impl != "route" {
		b.Fatalf("impl %q", impl)
	}
	opts.Upstream, opts.UpstreamKey = up, "sk-upstream"
}

// checkPoolsSpread has nothing to check: no pools.
func checkPoolsSpread(*testing.B, *poolsSide) {}
