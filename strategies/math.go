package strategies

import (
	"math"
	"math/bits"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// The arithmetic shared by the strategies.
//
// Instants, durations and counts are int64 nanoseconds or units. Every sum
// or product that a stored number or a caller's n can push past the int64
// range saturates at math.MaxInt64 (or math.MinInt64) instead of wrapping:
// a Record of math.MaxInt64 units, or a stored instant near the end of the
// int64 range, yields "practically never" (292 years), never a negative
// duration or a panic.
//
// Amounts that drain continuously (token and leaky buckets) are float64;
// bucket.go has their arithmetic.

// until returns the time from now to the instant t that something waits
// for: at least 1ns, even when t saturated at the end of the int64 range,
// since a wait of 0 would mean "nothing to wait for".
func until(t, now int64) time.Duration { return time.Duration(max(sat.Sub(t, now), 1)) }

// nonNeg returns d, or 0 when d is negative.
func nonNeg(d int64) int64 { return max(d, 0) }

// alignDown returns the start of the w-long window, aligned to the Unix
// epoch, that holds t: floor(t/w)*w for w > 0. It saturates at the bottom
// of the int64 range instead of wrapping.
func alignDown(t, w int64) int64 {
	r := t % w
	if r < 0 {
		r += w
	}
	return sat.Sub(t, r)
}

// alignUp returns the first epoch-aligned multiple of w at or after t,
// saturated at the top of the int64 range.
func alignUp(t, w int64) int64 {
	r := t % w
	if r < 0 {
		r += w
	}
	if r == 0 {
		return t
	}
	return sat.Add(t, w-r)
}

// mulLE reports whether a*b <= c*d, computed exactly in 128 bits.
func mulLE(a, b, c, d uint64) bool {
	h1, l1 := bits.Mul64(a, b)
	h2, l2 := bits.Mul64(c, d)
	return h1 < h2 || (h1 == h2 && l1 <= l2)
}

// mulDiv returns floor(a*b/c) and whether a remainder was left, for a
// product whose quotient is known to fit in 64 bits (a*b < c*2^64).
func mulDiv(a, b, c uint64) (q uint64, inexact bool) {
	hi, lo := bits.Mul64(a, b)
	q, r := bits.Div64(hi, lo, c)
	return q, r != 0
}

// floorCount returns floor(x) as a count: 0 for x <= 0 (and NaN), and
// math.MaxInt64 for x at or beyond 2^63.
func floorCount(x float64) int64 {
	if !(x > 0) {
		return 0
	}
	if x >= 0x1p63 {
		return math.MaxInt64
	}
	return int64(x)
}

// divisor divides by a number fixed in advance. A divisor made by
// newDivisor divides by a multiplication and shifts instead of a division
// instruction, which costs several times as much: the round-up method of
// Granlund and Montgomery ("Division by invariant integers using
// multiplication", 1994, figure 4.1), the one compilers use for constant
// divisors. It is exact for every uint64 dividend, and worth its set-up
// (itself a division) only when it divides many times: Prepare makes such
// divisors once per limiter.
type divisor struct {
	m        uint64 // floor(2^64*(2^l - d)/d) + 1, with l = ceil(log2(d)), d the divisor
	sh1, sh2 uint8  // min(l, 1) and l - sh1
}

// newDivisor returns the divisor for d >= 1, set up to multiply.
func newDivisor(d uint64) divisor {
	l := uint8(bits.Len64(d - 1)) // ceil(log2(d)); 0 for d = 1
	// 2^l - d < d, so the quotient fits in 64 bits; for l = 64 the shift
	// gives 0, and 0 - d wraps to 2^64 - d as it should. m+1 < 2^64.
	m, _ := bits.Div64((uint64(1)<<l)-d, 0, d)
	sh1 := min(l, 1)
	return divisor{m: m + 1, sh1: sh1, sh2: l - sh1}
}

// div returns floor(n/d).
func (v *divisor) div(n uint64) uint64 {
	t, _ := bits.Mul64(v.m, n)
	return (t + (n-t)>>v.sh1) >> v.sh2
}
