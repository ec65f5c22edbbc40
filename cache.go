package ratestore

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"

	"github.com/ratestore/ratestore/strategies"
)

// numShards splits the in-memory table so that calls on different keys
// rarely contend for a lock. A power of two: the top shardBits bits of a
// key's hash pick its shard.
const (
	shardBits = 7
	numShards = 1 << shardBits
)

// statePrefix namespaces limiter states in the store: a state lives at
// statePrefix + limiter name + 0x00 + key. Limiter names cannot hold a zero
// byte, so the split is unambiguous.
const statePrefix = "s/"

// joinKey returns name, 0x00, key: the name of one key's state under one
// limiter, as an entry holds it and as the store key holds it after
// statePrefix.
func joinKey(name, key string) string { return name + "\x00" + key }

// splitKey undoes joinKey.
func splitKey(sk string) (name, key string) {
	for i := 0; i < len(sk); i++ {
		if sk[i] == 0 {
			return sk[:i], sk[i+1:]
		}
	}
	return sk, ""
}

// appendStoreKey appends the store key of the state named sk (see joinKey)
// to dst.
func appendStoreKey(dst []byte, sk string) []byte {
	return append(append(dst, statePrefix...), sk...)
}

// The table.
//
// Each shard indexes its entries with an open-addressing hash table with
// linear probing, whose slots hold a key's 64-bit hash and a pointer to
// its entry: 16 bytes, four to a cache line. Entries are allocated one by
// one and never move, so the dirty lists and the committer hold them by
// pointer.
//
// The layout is chosen for the caches. A decision on a key in memory
// reads its slot, its entry, then its key's bytes (to compare them) and
// its state, those two at once. The index is small, 16 bytes a slot (~250
// KB at 10k keys), and the entries, allocated as keys are first seen, lie
// in memory in that order: keys first used together (a process warming
// up, clients that arrive together) are read from neighbouring memory,
// which the CPU prefetches. Slots holding whole 64-byte entries made a
// lookup one read shorter, but their table was four times larger and its
// reads could not be prefetched: with 10k keys used in the order they
// were first seen (BenchmarkHotPaired in bench/), decisions took ~0.93x
// x/time/rate's time with whole-entry slots and ~0.8x with this index.
//
// A removed entry leaves a tombstone, which probes pass over and
// insertions reuse, until a rehash clears them.

// slot is one place in a shard's index.
type slot struct {
	h uint64 // the key's hash (see locate); for a nil e, 0: free, 1: a tombstone
	e *entry
}

// Marks of a slot whose e is nil.
const (
	slotFree uint64 = 0 // never used since the last rehash: ends a probe
	slotGone uint64 = 1 // held an entry that was removed: probes go on
)

// entry is the in-memory state of one key under one limiter. Its fields are
// guarded by the lock of its shard. It fills one 64-byte cache line (see
// TestEntryIsOneCacheLine).
type entry struct {
	sk string           // joinKey(limiter name, key)
	st strategies.State // nil: the initial state, nothing stored

	// seen is the latest instant a call on this key has used (Unix ns). A
	// call never uses an earlier one: while a key is in memory, a clock that
	// goes backwards gives it no refill and no penalty, whatever its
	// strategy stores (GCRA keeps a single instant and could not tell).
	seen int64

	// idleAt is when st returns to its initial value (Unix ns), as of the
	// last call: the call's instant plus its ResetAfter. A state idle by
	// then is deleted instead of kept on disk: see dropIfIdle.
	idleAt int64

	gen   uint64 // the commit generation holding its latest change
	dirty bool   // changed since its last commit; listed in shard.dirty
	ref   bool   // used since the eviction clock last passed it
}

// is reports whether e holds the state of key under the limiter name: e.sk
// is joinKey(name, key), compared without building it.
func (e *entry) is(name, key string) bool {
	n := len(name)
	return len(e.sk) == n+1+len(key) && e.sk[n+1:] == key && e.sk[n] == 0 && e.sk[:n] == name
}

// shard is one lock's share of the table.
type shard struct {
	mu    sync.Mutex
	index []slot   // nil or a power of two of them
	live  int      // slots holding an entry
	used  int      // slots not free: live ones and tombstones
	hand  int      // the eviction clock's position in index
	dirty []*entry // the dirty entries
	_     [64]byte // keep neighbouring shard locks off one cache line
}

// minSlots is the size of a shard's index when it gets its first entry.
const minSlots = 8

// place is where a key lives: its hash and its shard.
type place struct {
	h   uint64
	idx uint32
}

// locate hashes key under a limiter whose name hashes to nameHash.
func (db *DB) locate(nameHash uint64, key string) place {
	h := maphash.String(db.seed, key) ^ nameHash
	return place{h: h, idx: uint32(h >> (64 - shardBits))}
}

// locateKey returns the place of the entry named sk (see joinKey), as
// locate gave it.
func (db *DB) locateKey(sk string) place {
	name, key := splitKey(sk)
	return db.locate(maphash.String(db.seed, name), key)
}

// find returns the entry of key under the limiter name, whose hash is h,
// or nil. The caller holds sh.mu.
func (sh *shard) find(h uint64, name, key string) *entry {
	if sh.live == 0 {
		return nil
	}
	mask := len(sh.index) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := &sh.index[i]
		switch {
		case s.e == nil:
			if s.h == slotFree {
				return nil
			}
		case s.h == h && s.e.is(name, key):
			return s.e
		}
	}
}

