package pricing_test

import (
	"fmt"

	"github.com/ratestore/ratestore/pricing"
)

func ExamplePrice_Cost() {
	p, name, _ := pricing.Default().Lookup("anthropic/claude-sonnet-4-20250514")
	u := pricing.Usage{Input: 1000, CacheRead: 20_000, CacheWrite: 5000, CacheWrite1h: 2000, Output: 800}
	fmt.Println(name, p.Cost(u))

	// A prompt above 200,000 tokens prices the whole request at the long-context tier.
	u.Input = 180_000
	fmt.Println(name, p.Cost(u))
	// Output:
	// claude-sonnet-4-20250514 0.05175
	// claude-sonnet-4-20250514 1.1595
}

func ExampleTable_Lookup() {
	t := pricing.Default()
	// A million-token prompt is above gemini-2.5-pro's 200k tier: $2.50, not $1.25.
	for _, model := range []string{"openai/gpt-4o-2024-08-06", "gpt-4o-2024-05-13", "gpt-4o-mini", "claude-opus-4-0", "gemini/gemini-2.5-pro", "gpt-4"} {
		p, name, ok := t.Lookup(model)
		fmt.Printf("%s: %q %v, $%v per million input tokens\n", model, name, ok, p.Cost(pricing.Usage{Input: 1_000_000}))
	}
	// Output:
	// openai/gpt-4o-2024-08-06: "gpt-4o" true, $2.5 per million input tokens
	// gpt-4o-2024-05-13: "gpt-4o-2024-05-13" true, $5 per million input tokens
	// gpt-4o-mini: "gpt-4o-mini" true, $0.15 per million input tokens
	// claude-opus-4-0: "claude-opus-4-20250514" true, $15 per million input tokens
	// gemini/gemini-2.5-pro: "gemini-2.5-pro" true, $2.5 per million input tokens
	// gpt-4: "" false, $0 per million input tokens
}
