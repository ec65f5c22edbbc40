package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/redis/go-redis/v9"
)

// lockScript takes the locks KEYS[1..ARGV[2]], setting each to ARGV[1] for
// ARGV[3] milliseconds, if none is held by another token, and then answers
// {1, then for each other KEYS its value (false for none) and its TTL in
// milliseconds (PTTL)}; otherwise it takes none and answers {0}.
var lockScript = redis.NewScript(`
local token, nlocks = ARGV[1], tonumber(ARGV[2])
for i = 1, nlocks do
  local h = redis.call('GET', KEYS[i])
  if h and h ~= token then return {0} end
end
for i = 1, nlocks do
  redis.call('SET', KEYS[i], token, 'PX', ARGV[3])
end
local out = {1}
for i = nlocks + 1, #KEYS do
  out[#out + 1] = redis.call('GET', KEYS[i])
  out[#out + 1] = redis.call('PTTL', KEYS[i])
end
return out
`)

// lockAndRead takes the batch's locks and reads rks in one round trip, and
// returns their values ("": none), which it notes in the cache with their
// TTLs. While another holder has a lock, it waits, with backoff, until ctx
// ends. On a Cluster it runs a script per slot; when one finds a lock
// held, those that took theirs let them go.
func (b *batch) lockAndRead(rks []string) ([]string, error) {
	ttl := b.db.opts.LockTTL.Milliseconds()
	var calls []scriptCall
	for _, keys := range b.db.bySlot(append(slices.Clone(b.locks), rks...)) {
		locks, reads := b.splitLocks(keys)
		calls = append(calls, scriptCall{append(locks, reads...), []any{b.token, len(locks), ttl}})
	}
	var out []string
	err := b.retry(func() (bool, error) {
		vals, taken, err := b.runLocks(calls)
		switch {
		case err != nil:
			return true, fmt.Errorf("locking %d keys: %w", len(b.locks), err)
		case !taken:
			return false, nil
		}
		b.locked = true
		out = make([]string, len(rks))
		for i, rk := range rks {
			out[i] = vals[rk]
		}
		return true, nil
	})
	return out, err
}

// retry calls try until it is done, waiting between tries, with backoff,
// until ctx ends: try is not done while another process holds a lock.
func (b *batch) retry(try func() (done bool, err error)) error {
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if done, err := try(); done {
			return err
		}
		select {
		case <-b.ctx.Done():
			return fmt.Errorf("waiting for a lock held by another process: %w", b.ctx.Err())
		case <-time.After(wait): // real time: another process holds the lock
		}
	}
}

// splitLocks splits keys, the keys of one slot, into the batch's locks
// and the others.
func (b *batch) splitLocks(keys []string) (locks, others []string) {
	for _, k := range keys {
		if slices.Contains(b.locks, k) {
			locks = append(locks, k)
		} else {
			others = append(others, k)
		}
	}
	return locks, others
}

// forgetRead drops the values the batch read from the cache, after a
// commit that found, or may have found, some changed: the next calls read
// them again.
func (b *batch) forgetRead() {
	for rk := range b.read {
		b.db.cache.put(rk, "", 0)
	}
}

// runLocks runs the lock scripts calls, and returns the values they read
// when every one took its locks. Otherwise it releases those taken.
func (b *batch) runLocks(calls []scriptCall) (map[string]string, bool, error) {
	ctx, cancel := context.WithTimeout(b.ctx, b.db.opts.Timeout)
	defer cancel()
	vals := map[string]string{}
	taken := true
	var errs []error
	sent := b.db.cache.clock()
	for i, c := range b.db.runScripts(ctx, lockScript, calls) {
		v, err := c.Slice()
		if err != nil || len(v) == 0 {
			errs = append(errs, cmpErr(err, "lock script: empty reply"))
			continue
		}
		if v[0] != int64(1) {
			taken = false
			continue
		}
		nlocks := calls[i].args[1].(int)
		for j, rk := range calls[i].keys[nlocks:] {
			if 2*j+2 < len(v) {
				vals[rk], _ = v[2*j+1].(string)
				pttl, _ := v[2*j+2].(int64)
				b.db.cache.put(rk, vals[rk], deadline(sent, time.Duration(max(0, pttl))*time.Millisecond))
			}
		}
	}
	if err := errors.Join(errs...); err != nil || !taken {
		b.release()
		return nil, false, err
	}
	return vals, true, nil
}

