package ratestore

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTable drives a table with random inserts, finds and removes, against
// a map of what it should hold, and checks its invariants after each step:
// every key is found at its slot, live and used count what the slots hold,
// at most 5/8 of the slots are in use, and a rehash drops the tombstones.
func TestTable(t *testing.T) {
	seed := maphash.MakeSeed()
	hash := func(sk string) uint64 { return maphash.String(seed, sk) }
	sk := func(k int) string { return joinKey("n", fmt.Sprint(k)) }
	var tb table
	want := map[int]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	rehashes := 0
	for step := range 20000 {
		k := rng.IntN(500)
		i := tb.find(hash(sk(k)), "n", fmt.Sprint(k))
		require.Equal(t, want[k], i >= 0, "step %d: key %d found at %d", step, k, i)
		switch {
		case i >= 0 && rng.IntN(2) == 0:
			tb.remove(i)
			delete(want, k)
		case i < 0:
			_, rehashed := tb.insert(hash(sk(k)), entry{sk: sk(k)})
			if rehashed {
				rehashes++
			}
			want[k] = true
		}
		checkTable(t, &tb, want, hash)
	}
	require.Greater(t, rehashes, 5, "the table grew and swept its tombstones")
}

func checkTable(t *testing.T, tb *table, want map[int]bool, hash func(string) uint64) {
	live, used := 0, 0
	for i := range tb.slots {
		e := &tb.slots[i]
		if e.ctl != slotFree {
			used++
		}
		if e.ctl == slotLive {
			live++
			name, key := splitKey(e.sk)
			require.Equal(t, i, tb.find(hash(e.sk), name, key), "%q is found at its slot", e.sk)
			require.Equal(t, uint32(hash(e.sk)>>32), e.tag)
		}
	}
	require.Equal(t, len(want), live)
	require.Equal(t, live, tb.live)
	require.Equal(t, used, tb.used)
	require.LessOrEqual(t, 8*tb.used, 5*len(tb.slots), "at most 5/8 of the slots in use")
}

// TestTableRehashDropsTombstones: a rehash keeps the live entries, each
// found at its new slot, and leaves no tombstone, in a table of twice its
// entries and one.
func TestTableRehashDropsTombstones(t *testing.T) {
	seed := maphash.MakeSeed()
	hash := func(sk string) uint64 { return maphash.String(seed, sk) }
	var tb table
	for k := range 20 {
		tb.insert(hash(sk20(k)), entry{sk: sk20(k)})
	}
	for i := range tb.slots {
		if tb.slots[i].ctl == slotLive && tb.live > 10 {
			tb.remove(i)
		}
	}
	tb.rehash()
	require.Equal(t, 10, tb.live)
	require.Equal(t, 10, tb.used, "no tombstones")
	require.Len(t, tb.slots, 22)
	for i := range tb.slots {
		if e := &tb.slots[i]; e.ctl == slotLive {
			name, key := splitKey(e.sk)
			require.Equal(t, i, tb.find(hash(e.sk), name, key))
		}
	}
}

func sk20(k int) string { return joinKey("n", fmt.Sprintf("%02d", k)) }
