package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, refuses only with ErrInvalid, and a table
// it returns finds each of its models by its own name, with prices in range
// that Cost can use.
func FuzzParse(f *testing.F) {
	f.Add(defaultJSON)
	for _, s := range []string{
		`{}`, `{"m": {"input_cost_per_token": 2.5e-06}}`,
		`{"m": {"input_cost_per_token": 1e-6, "input_cost_per_token_above_200k_tokens": 2e-6, "output_cost_per_token": 1}}`,
		`{"a/b": {"input_cost_per_token": 1e-12}, "b": {"output_cost_per_token": 0.0000025}}`,
		`{"m": {"x": [{"a": 1}, [null, true]], "cache_creation_input_token_cost_above_1hr_above_272k_tokens": 3e-6}}`,
		`{"m": {"input_cost_per_token": 1e-13}}`, `{"m": {}} {}`, `{"m": {"m": 1, "m": 2}}`,
		`{"gpt-4o-2024-08-06": {"input_cost_per_token": 1e-6}, "GPT-4o-2024-08-06": {"input_cost_per_token": 2e-6}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := Parse(bytes.NewReader(data))
		if err != nil {
			if tab != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse = %v, %v", tab, err)
			}
			return
		}
		models := tab.Models()
		if len(models) != tab.Len() {
			t.Fatalf("%d models, Len %d", len(models), tab.Len())
		}
		for _, m := range models {
			p, name, ok := tab.Lookup(m)
			if !ok || name != m || p != tab.prices[m] {
				t.Fatalf("Lookup(%q) = %v, %q, %v", m, p, name, ok)
			}
			checkPrice(t, m, p)
			// Any other spelling finds some entry of the table, or none.
			if _, other, ok := tab.Lookup("provider/" + strings.ToUpper(m) + "-latest"); ok {
				if _, found := tab.prices[other]; !found {
					t.Fatalf("Lookup found %q, not in the table", other)
				}
			}
		}
		again := tab.With(tab)
		if !slicesEqual(again.Models(), models) {
			t.Fatalf("With itself changed the models")
		}
	})
}

func checkPrice(t *testing.T, model string, p Price) {
	for _, v := range [...]int64{p.Input, p.Output, p.CacheRead, p.CacheWrite, p.CacheWrite1h, p.Reasoning,
		p.InputAbove200k, p.OutputAbove200k, p.CacheReadAbove200k, p.CacheWriteAbove200k, p.CacheWrite1hAbove200k} {
		if v < 0 || v > MaxPrice {
			t.Fatalf("%q: price %d out of range", model, v)
		}
	}
	if p.Threshold < 0 || p.Threshold == DefaultThreshold {
		t.Fatalf("%q: threshold %d", model, p.Threshold)
	}
	for _, u := range []Usage{{}, {Input: 1, Output: 1}, {1 << 62, 1 << 62, 1 << 62, 1 << 62, 1 << 62, 1 << 62}} {
		if c := p.Cost(u); c < 0 {
			t.Fatalf("%q: negative cost %d", model, c)
		}
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
}

// FuzzParseUSD: ParseUSD never panics, refuses only with ErrInvalid, and
// what it accepts is the exact value of the text (checked against math/big)
// and reads back unchanged from its String and its JSON.
func FuzzParseUSD(f *testing.F) {
	for _, s := range []string{"0", "0.125", "-2.5", "1e-9", "1E+3", ".5", "5.", "+7", "NaN", "1e-10",
		"9223372036.854775807", "-9223372036.854775808", "9223372036.854775808", "0.1000000000", "00.0e0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseUSD(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseUSD(%q): %v", s, err)
			}
			if want, ok := ratNanos(s); ok && want.IsInt64() {
				t.Fatalf("ParseUSD(%q) refused %v nano-dollars: %v", s, want, err)
			}
			return
		}
		if want, ok := ratNanos(s); ok && (!want.IsInt64() || want.Int64() != int64(u)) {
			t.Fatalf("ParseUSD(%q) = %d, want %v", s, u, want)
		}
		roundTrip(t, u)
	})
}

// ratNanos is the value of s in nano-dollars by math/big, when s is a
// number Go's big.Rat and ParseUSD both read (decimal digits, point,
// exponent; short enough for big.Rat to be quick) and that value is whole.
func ratNanos(s string) (*big.Int, bool) {
	if len(s) > 60 || strings.Trim(s, "0123456789.eE+-") != "" || strings.Count(s, "_") > 0 {
		return nil, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if e, err := strconv.Atoi(s[i+1:]); err != nil || e > 400 || e < -400 {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, false
	}
	r.Mul(r, big.NewRat(int64(Dollar), 1))
	if !r.IsInt() {
		return nil, false
	}
	return r.Num(), true
}

// FuzzUSDRoundTrip: every amount's String and JSON read back unchanged.
func FuzzUSDRoundTrip(f *testing.F) {
	for _, n := range []int64{0, 1, -1, 125_000_000, 5e9, math.MaxInt64, math.MinInt64, 1e18 + 5e8} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) { roundTrip(t, USD(n)) })
}

func roundTrip(t *testing.T, u USD) {
	got, err := ParseUSD(u.String())
	if err != nil || got != u {
		t.Fatalf("ParseUSD(%q) = %d, %v; want %d", u.String(), got, err, u)
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("MarshalJSON(%d) = %s, not JSON", u, b)
	}
	var back USD
	if err := json.Unmarshal(b, &back); err != nil || back != u {
		t.Fatalf("Unmarshal(%s) = %d, %v; want %d", b, back, err, u)
	}
}
