package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratestore/ratestore"
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
func (b *Batch) lockAndRead(rks []string) ([]string, error) {
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
func (b *Batch) retry(try func() (done bool, err error)) error {
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
func (b *Batch) splitLocks(keys []string) (locks, others []string) {
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
func (b *Batch) forgetRead() {
	for rk := range b.read {
		b.db.cache.put(rk, "", 0)
	}
}

// runLocks runs the lock scripts calls, and returns the values they read
// when every one took its locks. Otherwise it releases those taken.
func (b *Batch) runLocks(calls []scriptCall) (map[string]string, bool, error) {
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
func (b *Batch) release() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.db.opts.Timeout)
	defer cancel()
	var calls []scriptCall
	for _, keys := range b.db.bySlot(b.locks) {
		calls = append(calls, scriptCall{keys, []any{b.token, len(keys), 1}})
	}
	b.db.runScripts(ctx, commitScript, calls) // a lock not released ends after LockTTL
}

// commitScript stores a batch: KEYS are its locks (ARGV[2] of them) and
// then the keys it wrote; ARGV[1] is the locks' token, ARGV[3] 1 when the
// batch holds its locks, then for each key written the value it was read
// with ("\0unread": not read), its new value ("": delete) and its TTL in
// milliseconds (0: none; -1: not written, only checked). It stores nothing
// and answers 0 if a value read has changed, and 2 if the batch does not
// hold its locks and another holder has one; it releases the locks the
// batch holds in any case.
var commitScript = redis.NewScript(`
local token, nlocks, held = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local ok = 1
if not held then
  for i = 1, nlocks do
    if redis.call('EXISTS', KEYS[i]) == 1 then return 2 end
  end
end
for i = nlocks + 1, #KEYS do
  local j = 4 + 3 * (i - nlocks - 1)
  if ARGV[j] ~= '\0unread' and (redis.call('GET', KEYS[i]) or '') ~= ARGV[j] then ok = 0 end
end
if ok == 1 then
  for i = nlocks + 1, #KEYS do
    local j = 4 + 3 * (i - nlocks - 1)
    local v, ttl = ARGV[j + 1], tonumber(ARGV[j + 2])
    if ttl < 0 then
      -- read only: checked above
    elseif v == '' then
      redis.call('DEL', KEYS[i])
    elseif ttl > 0 then
      redis.call('SET', KEYS[i], v, 'PX', ttl)
    else
      redis.call('SET', KEYS[i], v)
    end
  end
end
for i = 1, nlocks do
  if redis.call('GET', KEYS[i]) == token then redis.call('DEL', KEYS[i]) end
end
return ok
`)

// commit stores the batch's writes and releases its locks. A batch that
// holds no lock and finds one held waits for it, as its first read would
// have, and commits again: it read nothing, so nothing it decided on can
// have changed.
func (b *Batch) commit() error {
	if len(b.order) == 0 {
		if b.locked {
			b.release()
		}
		return nil
	}
	return b.retry(b.commitOnce)
}

// commitOnce runs commitScript for each slot of the batch's keys, and
// reports whether it is done: false when another holder has a lock.
func (b *Batch) commitOnce() (bool, error) {
	calls := b.commitCalls(b.locks)
	if len(calls) > 1 && b.cached {
		if err := b.verify(); err != nil {
			return true, err
		}
	}
	if b.locked && len(calls) > 1 {
		// Several slots, not one step: the locks are released once every
		// slot's changes are stored, or a batch taking them could read a
		// slot not yet changed.
		calls = b.commitCalls(nil)
		defer b.release()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.db.opts.Timeout)
	defer cancel()
	sent := b.db.cache.clock()
	stored, conflicts, blocked := 0, 0, 0
	var errs []error
	for _, c := range b.db.runScripts(ctx, commitScript, calls) {
		switch n, err := c.Int(); {
		case err != nil:
			errs = append(errs, err)
		case n == 1:
			stored++
		case n == 0:
			conflicts++
		default:
			blocked++
		}
	}
	if blocked > 0 && stored == 0 && conflicts == 0 && len(errs) == 0 {
		return false, nil
	}
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
	return true, commitError(errors.Join(errs...), conflicts+blocked, stored)
}

// verify takes the batch's locks, if it holds them not yet, and checks
// that the values it read are still stored, failing with ErrConflict
// otherwise. A cached batch (UpdateCached) of several slots of a Cluster
// does so before its commit, which is not one step: it must not store the
// changes of one slot when another's values have changed.
func (b *Batch) verify() error {
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
		return fmt.Errorf("%w: %w", err, ratestore.ErrUncertain)
	case conflicts > 0 && stored > 0:
		return fmt.Errorf("%w: the changes of %d slots were stored, of %d not: %w", ErrConflict, stored, conflicts, ratestore.ErrUncertain)
	case conflicts > 0:
		return ErrConflict
	}
	return nil
}

// checked are the keys the commit checks: those written, and of a cached
// batch (UpdateCached) those read too, whose values may be the cache's.
func (b *Batch) checked() []string {
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
// of the keys written and of locks, each with the locks of its slot.
func (b *Batch) commitCalls(locks []string) []scriptCall {
	held := 0
	if b.locked {
		held = 1
	}
	var calls []scriptCall
	for _, keys := range b.db.bySlot(append(slices.Clone(locks), b.checked()...)) {
		locks, writes := b.splitLocks(keys)
		args := []any{b.token, len(locks), held}
		for _, rk := range writes {
			ttl, written := b.ttls[rk]
			if !written {
				args = append(args, b.read[rk], "", -1)
				continue
			}
			args = append(args, b.read[rk], b.vals[rk], ms(ttl))
		}
		calls = append(calls, scriptCall{append(locks, writes...), args})
	}
	return calls
}
