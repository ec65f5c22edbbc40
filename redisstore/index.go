package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The index lists every record that exists, and may list records that do
// not: a scan skips those, and drops them (prune). It never misses a
// record whose commit was acknowledged.
//
// On one Redis the commit script changes a record and its index entry
// together. On a Cluster the index is in another slot than most of its
// records, and no script can change both; the steps are ordered instead.
// A commit adds the keys of the records it may create to their indexes
// first (indexAddScript, one round trip), noting in the index's recent
// additions the instant of Redis's TIME it did so, then stores them; its
// scripts store nothing when they run more than indexGrace/2 after that
// instant (on the record's node's clock), so that no record is ever
// created long after its key was added. (A record it puts that exists is
// listed already: see indexOps and assumeKey.) An entry is dropped only by
// pruneScript, given an instant t0 of the index's clock taken before a
// read that found no record (a scan's MGET, or the commit that deleted
// it), and only when its key was not added since t0 - indexGrace. A commit
// that created the record after that read added its key at most
// indexGrace/2 before (plus the clocks' difference), so after t0 -
// indexGrace: its entry stays. The prune's script runs within indexGrace of
// t0, which it checks, and recent additions are kept for two indexGrace,
// so the addition that stops it is still noted. The nodes' clocks may
// therefore differ by up to indexGrace/2.
const indexGrace = time.Minute

// segment is the part of a record key its index is chosen by: up to and
// including the first "/", or "" for a key with none.
func segment(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i+1]
	}
	return ""
}

// indexKey is the Redis key of the index of the segment seg.
func (db *DB) indexKey(seg string) string {
	return db.opts.Prefix + "{" + recordTag([]byte(strings.TrimSuffix(seg, "/"))) + "}/i/" + seg
}

// addsKey is the Redis key of the recent additions to seg's index.
func (db *DB) addsKey(seg string) string {
	return db.opts.Prefix + "{" + recordTag([]byte(strings.TrimSuffix(seg, "/"))) + "}/a/" + seg
}

// segmentsKey is the Redis key of the list of segments, but "".
func (db *DB) segmentsKey() string { return db.opts.Prefix + "{index}/s" }

// indexAddScript adds ARGV[2...] to the sorted set KEYS[1] (score 0) and,
// with a KEYS[2], notes them there, scored by Redis's TIME in
// milliseconds, dropping the notes older than two ARGV[1] milliseconds.
// It answers that time.
var indexAddScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 0, ARGV[i])
  if KEYS[2] then redis.call('ZADD', KEYS[2], now, ARGV[i]) end
end
if KEYS[2] then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - 2 * tonumber(ARGV[1]))) end
return now
`)

// pruneScript drops ARGV[3...] from the index KEYS[1], whose records a
// read at ARGV[1] (milliseconds of Redis's TIME) did not find, except
// those that KEYS[2], its recent additions, notes since ARGV[1] - ARGV[2];
// and drops none when that read is ARGV[2] old or more (see indexGrace).
var pruneScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local t0, grace = tonumber(ARGV[1]), tonumber(ARGV[2])
if now - t0 >= grace then return 0 end
for i = 3, #ARGV do
  local at = redis.call('ZSCORE', KEYS[2], ARGV[i])
  if not at or tonumber(at) < t0 - grace then redis.call('ZREM', KEYS[1], ARGV[i]) end
end
return 1
`)

// pruneOneScript drops ARGV[i] from the index KEYS[1] when its record,
// KEYS[i+1], does not exist: on one Redis, where it sees both at once.
var pruneOneScript = redis.NewScript(`
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then redis.call('ZREM', KEYS[1], ARGV[i - 1]) end
end
return 1
`)

