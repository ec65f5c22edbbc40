package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/keystore"
)

// Upstreams reports each upstream as GET /admin/upstreams shows it: the
// pools' in order, then the routes'. Its use of its limits is read from
// the key store (shared by every gateway on one Redis); an upstream whose
// usage cannot be read shows none, and the failure is logged.
func (g *Gateway) Upstreams(ctx context.Context) []admin.Upstream {
	ups := g.ups.Load()
	now := g.now()
	out := make([]admin.Upstream, 0, len(ups.members)+len(ups.routes))
	for _, m := range ups.members {
		out = append(out, g.status(ctx, m, now))
	}
	for _, rt := range ups.routes {
		a := g.status(ctx, rt.m, now)
		a.Prefix = rt.m.name
		out = append(out, a)
	}
	return out
}

// status is m's as /admin/upstreams shows it, at now.
func (g *Gateway) status(ctx context.Context, m *member, now time.Time) admin.Upstream {
	a := admin.Upstream{
		Name: m.name, API: m.api, URL: m.url.Redacted(), Models: m.pu.Models, Weight: max(m.pu.Weight, 1),
		Limits:   admin.UpstreamLimits{RequestsPerMinute: m.limits.RequestsPerMinute, TokensPerMinute: m.limits.TokensPerMinute, MaxConcurrent: m.limits.MaxConcurrent},
		Requests: m.requests.Load(), Errors: m.errors.Load(),
	}
	if m.api == APIAzureOpenAI {
		a.Models = sortedKeys(m.deploy)
	}
	if a.Models == nil {
		a.Models = []string{}
	}
	if until := m.pu.CoolingUntil(now); !until.IsZero() {
		u := until.UTC().Add(time.Second - 1).Truncate(time.Second) // the whole second it is back by
		a.CoolingDownUntil = &u
	}
	if len(m.quotas) == 0 {
		return a
	}
	u, err := g.keys.QuotaUsage(ctx, m.quotas[0])
	if err != nil && !errors.Is(err, keystore.ErrNotFound) {
		g.log.LogAttrs(ctx, slog.LevelError, "gateway: reading an upstream's usage failed", slog.String("upstream", m.name), slog.String("error", err.Error()))
		return a
	}
	a.Used = admin.UpstreamUsed{RequestsPerMinute: u.Requests, InFlight: u.InFlight}
	if len(u.Windows) > 0 {
		a.Used.TokensPerMinute = u.Windows[0].Used
	}
	return a
}
