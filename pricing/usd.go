package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/ratestore/ratestore/internal/sat"
)

// USD is an amount of money in whole nano-dollars (1e-9 USD), the unit
// budgets and spend are stored in. An int64 of them spans about ±9.2
// billion dollars, far beyond any budget, so arithmetic saturates at the
// ends of that range instead of wrapping: an absurd amount stays absurd
// and keeps its sign.
type USD int64

// Units of USD.
const (
	Nano   USD = 1
	Micro  USD = 1e3
	Cent   USD = 1e7
	Dollar USD = 1e9
)

// MaxUSD is the largest amount, where Add and Cost saturate.
const MaxUSD USD = math.MaxInt64

// picoPerNano converts pico-dollars, the unit of prices, to nano-dollars.
const picoPerNano = 1000

// Add returns u+v, saturated to [math.MinInt64, math.MaxInt64] nano-dollars.
func (u USD) Add(v USD) USD { return USD(sat.Add(int64(u), int64(v))) }

// Sub returns u-v, saturated to [math.MinInt64, math.MaxInt64] nano-dollars.
func (u USD) Sub(v USD) USD { return USD(sat.Sub(int64(u), int64(v))) }

// Float64 returns u in dollars as a float64, for display and metrics only:
// it is exact below 2^53 nano-dollars (about $9 million) and rounded above.
// Never store it or compute an amount from it.
func (u USD) Float64() float64 { return float64(u) / float64(Dollar) }

// String formats u in dollars as an exact decimal with no trailing zeros:
// "5", "0.125", "0.000000001", "-2.5". ParseUSD reads it back unchanged.
func (u USD) String() string { return string(u.appendText(nil)) }

func (u USD) appendText(b []byte) []byte {
	n := uint64(u)
	if u < 0 {
		b = append(b, '-')
		n = -n // two's complement: exact even for math.MinInt64
	}
	whole, frac := n/uint64(Dollar), n%uint64(Dollar)
	b = strconv.AppendUint(b, whole, 10)
	if frac == 0 {
		return b
	}
	// Adding 1e9 pads the fraction to nine digits; the leading 1 is dropped.
	f := strconv.AppendUint(nil, frac+uint64(Dollar), 10)[1:]
	f = bytes.TrimRight(f, "0")
	return append(append(b, '.'), f...)
}

// MarshalJSON writes u as a JSON number in dollars, in the exact decimal of
// String: 0.125, never 1.25e-01 nor a rounded float.
func (u USD) MarshalJSON() ([]byte, error) { return u.appendText(nil), nil }

// UnmarshalJSON reads a JSON number in dollars as ParseUSD does, or the same
// decimal as a JSON string ("0.125"), for clients whose JSON numbers are
// floats. null leaves u unchanged, as encoding/json does for other types.
func (u *USD) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("pricing: USD amount %s: %v: %w", b, err, ErrInvalid)
		}
	}
	v, err := ParseUSD(s)
	if err != nil {
		return err
	}
	*u = v
	return nil
}

// ParseUSD reads a decimal amount of dollars exactly, with no float in
// between: "5", "0.125", "1e-3", "-2.5". It accepts a JSON number, and also
// a leading '+', leading zeros, ".5" and "5.". The amount must be a whole
// number of nano-dollars: at most 9 decimal places once trailing zeros and
// any exponent are taken into account ("0.0000000001" is refused, nothing
// is rounded), and within ±9,223,372,036.854775807 dollars. Negative
// amounts are accepted: whether one makes sense (a refund, an adjustment)
// is the caller's to decide. NaN, Inf and anything else are refused with an
// error wrapping ErrInvalid that quotes the text.
func ParseUSD(s string) (USD, error) {
	v, err := scaled(s, 9)
	switch err {
	case nil:
		return USD(v), nil
	case errFraction:
		return 0, fmt.Errorf("pricing: USD amount %.40q: more than 9 decimal places (the unit is 1e-9 USD): %w", s, ErrInvalid)
	case errRange:
		return 0, fmt.Errorf("pricing: USD amount %.40q: beyond ±9223372036.854775807: %w", s, ErrInvalid)
	default:
		return 0, fmt.Errorf("pricing: USD amount %.40q: %v: %w", s, err, ErrInvalid)
	}
}
