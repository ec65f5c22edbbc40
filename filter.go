package ratestore

import (
	"sync/atomic"
)

// stored is a filter of the states in the store: it answers "not stored"
// for a key whose state the store has never held, so that the first call
// on a new key costs a map insert instead of a read of the store that
// finds nothing. "Maybe stored" is the answer for every stored key and,
// about once in a hundred, for one that is not: the read then finds
// nothing, as it would without the filter.
//
// It is a blocked Bloom filter: a key's 7 bits all lie in one 512-bit
// block (one cache line), so an answer costs one cache miss; with 10 bits
// a key it says "maybe" for about 1% of the keys it does not hold, in 1.25
// bytes a key.
//
// Keys get in three ways. Open fills it from the store in the background
// (DB.fillFilter); until that scan ends it answers "maybe" for every key.
// A key first used, not found stored, is added as its entry is made
// (DB.miss), under its shard's lock, before any commit could store it.
// And when it holds more keys than it was made for, a filter for twice as
// many is rebuilt beside it (DB.rebuildFilter) from the entries in memory
// and the store, while the keys added meanwhile go to both, and then takes
// its place. A key out of memory whose state is stored is therefore always
// in it. Deleted states stay in it until the next rebuild.
type stored struct {
	ready      atomic.Bool
	rebuilding atomic.Bool
	cur        atomic.Pointer[bloom]
	next       atomic.Pointer[bloom] // being rebuilt: adds go to both
}

// filterStart is how many keys the filter is first made for.
var filterStart = 1 << 16

// filterBits and filterProbes are the bits a key takes, and the bits it
// sets in its block.
const (
	filterBits   = 10
	filterProbes = 7
)

// bloom is the filter's bits.
type bloom struct {
	blocks []block
	keys   atomic.Int64 // added, an upper bound on the distinct keys
	room   int64        // the keys it was made for
}

type block [8]atomic.Uint64

func newBloom(keys int) *bloom {
	return &bloom{blocks: make([]block, max(1, keys*filterBits/512)), room: int64(keys)}
}

// probe calls fn with the word and bit of each of h's probes in b, until
// fn returns false.
//
// The block comes from the high half of h; each probe's 9 bits (word and
// bit within the 512-bit block) from the top of the low half, multiplied
// by an odd constant before each probe, as RocksDB's FastLocalBloom does.
// The probes then draw on all 32 bits of the low half, so two keys in one
// block set the same bits once in 2^32. Double hashing within the block
// (a start and an odd step of 9 bits each) would leave 17 bits: in a
// sparse filter that collision, not the filling, set the rate of false
// maybes, at 5 in 100,000 instead of about none.
func (b *bloom) probe(h uint64, fn func(w *atomic.Uint64, bit uint64) bool) bool {
	blk := &b.blocks[(h>>32)*uint64(len(b.blocks))>>32] // the high half scaled to the blocks: no division
	x := uint32(h)
	for range filterProbes {
		x *= 0x9e3779b9 // 2^32 / the golden ratio
		p := x >> (32 - 9)
		if !fn(&blk[p>>6], uint64(1)<<(p&63)) {
			return false
		}
	}
	return true
}

func (b *bloom) add(h uint64) {
	b.probe(h, func(w *atomic.Uint64, bit uint64) bool {
		if w.Load()&bit == 0 {
			w.Or(bit)
		}
		return true
	})
	b.keys.Add(1)
}

func (b *bloom) has(h uint64) bool {
	return b.probe(h, func(w *atomic.Uint64, bit uint64) bool { return w.Load()&bit != 0 })
}

// add adds the key whose hash (DB.locate) is h, and reports whether the
// filter holds more keys than it was made for.
func (f *stored) add(h uint64) (full bool) {
	c := f.cur.Load()
	c.add(h)
	if n := f.next.Load(); n != nil {
		n.add(h)
	}
	return c.keys.Load() > c.room
}

// mayHold reports whether the key whose hash is h may be stored: false
// only once the filter is filled and does not hold h.
func (f *stored) mayHold(h uint64) bool {
	return !f.ready.Load() || f.cur.Load().has(h)
}
