package redisstore

import (
	"hash/maphash"
	"sync"
)

// cacheShards spreads the cache's locks: a call holds one for a map
// lookup, never across a round trip.
const cacheShards = 64

// callStripes is how many locks serialize this DB's calls on a key (see
// DB.lockKey): enough that calls on different keys rarely share one.
const callStripes = 4096

// cache holds the last value this DB saw of each Redis key it used, what
// its next call on the key decides on. A key not held is taken to hold
// nothing, which the swap script corrects in one more round trip if it
// does. When a shard is full, an arbitrary key of it is forgotten.
type cache struct {
	seed   maphash.Seed
	max    int // keys per shard
	shards [cacheShards]struct {
		mu sync.Mutex
		m  map[string]string
	}
	// calls serialize the calls of this DB on a key, across their round
	// trips: concurrent calls on one key would otherwise all decide on the
	// same state, and all but one find it changed and go round again.
	calls [callStripes]sync.Mutex
}

// lock locks the calls on key (and on the keys that share its stripe),
// and returns the unlock.
func (c *cache) lock(key string) func() {
	mu := &c.calls[maphash.String(c.seed, key)%callStripes]
	mu.Lock()
	return mu.Unlock
}

func (c *cache) init(maxKeys int) {
	c.seed = maphash.MakeSeed()
	c.max = max(1, maxKeys/cacheShards)
	for i := range c.shards {
		c.shards[i].m = make(map[string]string)
	}
}

// get returns the value last seen at key, "" when none is held.
func (c *cache) get(key string) string {
	sh := &c.shards[maphash.String(c.seed, key)%cacheShards]
	sh.mu.Lock()
	v := sh.m[key]
	sh.mu.Unlock()
	return v
}

// put notes that key holds v; "" forgets it.
func (c *cache) put(key, v string) {
	sh := &c.shards[maphash.String(c.seed, key)%cacheShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if v == "" {
		delete(sh.m, key)
		return
	}
	if _, ok := sh.m[key]; !ok && len(sh.m) >= c.max {
		for k := range sh.m {
			delete(sh.m, k)
			break
		}
	}
	sh.m[key] = v
}
