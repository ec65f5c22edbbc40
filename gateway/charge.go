package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/gateway/meter"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// The charging half of a request: once the upstream has answered (or
// failed, or the caller went away), the tokens its usage comes to, their
// price, the key store's Finish with the ledger's entry in its commit, the
// alerts, and the debug line of what was charged. ServeHTTP then counts
// the request in the metrics and the live rates, and logs it.

// charged is what a request was charged, and why.
type charged struct {
	reported, tokens int64       // tokens reported (weighed); charged
	cost             pricing.USD // what the tokens cost the key
	budgetLeft       pricing.USD // the least the key's budgets have left after it
	hasBudget        bool
	counts           meter.Counts // the tokens reported, by type
	estimated        bool         // the tokens charged are the reservation: no usage could be read
	capped           bool         // the usage reported was over Options.MaxTokensPerRequest
}

// finish charges a request that ended with status what it used, in place
// of its reservation: see Usage in the package documentation. A charge
// that failed is logged, and its tokens and cost left at 0.
func (g *Gateway) finish(ctx context.Context, rq *request, ad *admission, up *upstreamResult, status int) charged {
	ch := g.tokens(rq, ad, up)
	g.logCharge(ctx, rq, up, &ch)
	cost := g.cost(rq, ad, &ch)
	var u keystore.Usage
	var err error
	if ad.adm != nil {
		note := g.note(rq, &ch, cost, status)
		if note != nil {
			u, err = ad.adm.FinishWith(ctx, ch.tokens, cost, note)
			note.Done(err)
		} else {
			u, err = ad.adm.FinishSpend(ctx, ch.tokens, cost)
		}
		if err == nil || errors.Is(err, backend.ErrUncertain) {
			g.observe(ctx, rq, u)
		}
		for i, b := range u.Budgets {
			if i == 0 || b.Remaining < ch.budgetLeft {
				ch.budgetLeft, ch.hasBudget = b.Remaining, true
			}
		}
	} else if ch.tokens > 0 { // shadowed: served without an admission
		_, err = g.keys.RecordUsage(ctx, rq.keyID, ch.tokens)
		if note := g.note(rq, &ch, cost, status); note != nil && err == nil {
			g.ledgerFailed(ctx, rq, g.ledger.Add(ctx, note.Entry()))
		}
	}
	if err = g.chargeFailed(ctx, rq, ch.tokens, err); err != nil {
		ch.tokens = 0
		return ch
	}
	ch.cost = cost
	g.log.LogAttrs(ctx, slog.LevelDebug, "gateway: charged",
		slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.String("model", rq.model),
		slog.Int64("tokens", ch.tokens), slog.String("cost_usd", cost.String()))
	return ch
}

// chargeFailed logs err, the failure of charging tokens, and returns it
// unless it is only that the charge is not yet known to be on disk.
func (g *Gateway) chargeFailed(ctx context.Context, rq *request, tokens int64, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, backend.ErrUncertain):
		// Charged in memory, which every later request sees; the next
		// commit writes it. Not an error an operator reconciles from.
		g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: usage charged, not yet known to be on disk (the next commit retries)",
			slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.Int64("tokens", tokens), slog.String("error", err.Error()))
		return nil
	}
	level := slog.LevelError
	if errors.Is(err, keystore.ErrNotFound) {
		level = slog.LevelWarn // the key was deleted meanwhile
	}
	g.log.LogAttrs(ctx, level, "gateway: charging usage failed",
		slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.Int64("tokens", tokens), slog.String("error", err.Error()))
	return err
}

// logCharge logs what is unusual in charge ch: a usage over
// Options.MaxTokensPerRequest, a usage object too large to read, an
// estimate.
func (g *Gateway) logCharge(ctx context.Context, rq *request, up *upstreamResult, ch *charged) {
	if ch.capped {
		g.log.LogAttrs(ctx, slog.LevelError, "gateway: the upstream reported more usage than one request may be charged: charging the bound",
			slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.String("model", rq.model),
			slog.Int64("reported", ch.reported), slog.Int64("tokens", ch.tokens), slog.Int64("max_tokens_per_request", g.maxCharge))
	}
	if up.used.TooLarge {
		g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: a usage object too large to read was skipped",
			slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.Int("max_usage_bytes", meter.MaxUsageBytes))
	}
	if ch.estimated {
		g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: no usage read: charging the estimate",
			slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.String("model", rq.model),
			slog.Int64("tokens", ch.tokens), slog.Bool("estimated", true), slog.Int("upstream_status", up.status))
	}
}

// tokens returns the charge of a request, its tokens at most
// Options.MaxTokensPerRequest, noting whether they are an estimate or
// capped.
func (g *Gateway) tokens(rq *request, ad *admission, up *upstreamResult) charged {
	ch := charged{counts: up.used.Counts, reported: g.weights.charge(up.used.Counts)}
	ch.tokens = uncapped(rq.ep, ad.reserve, up, &ch)
	if ch.tokens > g.maxCharge {
		ch.capped, ch.tokens = true, g.maxCharge
	}
	return ch
}

