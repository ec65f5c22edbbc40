// Package sat is saturating int64 arithmetic: instants, durations and
// counts that a stored number or a caller's n can push past the int64
// range stop at math.MaxInt64 (or math.MinInt64) instead of wrapping, so
// that "a very long time" never becomes a negative duration.
package sat

import "math"

// Add returns a+b, saturated to the int64 range. It runs several times in
// every decision, so it tests for an overflow once, on the sum: the sum
// overflowed exactly when a and b have the same sign and it has the other,
// and then it saturates on their side.
func Add(a, b int64) int64 {
	s := a + b
	if (s^a)&(s^b) < 0 {
		return math.MaxInt64 ^ a>>63 // a < 0: math.MinInt64
	}
	return s
}

// Sub returns a-b, saturated to the int64 range. As Add, it tests the
// difference: it overflowed exactly when a and b have opposite signs and it
// has b's, and then it saturates on a's side.
func Sub(a, b int64) int64 {
	d := a - b
	if (a^b)&(a^d) < 0 {
		return math.MaxInt64 ^ a>>63 // a < 0: math.MinInt64
	}
	return d
}

// Mul returns a*b for a, b >= 0, saturated at math.MaxInt64. A negative
// operand (never passed by a valid caller) gives 0 rather than a panic.
func Mul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// CeilDiv returns a/b rounded up, for b > 0, and 0 for a <= 0: the whole
// seconds (or milliseconds) of a wait, which must not come out shorter
// than the wait. It cannot overflow, where a+b-1 would.
func CeilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
