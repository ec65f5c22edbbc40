package ratestore

import (
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"

	"github.com/ratestore/ratestore/strategies"
)

// numShards splits the in-memory table so that calls on different keys
// rarely contend for a lock. A power of two, so a hash picks one by masking.
const numShards = 128

// statePrefix namespaces limiter states in the store: a state lives at
// statePrefix + limiter name + 0x00 + key. Limiter names cannot hold a zero
// byte, so the split is unambiguous.
const statePrefix = "s/"

// stateKey identifies one key of one limiter in memory.
type stateKey struct{ name, key string }

// appendStoreKey appends the store key of k to dst.
func appendStoreKey(dst []byte, k stateKey) []byte {
	dst = append(dst, statePrefix...)
	dst = append(dst, k.name...)
	dst = append(dst, 0)
	return append(dst, k.key...)
}

// entry is the in-memory state of one key. Its fields are guarded by the
// lock of its shard.
type entry struct {
	k  stateKey
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
	h     uint64 // the hash of k: see DB.locate
	next  *entry // the next entry whose key hashes alike
	dirty bool   // changed since its last commit; listed in shard.dirty
	ref   bool   // used since the eviction clock last passed it
}

// dropIfIdle turns a state that is back at its initial value into a delete:
// an idle key should cost nothing on disk. Taking calls never leave a state
// idle, so this runs where time alone may have made it so: calls that take
// nothing, eviction, and Close. It reports whether it marked e dirty. The
// caller holds the lock of e's shard.
func (sh *shard) dropIfIdle(e *entry, now int64, g uint64) bool {
	if e.st == nil || e.idleAt > now {
		return false
	}
	sh.setState(e, nil)
	sh.markDirty(e, g)
	return true
}

// shard is one lock's share of the table. Entries are found by the 64-bit
// hash of their key, computed once per call (it also picks the shard), so a
// lookup hashes a uint64 rather than two strings; the rare keys whose hashes
// collide are chained through entry.next and told apart by their strings.
type shard struct {
	mu    sync.Mutex
	m     map[uint64]ref
	n     int // entries, counting chained ones
	dirty []*entry
	_     [64]byte // keep neighbouring shard locks off one cache line
}

// ref is what the table holds for a hash: the first entry with that hash,
// and copies of its key and state. A decision on a key reads all three
// from the table, so that the loads of the key's bytes (to compare them),
// of its state and of its entry go out together; following the entry to
// its key and state made them one cache miss after another, and with 10k
// keys in use each of those misses the CPU caches. setState keeps st equal
// to the entry's.
type ref struct {
	e   *entry
	key string
	st  strategies.State
}

// slot is where a key lives: its hash and its shard.
type slot struct {
	h   uint64
	idx uint32
}

// locate hashes key under a limiter whose name hashes to nameHash.
func (db *DB) locate(nameHash uint64, key string) slot {
	h := maphash.String(db.seed, key) ^ nameHash
	return slot{h: h, idx: shardIndex(h)}
}

// shardIndex picks the shard of hash h.
func shardIndex(h uint64) uint32 {
	f := h ^ h>>29 // fold high bits, where maphash mixes best, into the mask
	return uint32(f & (numShards - 1))
}

// refTo returns the table's ref for e.
func refTo(e *entry) ref { return ref{e: e, key: e.k.key, st: e.st} }

// find returns the entry of k in sh and its state, or nil. The caller holds
// sh.mu.
func (sh *shard) find(h uint64, k stateKey) (*entry, strategies.State) {
	r := sh.m[h]
	if r.e == nil {
		return nil, nil
	}
	if r.key == k.key && r.e.k.name == k.name {
		return r.e, r.st
	}
	for e := r.e.next; e != nil; e = e.next {
		if e.k.key == k.key && e.k.name == k.name {
			return e, e.st
		}
	}
	return nil, nil
}

// setState sets the state of e, in e and in the table. The caller holds the
// lock of e's shard.
func (sh *shard) setState(e *entry, st strategies.State) {
	if e.st == st {
		return
	}
	e.st = st
	if r := sh.m[e.h]; r.e == e {
		r.st = st
		sh.m[e.h] = r
	}
}

// insert makes e the first entry of its hash in sh. The caller holds sh.mu.
func (sh *shard) insert(e *entry) {
	e.next = sh.m[e.h].e
	sh.m[e.h] = refTo(e)
	sh.n++
}

// remove unlinks e from sh. The caller holds sh.mu.
func (sh *shard) remove(e *entry) {
	head := sh.m[e.h].e
	switch {
	case head == e && e.next == nil:
		delete(sh.m, e.h)
	case head == e:
		sh.m[e.h] = refTo(e.next)
	default:
		p := head
		for p.next != e {
			p = p.next
		}
		p.next = e.next
	}
	e.next = nil
	sh.n--
}

// lookup returns the entry of k in its shard and its state (nil: the
// initial state), loading it from the store on a miss. With load false a
// missing key gets an empty entry without reading the store (Reset, which
// needs no old state). The caller holds sh.mu.
func (db *DB) lookup(sh *shard, at slot, k stateKey, s strategies.Strategy, now int64, load bool) (*entry, strategies.State, error) {
	if e, st := sh.find(at.h, k); e != nil {
		if !e.ref { // no store when unchanged: it would dirty the cache line
			e.ref = true
		}
		return e, st, nil
	}
	// The entry outlives the call: copy the key, which may be a slice of a
	// larger buffer (a request header) that must not stay alive with it.
	k.key = strings.Clone(k.key)
	e := &entry{k: k, h: at.h, ref: true}
	if load {
		raw, err := db.store.Get(appendStoreKey(nil, k))
		if err != nil {
			return nil, nil, fmt.Errorf("ratestore: limiter %q: key %q: load: %w", k.name, k.key, err)
		}
		if raw != nil {
			st, err := s.Decode(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("ratestore: limiter %q: key %q: %w", k.name, k.key, err)
			}
			e.st = st
			e.idleAt = math.MaxInt64 // unknown until the first Apply
		}
	}
	if sh.n >= db.shardCap {
		db.evict(sh, now)
	}
	sh.insert(e)
	return e, e.st, nil
}

// evictScan bounds the work of one eviction: at most this many entries are
// examined per insertion into a full shard, which keeps lookups O(1).
const evictScan = 32

// evict frees room in a full shard with the CLOCK (second chance) policy:
// an entry used since the clock last passed it loses its ref bit and stays;
// one not used since goes. Map iteration starts at a random point, which
// plays the clock hand. Only entries whose latest change is durable can go,
// so a reload from the store never sees an older state than memory had; an
// idle state is first turned into a delete, and goes once that is durable.
// The caller holds sh.mu.
func (db *DB) evict(sh *shard, now int64) {
	durable, g := db.durable.Load(), db.gen.Load().seq
	n := 0
	for _, r := range sh.m {
		e := r.e
		if n++; n > evictScan {
			return
		}
		if e.next != nil {
			continue // a collision chain: rare, left for a later pass
		}
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
		sh.remove(e)
		if sh.n < db.shardCap {
			return
		}
	}
}

// markDirty records that e changed in the generation g and must be written.
// The caller holds the lock of e's shard.
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
	return db.sumShards(func(sh *shard) int { return sh.n })
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
