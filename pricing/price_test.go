package pricing

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lookup returns a model's price from the default table, by its exact name.
func lookup(t *testing.T, model string) Price {
	t.Helper()
	p, name, ok := Default().Lookup(model)
	require.True(t, ok, model)
	require.Equal(t, model, name)
	return p
}

// Anthropic: claude-sonnet-4 at $3 input, $3.75 5-minute write, $6 1-hour
// write, $0.30 cache read and $15 output per million tokens.
func TestCostAnthropicCache(t *testing.T) {
	p := lookup(t, "claude-sonnet-4-20250514")
	assert.Equal(t, Price{
		Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000, CacheWrite1h: 6_000_000,
		InputAbove200k: 6_000_000, OutputAbove200k: 22_500_000, CacheReadAbove200k: 600_000, CacheWriteAbove200k: 7_500_000,
	}, p)
	u := Usage{Input: 1000, CacheRead: 20_000, CacheWrite: 5000, CacheWrite1h: 2000, Output: 800}
	// 1000×3,000,000 + 20,000×300,000 + 5000×3,750,000 + 2000×6,000,000 + 800×15,000,000
	// = 3e9 + 6e9 + 18.75e9 + 12e9 + 12e9 = 51.75e9 pico-dollars = 51,750,000 nano-dollars.
	assert.Equal(t, USD(51_750_000), p.Cost(u))
	assert.Equal(t, "0.05175", p.Cost(u).String())
}

// OpenAI: gpt-5-mini at $0.25 input, $0.025 cached input, $2 output per
// million; reasoning tokens have no price of their own and bill as output.
func TestCostOpenAIReasoning(t *testing.T) {
	p := lookup(t, "gpt-5-mini")
	assert.Equal(t, Price{Input: 250_000, CacheRead: 25_000, Output: 2_000_000}, p)
	u := Usage{Input: 1234, CacheRead: 4096, Output: 300, Reasoning: 1500}
	// 1234×250,000 + 4096×25,000 + (300+1500)×2,000,000
	// = 308,500,000 + 102,400,000 + 3,600,000,000 = 4,010,900,000 pico = 4,010,900 nano.
	assert.Equal(t, USD(4_010_900), p.Cost(u))
	assert.Equal(t, "0.0040109", p.Cost(u).String())

	// A dedicated reasoning price is used when set: gemini-2.5-flash's equals
	// its output price, so only the arithmetic shows.
	f := lookup(t, "gemini-2.5-flash")
	assert.Equal(t, int64(2_500_000), f.Reasoning)
	f.Reasoning = 1_000_000
	assert.Equal(t, USD(1_000_000+2_500_000), f.Cost(Usage{Reasoning: 1000, Output: 1000}))
}

// Gemini 2.5 Pro: $1.25 input, $0.125 cache read, $10 output per million
// up to a 200k prompt; $2.50, $0.25 and $15 for every token of a request
// whose prompt is above.
func TestCostGeminiLongContext(t *testing.T) {
	p := lookup(t, "gemini-2.5-pro")
	above := Usage{Input: 250_000, CacheRead: 10_000, Output: 2000, Reasoning: 3000}
	// prompt 260,000 > 200,000: 250,000×2,500,000 + 10,000×250,000 + 5000×15,000,000
	// = 625e9 + 2.5e9 + 75e9 = 702.5e9 pico = $0.7025.
	assert.Equal(t, "0.7025", p.Cost(above).String())

	below := Usage{Input: 150_000, CacheRead: 10_000, Output: 2000, Reasoning: 3000}
	// prompt 160,000: 150,000×1,250,000 + 10,000×125,000 + 5000×10,000,000
	// = 187.5e9 + 1.25e9 + 50e9 = 238.75e9 pico = $0.23875.
	assert.Equal(t, "0.23875", p.Cost(below).String())

	// The threshold is strict: a prompt of exactly 200,000 is at the base.
	assert.Equal(t, 200_000*USD(1250), p.Cost(Usage{Input: 200_000}))
	assert.Equal(t, 200_001*USD(2500), p.Cost(Usage{Input: 200_001}))
	// Cached and cache-written tokens count towards the prompt.
	assert.Equal(t, USD(199_999*2500+2*250), p.Cost(Usage{Input: 199_999, CacheRead: 2}))
}