// prune drops the index entries of gone, whose records a scan did not
// find. A failure leaves them for the next scan.
func (db *DB) prune(ctx context.Context, gone []hit) {
	type group struct {
		seg string
		at  int64
	}
	groups := map[group][]string{}
	for _, h := range gone {
		g := group{h.cur.seg, h.at}
		groups[g] = append(groups[g], h.key)
	}
	var calls []scriptCall
	for g, keys := range groups {
		if db.cluster {
			calls = append(calls, db.pruneCall(g.seg, g.at, keys))
			continue
		}
		c := scriptCall{keys: []string{db.indexKey(g.seg)}}
		for _, k := range keys {
			c.keys = append(c.keys, db.recordKey([]byte(k)))
			c.args = append(c.args, k)
		}
		calls = append(calls, c)
	}
	pctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	defer cancel()
	if db.cluster {
		db.runScripts(pctx, pruneScript, calls)
	} else {
		db.runScripts(pctx, pruneOneScript, calls)
	}
}

// pruneCall is the run of pruneScript dropping keys, of seg's index, whose
// records were not found by a read at the instant at.
func (db *DB) pruneCall(seg string, at int64, keys []string) scriptCall {
	args := []any{at, indexGrace.Milliseconds()}
	for _, k := range keys {
		args = append(args, k)
	}
	return scriptCall{[]string{db.indexKey(seg), db.addsKey(seg)}, args}
}

// indexChange is what a commit changes in the index for a record it
// writes.
type indexChange uint8

const (
	// addKey: the record may not exist yet; its key is added.
	addKey indexChange = iota + 1
	// dropKey: the record is deleted; its key is dropped.
	dropKey
	// assumeKey: on a Cluster, a record put blind that this DB has seen
	// exist (its cache holds it), as the ledger puts its chunks: instead of
	// a round trip adding its key, the commit script checks that the
	// record exists, and so is listed. When it does not, the script stores
	// nothing of its slot (it answers 4), and the commit adds the key and
	// runs the slot's script again (commitUnlisted).
	assumeKey
)

// indexOp is the change of the index for the record key.
type indexOp struct {
	key    string
	change indexChange
}

// indexOps are the index changes of the batch's commit, by the Redis key
// of the record. A record the batch read as it was, and writes, exists
// when the commit, which checks that value, stores it: its key is in the
// index already.
func (b *batch) indexOps() map[string]indexOp {
	ops := map[string]indexOp{}
	for _, rk := range b.order {
		key, ok := b.recs[rk]
		if !ok {
			continue // a state
		}
		read := b.read[rk]
		switch {
		case b.vals[rk] == "":
			if read != "" {
				ops[rk] = indexOp{key, dropKey}
			}
		case read != unread && read != "":
			// listed: the commit checks the value read
		case read == unread && b.db.cluster && b.db.cache.get(rk).v != "":
			ops[rk] = indexOp{key, assumeKey}
		default:
			ops[rk] = indexOp{key, addKey}
		}
	}
	return ops
}

// indexStep is the first step of a commit's index changes on a Cluster:
// what it changes, and the instant of each index's clock it added its keys
// at, or read it, before the commit.
type indexStep struct {
	ops      map[string]indexOp
	at       map[string]int64 // segment → Redis's TIME in ms
	deadline int64            // the commit stores nothing after it (ms); 0: none
}

// until is the deadline of the commit that follows st (0: none).
func (st *indexStep) until() int64 {
	if st == nil {
		return 0
	}
	return st.deadline
}

