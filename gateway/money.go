package gateway

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
)

// Unpriced is what a request for a model the price table does not list
// costs a key that has a budget (Options.Unpriced). A key without one is
// charged such a request $0: nothing depends on its price.
type Unpriced uint8

const (
	// UnpricedRefuse refuses the request: 403 model_not_priced, naming the
	// model. A budget cannot hold what the gateway cannot price.
	UnpricedRefuse Unpriced = iota
	// UnpricedZero serves it at $0, logged at warn.
	UnpricedZero
	// UnpricedDefault serves it at Options.DefaultPrice.
	UnpricedDefault
)

// ParseUnpriced parses "refuse", "zero" or "default".
func ParseUnpriced(s string) (Unpriced, error) {
	for u, name := range [...]string{"refuse", "zero", "default"} {
		if s == name {
			return Unpriced(u), nil
		}
	}
	return 0, fmt.Errorf("gateway: unpriced %q: want refuse, zero or default: %w", s, backend.ErrInvalid)
}

// prices is the gateway's price table: pricing.Default() with
// Options.PricesFile over it, replaced whole by ReloadPrices.
type prices struct {
	table    atomic.Pointer[pricing.Table]
	file     string
	unpriced Unpriced
	def      pricing.Price
}

// loadPrices returns the built-in table with file's entries over it ("":
// none). A file that does not parse is refused whole, with the entry
// named.
func loadPrices(file string) (*pricing.Table, error) {
	t := pricing.Default()
	if file == "" {
		return t, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("gateway: prices: %w", err)
	}
	defer f.Close()
	over, err := pricing.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("gateway: prices %s: %w", file, err)
	}
	return t.With(over), nil
}

// ReloadPrices reads Options.PricesFile again and, if it parses, makes it
// the table every request after is priced with. A file that does not
// parse changes nothing: the running table stays, and the error says why.
// It returns the number of models priced.
func (g *Gateway) ReloadPrices() (int, error) {
	t, err := loadPrices(g.prices.file)
	if err != nil {
		return 0, err
	}
	g.prices.table.Store(t)
	return t.Len(), nil
}

// priceOf returns the price of model, by the table's lookup rules, and
// whether it has one.
func (g *Gateway) priceOf(model string) (pricing.Price, bool) {
	p, _, ok := g.prices.table.Load().Lookup(model)
	return p, ok
}

// priceFor prices rq for key k before it is admitted: its price,
// and the cost Admit reserves, the worst case of the request: its prompt
// estimate as uncached input, and its most output, all of it at the
// dearer of the output and reasoning prices. It refuses the request when
// the model has no price and k has a budget the operator wants refused
// (UnpricedRefuse).
func (g *Gateway) priceFor(rq *request, k keystore.Key, req *keystore.Request) *refusal {
	p, ok := g.priceOf(rq.model)
	budget := len(k.Policy.Budgets) > 0
	switch {
	case ok:
	case !budget || rq.model == "":
		return nil // $0: no budget depends on it
	case g.prices.unpriced == UnpricedRefuse:
		return &refusal{status: http.StatusForbidden, typ: typePermission, code: "model_not_priced", reason: "unpriced",
			msg: fmt.Sprintf("model %q has no price on this gateway, and key %s has a budget: it cannot be metered in money", rq.model, k.ID)}
	case g.prices.unpriced == UnpricedDefault:
		p = g.prices.def
	default:
		g.log.Warn("gateway: model has no price: charged $0", "model", rq.model, "key_id", k.ID)
	}
	rq.price, rq.priced = p, true
	out := pricing.Usage{Input: rq.promptEst, Output: rq.outputMax}
	reasoning := pricing.Usage{Input: rq.promptEst, Reasoning: rq.outputMax}
	req.Cost = max(p.Cost(out), p.Cost(reasoning))
	return nil
}

// budgetHeader sets the caller's budget header from its admission: the
// least any of the key's budgets has left, in USD.
func budgetHeader(h http.Header, lim keystore.Limits) {
	if lim.HasBudget {
		h.Set("X-Ratestore-Budget-Remaining", lim.Budget.String())
	}
}

// limitHeaders sets the caller's OpenAI-style rate-limit headers from its
// admission: its request rate and its binding token window, each if it
// has one (of the key's and its team's, the tighter), with the times in
// OpenAI's format ("6m0s", "1s").
func limitHeaders(h http.Header, lim keystore.Limits) {
	if lim.HasRequests {
		h.Set("X-Ratelimit-Limit-Requests", strconv.FormatInt(lim.Requests.Limit, 10))
		h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(lim.Requests.Remaining, 10))
		h.Set("X-Ratelimit-Reset-Requests", resetText(lim.Requests.ResetAfter))
	}
	if lim.HasTokens {
		h.Set("X-Ratelimit-Limit-Tokens", strconv.FormatInt(lim.Tokens.Limit, 10))
		h.Set("X-Ratelimit-Remaining-Tokens", strconv.FormatInt(lim.Tokens.Remaining, 10))
		h.Set("X-Ratelimit-Reset-Tokens", resetText(lim.Tokens.ResetAfter))
	}
	budgetHeader(h, lim)
}

// resetText is d as OpenAI's reset headers write it: a Go duration to the
// millisecond ("6m0s", "20ms", "0s").
func resetText(d time.Duration) string { return max(0, d).Round(time.Millisecond).String() }
