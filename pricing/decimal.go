package pricing

import (
	"errors"
	"math"
	"strings"
)

// The ways a decimal text can fail to be a whole number of units; callers
// say which unit.
var (
	errSyntax   = errors.New("not a decimal number")
	errFraction = errors.New("finer than the unit")
	errRange    = errors.New("out of range")
)

// maxNumberLen bounds the text scaled reads, so that a hostile number of a
// million digits costs nothing to refuse.
const maxNumberLen = 400

// scaled returns the value of the decimal text s times 10^scale, exactly, as
// an int64. s is a JSON number or a little more: an optional sign ('+' or
// '-'), digits with at most one '.' and at least one digit, an optional
// exponent ('e' or 'E', optional sign, digits); leading zeros and a bare
// ".5" or "5." are accepted. The value must be a whole number of units once
// scaled (errFraction otherwise: nothing is rounded) and fit an int64
// (errRange). "NaN", "Inf", hex and everything else is errSyntax.
//
// The digits are moved, not multiplied: s = digits × 10^exp, so scaling
// adds scale to exp; a negative exp must only drop zeros, a positive one
// appends them, and the result must then have at most 19 digits.
func scaled(s string, scale int) (int64, error) {
	if len(s) > maxNumberLen {
		return 0, errRange
	}
	neg, digits, exp, ok := splitNumber(s)
	if !ok {
		return 0, errSyntax
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return 0, nil
	}
	exp += scale
	if exp < 0 {
		cut := len(digits) + exp // where the digits below the unit begin
		if cut <= 0 || strings.TrimRight(digits[cut:], "0") != "" {
			return 0, errFraction
		}
		digits, exp = digits[:cut], 0
	}
	if len(digits)+exp > 19 {
		return 0, errRange
	}
	var v uint64
	for i := 0; i < len(digits); i++ {
		v = v*10 + uint64(digits[i]-'0')
	}
	for ; exp > 0; exp-- {
		v *= 10
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++ // math.MinInt64 has one more unit than math.MaxInt64
	}
	if v > limit {
		return 0, errRange
	}
	if neg {
		return -int64(v), nil // wraps to math.MinInt64 for 1<<63, as wanted
	}
	return int64(v), nil
}

// splitNumber splits a decimal text into its sign, its mantissa's digits
// without the point, and the power of ten they are multiplied by. An
// exponent's magnitude is capped near 1e7: past that every non-zero
// mantissa is out of range or below the unit anyway, given maxNumberLen.
func splitNumber(s string) (neg bool, digits string, exp int, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	intPart, i := scanDigits(s, i)
	var frac string
	if i < len(s) && s[i] == '.' {
		frac, i = scanDigits(s, i+1)
	}
	if intPart == "" && frac == "" {
		return false, "", 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := i < len(s) && s[i] == '-'
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		var e string
		if e, i = scanDigits(s, i); e == "" {
			return false, "", 0, false
		}
		for j := 0; j < len(e) && exp < 1e6; j++ {
			exp = exp*10 + int(e[j]-'0')
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return false, "", 0, false
	}
	return neg, intPart + frac, exp - len(frac), true
}

// scanDigits returns the run of ASCII digits of s starting at i and the
// index just past it.
func scanDigits(s string, i int) (string, int) {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	return s[i:j], j
}
