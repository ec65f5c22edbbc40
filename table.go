package ratestore

// Each shard keeps its entries in a table: open addressing with linear
// probing, whose slots are the entries themselves, 64 bytes each: one
// cache line. A
// decision on a key in memory reads its slot, then its key's bytes (to
// compare them) and its state, those two at once. With many keys in use,
// each of those reads misses the CPU's private caches, so what the table
// costs is mostly how many of them depend on one another: two here. A Go
// map from hash to entry needs three (the map's control word, its slot,
// then the entry), and its slot and entry together take about 150 bytes a
// key, as much as this table's slots at their emptiest (see rehash).
//
// A compact index (16-byte slots of hash and entry pointer, the entries
// allocated apart, in the order keys are first seen) would be no faster
// when keys come in the order they were first seen, which the CPU
// prefetches either way, and slower when they come in random order, as
// traffic from many clients does: one more dependent read a decision.
//
// Entries do not move while their shard is locked, except when an
// insertion rehashes the table: code that holds a slot index or an *entry
// across an insertion looks it up again. A removed entry leaves a
// tombstone (slotGone), which probes pass over and insertions reuse, until
// a rehash clears them.

// Slot states.
const (
	slotFree uint8 = iota // never used since the last rehash: ends a probe
	slotLive              // holds an entry
	slotGone              // held an entry that was removed: probes go on
)

// table is one shard's hash table of entries: open addressing, linear
// probing, the slots the entries themselves. It knows nothing of loading,
// eviction or commits (cache.go, commit.go); its callers hold the shard's
// lock.
type table struct {
	slots []entry // nil, or at least minSlots of them
	live  int     // slots holding an entry
	used  int     // slots not free: live ones and tombstones
}

// minSlots is the size of a table when it gets its first entry.
const minSlots = 8

// home returns the slot where the probe for a key whose hash is h starts:
// its tag (the top half of h) without the top shardBits, which pick the
// shard and are the same for all its keys, scaled to the table's size by a
// multiplication, so that the size need not be a power of two (see
// rehash). The tag alone places an entry, so a rehash moves entries
// without hashing their keys again.
func (t *table) home(h uint64) int {
	return int(uint64(uint32(h>>32)<<shardBits) * uint64(len(t.slots)) >> 32)
}

// next returns the slot after i, the last one followed by the first.
func (t *table) next(i int) int {
	if i++; i == len(t.slots) {
		return 0
	}
	return i
}

// find returns the slot of the entry of key under the limiter name, whose
// hash is h, or -1.
func (t *table) find(h uint64, name, key string) int {
	if t.live == 0 {
		return -1
	}
	tag := uint32(h >> 32)
	for i := t.home(h); ; i = t.next(i) {
		e := &t.slots[i]
		switch {
		case e.ctl == slotFree:
			return -1
		case e.tag == tag && e.ctl == slotLive && e.is(name, key):
			return i
		}
	}
}

// insert adds the entry e, whose key hashes to h, and returns its slot.
// rehashed reports whether it rehashed the table first (see rehash):
// slots found before are then stale.
func (t *table) insert(h uint64, e entry) (i int, rehashed bool) {
	// At most 5/8 of the slots are in use, so a probe always ends at a
	// free slot and takes under 2 probes on average to find a key.
	if rehashed = 8*(t.used+1) > 5*len(t.slots); rehashed {
		t.rehash()
	}
	return t.put(h, e), rehashed
}

// put is insert into a table with a free slot.
func (t *table) put(h uint64, e entry) int {
	i := t.home(h)
	for t.slots[i].ctl == slotLive {
		i = t.next(i)
	}
	if t.slots[i].ctl == slotFree {
		t.used++
	}
	e.tag, e.ctl = uint32(h>>32), slotLive
	t.slots[i] = e
	t.live++
	return i
}

// rehash moves the entries to a new table, dropping the tombstones. The
// new table is the smallest that the entries fill to 1/2 at most, so that
// at least 1/8 of it stays to insert into before the next rehash (at 5/8):
// a rehash costs O(slots), paid for by as many insertions over 8. Its size
// is not rounded up to a power of two (home scales a hash to any size),
// which would leave a table between 5/16 and 5/8 full: each key costs 102
// to 128 bytes of slots, where a power of two took up to 205. A shard at
// its cache limit that evicts as it inserts keeps its size, its tombstones
// swept by these rehashes. An entry's tag is all that places it (see
// home): no key is hashed again.
func (t *table) rehash() {
	old := t.slots
	t.slots, t.live, t.used = make([]entry, max(minSlots, 2*(t.live+1))), 0, 0
	for i := range old {
		if e := &old[i]; e.ctl == slotLive {
			t.put(uint64(e.tag)<<32, *e)
		}
	}
}

// remove frees slot i, whose entry is not dirty.
func (t *table) remove(i int) {
	// A probe that reaches i goes on to i+1; if that is free, it would stop
	// there anyway, so i can be free too instead of a tombstone.
	if next := &t.slots[t.next(i)]; next.ctl == slotFree {
		t.slots[i] = entry{}
		t.used--
	} else {
		t.slots[i] = entry{ctl: slotGone}
	}
	t.live--
}
