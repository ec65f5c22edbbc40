package ledger

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/ratestore/ratestore/pricing"
)

// TestRowCodeKeepsValue changes a rollup of end users as entries,
// refusals, moves into the other row and counts taken back do, and
// checks after each change that the value kept encoded is the one
// appendRows encodes from the rows, and that the rows are those of a
// rollup that makes room the plain way (makeRoom, then insert).
func TestRowCodeKeepsValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r, ref := &rollup{}, &rollup{}
	for step := range 5000 {
		team := []string{"", "team_a"}[rng.IntN(2)]
		k := rowKey{team, "u-" + strconv.Itoa(rng.IntN(600))}
		if rng.IntN(20) == 0 {
			k.model = ""
		}
		add := Totals{Requests: 1, Tokens: Tokens{Input: rng.Int64N(1 << 20)}, Cost: pricing.USD(rng.Int64N(1 << 30))}
		switch rng.IntN(10) {
		case 0:
			add = Totals{Refused: 3, Reasons: map[string]int64{"rate": 3}}
		case 1:
			add = Totals{Requests: -1, Cost: -1}
		}
		r.addTo(r.endUserRow(k), &add)
		i, ok := ref.find(k)
		if !ok {
			ref.makeRoom(maxEndUserRows - 1)
			if i, ok = ref.find(k); !ok {
				ref.insert(i, k)
			}
		}
		ref.addTo(i, &add)
		got := r.value(nil)
		if want := appendRows(nil, r.rows); !bytes.Equal(got, want) {
			t.Fatalf("step %d: value kept differs from the rows encoded", step)
		}
		if want := appendRows(nil, ref.rows); !bytes.Equal(got, want) {
			t.Fatalf("step %d: rows differ from those made room for the plain way", step)
		}
	}
	if len(r.rows) > maxEndUserRows {
		t.Fatalf("%d rows, want at most %d", len(r.rows), maxEndUserRows)
	}
}
