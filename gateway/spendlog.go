package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// newRequestID returns a request's id: "req_" and 16 hex digits (64
// random bits), which the ledger stores in 8 bytes.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// Ledger returns the gateway's spend ledger, or nil with
// Options.NoLedger.
func (g *Gateway) Ledger() *ledger.Ledger { return g.ledger }

// Close ends the gateway's background work: the ledger compacts what it
// wrote and stops, waiting until ctx ends. Call it after Wait and before
// closing the database.
func (g *Gateway) Close(ctx context.Context) error {
	if g.ledger == nil {
		return nil
	}
	return g.ledger.Close(ctx)
}

// note returns the ledger's note of x, charged tokens costing cost: nil without a
// ledger. Tokens by type are what the upstream reported; an estimate has
// no types, and is entered whole as input.
func (g *Gateway) note(x *exchange, tokens int64, cost pricing.USD) *ledger.Note {
	if g.ledger == nil {
		return nil
	}
	t := ledger.Tokens{Input: tokens}
	if !x.charge.estimated {
		u := usageOf(x.charge.counts)
		t = ledger.Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite + u.CacheWrite1h, Reasoning: u.Reasoning}
	}
	n, err := g.ledger.Note(ledger.Entry{
		RequestID: x.id, Key: x.keyID, Team: x.team, Model: x.model, Route: x.path,
		Tokens: t, Cost: cost, Status: x.status, Latency: time.Since(x.start), Estimated: x.charge.estimated,
	})
	if err != nil {
		g.ledgerFailed(context.Background(), x, err)
		return nil
	}
	return n
}

// refused counts the refusal d of x's key in the ledger's rollups (in
// memory; the ledger writes the counts as totals).
func (g *Gateway) refused(ctx context.Context, x *exchange, k keystore.Key, d *keystore.Denial) {
	if g.ledger == nil || k.ID == "" || d.Reason == "unknown" {
		return
	}
	err := g.ledger.Refused(context.WithoutCancel(ctx), ledger.Refusal{Key: k.ID, Team: k.Team, Model: refusedModel(x.model, k, d), Reason: d.Reason})
	g.ledgerFailed(ctx, x, err)
}

// refusedModel is the model a refusal d of key k is counted under: the
// one asked for when k's policy allows it, else ledger.OtherModel. A key
// holder chooses the names it sends, and a rollup keeps a row for at
// most 256 models: names its policy refuses would fill them, and the
// model it does use would then be counted as (other).
func refusedModel(model string, k keystore.Key, d *keystore.Denial) string {
	if d.Reason == "model" || !allows(k.Policy.Models, model) {
		return ledger.OtherModel
	}
	return model
}

// allows reports whether the model globs of a policy allow model, as
// the key store checks them (path.Match; none: any model; a request
// naming none is not checked).
func allows(globs []string, model string) bool {
	if len(globs) == 0 || model == "" {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

// ledgerFailed logs err, if the ledger failed: the request was served
// and charged; only its record is missing.
func (g *Gateway) ledgerFailed(ctx context.Context, x *exchange, err error) {
	if err == nil || errors.Is(err, ratestore.ErrUncertain) {
		return
	}
	g.log.LogAttrs(ctx, slog.LevelError, "gateway: the spend ledger failed to record a request",
		slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.String("error", err.Error()))
}

// routePath is the pattern of an endpoint's path p, as the ledger records
// it: resource ids as "*" (/v1/responses/*), a Gemini model as {model}
// (/v1beta/models/{model}:generateContent). A route is one of a few
// strings, stored once per block.
func routePath(p string) string {
	if _, model, ok := geminiPath(p); ok {
		return strings.Replace(p, model, "{model}", 1)
	}
	return pattern(p)
}
