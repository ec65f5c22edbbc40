//go:build !base9006258

package bench

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/ratestore/ratestore/gateway"
)

// poolsImpls are BenchmarkGatewayPools' sides, the baseline first.
var poolsImpls = []string{"route", "pool-1", "pool-16-nolimits", "pool-16", "pool-16-full-15"}

// poolsOptions sets impl's upstreams in opts, each at up.
func poolsOptions(b *testing.B, impl string, opts *gateway.Options, up *url.URL) {
	room := gateway.UpstreamLimits{RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50, MaxConcurrent: 1 << 20}
	upstream := func(i int, weight int, limits gateway.UpstreamLimits) gateway.Upstream {
		return gateway.Upstream{Name: fmt.Sprintf("openai-%02d", i), API: gateway.APIOpenAI, URL: up, Key: "sk-upstream",
			Models: []string{"gpt-4o*", "gpt-4.1*"}, Limits: limits, Weight: weight}
	}
	switch impl {
	case "route":
		opts.Upstream, opts.UpstreamKey = up, "sk-upstream"
	case "pool-1":
		opts.Upstreams = []gateway.Upstream{upstream(0, 1, room)}
	case "pool-16", "pool-16-nolimits":
		limits := room
		if impl == "pool-16-nolimits" {
			limits = gateway.UpstreamLimits{}
		}
		for i := range 16 {
			opts.Upstreams = append(opts.Upstreams, upstream(i, 1+i%3, limits))
		}
	case "pool-16-full-15":
		full := room
		full.TokensPerMinute = 10 // below any request's reservation
		for i := range 15 {
			opts.Upstreams = append(opts.Upstreams, upstream(i, 1000, full))
		}
		opts.Upstreams = append(opts.Upstreams, upstream(15, 1, room))
	default:
		b.Fatalf("impl %q", impl)
	}
}

// checkPoolsSpread checks where s's requests went: pool-16's (with limits
// or without) to every upstream, pool-16-full-15's to the last alone.
func checkPoolsSpread(b *testing.B, s *poolsSide) {
	impl := s.impl
	ups := s.g.Upstreams(context.Background())
	for i, u := range ups {
		switch {
		case (impl == "pool-16" || impl == "pool-16-nolimits") && u.Requests == 0:
			b.Errorf("upstream %s served no request", u.Name)
		case impl == "pool-16-full-15" && i < 15 && u.Requests != 0:
			b.Errorf("upstream %s, full, served %d requests", u.Name, u.Requests)
		}
	}
}