// cmpErr is err, or a new error of text when err is nil.
func cmpErr(err error, text string) error {
	if err != nil {
		return err
	}
	return errors.New(text)
}

// release lets go of the batch's locks it holds, where it holds them.
func (b *batch) release() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.db.opts.Timeout)
	defer cancel()
	var calls []scriptCall
	for _, keys := range b.db.bySlot(b.locks) {
		calls = append(calls, b.commitCall(keys, nil, true, 0, nil, false))
	}
	b.db.runScripts(ctx, commitScript, calls) // a lock not released ends after LockTTL
}

// commitScript stores a batch. KEYS are its locks (ARGV[2] of them), the
// ARGV[4] keys it wrote, and then the indexes, the list of segments and
// the feeds the script changes. ARGV[1] is the locks' token, ARGV[3] 1
// when the batch holds its locks, ARGV[5] the instant (ms of Redis's TIME)
// after which the script stores nothing (0: none; see indexGrace), ARGV[6]
// the position in KEYS of the list of segments (0: none), ARGV[7] the
// length the feeds are trimmed to. Then for each key written come the
// value it was read with ("\0unread": not read), its new value ("":
// delete), its TTL in milliseconds (0: none; -1: not written, only
// checked), the position in KEYS of the index of its record (0: none) and
// the record's key; then for each message announced the position of its
// feed and the message. A value read of "\0exists" is a record not read
// that must exist (see assumeKey). It stores nothing and answers 0 if a
// value read has changed, 3 if it runs after its deadline, 4 if a record
// that must exist does not, and 2 if the batch does not hold its locks and
// another holder has one; it releases the locks the batch holds but after
// a 4, when the batch commits the slot again. Otherwise it stores every
// write, adds the records it sets to their indexes (and their segments to
// the list) and drops those it deletes, adds the messages to their feeds,
// releases the locks, and answers 1.
var commitScript = redis.NewScript(feedAddLua + `
local token, nlocks, held, nw = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', tonumber(ARGV[4])
local deadline, segs, feedlen = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local function arg(i) return 8 + 5 * (i - 1) end
if not held then
  for i = 1, nlocks do
    if redis.call('EXISTS', KEYS[i]) == 1 then return 2 end
  end
end
local ok = 1
for i = 1, nw do
  local j = arg(i)
  if ARGV[j] == '\0exists' then
    if ok == 1 and redis.call('EXISTS', KEYS[nlocks + i]) == 0 then ok = 4 end
  elseif ARGV[j] ~= '\0unread' and (redis.call('GET', KEYS[nlocks + i]) or '') ~= ARGV[j] then
    ok = 0
  end
end
if ok == 1 and deadline > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > deadline then ok = 3 end
end
if ok == 1 then
  local listed = {} -- the indexes whose segment is listed
  for i = 1, nw do
    local j, k = arg(i), KEYS[nlocks + i]
    local v, ttl, ix, rec = ARGV[j + 1], tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), ARGV[j + 4]
    if ttl < 0 then
      -- read only: checked above
    elseif v == '' then
      redis.call('DEL', k)
      if ix > 0 then redis.call('ZREM', KEYS[ix], rec) end
    else
      if ttl > 0 then redis.call('SET', k, v, 'PX', ttl) else redis.call('SET', k, v) end
      if ix > 0 then
        redis.call('ZADD', KEYS[ix], 0, rec)
        local s = string.find(rec, '/', 1, true)
        if s and segs > 0 and not listed[ix] then
          redis.call('ZADD', KEYS[segs], 0, string.sub(rec, 1, s))
          listed[ix] = true
        end
      end
    end
  end
  for j = arg(nw + 1), #ARGV, 2 do feedAdd(KEYS[tonumber(ARGV[j])], feedlen, 'm', ARGV[j + 1]) end
end
if ok ~= 4 then
  for i = 1, nlocks do
    if redis.call('GET', KEYS[i]) == token then redis.call('DEL', KEYS[i]) end
  end
end
return ok
`)

