package pricing

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUSDString(t *testing.T) {
	for _, c := range []struct {
		u    USD
		want string
	}{
		{0, "0"},
		{Nano, "0.000000001"},
		{125 * Dollar / 1000, "0.125"},
		{5 * Dollar, "5"},
		{-5 * Dollar / 2, "-2.5"},
		{Cent, "0.01"},
		{Micro + Nano, "0.000001001"},
		{1_000_000_000*Dollar + Dollar/2, "1000000000.5"},
		{math.MaxInt64, "9223372036.854775807"},
		{math.MinInt64, "-9223372036.854775808"},
	} {
		assert.Equal(t, c.want, c.u.String(), "%d", int64(c.u))
		got, err := ParseUSD(c.want)
		require.NoError(t, err, c.want)
		assert.Equal(t, c.u, got, c.want)
	}
}

func TestParseUSDAccepts(t *testing.T) {
	for s, want := range map[string]USD{
		"5":                     5 * Dollar,
		"0.125":                 125 * Dollar / 1000,
		"1e-3":                  Dollar / 1000,
		"1E2":                   100 * Dollar,
		"1.5e+3":                1500 * Dollar,
		"+1":                    Dollar,
		".5":                    Dollar / 2,
		"5.":                    5 * Dollar,
		"007":                   7 * Dollar,
		"-0":                    0,
		"-0.000000001":          -Nano,
		"0.1000000000000":       Dollar / 10, // trailing zeros past the 9th place are exact
		"1000000000.000000001":  1_000_000_000*Dollar + Nano,
		"9223372036.854775807":  math.MaxInt64,
		"-9223372036.854775808": math.MinInt64,
		"0.000000000e999999999": 0,
	} {
		got, err := ParseUSD(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
}

func TestParseUSDRefuses(t *testing.T) {
	for _, s := range []string{
		"", "NaN", "nan", "Inf", "-Inf", "+Inf", "infinity", "0x10", "1/2", "abc", "1.2.3",
		"--1", "+-1", "1e", "1e+", "e5", ".", "-", "+", " 1", "1 ", "1,5", "1_000", "٣",
		"0.0000000001", "12.5e-9", "1e-10", "0.0000000015",
		"9223372036.854775808", "-9223372036.854775809", "1e19", "1e999999999999",
		"1e-999999999999", strings.Repeat("1", 500),
	} {
		_, err := ParseUSD(s)
		require.Error(t, err, "%q", s)
		assert.True(t, errors.Is(err, ErrInvalid), "%q: %v", s, err)
		if len(s) < 30 {
			assert.Contains(t, err.Error(), strconv.Quote(s), s)
		}
	}
}

func TestUSDJSON(t *testing.T) {
	type budget struct {
		Limit USD  `json:"limit_usd"`
		Spent *USD `json:"spent_usd,omitempty"`
	}
	b, err := json.Marshal(budget{Limit: 125 * Dollar / 1000})
	require.NoError(t, err)
	assert.JSONEq(t, `{"limit_usd":0.125}`, string(b))
	assert.Equal(t, `{"limit_usd":0.125}`, string(b), "an exact decimal, not a float's text")

	for in, want := range map[string]USD{
		`{"limit_usd":5}`:                    5 * Dollar,
		`{"limit_usd":0.000000001}`:          Nano,
		`{"limit_usd":1.5e-3}`:               15 * Dollar / 10000,
		`{"limit_usd":"0.125"}`:              125 * Dollar / 1000,
		`{"limit_usd":-2.5}`:                 -5 * Dollar / 2,
		`{"limit_usd":null}`:                 7, // left as it was
		`{"limit_usd":9223372036.854775807}`: math.MaxInt64,
	} {
		got := budget{Limit: 7}
		require.NoError(t, json.Unmarshal([]byte(in), &got), in)
		assert.Equal(t, want, got.Limit, in)
	}
	for _, in := range []string{
		`{"limit_usd":true}`, `{"limit_usd":"abc"}`, `{"limit_usd":"NaN"}`, `{"limit_usd":[1]}`,
		`{"limit_usd":0.0000000001}`, `{"limit_usd":1e300}`, `{"limit_usd":"1"2}`,
	} {
		var got budget
		err := json.Unmarshal([]byte(in), &got)
		require.Error(t, err, in)
	}
	var u USD
	err = u.UnmarshalJSON([]byte(`"0.0000000001"`))
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestUSDSaturates(t *testing.T) {
	const billion = 1_000_000_000 * Dollar // $1B is 1e18 nano-dollars: it fits
	assert.Equal(t, 2*billion, billion.Add(billion))
	assert.Equal(t, MaxUSD, (5 * billion).Add(5*billion), "$10B does not fit: saturates")
	assert.Equal(t, USD(math.MinInt64), (-5 * billion).Add(-5*billion))
	assert.Equal(t, USD(math.MinInt64), (-5 * billion).Sub(5*billion))
	assert.Equal(t, MaxUSD, (5 * billion).Sub(-5*billion))
	assert.Equal(t, MaxUSD, MaxUSD.Add(Nano))
	assert.Equal(t, USD(math.MinInt64), USD(math.MinInt64).Sub(Nano))
	assert.Equal(t, USD(-1), MaxUSD.Add(math.MinInt64))
	assert.Equal(t, 3*Nano, Nano.Add(2*Nano))
	assert.Equal(t, -Nano, Nano.Sub(2*Nano))
	assert.InDelta(t, 0.125, (125 * Dollar / 1000).Float64(), 0)
}
