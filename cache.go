package ratestore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
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
	name, key, _ = strings.Cut(sk, "\x00")
	return name, key
}

// appendStoreKey appends the store key of the state named sk (see joinKey)
// to dst.
func appendStoreKey(dst []byte, sk string) []byte {
	return append(append(dst, statePrefix...), sk...)
}

// entry is the in-memory state of one key under one limiter. Its fields are
// guarded by the lock of its shard. It is laid out to fill one 64-byte
// cache line exactly (see TestEntryIsOneCacheLine).
type entry struct {
	// tag is the top half of the key's hash. A probe compares it before the
	// key, so a slot of another key is passed over without reading that
	// key's bytes (a cache miss).
	tag   uint32
	ctl   uint8 // slotFree, slotLive or slotGone
	dirty bool  // changed since its last commit; listed in shard.dirty
	ref   bool  // used since the eviction clock last passed it
	// stored is false while the store is known to hold no state of the
	// key: it was not found there (or the filter said it was never
	// stored), and no commit has written it since. A state back at its
	// initial value by the time its commit sweeps it is then not written
	// at all (see DB.sweepShard): there is nothing to delete.
	stored bool

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

	gen uint64 // the commit generation holding its latest change
}

// is reports whether e holds the state of key under the limiter name: e.sk
// is joinKey(name, key), compared without building it.
func (e *entry) is(name, key string) bool {
	n := len(name)
	return len(e.sk) == n+1+len(key) && e.sk[n+1:] == key && e.sk[n] == 0 && e.sk[:n] == name
}

// shard is one lock's share of the table.
type shard struct {
	mu sync.Mutex
	table
	hand  int      // the eviction clock's position in slots
	dirty []uint32 // the slots of the dirty entries
	peak  int      // the most entries it has held: see TestCacheBoundAsync
	// loading holds the keys (joinKey) whose state a call is reading from
	// the store, with the lock released, and a channel closed once that
	// call has put its entry in (or failed): see DB.miss.
	loading map[string]chan struct{}
	_       [64]byte // keep neighbouring shard locks off one cache line
}

// full reports whether sh holds, or is loading, capacity entries: a key
// being loaded has its place kept, so that the loads under way never take
// the shard past its bound.
func (sh *shard) full(capacity int) bool { return sh.live+len(sh.loading) >= capacity }

// slot is where a key lives: its hash and its shard.
type slot struct {
	h   uint64
	idx uint32
}

// locate hashes key under a limiter whose name hashes to nameHash.
func (db *DB) locate(nameHash uint64, key string) slot {
	h := maphash.String(db.seed, key) ^ nameHash
	return slot{h: h, idx: uint32(h >> (64 - shardBits))}
}

// locateKey returns the slot of the entry named sk (see joinKey), as
// locate gave it.
func (db *DB) locateKey(sk string) slot {
	name, key := splitKey(sk)
	return db.locate(maphash.String(db.seed, name), key)
}

// insert adds the entry e, whose key hashes to h, to sh's table, and
// returns its slot. A rehash of the table (see table.insert) makes slots
// found before it stale: the eviction clock starts over, and the dirty
// entries are listed at their new slots. The caller holds sh.mu.
func (db *DB) insert(sh *shard, h uint64, e entry) int {
	i, rehashed := sh.table.insert(h, e)
	if rehashed {
		sh.hand, sh.dirty = 0, sh.dirty[:0]
		for j := range sh.slots {
			if e := &sh.slots[j]; e.ctl == slotLive && e.dirty {
				sh.dirty = append(sh.dirty, uint32(j))
			}
		}
	} else if e.dirty {
		sh.dirty = append(sh.dirty, uint32(i))
	}
	sh.peak = max(sh.peak, sh.live)
	return i
}

// hashKey is the hash of the entry named sk, as locate gave it.
func (db *DB) hashKey(sk string) uint64 { return db.locateKey(sk).h }

// lookup returns the slot of the entry of key under the limiter name in its
// shard, loading its state from the store on a miss. With load false a
// missing key gets an empty entry without reading the store (Reset, which
// needs no old state). The caller holds sh.mu. It never waits for room in
// a full shard (see lookupWait): the table may then exceed its bound.
func (db *DB) lookup(sh *shard, at slot, name, key string, d strategies.Decider, now int64, load bool) (int, error) {
	return db.lookupWait(noWait, sh, at, name, key, d, now, load)
}

// noWait is the context of the lookups that must not wait for room in a
// full shard: those a Batch makes, which holds the committer off (the
// commit that would make room waits for the Update to end), and Peek's.
var noWait context.Context = noWaitCtx{context.Background()}

type noWaitCtx struct{ context.Context }

