package redisstore

import (
	"hash/maphash"
	"sync"
	"time"
)

// cacheShards spreads the cache's locks: a call holds one for a map
// lookup, never across a round trip.
const cacheShards = 64

// cache holds the last value this DB saw of each Redis key it used, what
// its next call on the key decides on, and when Redis expires it. A key
// not held, or held past its expiry, is taken to hold nothing, which the
// swap script corrects in one more round trip if it does. When a shard is
// full, an arbitrary key of it is forgotten.
//
// Expiries are on the cache's own clock, the monotonic time since init,
// not on Options.Now: Redis counts a TTL down in real time. An expiry is
// the instant a write was sent plus its TTL, which Redis counts from the
// write's arrival, so the cache takes a value for gone no later than Redis
// does, and a state that idled past its TTL (a key used less often than
// its ResetAfter plus ttlSlack) costs one round trip, not two.
type cache struct {
	seed   maphash.Seed
	epoch  time.Time
	max    int // keys per shard
	shards [cacheShards]shard
}

// shard is a part of the cache, with the lanes of its keys that have
// calls running (see combine.go): concurrent calls on one key are decided
// one after the other in one batch, where they would otherwise all decide
// on the same state, and all but one find it changed and go round again.
type shard struct {
	mu    sync.Mutex
	m     map[string]cached
	lanes map[string]*queue[*op]
}

// lane returns key's lane.
func (c *cache) lane(key string) lane {
	return lane{sh: c.shard(key), rk: key}
}

func (c *cache) shard(key string) *shard {
	return &c.shards[maphash.String(c.seed, key)%cacheShards]
}

// cached is a value of the cache: v, which Redis drops at expires on the
// cache's clock (0: never).
type cached struct {
	v       string
	expires time.Duration
}

// clock reads the cache's clock: the real time since init.
func (c *cache) clock() time.Duration { return time.Since(c.epoch) }

// deadline is the expiry of a value with a TTL of ttl (0: none) written by
// a round trip sent at sent.
func deadline(sent, ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	return sent + ttl
}

func (c *cache) init(maxKeys int) {
	c.seed = maphash.MakeSeed()
	c.epoch = time.Now()
	c.max = max(1, maxKeys/cacheShards)
	for i := range c.shards {
		c.shards[i].m = make(map[string]cached)
		c.shards[i].lanes = make(map[string]*queue[*op])
	}
}

// get returns the value last seen at key, and its expiry: "" when none is
// held, or when it has expired.
func (c *cache) get(key string) cached {
	sh := c.shard(key)
	sh.mu.Lock()
	e := sh.m[key]
	sh.mu.Unlock()
	if e.expires != 0 && c.clock() >= e.expires {
		return cached{}
	}
	return e
}

// put notes that key holds v until expires (0: no expiry); "" forgets it.
func (c *cache) put(key, v string, expires time.Duration) {
	sh := c.shard(key)
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
	sh.m[key] = cached{v, expires}
}
