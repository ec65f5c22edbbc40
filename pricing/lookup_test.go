package pricing

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// priced returns a table where each model's input price is its index + 1,
// so that a lookup's price tells which entry it found.
func priced(models ...string) *Table {
	m := make(map[string]Price, len(models))
	for i, name := range models {
		m[name] = Price{Input: int64(i + 1)}
	}
	return newTable(m)
}

func TestLookup(t *testing.T) {
	tab := priced(
		"gpt-4o", "gpt-4o-mini", "gpt-4", "o3-mini", "claude-sonnet-4",
		"gemini/gemini-2.5-pro", "vertex_ai/gemini-2.5-pro", "openrouter/google/gemini-2.5-pro",
		"claude-3-5-sonnet-20240620", "azure/gpt-4.1", "gpt-4.1", "text-embedding-3-small",
	)
	for _, c := range []struct{ model, want string }{
		// 1. exact.
		{"gpt-4o", "gpt-4o"},
		{"vertex_ai/gemini-2.5-pro", "vertex_ai/gemini-2.5-pro"},
		{"azure/gpt-4.1", "azure/gpt-4.1"},
		// 2. the same bare name, either side prefixed, any case.
		{"openai/gpt-4o", "gpt-4o"},
		{"GPT-4o", "gpt-4o"},
		{"openrouter/openai/gpt-4o-mini", "gpt-4o-mini"},
		{"gemini-2.5-pro", "gemini/gemini-2.5-pro"},
		{"google/gemini-2.5-pro", "gemini/gemini-2.5-pro"},
		{"openai/gpt-4.1", "gpt-4.1"},
		{"anthropic/claude-sonnet-4", "claude-sonnet-4"},
		// 3. the request's family.
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"openai/gpt-4o-2024-11-20", "gpt-4o"},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"gpt-4-0613", "gpt-4"},
		{"gpt-4o-latest", "gpt-4o"},
		{"claude-sonnet-4-20250514", "claude-sonnet-4"},
		{"claude-sonnet-4@20250514", "claude-sonnet-4"},
		{"vertex_ai/claude-sonnet-4@20250514", "claude-sonnet-4"},
		{"claude-sonnet-4-0", "claude-sonnet-4"},
		{"gemini-2.5-pro-001", "gemini/gemini-2.5-pro"},
		{"gemini-2.5-pro@002", "gemini/gemini-2.5-pro"},
		{"o3-mini-2025-01-31", "o3-mini"},
		// 4. the same family on both sides.
		{"claude-3-5-sonnet", "claude-3-5-sonnet-20240620"},
		{"claude-3-5-sonnet@20240620", "claude-3-5-sonnet-20240620"},
		{"claude-3-5-sonnet-20241022", "claude-3-5-sonnet-20240620"},
		{"claude-3-5-sonnet-latest", "claude-3-5-sonnet-20240620"},
		{"anthropic/claude-3-5-sonnet-latest", "claude-3-5-sonnet-20240620"},

		// Never a different model by prefix.
		{"gpt-4o-audio-preview", ""},
		{"gpt-4o-mini-tts", ""},
		{"gpt-4-turbo", ""},
		{"gpt-4-32k", ""},
		{"gpt", ""},
		{"gpt-4o-2024", ""},
		{"o3", ""},
		{"o3-mini-high", ""},
		{"claude-sonnet-4-5", ""},
		{"claude-sonnet-4-5-20250929", ""},
		{"claude-sonnet", ""},
		{"gemini-2.5-pro-preview", ""},
		{"gemini-2.5", ""},
		{"text-embedding-3", ""},
		{"gpt-4o-12345678", ""},   // not a date
		{"gpt-4o-20251399", ""},   // not a date
		{"gpt-4o-1399", ""},       // not a month and day
		{"gpt-4o-123", ""},        // a version starts with 0
		{"gpt-4o-2024-13-01", ""}, // not a date
		{"-latest", ""},           // nothing before the suffix
		{"", ""},
		{"/", ""},
		{"openai/", ""},
	} {
		p, name, ok := tab.Lookup(c.model)
		if c.want == "" {
			assert.False(t, ok, "%q found %q", c.model, name)
			assert.Equal(t, Price{}, p)
			assert.Empty(t, name)
			continue
		}
		if assert.True(t, ok, c.model) {
			assert.Equal(t, c.want, name, c.model)
			want, _, _ := tab.Lookup(c.want)
			assert.Equal(t, want, p, c.model)
		}
	}
}

// Claude's dated names (LiteLLM's) are found from Anthropic's aliases, and
// a dated request finds the undated entry when only that is listed.
func TestLookupDatedEitherSide(t *testing.T) {
	dated := priced("claude-sonnet-4-20250514")
	for _, model := range []string{"claude-sonnet-4", "claude-sonnet-4-0", "anthropic/claude-sonnet-4", "claude-sonnet-4@20250514"} {
		_, name, ok := dated.Lookup(model)
		assert.True(t, ok, model)
		assert.Equal(t, "claude-sonnet-4-20250514", name, model)
	}
	undated := priced("claude-sonnet-4")
	_, name, ok := undated.Lookup("claude-sonnet-4-20250514")
	assert.True(t, ok)
	assert.Equal(t, "claude-sonnet-4", name)

	// The exact entry beats the family: gpt-4o-2024-05-13 has its own price.
	both := priced("gpt-4o", "gpt-4o-2024-05-13")
	_, name, _ = both.Lookup("gpt-4o-2024-05-13")
	assert.Equal(t, "gpt-4o-2024-05-13", name)
	_, name, _ = both.Lookup("gpt-4o-2024-08-06")
	assert.Equal(t, "gpt-4o", name)
	_, name, _ = both.Lookup("gpt-4o")
	assert.Equal(t, "gpt-4o", name)

	// Several dated versions of a family: the first in order, every time.
	many := priced("claude-x-20250101", "claude-x-20240101", "bedrock/claude-x-20230101")
	for range 10 {
		_, name, _ = many.Lookup("claude-x")
		assert.Equal(t, "claude-x-20240101", name)
	}
}

