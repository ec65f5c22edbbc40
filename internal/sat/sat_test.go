package sat

import (
	"math"
	"testing"
)

func TestSaturating(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"add", Add(1, 2), 3},
		{"add over", Add(maxI, 1), maxI},
		{"add under", Add(minI, -1), minI},
		{"add max+min", Add(maxI, minI), -1},
		{"sub", Sub(1, 2), -1},
		{"sub over", Sub(maxI, -1), maxI},
		{"sub under", Sub(minI, 1), minI},
		{"sub min", Sub(0, minI), maxI},
		{"sub min from min", Sub(minI, minI), 0},
		{"mul", Mul(3, 4), 12},
		{"mul over", Mul(maxI, 2), maxI},
		{"mul big", Mul(1<<32, 1<<31), maxI},
		{"mul fits", Mul(1<<31, 1<<31), 1 << 62},
		{"mul negative", Mul(-1, 5), 0},
		{"ceildiv", CeilDiv(2001, 1000), 3},
		{"ceildiv exact", CeilDiv(2000, 1000), 2},
		{"ceildiv zero", CeilDiv(0, 1000), 0},
		{"ceildiv negative", CeilDiv(-5, 1000), 0},
		{"ceildiv max", CeilDiv(maxI, 1_000_000_000), maxI/1_000_000_000 + 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
}