// commit stores the batch's writes and releases its locks. A batch that
// holds no lock and finds one held waits for it, as its first read would
// have, and commits again: it read nothing, so nothing it decided on can
// have changed. On one Redis, a batch that writes nothing but announces
// runs the script too, for its messages.
func (b *batch) commit() error {
	if len(b.order) == 0 && (len(b.announced) == 0 || b.db.cluster) {
		if b.locked {
			b.release()
		}
		return nil
	}
	return b.retry(b.commitOnce)
}

// commitOnce runs commitScript for each slot of the batch's keys, with the
// index's steps around it on a Cluster, and reports whether it is done:
// false when another holder has a lock.
func (b *batch) commitOnce() (bool, error) {
	slots := len(b.db.bySlot(append(slices.Clone(b.locks), b.checked()...)))
	if slots > 1 && b.cached {
		if err := b.verify(); err != nil {
			return true, err
		}
	}
	locks := b.locks
	if b.locked && slots > 1 {
		// Several slots, not one step: the locks are released once every
		// slot's changes are stored, or a batch taking them could read a
		// slot not yet changed.
		locks = nil
		defer b.release()
	}
	ops := b.indexOps()
	st, err := b.indexBefore(ops)
	if err != nil {
		if b.locked && locks != nil {
			b.release()
		}
		return true, fmt.Errorf("adding records to the index: %w", err)
	}
	calls := b.commitCalls(locks, st.until(), ops)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.db.opts.Timeout)
	defer cancel()
	sent := b.db.cache.clock()
	results := b.db.runScripts(ctx, commitScript, calls)
	b.commitUnlisted(ctx, calls, results, ops)
	stored, conflicts, blocked, err := tally(results)
	if blocked > 0 && stored == 0 && conflicts == 0 && err == nil {
		return false, nil
	}
	b.indexAfter(st, calls, results)
	ok := stored == len(calls)
	for _, rk := range b.order {
		v := b.vals[rk]
		if !ok {
			v = "" // unknown: read again by the next call
		}
		b.db.cache.put(rk, v, deadline(sent, b.ttls[rk]))
	}
	if !ok {
		b.forgetRead()
	}
	return true, commitError(err, conflicts+blocked, stored)
}

// tally counts the commit scripts that stored their slot's changes, found
// a conflict (or ran late, or missed a record), and found a lock held, and
// joins their errors.
func tally(results []*redis.Cmd) (stored, conflicts, blocked int, err error) {
	var errs []error
	for _, c := range results {
		switch n, err := c.Int(); {
		case err != nil:
			errs = append(errs, err)
		case n == 1:
			stored++
		case n == 0 || n == 3 || n == 4: // 4: a record missing, after commitUnlisted
			conflicts++
		default:
			blocked++
		}
	}
	return stored, conflicts, blocked, errors.Join(errs...)
}

// verify takes the batch's locks, if it holds them not yet, and checks
// that the values it read are still stored, failing with ErrConflict
// otherwise. A cached batch (UpdateCached) of several slots of a Cluster
// does so before its commit, which is not one step: it must not store the
// changes of one slot when another's values have changed.
func (b *batch) verify() error {
	var keys []string
	for rk, v := range b.read {
		if v != unread {
			keys = append(keys, rk)
		}
	}
	var cur []string
	var err error
	if b.locked || len(b.locks) == 0 {
		ctx, cancel := context.WithTimeout(b.ctx, b.db.opts.Timeout)
		cur, err = b.db.mget(ctx, keys)
		cancel()
	} else {
		cur, err = b.lockAndRead(keys)
	}
	if err != nil {
		return err
	}
	for i, rk := range keys {
		if cur[i] != b.read[rk] {
			if b.locked {
				b.release()
			}
			b.forgetRead()
			return ErrConflict
		}
	}
	return nil
}

