// Package pricing turns the tokens a model reports into money: USD amounts
// kept as whole nano-dollars, per-token prices read from LiteLLM's
// model_prices_and_context_window.json format, and the lookup from a
// request's model name to its price.
//
// No float is involved anywhere between the price file and a stored amount.
// A price is parsed from the text of its JSON number into whole
// pico-dollars (1e-12 USD), which holds every price LiteLLM publishes
// exactly (3.75e-08 USD is 37,500 pico-dollars); a request's cost is the
// sum of its token counts times those prices in 128-bit integers, rounded
// up once to whole nano-dollars (1e-9 USD), the unit budgets are stored in.
// Rounding up means a request is never charged less than its price, and at
// most one nano-dollar more.
//
//	t, err := pricing.Parse(f)      // an operator's --prices file
//	...
//	t = pricing.Default().With(t)   // its entries over the built-in ones
//	p, name, ok := t.Lookup("openai/gpt-4o-2024-08-06") // gpt-4o's price
//	cost := p.Cost(pricing.Usage{Input: 1200, CacheRead: 800, Output: 300})
package pricing

import "github.com/ratestore/ratestore/internal/errs"

// ErrInvalid is wrapped by every error that refuses a value: a price file,
// an entry or a field in it, a USD amount. Match it with errors.Is; the
// message names what was refused.
var ErrInvalid = errs.ErrInvalid
