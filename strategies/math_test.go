package strategies

import (
	"math"
	"testing"
	"time"
)

func TestSaturatingArithmetic(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"alignDown", alignDown(25, 10), 20},
		{"alignDown negative", alignDown(-25, 10), -30},
		{"alignDown aligned", alignDown(-20, 10), -20},
		{"alignDown bottom", alignDown(minI, 3), minI},
		{"alignUp", alignUp(21, 10), 30},
		{"alignUp aligned", alignUp(20, 10), 20},
		{"alignUp negative", alignUp(-25, 10), -20},
		{"alignUp top", alignUp(maxI, 10), maxI},
		{"floorCount", floorCount(2.9), 2},
		{"floorCount negative", floorCount(-0.5), 0},
		{"floorCount NaN", floorCount(math.NaN()), 0},
		{"floorCount huge", floorCount(1e300), maxI},
		{"floorCount 2^63", floorCount(0x1p63), maxI},
		{"until", int64(until(10, 3)), 7},
		{"until passed", int64(until(3, 10)), 1},
		{"until saturated", int64(until(maxI, maxI)), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
	if q, inexact := mulDiv(math.MaxInt64, uint64(time.Hour), uint64(time.Hour)); q != math.MaxInt64 || inexact {
		t.Errorf("mulDiv: got %d, %v", q, inexact)
	}
	if q, inexact := mulDiv(7, 3, 2); q != 10 || !inexact {
		t.Errorf("mulDiv(7, 3, 2): got %d, %v", q, inexact)
	}
	if !mulLE(math.MaxUint64, 2, math.MaxUint64, 2) || mulLE(math.MaxUint64, 3, math.MaxUint64, 2) {
		t.Error("mulLE is wrong beyond 64 bits")
	}
}
