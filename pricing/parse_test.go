package pricing

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parseString(t *testing.T, s string) *Table {
	t.Helper()
	tab, err := Parse(strings.NewReader(s))
	require.NoError(t, err)
	return tab
}

func TestParsePricesExactly(t *testing.T) {
	for text, want := range map[string]int64{
		"2.5e-06":     2_500_000,
		"3.75e-08":    37_500,
		"0.0000025":   2_500_000,
		"2.5E-6":      2_500_000,
		"1.875e-05":   18_750_000,
		"5.46875e-07": 546_875,
		"1e-12":       1,
		"0":           0,
		"0.0":         0,
		"-0":          0,
		"1":           MaxPrice,
		"0.1e-11":     1,
		"1.923e-06":   1_923_000,
	} {
		tab := parseString(t, `{"m": {"input_cost_per_token": `+text+`}}`)
		p, _, ok := tab.Lookup("m")
		require.True(t, ok, text)
		assert.Equal(t, want, p.Input, text)
	}
}

func TestParseFields(t *testing.T) {
	tab := parseString(t, `{
		"sample_spec": {"input_cost_per_token": "whatever", "nested": {"a": [1, {"b": null}]}},
		"all": {
			"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
			"cache_read_input_token_cost": 3e-7, "cache_creation_input_token_cost": 4e-6,
			"cache_creation_input_token_cost_above_1hr": 5e-6, "output_cost_per_reasoning_token": 6e-6,
			"input_cost_per_token_above_200k_tokens": 7e-6, "output_cost_per_token_above_200k_tokens": 8e-6,
			"cache_read_input_token_cost_above_200k_tokens": 9e-7,
			"cache_creation_input_token_cost_above_200k_tokens": 1e-5,
			"cache_creation_input_token_cost_above_1hr_above_200k_tokens": 1.1e-5,
			"input_cost_per_token_priority": 0.5, "input_cost_per_token_batches": "ignored",
			"litellm_provider": "openai", "max_tokens": 8192, "mode": "chat", "supports_vision": true,
			"search_context_cost_per_query": {"search_context_size_low": 0.01},
			"supported_endpoints": ["/v1/chat/completions"], "deprecation_date": null
		},
		"openai-272k": {"input_cost_per_token": 2.5e-6, "input_cost_per_token_above_272k_tokens": 5e-6,
			"cache_read_input_token_cost_above_272000_tokens": 5e-7},
		"free": {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0},
		"image-only": {"output_cost_per_image": 0.04, "mode": "image_generation"},
		"nulls": {"input_cost_per_token": null, "output_cost_per_token": null}
	}`)
	assert.Equal(t, []string{"all", "free", "openai-272k"}, tab.Models(),
		"sample_spec and entries without a per-token price are left out")
	p, _, _ := tab.Lookup("all")
	assert.Equal(t, Price{
		Input: 1_000_000, Output: 2_000_000, CacheRead: 300_000, CacheWrite: 4_000_000, CacheWrite1h: 5_000_000,
		Reasoning: 6_000_000, InputAbove200k: 7_000_000, OutputAbove200k: 8_000_000, CacheReadAbove200k: 900_000,
		CacheWriteAbove200k: 10_000_000, CacheWrite1hAbove200k: 11_000_000,
	}, p)
	p, _, _ = tab.Lookup("openai-272k")
	assert.Equal(t, Price{Input: 2_500_000, InputAbove200k: 5_000_000, CacheReadAbove200k: 500_000, Threshold: 272_000}, p)
	p, _, ok := tab.Lookup("free")
	assert.True(t, ok)
	assert.Equal(t, Price{}, p)
	assert.Equal(t, 0, parseString(t, `{}`).Len())
	assert.Equal(t, 1, parseString(t, " \n{\"m\": {\"output_cost_per_token\": 1e-6}}\n\t ").Len())
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string // in the message
	}{
		{"string price", `{"gpt-4o": {"input_cost_per_token": "2.5e-06"}}`,
			[]string{`model "gpt-4o"`, "input_cost_per_token", "want a number", `"2.5e-06"`}},
		{"bool price", `{"gpt-4o": {"output_cost_per_token": true}}`, []string{`model "gpt-4o"`, "output_cost_per_token", "true"}},
		{"object price", `{"m": {"cache_read_input_token_cost": {"a": 1}}}`, []string{`model "m"`, "cache_read_input_token_cost"}},
		{"negative", `{"m": {"a": 1, "cache_creation_input_token_cost": -3.75e-06}}`,
			[]string{`model "m"`, "cache_creation_input_token_cost", "-3.75e-06", "negative"}},
		{"negative tiny", `{"m": {"input_cost_per_token": -1e-20}}`, []string{"negative"}},
		{"below a pico-dollar", `{"m": {"output_cost_per_token": 1e-13}}`,
			[]string{`model "m"`, "output_cost_per_token", "1e-13", "pico-dollars"}},
		{"not whole", `{"m": {"output_cost_per_token_above_200k_tokens": 2.5000000000001e-06}}`,
			[]string{"output_cost_per_token_above_200k_tokens", "pico-dollars"}},
		{"absurd", `{"claude": {"output_cost_per_token": 15}}`, []string{`model "claude"`, "output_cost_per_token", "15 USD", "$1"}},
		{"huge", `{"m": {"input_cost_per_token": 1e400}}`, []string{"input_cost_per_token", "$1"}},
		{"two thresholds", `{"m": {"input_cost_per_token_above_200k_tokens": 1e-6, "input_cost_per_token_above_128k_tokens": 1e-6}}`,
			[]string{`model "m"`, "tier threshold", "200000", "128000"}},
		{"duplicate model", `{"gpt-4o": {"input_cost_per_token": 1e-6}, "gpt-4o": {"input_cost_per_token": 2e-6}}`,
			[]string{`model "gpt-4o" appears twice`}},
		{"duplicate sample_spec", `{"sample_spec": {}, "sample_spec": {}}`, []string{`"sample_spec" appears twice`}},
		{"duplicate field", `{"m": {"input_cost_per_token": 1e-6, "input_cost_per_token": 1e-6}}`,
			[]string{`model "m"`, `field "input_cost_per_token" appears twice`}},
		{"duplicate ignored field", `{"m": {"mode": "chat", "mode": "embedding"}}`, []string{`model "m"`, `"mode" appears twice`}},
		{"duplicate nested", `{"m": {"x": [{"a": 1, "a": 2}]}}`, []string{`model "m"`, `"a" appears twice`}},
		{"trailing garbage", `{"m": {"input_cost_per_token": 1e-6}} xyz`, []string{"after the top-level object"}},
		{"second object", `{}{}`, []string{"after the top-level object"}},
		{"trailing comma", `{"m": {"input_cost_per_token": 1e-6},}`, []string{"price file", "invalid character"}},
		{"not an object", `[]`, []string{"want an object"}},
		{"entry not an object", `{"m": 2.5e-6}`, []string{`model "m"`, "want an object", "2.5e-6"}},
		{"entry is null", `{"m": null}`, []string{`model "m"`, "null"}},
		{"truncated", `{"m": {"input_cost_per_token": 1e-6`, []string{`model "m"`, "unexpected EOF"}},
		{"truncated top", `{"m": {}`, []string{"unexpected EOF"}},
		{"empty", ``, []string{"unexpected EOF"}},
		{"empty name", `{"": {"input_cost_per_token": 1e-6}}`, []string{"empty model name"}},
		{"NaN", `{"m": {"input_cost_per_token": NaN}}`, []string{"invalid character"}},
		{"invalid UTF-8", "{\"m\xff\": {}}", []string{"UTF-8"}},
		{"deep", `{"m": {"x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`, []string{`model "m"`, "nested deeper"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab, err := Parse(strings.NewReader(c.in))
			require.Error(t, err)
			assert.Nil(t, tab)
			assert.ErrorIs(t, err, ErrInvalid)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	// One byte over the bound refuses a file, valid or not, by its size
	// alone (shown on a small bound, and on the real one below).
	file := `{"m": {"input_cost_per_token": 1e-6}}`
	tab, err := parseLimited(strings.NewReader(file), int64(len(file)))
	require.NoError(t, err)
	assert.Equal(t, 1, tab.Len())
	_, err = parseLimited(strings.NewReader(file+" "), int64(len(file)))
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "larger than 37 bytes")

	if testing.Short() {
		t.Skip("reads 64 MiB (seconds under -race)")
	}
	// An endless stream ends at MaxFileSize.
	_, err = Parse(repeatReader(' '))
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "larger than 67108864 bytes")
}

// repeatReader reads as its byte repeated without end.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = byte(r)
	for n := 1; n < len(p); n *= 2 {
		copy(p[n:], p[:n])
	}
	return len(p), nil
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := Parse(iotest.ErrReader(boom))
	require.ErrorIs(t, err, boom)
	assert.NotErrorIs(t, err, ErrInvalid)
	_, err = Parse(io.MultiReader(bytes.NewReader([]byte(`{"m": `)), iotest.ErrReader(boom)))
	assert.ErrorIs(t, err, boom)
}