func TestLookupNil(t *testing.T) {
	var tab *Table
	_, _, ok := tab.Lookup("gpt-4o")
	assert.False(t, ok)
	assert.Equal(t, 0, tab.Len())
	assert.Empty(t, tab.Models())
	var zero Table
	_, _, ok = zero.Lookup("gpt-4o")
	assert.False(t, ok)
}

func TestDefault(t *testing.T) {
	d := Default()
	require.Same(t, d, Default())
	for _, model := range []string{
		"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o3", "o4-mini", "gpt-5", "gpt-5-mini",
		"claude-opus-4", "claude-sonnet-4", "claude-3-5-haiku", "claude-haiku-4-5",
		"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.0-flash",
	} {
		p, name, ok := d.Lookup(model)
		if !assert.True(t, ok, model) {
			continue
		}
		assert.Positive(t, p.Input, name)
		assert.Positive(t, p.Output, name)
		assert.Positive(t, p.CacheRead, name)
		if strings.HasPrefix(name, "claude") {
			assert.Positive(t, p.CacheWrite, name)
			assert.Positive(t, p.CacheWrite1h, name)
		}
	}
	for _, model := range []string{"claude-sonnet-4", "gemini-2.5-pro", "claude-sonnet-4-5"} {
		p, _, _ := d.Lookup(model)
		assert.Positive(t, p.InputAbove200k, model)
		assert.Positive(t, p.OutputAbove200k, model)
		assert.Positive(t, p.CacheReadAbove200k, model)
	}
	for model, want := range map[string]string{
		"openai/gpt-4o-2024-08-06":  "gpt-4o",
		"gpt-4o-2024-05-13":         "gpt-4o-2024-05-13",
		"claude-opus-4-0":           "claude-opus-4-20250514",
		"claude-opus-4-1-20250805":  "claude-opus-4-1",
		"claude-3-5-haiku-latest":   "claude-3-5-haiku-20241022",
		"claude-haiku-4-5-20251001": "claude-haiku-4-5",
		"gemini/gemini-2.5-flash":   "gemini-2.5-flash",
		"gemini-2.0-flash-001":      "gemini-2.0-flash",
		"vertex_ai/gemini-2.5-pro":  "gemini-2.5-pro",
	} {
		_, name, ok := d.Lookup(model)
		assert.True(t, ok, model)
		assert.Equal(t, want, name, model)
	}
	for _, model := range []string{"claude-opus-4-5", "gpt-5-nano", "o3-pro", "gemini-2.5-flash-lite", "gpt-4"} {
		_, name, ok := d.Lookup(model)
		assert.False(t, ok, "%s found %s", model, name)
	}
	assert.Contains(t, string(defaultJSON), `"prices_taken": "2026-11-26"`)
	assert.Contains(t, string(defaultJSON), "BerriAI/litellm")
}

func TestWith(t *testing.T) {
	base := Default()
	n := base.Len()
	gpt4o, _, _ := base.Lookup("gpt-4o")
	over := parseString(t, `{
		"gpt-4o": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
		"my-model": {"input_cost_per_token": 3e-6}
	}`)
	both := base.With(over)
	assert.Equal(t, n+1, both.Len())
	p, _, _ := both.Lookup("gpt-4o")
	assert.Equal(t, Price{Input: 1_000_000, Output: 2_000_000}, p, "over's entry replaces the whole entry")
	p, _, _ = both.Lookup("openai/gpt-4o-2024-08-06")
	assert.Equal(t, Price{Input: 1_000_000, Output: 2_000_000}, p, "and lookups reach it")
	_, _, ok := both.Lookup("my-model")
	assert.True(t, ok)
	_, _, ok = both.Lookup("claude-sonnet-4")
	assert.True(t, ok, "the base's other entries stay")

	// Neither table changed.
	assert.Equal(t, n, base.Len())
	p, _, _ = base.Lookup("gpt-4o")
	assert.Equal(t, gpt4o, p)
	_, _, ok = base.Lookup("my-model")
	assert.False(t, ok)
	assert.Equal(t, 2, over.Len())

	assert.Equal(t, n, base.With(nil).Len())
	var none *Table
	assert.Equal(t, 2, none.With(over).Len())
	assert.Equal(t, []string{"gpt-4o", "my-model"}, none.With(over).Models())
}

func TestModelsSorted(t *testing.T) {
	m := Default().Models()
	assert.IsIncreasing(t, m)
	assert.Len(t, m, Default().Len())
	m[0] = "changed"
	assert.NotEqual(t, "changed", Default().Models()[0], "Models returns a copy")
}
