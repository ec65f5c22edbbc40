package gateway

import (
	"context"

	"github.com/ratestore/ratestore/admin"
)

// Upstreams is filled in by the pools' wiring (placeholder of branch ops).
func (g *Gateway) Upstreams(ctx context.Context) []admin.Upstream { return nil }