// lookupWait is lookup, which on a miss in a full shard may wait for room
// (see makeRoom) unless ctx is noWait: sh.mu is then unlocked meanwhile,
// and locked again when lookupWait returns, with or without an error.
// Callers that hold up the committer (a Batch, within Update) pass
// noWait.
func (db *DB) lookupWait(ctx context.Context, sh *shard, at slot, name, key string, d strategies.Decider, now int64, load bool) (int, error) {
	if i := sh.find(at.h, name, key); i >= 0 {
		if e := &sh.slots[i]; !e.ref { // no store when unchanged: it would dirty the cache line
			e.ref = true
		}
		return i, nil
	}
	return db.miss(ctx, sh, at, name, key, d, now, load)
}

// miss is lookupWait for a key not found in its shard: apart, so that the
// hit, on every hot decision, stays a small function.
//
// A key's state is read from the store with the shard's lock released, so
// that a slow read (a cold page of the bbolt file, a badger table) stalls
// only the calls on that key, not every key of the shard. The key is
// marked as loading meanwhile: any other call on it, with or without a
// load (Reset), waits for the loader and then finds its entry. So one read
// per key serves every concurrent call, no entry of the key can be put in
// (and changed, committed, evicted) while the read is under way, and the
// state read is the latest: the store holds what memory last committed,
// since an entry goes only once its latest change is durable. Room in a
// full shard is made before the read, not after: a loader waiting for a
// commit while a Batch (which holds commits off) waits for the loader would
// never end.
func (db *DB) miss(ctx context.Context, sh *shard, at slot, name, key string, d strategies.Decider, now int64, load bool) (int, error) {
	// A copy of the key, which may be a slice of a larger buffer (a request
	// header) that must not stay alive with the entry.
	e := entry{sk: joinKey(name, key), ref: true, stored: true}
	for waits, unlocked := 0, false; ; unlocked = true {
		if unlocked {
			// The shard was unlocked: another call may have loaded the key.
			if i := sh.find(at.h, name, key); i >= 0 {
				sh.slots[i].ref = true
				return i, nil
			}
		}
		if done, busy := sh.loading[e.sk]; busy {
			sh.mu.Unlock()
			<-done
			sh.mu.Lock()
			continue
		}
		if !sh.full(db.shardCap) {
			break
		}
		waited, err := db.makeRoom(ctx, sh, now, waits)
		if err != nil {
			return -1, fmt.Errorf("ratestore: limiter %q: key %q: %w", name, key, err)
		}
		if !waited {
			break // room made, or none to wait for: insert
		}
		waits++
	}
	if load && !db.filter.mayHold(at.h) {
		load, e.stored = false, false // never stored: a new key, with nothing to read
		db.noteNew(at.h)
	}
	if load {
		done := make(chan struct{})
		defer sh.loaded(e.sk, done) // with sh.mu held again, once the entry is in or the load failed
		if err := db.loadUnlocked(sh, at, &e, d, now, done); err != nil {
			return -1, fmt.Errorf("ratestore: limiter %q: key %q: %w", name, key, err)
		}
	}
	if db.async && 4*len(sh.dirty) >= 3*db.shardCap {
		// Changes fill the shard: start the commit that makes them
		// evictable before a call has to wait for room (see makeRoom).
		db.wake()
	}
	return db.insert(sh, at.h, e), nil
}

// loadUnlocked loads e's state (see load) with sh.mu unlocked meanwhile,
// the key marked as loading until done is closed (see shard.loaded).
func (db *DB) loadUnlocked(sh *shard, at slot, e *entry, d strategies.Decider, now int64, done chan struct{}) error {
	if sh.loading == nil {
		sh.loading = make(map[string]chan struct{})
	}
	sh.loading[e.sk] = done
	sh.mu.Unlock()
	clamped, err := db.load(e, d, now)
	sh.mu.Lock()
	if err != nil {
		return err
	}
	if e.st == nil {
		e.stored = false
		db.noteNew(at.h) // stored from its next commit on
	}
	if clamped {
		// Stored clamped, so that it is clamped once; the generation is
		// read under the lock, as DB.commit requires.
		e.dirty, e.gen = true, db.gen.Load().seq
	}
	return nil
}

// loaded ends the load of the key sk: the calls waiting for it look
// again. The caller holds sh.mu.
func (sh *shard) loaded(sk string, done chan struct{}) {
	delete(sh.loading, sk)
	close(done)
}

// load reads the stored state of e's key into e, with no lock held. It
// reports whether the state was clamped: written ahead of a clock that has
// come back since (see DB.rewind).
func (db *DB) load(e *entry, d strategies.Decider, now int64) (clamped bool, err error) {
	raw, err := db.store.Get(appendStoreKey(nil, e.sk))
	db.loads.Add(1)
	if err != nil {
		return false, fmt.Errorf("load: %w", err)
	}
	if raw == nil {
		return false, nil
	}
	st, err := d.Decode(raw)
	if err != nil {
		return false, err
	}
	if clamped = d.Clamp(st, now); clamped {
		db.clockJumped(e.sk, 0)
	}
	e.st = st
	e.idleAt = math.MaxInt64 // unknown until the first Apply
	return clamped, nil
}