// uncapped returns the tokens a request to ep, reserving reserve, is to
// be charged for what the upstream answered: see Usage in the package
// documentation.
func uncapped(ep *endpoint, reserve int64, up *upstreamResult, ch *charged) int64 {
	switch {
	case !up.forwarded || ep == nil || ep.retrieve:
		return 0
	case up.used.Found && up.used.Complete:
		return ch.reported
	case !ep.generates || (up.status >= 400 && up.status < 500):
		// Nothing generated (nothing reserved), or a model call the
		// upstream refused: what usage was read, if any.
		if up.used.Found {
			return ch.reported
		}
		return 0
	}
	// The upstream failed, broke off or reported no usage, or the
	// caller went away: the reservation, or more if more was reported.
	ch.estimated = true
	return max(ch.reported, reserve)
}

// cost returns what a request charged ch costs: its usage at its price,
// each token type at its own; at least the cost reserved when its usage
// could not be read (as its tokens are then the reservation), where an
// admission reserved one (a request shadow mode served has none). A request without a
// price costs $0.
func (g *Gateway) cost(rq *request, ad *admission, ch *charged) pricing.USD {
	switch {
	case !rq.priced || ch.tokens == 0:
		return 0
	case ch.estimated && ad.adm != nil:
		return max(rq.price.Cost(usageOf(ch.counts)), ad.adm.Cost())
	}
	return rq.price.Cost(usageOf(ch.counts))
}

// usageOf is c in disjoint token types, as pricing counts them: the
// uncached input, cache reads and writes (by the hour or the five
// minutes), the output besides reasoning, and the reasoning.
func usageOf(c meter.Counts) pricing.Usage {
	write := c.CacheWrite
	write1h := min(c.CacheWrite1h, write)
	return pricing.Usage{
		Input:        max(0, c.Input-c.CacheRead-write),
		CacheRead:    c.CacheRead,
		CacheWrite:   write - write1h,
		CacheWrite1h: write1h,
		Output:       max(0, c.Output-c.Reasoning),
		Reasoning:    min(c.Reasoning, c.Output),
	}
}

// note returns the ledger's note of a request that ended with status,
// charged ch costing cost: nil without a ledger. Tokens by type are what
// the upstream reported; an estimate has no types, and is entered whole
// as input.
func (g *Gateway) note(rq *request, ch *charged, cost pricing.USD, status int) *ledger.Note {
	if g.ledger == nil {
		return nil
	}
	t := ledger.Tokens{Input: ch.tokens}
	if !ch.estimated {
		u := usageOf(ch.counts)
		t = ledger.Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite + u.CacheWrite1h, Reasoning: u.Reasoning}
	}
	n, err := g.ledger.Note(ledger.Entry{
		RequestID: rq.id, Key: rq.keyID, Team: rq.team, Model: rq.model, Route: rq.path, Upstream: rq.upstream, EndUser: rq.endUser,
		Tokens: t, Cost: cost, Status: status, Latency: time.Since(rq.start), Estimated: ch.estimated,
	})
	if err != nil {
		g.ledgerFailed(context.Background(), rq, err)
		return nil
	}
	return n
}

// ledgerFailed logs err, if the ledger failed: the request was served
// and charged; only its record is missing.
func (g *Gateway) ledgerFailed(ctx context.Context, rq *request, err error) {
	if err == nil || errors.Is(err, backend.ErrUncertain) {
		return
	}
	g.log.LogAttrs(ctx, slog.LevelError, "gateway: the spend ledger failed to record a request",
		slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.String("error", err.Error()))
}

// Weights weigh the tokens of a response by type, for what a key is
// charged: Input*(uncached input) + CacheRead*(cache reads) +
// CacheWrite*(cache writes) + Output*(output, reasoning included), rounded
// up. Every weight is finite and >= 0. Prices differ by type (a cache
// read costs a tenth of fresh input at Anthropic and OpenAI, a cache
// write more), and weights let a key's windows count what the upstream
// bills rather than raw tokens.
type Weights struct {
	Input, Output, CacheRead, CacheWrite float64
}

// UnitWeights count every token as one: what a nil Options.Weights means.
var UnitWeights = Weights{Input: 1, Output: 1, CacheRead: 1, CacheWrite: 1}

// valid reports whether every weight is finite and >= 0.
func (w Weights) valid() bool {
	for _, v := range [...]float64{w.Input, w.Output, w.CacheRead, w.CacheWrite} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// charge returns the tokens to charge for c. Unit weights add up in
// integers, saturating; others in float64, rounded up and saturating.
func (w Weights) charge(c meter.Counts) int64 {
	if w == UnitWeights {
		return sat.Add(c.Input, c.Output)
	}
	cached := min(c.Input, sat.Add(c.CacheRead, c.CacheWrite))
	f := w.Input*float64(c.Input-cached) + w.CacheRead*float64(c.CacheRead) +
		w.CacheWrite*float64(c.CacheWrite) + w.Output*float64(c.Output)
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Ceil(f))
}