// insert adds e, whose key hashes to h. The caller holds sh.mu.
func (sh *shard) insert(h uint64, e *entry) {
	// At most 3/4 of the slots are in use, so a probe always ends at a
	// free slot and takes 2.5 probes on average to find a key.
	if 4*(sh.used+1) > 3*len(sh.index) {
		sh.rehash()
	}
	mask := len(sh.index) - 1
	i := int(h) & mask
	for sh.index[i].e != nil {
		i = (i + 1) & mask
	}
	if sh.index[i].h == slotFree {
		sh.used++
	}
	sh.index[i] = slot{h: h, e: e}
	sh.live++
}

// rehash moves the entries of sh to a new index, dropping the tombstones.
// The new index is the smallest power of two that the entries fill to 5/8
// at most, so that at least 1/8 of it stays to insert into before the
// next rehash (at 3/4): a rehash costs O(slots), paid for by as many
// insertions over 8. A shard at its cache limit that evicts as it inserts
// keeps its size, its tombstones swept by these rehashes. The caller
// holds sh.mu.
func (sh *shard) rehash() {
	n := minSlots
	for 8*(sh.live+1) > 5*n {
		n *= 2
	}
	old := sh.index
	sh.index, sh.live, sh.used, sh.hand = make([]slot, n), 0, 0, 0
	for _, s := range old {
		if s.e != nil {
			sh.insert(s.h, s.e)
		}
	}
}

// remove takes the entry of slot i out of the index. The caller holds
// sh.mu, and the entry is not dirty.
func (sh *shard) remove(i int) {
	// A probe that reaches i goes on to i+1; if that is free, it would stop
	// there anyway, so i can be free too instead of a tombstone.
	if next := sh.index[(i+1)&(len(sh.index)-1)]; next.e == nil && next.h == slotFree {
		sh.index[i] = slot{h: slotFree}
		sh.used--
	} else {
		sh.index[i] = slot{h: slotGone}
	}
	sh.live--
}

// lookup returns the entry of key under the limiter name in its shard,
// loading its state from the store on a miss. With load false a missing
// key gets an empty entry without reading the store (Reset, which needs no
// old state). The caller holds sh.mu.
func (db *DB) lookup(sh *shard, at place, name, key string, s strategies.Strategy, now int64, load bool) (*entry, error) {
	if e := sh.find(at.h, name, key); e != nil {
		if !e.ref { // no store when unchanged: it would dirty the cache line
			e.ref = true
		}
		return e, nil
	}
	// A copy of the key, which may be a slice of a larger buffer (a request
	// header) that must not stay alive with the entry.
	e := &entry{sk: joinKey(name, key), ref: true}
	if load {
		raw, err := db.store.Get(appendStoreKey(nil, e.sk))
		if err != nil {
			return nil, fmt.Errorf("ratestore: limiter %q: key %q: load: %w", name, key, err)
		}
		if raw != nil {
			st, err := s.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("ratestore: limiter %q: key %q: %w", name, key, err)
			}
			e.st = st
			e.idleAt = math.MaxInt64 // unknown until the first Apply
		}
	}
	if sh.live >= db.shardCap {
		db.evict(sh, now)
	}
	sh.insert(at.h, e)
	return e, nil
}

// evictScan bounds the work of one eviction: at most this many entries are
// examined per insertion into a full shard, which keeps lookups O(1).
const evictScan = 32

// evict frees room in a full shard with the CLOCK (second chance) policy:
// the hand goes round the index; an entry used since the hand last passed
// it loses its ref bit and stays, one not used since goes. Only entries
// whose latest change is durable can go, so a reload from the store never
// sees an older state than memory had; an idle state is first turned into a
// delete, and goes once that is durable. The caller holds sh.mu.
func (db *DB) evict(sh *shard, now int64) {
	durable, g := db.durable.Load(), db.gen.Load().seq
	mask := len(sh.index) - 1
	for seen, steps := 0, 0; seen < evictScan && steps <= mask; steps++ {
		i := sh.hand
		sh.hand = (i + 1) & mask
		e := sh.index[i].e
		if e == nil {
			continue
		}
		seen++
		if e.dirty || e.gen > durable {
			continue
		}
		if sh.dropIfIdle(e, now, g) {
			continue // a delete now; evictable once that is durable
		}
		if e.ref {
			e.ref = false
			continue
		}
		sh.remove(i)
		if sh.live < db.shardCap {
			return
		}
	}
}

// dropIfIdle turns the state of e into a delete if it is back at its
// initial value: an idle key should cost nothing on disk. Taking calls never
// leave a state idle, so this runs where time alone may have made it so:
// calls that take nothing, eviction, and Close. It reports whether it marked
// e dirty. The caller holds the lock of e's shard.
func (sh *shard) dropIfIdle(e *entry, now int64, g uint64) bool {
	if e.st == nil || e.idleAt > now {
		return false
	}
	e.st = nil
	sh.markDirty(e, g)
	return true
}

// markDirty records that e changed in the generation g and must be
// written. The caller holds the lock of e's shard.
func (sh *shard) markDirty(e *entry, g uint64) {
	if e.gen != g {
		e.gen = g
	}
	if !e.dirty {
		e.dirty = true
		sh.dirty = append(sh.dirty, e)
	}
}

// CachedKeys reports how many key states are held in memory.
func (db *DB) CachedKeys() int {
	return db.sumShards(func(sh *shard) int { return sh.live })
}

// sumShards adds up f over the shards, each under its lock.
func (db *DB) sumShards(f func(*shard) int) int {
	n := 0
	for i := range db.shards {
		sh := &db.shards[i]
		sh.mu.Lock()
		n += f(sh)
		sh.mu.Unlock()
	}
	return n
}
