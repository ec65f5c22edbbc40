package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/redis/go-redis/v9"
)

// The Redis keys of a DB, under Options.Prefix P:
//
//	P{key}name        the state of key under the limiter name
//	P{tag}/r/record   a record (see recordTag)
//	P{tag}/l/lock     a lock of Update (tag: recordTag(lock))
//	P{topic}/f        the feed of topic's changes, a Stream (changes.go)
//	P{stag}/i/seg     the index of the records of the segment seg, a sorted
//	                  set of their keys, all of score 0 (index.go)
//	P{stag}/a/seg     on a Cluster, the index's recent additions: each key
//	                  added to it in the last two indexGrace, scored by the
//	                  millisecond of Redis's TIME it was added at
//	P{index}/s        the segments that have an index, a sorted set
//	Playout           the layout's version, "3"
//
// The braces hold the hash tag: keys with one tag are in one slot of a
// Redis Cluster, where a script may use them together. A limiter name has
// no "/", so no state is ever taken for a record, a lock, a feed or an
// index.
//
// A record's segment is its key up to and including the first "/" (the
// key store's "k/", the ledger's "L/"), or "" for a key with none, and
// stag is recordTag of the segment without its "/". The index is split by
// segment because every caller scans within one ("k/", "L/e/<day>/"): a
// page is then one range of one sorted set, O(n + log N), whose keys come
// in order with no merge; and the key store's index and the ledger's are
// separate keys, in separate slots of a Cluster. A prefix with no "/" (an
// export, say) merges the indexes the segment list names, and the one of
// segment "". A split by slot group instead would spread one segment's
// index over the nodes, but then every page would read and merge a range
// of every group.

// layoutVersion is the value of Playout. Version 1 (no Playout) kept a
// record at P + "r:" + record, with no hash tag; version 2 had no index.
const layoutVersion = 3

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

// migrate brings the Prefix's keys to this layout, once: the first DB
// opened after an upgrade moves the records of layout 1 to their keys and
// indexes the records of layout 1 or 2, then sets Playout. Several DBs may
// do it at once, or again after a crash: each step leaves what the others
// do as it was. Records written meanwhile by DBs of this version are
// indexed by their commits; those of DBs of an earlier version are not,
// and the Open of such a DB sets Playout back, so that the next Open here
// indexes them: every process of a Prefix is to run one version. (So
// does setting Playout to 2 by hand, to build an index lost again.)
func (db *DB) migrate(ctx context.Context) error {
	marker := db.opts.Prefix + "layout"
	gctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	v, err := db.client.Get(gctx, marker).Result()
	cancel()
	if err != nil && err != redis.Nil {
		return err
	}
	n, _ := strconv.Atoi(v)
	switch {
	case n == layoutVersion:
		return nil
	case n > layoutVersion:
		return fmt.Errorf("the keys under %q have layout %s, of a later version than this one (%d): %w",
			db.opts.Prefix, v, layoutVersion, backend.ErrInvalid)
	case v == "" && !db.cluster: // layout 1 only ever stored records on one node: its Update refused a Cluster
		if err := db.moveLayout1(ctx); err != nil {
			return err
		}
	}
	if err := db.buildIndex(ctx); err != nil {
		return fmt.Errorf("indexing the records for layout %d: %w", layoutVersion, err)
	}
	sctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	defer cancel()
	return db.client.Set(sctx, marker, layoutVersion, 0).Err()
}

// moveLayout1 moves the records of layout 1 to their keys.
func (db *DB) moveLayout1(ctx context.Context) error {
	old := db.opts.Prefix + "r:"
	return db.scanKeys(ctx, globEscape(old)+"*", func(keys []string) error {
		for _, k := range keys {
			mctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
			err := migrateScript.Run(mctx, db.client, []string{k, db.recordKey([]byte(k[len(old):]))}).Err()
			cancel()
			if err != nil {
				return fmt.Errorf("moving record %q to its key: %w", k, err)
			}
		}
		return nil
	})
}

// buildIndex adds every record to its segment's index, a page of SCAN at a
// time. An entry added for a record deleted since is left for the scans
// to drop (see DB.prune).
func (db *DB) buildIndex(ctx context.Context) error {
	return db.scanKeys(ctx, globEscape(db.opts.Prefix)+"{*}/r/*", func(rks []string) error {
		bySeg := map[string][]redis.Z{}
		for _, rk := range rks {
			if k, ok := db.recordOf(rk); ok {
				bySeg[segment(k)] = append(bySeg[segment(k)], redis.Z{Member: k})
			}
		}
		ictx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
		defer cancel()
		_, err := db.client.Pipelined(ictx, func(p redis.Pipeliner) error {
			for seg, members := range bySeg {
				p.ZAdd(ictx, db.indexKey(seg), members...)
				if seg != "" {
					p.ZAdd(ictx, db.segmentsKey(), redis.Z{Member: seg})
				}
			}
			return nil
		})
		return err
	})
}

// recordOf is the record key of rk, a Redis key of the DB, and whether rk
// is a record's.
func (db *DB) recordOf(rk string) (string, bool) {
	rest, ok := strings.CutPrefix(rk, db.opts.Prefix+"{")
	if !ok {
		return "", false
	}
	i := strings.IndexByte(rest, '}')
	if i < 0 {
		return "", false
	}
	k, ok := strings.CutPrefix(rest[i+1:], "/r/")
	return k, ok && db.recordKey([]byte(k)) == rk
}

// scanKeys calls fn with each page of the Redis keys matching match (SCAN,
// on every primary of a Cluster, at once), each SCAN call bounded by
// Options.Timeout. A key may come twice. Only migrate lists keys this way:
// once, at Open.
func (db *DB) scanKeys(ctx context.Context, match string, fn func([]string) error) error {
	cc, ok := db.client.(*redis.ClusterClient)
	if !ok {
		return scanNode(ctx, db.client, match, db.opts.Timeout, fn)
	}
	var mu sync.Mutex // fn runs on one node's page at a time
	return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return scanNode(ctx, c, match, db.opts.Timeout, func(keys []string) error {
			mu.Lock()
			defer mu.Unlock()
			return fn(keys)
		})
	})
}

// scanNode calls fn with each page of the keys matching match of the node
// c talks to, each SCAN call bounded by timeout.
func scanNode(ctx context.Context, c redis.Cmdable, match string, timeout time.Duration, fn func([]string) error) error {
	var cursor uint64
	for {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		keys, next, err := c.Scan(sctx, cursor, match, 1000).Result()
		cancel()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// globEscape escapes the characters SCAN's MATCH pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte(`*?[]\`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