// commitError is the error of a commit whose scripts failed with err,
// found conflicts (or, alongside others, a lock held), and stored the
// changes of stored slots.
func commitError(err error, conflicts, stored int) error {
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", err, backend.ErrUncertain)
	case conflicts > 0 && stored > 0:
		return fmt.Errorf("%w: the changes of %d slots were stored, of %d not: %w", ErrConflict, stored, conflicts, backend.ErrUncertain)
	case conflicts > 0:
		return ErrConflict
	}
	return nil
}

// checked are the keys the commit checks: those written, and of a cached
// batch (UpdateCached) those read too, whose values may be the cache's.
func (b *batch) checked() []string {
	if !b.cached {
		return b.order
	}
	keys := slices.Clone(b.order)
	for rk := range b.read {
		if _, written := b.ttls[rk]; !written {
			keys = append(keys, rk)
		}
	}
	return keys
}

// commitCalls are the commit's scripts: one, or on a Cluster one per slot
// of the keys written and of locks, each with the locks of its slot, to
// store nothing after deadline (0: none), with the index changes ops. On
// one Redis, the script also changes the index and adds the batch's
// announcements to their feeds.
func (b *batch) commitCalls(locks []string, deadline int64, ops map[string]indexOp) []scriptCall {
	var calls []scriptCall
	for _, keys := range b.db.bySlot(append(slices.Clone(locks), b.checked()...)) {
		locks, writes := b.splitLocks(keys)
		calls = append(calls, b.commitCall(locks, writes, b.locked, deadline, ops, !b.db.cluster))
	}
	if len(calls) == 0 && !b.db.cluster { // no write: the announcements alone
		calls = append(calls, b.commitCall(nil, nil, b.locked, 0, nil, true))
	}
	return calls
}

// commitCall is the run of commitScript storing writes, the keys of one
// slot the batch wrote or checks, with locks, those of the batch in the
// slot, which it holds when held. It checks that the records ops assumes
// exist do. With all, it also makes the index changes of ops, and the
// batch's announcements, whose keys the slot must hold.
func (b *batch) commitCall(locks, writes []string, held bool, deadline int64, ops map[string]indexOp, all bool) scriptCall {
	keys := append(slices.Clone(locks), writes...)
	at := map[string]int{}
	pos := func(k string) int { // k's position in keys, added if new
		if at[k] == 0 {
			keys = append(keys, k)
			at[k] = len(keys)
		}
		return at[k]
	}
	heldArg := 0
	if held {
		heldArg = 1
	}
	args := []any{b.token, len(locks), heldArg, len(writes), deadline, 0, feedLen}
	for _, rk := range writes {
		read, v, ttl := b.read[rk], b.vals[rk], int64(-1)
		if t, written := b.ttls[rk]; written {
			ttl = ms(t)
		} else {
			v = ""
		}
		op, indexed := ops[rk]
		if indexed && op.change == assumeKey {
			read = exists
		}
		if !all || !indexed || op.change == assumeKey {
			args = append(args, read, v, ttl, 0, "")
			continue
		}
		args = append(args, read, v, ttl, pos(b.db.indexKey(segment(op.key))), op.key)
		if op.change == addKey && segment(op.key) != "" {
			args[5] = pos(b.db.segmentsKey())
		}
	}
	if all {
		for _, a := range b.announced {
			args = append(args, pos(b.db.feedKey(a.topic)), a.msg)
		}
	}
	return scriptCall{keys, args}
}