// Sonnet 4.5 above 200k: every kind at its tier, the 1-hour write included.
func TestCostAnthropicLongContext(t *testing.T) {
	p := lookup(t, "claude-sonnet-4-5")
	u := Usage{Input: 150_000, CacheRead: 40_000, CacheWrite: 10_000, CacheWrite1h: 5000, Output: 1000, Reasoning: 500}
	// 150,000×6e6 + 40,000×6e5 + 10,000×7.5e6 + 5000×1.2e7 + 1500×2.25e7
	// = 900e9 + 24e9 + 75e9 + 60e9 + 33.75e9 = 1092.75e9 pico.
	assert.Equal(t, "1.09275", p.Cost(u).String())

	// claude-sonnet-4 has no 1-hour tier price: its base 1-hour price stays.
	s4 := lookup(t, "claude-sonnet-4-20250514")
	assert.Equal(t, USD(1000*6000), s4.Cost(Usage{Input: 200_000, CacheWrite1h: 1000})-200_000*6000)
}

func TestCostFallbacks(t *testing.T) {
	in := Price{Input: 1000, Output: 5000}
	assert.Equal(t, USD(4), in.Cost(Usage{CacheRead: 1, CacheWrite: 1, CacheWrite1h: 1, Input: 1}),
		"unpriced cache tokens are charged as input, not given away")
	assert.Equal(t, USD(10), in.Cost(Usage{Output: 1, Reasoning: 1}))

	w := Price{Input: 1000, CacheWrite: 3000}
	assert.Equal(t, USD(3), w.Cost(Usage{CacheWrite1h: 1}), "1-hour writes fall back to the 5-minute price")

	tiered := Price{Input: 1000, InputAbove200k: 2000, Output: 3000, Threshold: 272_000}
	assert.Equal(t, USD(272_000), tiered.Cost(Usage{Input: 272_000}))
	assert.Equal(t, USD(272_001*2+3), tiered.Cost(Usage{Input: 272_001, Output: 1}),
		"output has no tier price: the base one applies")
	assert.Equal(t, USD(272_001*2+2), tiered.Cost(Usage{Input: 272_000, CacheRead: 1, CacheWrite: 1}),
		"unpriced cache tokens fall back to the tier's input price")

	assert.Equal(t, USD(0), Price{}.Cost(Usage{Input: 1 << 62, Output: 1 << 62}))
	assert.Equal(t, USD(0), Price{Input: -5, Output: 1000}.Cost(Usage{Input: 100, Output: -100}),
		"negative prices and counts count as zero")
}

func TestCostRoundsUp(t *testing.T) {
	p := Price{Input: 37_500} // $0.0375 per million tokens: 37.5 nano-dollars a token
	assert.Equal(t, USD(38), p.Cost(Usage{Input: 1}))
	assert.Equal(t, USD(75), p.Cost(Usage{Input: 2}))
	assert.Equal(t, USD(1), Price{Output: 1}.Cost(Usage{Output: 1}), "one pico-dollar costs a nano-dollar")
	assert.Equal(t, USD(1), Price{Output: 1}.Cost(Usage{Output: 1000}))
	assert.Equal(t, USD(2), Price{Output: 1}.Cost(Usage{Output: 1001}))
	assert.Equal(t, USD(0), Price{Output: 1}.Cost(Usage{}))
}

func TestCostSaturates(t *testing.T) {
	const huge = 1 << 62
	dear := Price{Input: MaxPrice, Output: MaxPrice, CacheRead: MaxPrice, CacheWrite: MaxPrice, CacheWrite1h: MaxPrice, Reasoning: MaxPrice}
	all := Usage{huge, huge, huge, huge, huge, huge}
	assert.Equal(t, MaxUSD, dear.Cost(all))
	assert.Equal(t, MaxUSD, dear.Cost(Usage{Input: huge}))

	// Far beyond MaxPrice, the 128-bit sum itself overflows: still saturated.
	absurd := Price{Input: math.MaxInt64, Output: math.MaxInt64, CacheRead: math.MaxInt64,
		CacheWrite: math.MaxInt64, CacheWrite1h: math.MaxInt64, Reasoning: math.MaxInt64}
	max := Usage{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64}
	assert.Equal(t, MaxUSD, absurd.Cost(max))
	assert.Equal(t, int64(math.MaxInt64), max.Prompt())

	// Just below the edge: $1 a token for 9,223,372,036 tokens is exact.
	assert.Equal(t, USD(9_223_372_036*Dollar), Price{Input: MaxPrice}.Cost(Usage{Input: 9_223_372_036}))
	// 9,223,372,036,854,775,807 pico-dollars is exactly MaxUSD/1000 rounded up.
	assert.Equal(t, USD(math.MaxInt64/1000+1), Price{Input: 1}.Cost(Usage{Input: math.MaxInt64}))
	// A quotient that rounds up past MaxUSD saturates instead of wrapping.
	assert.Equal(t, MaxUSD, Price{Input: 1000}.Cost(Usage{Input: math.MaxInt64}))
	assert.Equal(t, MaxUSD, Price{Input: 1001}.Cost(Usage{Input: math.MaxInt64}))
}
