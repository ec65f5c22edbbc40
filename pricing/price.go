package pricing

import (
	"math"
	"math/bits"

	"github.com/ratestore/ratestore/internal/sat"
)

// DefaultThreshold is the prompt size, in tokens, above which a request is
// priced at a model's long-context tier when Price.Threshold is 0: the
// 200,000 of LiteLLM's "*_above_200k_tokens" fields (Anthropic's and
// Google's long-context prices).
const DefaultThreshold = 200_000

// Price is what one token of each kind costs on a model, in whole
// pico-dollars (1e-12 USD): LiteLLM's per-token prices in USD times 1e12,
// which makes every one of them a whole number (3.75e-08 USD is 37,500).
// A zero price is an unset one; the fallbacks are Cost's.
type Price struct {
	Input        int64 // input_cost_per_token: a prompt token neither cached nor cache-written
	Output       int64 // output_cost_per_token: a completion token that is not reasoning
	CacheRead    int64 // cache_read_input_token_cost: a prompt token read from the cache
	CacheWrite   int64 // cache_creation_input_token_cost: a prompt token written to the 5-minute cache
	CacheWrite1h int64 // cache_creation_input_token_cost_above_1hr: one written to the 1-hour cache
	Reasoning    int64 // output_cost_per_reasoning_token: a reasoning ("thinking") token

	// The long-context tier: the same prices, from the fields
	// "<field>_above_200k_tokens", for a request whose prompt is above
	// Threshold tokens.
	InputAbove200k        int64
	OutputAbove200k       int64
	CacheReadAbove200k    int64
	CacheWriteAbove200k   int64
	CacheWrite1hAbove200k int64

	// Threshold is the prompt size in tokens above which the *Above200k
	// prices apply; 0 means DefaultThreshold. A file whose tier is
	// "_above_272k_tokens" (OpenAI's) sets 272,000: the fields keep their
	// name, as LiteLLM's keep theirs.
	Threshold int64
}

// Usage is the tokens a request used, by kind. The counts are disjoint, so
// each token is priced once: Input excludes the prompt tokens read from or
// written to a cache, and Output excludes the reasoning tokens. A negative
// count counts as zero.
type Usage struct {
	Input, CacheRead, CacheWrite, CacheWrite1h, Output, Reasoning int64
}

// Prompt returns the request's whole prompt: Input + CacheRead + CacheWrite
// + CacheWrite1h, saturated at math.MaxInt64. Its size picks the tier.
func (u Usage) Prompt() int64 {
	var n int64
	for _, c := range [...]int64{u.Input, u.CacheRead, u.CacheWrite, u.CacheWrite1h} {
		n = sat.Add(n, max(c, 0))
	}
	return n
}

// Cost returns what u costs at p: each count times its price, summed in
// pico-dollars in 128-bit arithmetic (counts up to 1<<62 times any price
// cannot overflow it; a sum that would, saturates), then converted to
// nano-dollars rounding up, so that no request is ever charged less than its
// price, and saturated at MaxUSD. A negative price counts as zero: the
// result is never negative.
//
// The tier is LiteLLM's: when u.Prompt() is above p's threshold (strictly:
// a prompt of exactly 200,000 tokens is priced at the base), every token of
// the request, output and reasoning included, is priced at its kind's
// *Above200k price where that is set, and at the base price where it is
// not. Then, at the tier in force:
//   - Reasoning unset: reasoning tokens are priced as Output;
//   - CacheRead or CacheWrite unset: those tokens are priced as Input
//     (LiteLLM would bill them as free; an unpriced kind is charged in full
//     rather than given away);
//   - CacheWrite1h unset: 1-hour cache writes are priced as CacheWrite.
func (p Price) Cost(u Usage) USD {
	r := p.at(u.Prompt() > p.threshold())
	var s uint128
	s.addMul(u.Input, r.Input)
	s.addMul(u.CacheRead, r.CacheRead)
	s.addMul(u.CacheWrite, r.CacheWrite)
	s.addMul(u.CacheWrite1h, r.CacheWrite1h)
	s.addMul(u.Output, r.Output)
	s.addMul(u.Reasoning, r.Reasoning)
	return s.nanosUp()
}

func (p Price) threshold() int64 {
	if p.Threshold <= 0 {
		return DefaultThreshold
	}
	return p.Threshold
}

// at returns the six base prices that apply to a request, in or out of the
// tier, with Cost's fallbacks for unset ones resolved; the tier fields of
// the result are zero.
func (p Price) at(above bool) Price {
	pick := func(base, tier int64) int64 {
		if above && tier > 0 {
			return tier
		}
		return base
	}
	r := Price{
		Input:        pick(p.Input, p.InputAbove200k),
		Output:       pick(p.Output, p.OutputAbove200k),
		CacheRead:    pick(p.CacheRead, p.CacheReadAbove200k),
		CacheWrite:   pick(p.CacheWrite, p.CacheWriteAbove200k),
		CacheWrite1h: pick(p.CacheWrite1h, p.CacheWrite1hAbove200k),
		Reasoning:    p.Reasoning,
	}
	if r.CacheRead <= 0 {
		r.CacheRead = r.Input
	}
	if r.CacheWrite <= 0 {
		r.CacheWrite = r.Input
	}
	if r.CacheWrite1h <= 0 {
		r.CacheWrite1h = r.CacheWrite
	}
	if r.Reasoning <= 0 {
		r.Reasoning = r.Output
	}
	return r
}

// uint128 is a sum of pico-dollars too large for 64 bits: 1<<62 tokens at
// $1 a token is about 2^102 pico-dollars. sat records a carry out of the
// top bit, which only prices far beyond any LiteLLM lists can cause.
type uint128 struct {
	hi, lo uint64
	sat    bool
}

// addMul adds n*price, each taken as zero when negative.
func (s *uint128) addMul(n, price int64) {
	if n <= 0 || price <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(n), uint64(price))
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, lo, 0)
	s.hi, carry = bits.Add64(s.hi, hi, carry)
	if carry != 0 {
		s.sat = true
	}
}

// nanosUp returns the sum in nano-dollars, rounded up, saturated at MaxUSD.
// A high word of picoPerNano or more means a quotient of 2^64 or more (and
// bits.Div64 would panic on it).
func (s uint128) nanosUp() USD {
	if s.sat || s.hi >= picoPerNano {
		return MaxUSD
	}
	q, rem := bits.Div64(s.hi, s.lo, picoPerNano)
	if q >= math.MaxInt64 {
		return MaxUSD
	}
	if rem != 0 {
		q++
	}
	return USD(q)
}