// maxRoomWaits bounds how many commits a call waits for room in a full
// shard (see makeRoom) before it inserts its key over the bound: each
// commit frees the whole shard, so only callers racing for that room wait
// for more than one, and the bound gives way rather than starve one.
const maxRoomWaits = 4

// makeRoom frees room for one entry in sh, which holds shardCap of them
// or more. It reports whether it waited, having unlocked sh.mu meanwhile;
// if not, the caller inserts, within the bound if room was made.
//
// An entry can go only once its latest change is durable (see evict), so
// a shard full of changes not yet committed has no room until a commit
// ends: in Async mode, up to FlushInterval later. Rather than grow the
// table past MaxCachedKeys by every key that arrives meanwhile (in Async
// mode, a whole FlushInterval of new keys), makeRoom starts the next
// commit at once and, unless ctx is noWait, waits for it (or for ctx), up
// to maxRoomWaits times; the caller then looks again.
// With noWait (a Batch, which holds the committer off and so could
// never see the commit end), or after maxRoomWaits commits, the caller
// inserts over the bound: the table exceeds it by at most the keys that
// such callers add to full shards before the next commit ends.
//
// A commit that fails leaves every change in memory: the error is
// returned, and nothing has changed.
func (db *DB) makeRoom(ctx context.Context, sh *shard, now int64, waits int) (bool, error) {
	db.evict(sh, now, false)
	if !sh.full(db.shardCap) {
		return false, nil
	}
	if len(sh.dirty) < sh.live {
		// Some entries may go: a whole round of the clock, passing each
		// entry twice, finds one if any is durable and clean.
		db.evict(sh, now, true)
		if !sh.full(db.shardCap) {
			return false, nil
		}
	}
	g := db.gen.Load()
	db.wake()
	if ctx == noWait || waits >= maxRoomWaits {
		db.roomMisses.Add(1)
		return false, nil
	}
	sh.mu.Unlock()
	defer sh.mu.Lock()
	select {
	case <-g.done:
	case <-ctx.Done():
		return true, ctx.Err()
	}
	if db.closed.Load() {
		return true, ErrClosed
	}
	if g.err != nil {
		return true, fmt.Errorf("no room in memory for a new key: the commit that would make room failed: %w", g.err)
	}
	return true, nil
}

// evictScan bounds the work of one eviction: at most this many entries are
// examined per insertion into a full shard, which keeps lookups O(1).
const evictScan = 32

// evict frees room in a full shard with the CLOCK (second chance) policy:
// the hand goes round the slots; an entry used since the hand last passed
// it loses its ref bit and stays, one not used since goes. Only entries
// whose latest change is durable can go, so a reload from the store never
// sees an older state than memory had; an idle state is first turned into a
// delete, and goes once that is durable. It examines evictScan entries at
// most, or, with all set, two rounds of the slots: enough to find an entry
// that can go if there is one (makeRoom). The caller holds sh.mu.
func (db *DB) evict(sh *shard, now int64, all bool) {
	durable, g := db.durable.Load(), db.gen.Load().seq
	scan, steps := evictScan, len(sh.slots)-1
	if all {
		scan, steps = len(sh.slots)*2, len(sh.slots)*2
	}
	for seen, step := 0, 0; seen < scan && step <= steps; step++ {
		i := sh.hand
		sh.hand = sh.next(i)
		e := &sh.slots[i]
		if e.ctl != slotLive {
			continue
		}
		seen++
		if e.dirty || e.gen > durable {
			continue
		}
		if sh.dropIfIdle(i, now, g) {
			continue // a delete now; evictable once that is durable
		}
		if e.ref {
			e.ref = false
			continue
		}
		sh.remove(i)
		db.evictions.Add(1)
		if !sh.full(db.shardCap) {
			return
		}
	}
}

// dropIfIdle turns the state of slot i into a delete if it is back at its
// initial value: an idle key should cost nothing on disk. Taking calls never
// leave a state idle, so this runs where time alone may have made it so:
// calls that take nothing, eviction, and Close. It reports whether it marked
// the entry dirty. The caller holds sh.mu.
func (sh *shard) dropIfIdle(i int, now int64, g uint64) bool {
	e := &sh.slots[i]
	if e.st == nil || e.idleAt > now {
		return false
	}
	e.st = nil
	sh.markDirty(i, g)
	return true
}

// markDirty records that the entry of slot i changed in the generation g
// and must be written. The caller holds sh.mu.
func (sh *shard) markDirty(i int, g uint64) {
	e := &sh.slots[i]
	if e.gen != g {
		e.gen = g
	}
	if !e.dirty {
		e.dirty = true
		sh.dirty = append(sh.dirty, uint32(i))
	}
}

// liveKeys appends the names (joinKey) of sh's entries to dst, under
// sh's lock.
func (sh *shard) liveKeys(dst []string) []string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for j := range sh.slots {
		if e := &sh.slots[j]; e.ctl == slotLive {
			dst = append(dst, e.sk)
		}
	}
	return dst
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
