package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The Redis keys of a DB, under Options.Prefix P:
//
//	P{key}name        the state of key under the limiter name
//	P{tag}/r/record   a record (see recordTag)
//	P{tag}/l/lock     a lock of Update (tag: recordTag(lock))
//	Playout           the layout's version, "2"
//
// The braces hold the hash tag: keys with one tag are in one slot of a
// Redis Cluster, where a script may use them together. A limiter name has
// no "/", so no state is ever taken for a record or a lock.

// layoutVersion is the value of Playout. Version 1 (no Playout) kept a
// record at P + "r:" + record, with no hash tag.
const layoutVersion = "2"

// key is the Redis key of key's state under the limiter name.
func (db *DB) key(name, key string) string {
	return db.opts.Prefix + "{" + key + "}" + name
}

// recordKey is the Redis key of the record key.
func (db *DB) recordKey(key []byte) string {
	return db.opts.Prefix + "{" + recordTag(key) + "}/r/" + string(key)
}

// lockKey is the Redis key of the lock name.
func (db *DB) lockKey(name string) string {
	return db.opts.Prefix + "{" + recordTag([]byte(name)) + "}/l/" + name
}

// recordTag is the hash tag of a record or lock: what follows its key's
// last "/", which is the id of what the record belongs to in the key
// store's records ("k/<id>", "t/<team id>"), so that they share the slot
// of the id's states (whose tag is the limiter key, the id). A tag that
// would be empty, long, or hold other bytes than a limiter name's is the
// first 16 hex digits of the key's SHA-256 instead: still one slot per key.
func recordTag(key []byte) string {
	t := key[strings.LastIndexByte(string(key), '/')+1:]
	if len(t) > 0 && len(t) <= 64 && nameBytes(t) {
		return string(t)
	}
	h := sha256.Sum256(key)
	return hex.EncodeToString(h[:8])
}

// nameBytes reports whether b holds only the bytes of a limiter name.
func nameBytes(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.:@+-", c) >= 0) {
			return false
		}
	}
	return true
}

// slotTag is the part of the Redis key rk that Redis hashes to its slot:
// between the first "{" and the first "}" after it, when that is not
// empty, and otherwise all of rk.
func slotTag(rk string) string {
	i := strings.IndexByte(rk, '{')
	if i < 0 {
		return rk
	}
	j := strings.IndexByte(rk[i+1:], '}')
	if j <= 0 {
		return rk
	}
	return rk[i+1 : i+1+j]
}

// migrateScript moves the record at KEYS[1] (layout 1) to KEYS[2], unless
// KEYS[2] holds one already, written since in layout 2.
var migrateScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and redis.call('EXISTS', KEYS[2]) == 0 then redis.call('SET', KEYS[2], v) end
redis.call('DEL', KEYS[1])
return 1
`)

// migrate moves the records of layout 1 to layout 2's keys, once for the
// Prefix: the first DB opened after an upgrade does it. Layout 1 only ever
// stored records on one node (its Update refused a Cluster).
func (db *DB) migrate(ctx context.Context) error {
	marker := db.opts.Prefix + "layout"
	v, err := db.client.Get(ctx, marker).Result()
	if err == nil && v == layoutVersion {
		return nil
	}
	if err != nil && err != redis.Nil {
		return err
	}
	if _, ok := db.client.(*redis.ClusterClient); !ok {
		old := db.opts.Prefix + "r:"
		keys, err := db.scanKeys(ctx, globEscape(old)+"*")
		if err != nil {
			return fmt.Errorf("listing records to move to layout %s: %w", layoutVersion, err)
		}
		for _, k := range keys {
			if err := migrateScript.Run(ctx, db.client, []string{k, db.recordKey([]byte(k[len(old):]))}).Err(); err != nil {
				return fmt.Errorf("moving record %q to layout %s: %w", k, layoutVersion, err)
			}
		}
	}
	return db.client.Set(ctx, marker, layoutVersion, 0).Err()
}
