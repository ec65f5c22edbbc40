// Package upstreamtest holds the upstreams that the tests of GET
// /admin/upstreams show, through the admin API, the command line and the
// console: one of each state a reader of them must tell apart.
package upstreamtest

import (
	"time"

	"github.com/ratestore/ratestore/admin"
)

// Three returns three upstreams, as a gateway's admin.Gateway would:
// "openai-a", with every limit, each half used, and a few errors;
// "azure-east", cooling down until until after many errors, with a limit
// on tokens alone; and an --upstream route named name, without limits.
func Three(until time.Time, name string) []admin.Upstream {
	return []admin.Upstream{
		{Name: "openai-a", API: "openai", URL: "https://api.openai.com", Models: []string{"gpt-4o*", "gpt-4.1*"},
			Limits: admin.UpstreamLimits{RequestsPerMinute: 5000, TokensPerMinute: 800_000, MaxConcurrent: 200}, Weight: 2,
			Used:     admin.UpstreamUsed{RequestsPerMinute: 2500, TokensPerMinute: 400_000, InFlight: 100},
			Requests: 91_234, Errors: 3},
		{Name: "azure-east", API: "azure-openai", URL: "https://east.example.openai.azure.com", Models: []string{},
			Limits: admin.UpstreamLimits{TokensPerMinute: 450_000}, Weight: 1, Used: admin.UpstreamUsed{TokensPerMinute: 12_000, InFlight: 1},
			CoolingDownUntil: &until, Requests: 812, Errors: 57},
		{Name: name, URL: "https://api.anthropic.com", Prefix: "/anthropic", Models: []string{}, Weight: 1,
			Used: admin.UpstreamUsed{RequestsPerMinute: 7}, Requests: 7},
	}
}