// indexBefore adds the keys of ops to add to their indexes, and the
// segments new to this DB to the list of segments, and reads the time of
// the indexes of the keys to drop, in one round trip before the commit
// (on a Cluster; nil on one Redis, where the commit script does it).
func (b *batch) indexBefore(ops map[string]indexOp) (*indexStep, error) {
	if !b.db.cluster {
		return nil, nil
	}
	st := &indexStep{ops: ops, at: map[string]int64{}}
	grace := indexGrace.Milliseconds()
	adds := map[string][]any{}
	for _, op := range ops {
		seg := segment(op.key)
		if op.change != assumeKey && adds[seg] == nil {
			adds[seg] = []any{grace}
		}
		if op.change == addKey {
			adds[seg] = append(adds[seg], op.key)
		}
	}
	if len(adds) == 0 {
		return st, nil
	}
	var calls []scriptCall
	var segs []string
	for seg, args := range adds {
		calls = append(calls, scriptCall{[]string{b.db.indexKey(seg), b.db.addsKey(seg)}, args})
		segs = append(segs, seg)
	}
	fresh := b.db.segs.fresh(segs)
	if len(fresh) > 0 {
		calls = append(calls, scriptCall{[]string{b.db.segmentsKey()}, append([]any{grace}, fresh...)})
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.db.opts.Timeout)
	defer cancel()
	for i, c := range b.db.runScripts(ctx, indexAddScript, calls) {
		at, err := c.Int64()
		if err != nil {
			return nil, err
		}
		if i < len(segs) {
			st.at[segs[i]] = at
			if len(calls[i].args) > 1 && (st.deadline == 0 || at+grace/2 < st.deadline) {
				st.deadline = at + grace/2
			}
		}
	}
	b.db.segs.note(fresh)
	return st, nil
}

// indexAfter drops from their indexes the keys of the records that the
// commit scripts calls deleted, where they stored the batch (results).
// A failure leaves them for the scans to drop.
func (b *batch) indexAfter(st *indexStep, calls []scriptCall, results []*redis.Cmd) {
	if st == nil {
		return
	}
	gone := map[string][]string{}
	for i, c := range calls {
		if n, err := results[i].Int(); err != nil || n != 1 {
			continue
		}
		for _, rk := range c.keys {
			if op, ok := st.ops[rk]; ok && op.change == dropKey {
				gone[segment(op.key)] = append(gone[segment(op.key)], op.key)
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	var prunes []scriptCall
	for seg, keys := range gone {
		prunes = append(prunes, b.db.pruneCall(seg, st.at[seg], keys))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.db.opts.Timeout)
	defer cancel()
	b.db.runScripts(ctx, pruneScript, prunes)
}

// commitUnlisted runs again the commit scripts of calls that found a
// record missing that the batch assumed to exist (answer 4, see
// assumeKey), having added the keys of their records to the index first,
// and puts their answers in results.
func (b *batch) commitUnlisted(ctx context.Context, calls []scriptCall, results []*redis.Cmd, ops map[string]indexOp) {
	var redo []int
	again := map[string]indexOp{}
	for i, c := range calls {
		if n, err := results[i].Int(); err != nil || n != 4 {
			continue
		}
		redo = append(redo, i)
		for _, rk := range c.keys {
			if op, ok := ops[rk]; ok {
				if op.change == assumeKey {
					op.change = addKey
				}
				again[rk] = op
			}
		}
	}
	if len(redo) == 0 {
		return
	}
	st, err := b.indexBefore(again)
	if err != nil {
		for _, i := range redo {
			results[i] = redis.NewCmd(ctx)
			results[i].SetErr(fmt.Errorf("adding records to the index: %w", err))
		}
		if b.locked {
			b.release() // the scripts that answered 4 kept the locks
		}
		return
	}
	rerun := make([]scriptCall, len(redo))
	for j, i := range redo {
		n := calls[i].args[1].(int)
		rerun[j] = b.commitCall(calls[i].keys[:n], calls[i].keys[n:], b.locked, st.until(), again, false)
		calls[i] = rerun[j]
	}
	for j, c := range b.db.runScripts(ctx, commitScript, rerun) {
		results[redo[j]] = c
	}
}

// segments are the segments this DB has added to the list of segments,
// which no commit needs to add again: entries of the list are never
// dropped. It holds at most maxSegments.
type segments struct {
	mu    sync.Mutex
	known map[string]bool
}

// fresh are those of segs, but "", not known to be listed.
func (s *segments) fresh(segs []string) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []any
	for _, seg := range segs {
		if seg != "" && !s.known[seg] {
			out = append(out, seg)
		}
	}
	return out
}

// note notes segs as listed.
func (s *segments) note(segs []any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		s.known = map[string]bool{}
	}
	for _, seg := range segs {
		if len(s.known) < maxSegments {
			s.known[seg.(string)] = true
		}
	}
}
