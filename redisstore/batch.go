package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/strategies"
)

// ErrConflict is matched by an Update that did not commit because a value
// it read was changed meanwhile by a writer that did not hold its locks
// (or after they had expired): nothing of the batch was stored, and the
// caller may run it again.
var ErrConflict = errors.New("redisstore: a value read by the batch changed before its commit")

// DefaultLockTTL is how long the locks of an Update last if their holder
// never releases them (a crashed process).
const DefaultLockTTL = 5 * time.Second

// Update runs fn with a Batch holding the locks named by locks, and stores
// every change fn made through it in one atomic step, as
// ratestore.DB.Update does for the changes of one request (the key store's
// Admit, say): all of them or none. It is how several processes change
// several states and records of one entity (a key id) consistently.
//
// The locks are Redis keys, taken together or not at all (waiting until
// ctx ends while another holder has one), held while fn runs and released
// by the commit; a crashed holder's end after Options.LockTTL. They keep
// the batches of other processes out; they are not what makes the batch
// correct. The commit stores the batch only if every value it read is
// still what it read, and otherwise stores nothing and fails with
// ErrConflict: a batch is never applied on values another writer changed.
//
// Within fn, the batch's reads see its own writes. As with a ratestore
// Batch, an error from fn does not undo the changes fn made: they are
// committed, and Update returns fn's error (joined with the commit's, if
// it failed). Each round trip is bounded by Options.Timeout; the wait for
// the locks by ctx. Update needs every key in one Redis node: on a Redis
// Cluster it fails with ErrInvalid.
func (db *DB) Update(ctx context.Context, locks []string, fn func(*Batch) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.closed.Load() {
		return ErrClosed
	}
	if _, ok := db.client.(*redis.ClusterClient); ok {
		return fmt.Errorf("redisstore: update: batches need one Redis node, not a Cluster: %w", ratestore.ErrInvalid)
	}
	b := &Batch{db: db, ctx: ctx, now: db.now().UnixNano(), vals: map[string]string{}, read: map[string]string{}}
	var token string
	if len(locks) > 0 {
		keys := make([]string, 0, len(locks))
		for _, l := range locks {
			keys = append(keys, db.opts.Prefix+"lock:"+l)
		}
		slices.Sort(keys)
		b.locks = slices.Compact(keys)
		var err error
		if token, err = db.lock(ctx, b.locks); err != nil {
			return fmt.Errorf("redisstore: update: %w", err)
		}
	}
	err := fn(b)
	if cerr := b.commit(token); cerr != nil {
		return errors.Join(err, fmt.Errorf("redisstore: update: %w", cerr))
	}
	return err
}

// lockScript sets every KEYS to ARGV[1] for ARGV[2] milliseconds if none
// exists, answering 1, and otherwise sets none, answering 0.
var lockScript = redis.NewScript(`
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
`)

// lock takes the locks keys with a fresh token, which it returns, waiting
// (with backoff) until ctx ends while another holder has one of them.
func (db *DB) lock(ctx context.Context, keys []string) (string, error) {
	var raw [16]byte
	rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	ttl := db.opts.LockTTL.Milliseconds()
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		tctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
		got, err := lockScript.Run(tctx, db.client, keys, token, ttl).Int()
		cancel()
		if err != nil {
			return "", fmt.Errorf("locking %d keys: %w", len(keys), err)
		}
		if got == 1 {
			return token, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for a lock held by another process: %w", ctx.Err())
		case <-time.After(wait): // real time: another process holds the lock
		}
	}
}

// A Batch is the changes of one Update, made on values read from Redis
// once each and kept until the commit stores them all. Its methods are
// those of a ratestore.Batch, on redisstore's limiters.
type Batch struct {
	db    *DB
	ctx   context.Context
	now   int64
	locks []string          // the Redis keys of the locks held
	vals  map[string]string // Redis key → its value in the batch ("": none)
	read  map[string]string // Redis key → its value when first read
	order []string          // the Redis keys written, in order
	ttls  map[string]time.Duration
}

// Now returns the batch's instant, read from the DB's clock once when
// Update began: every call of the batch decides at it (or at the instant a
// state was last stored, if that is later, as a Limiter does).
func (b *Batch) Now() time.Time { return time.Unix(0, b.now) }

// value returns the value of the Redis key rk in the batch, reading it on
// first use.
func (b *Batch) value(rk string) (string, error) {
	if v, ok := b.vals[rk]; ok {
		return v, nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.db.opts.Timeout)
	defer cancel()
	v, err := b.db.client.Get(ctx, rk).Result()
	if errors.Is(err, redis.Nil) {
		v, err = "", nil
	}
	if err != nil {
		return "", err
	}
	b.vals[rk], b.read[rk] = v, v
	return v, nil
}

// Prefetch reads in one round trip the values the batch is about to use,
// which its calls would otherwise read one at a time: the records at
// records, and key's state under each of limiters. A value the batch has
// read or written already is left as it is.
func (b *Batch) Prefetch(records [][]byte, key string, limiters ...ratestore.StoreLimiter) error {
	rks := make([]string, 0, len(records)+len(limiters))
	for _, r := range records {
		rks = append(rks, b.db.recordKey(r))
	}
	for _, sl := range limiters {
		l, ok := sl.(*Limiter)
		if !ok || l.db != b.db {
			return fmt.Errorf("redisstore: prefetch: limiter %q is not one of this DB's: %w", sl.Name(), ratestore.ErrInvalid)
		}
		if err := l.check(b.ctx, key, 0); err != nil {
			return err
		}
		rks = append(rks, b.db.key(l.name, key))
	}
	rks = slices.DeleteFunc(rks, func(rk string) bool { _, ok := b.vals[rk]; return ok })
	if len(rks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.db.opts.Timeout)
	defer cancel()
	vals, err := b.db.client.MGet(ctx, rks...).Result()
	if err != nil {
		return fmt.Errorf("redisstore: prefetch: %w", err)
	}
	for i, rk := range rks {
		v, _ := vals[i].(string) // nil: none
		if _, ok := b.vals[rk]; !ok {
			b.vals[rk], b.read[rk] = v, v
		}
	}
	return nil
}

// set makes v (none: "") the value of rk in the batch, stored with ttl (0:
// none) by the commit.
func (b *Batch) set(rk, v string, ttl time.Duration) {
	if _, ok := b.read[rk]; !ok {
		b.read[rk] = "\x00unread" // written blind: the commit does not check it
	}
	if b.ttls == nil {
		b.ttls = map[string]time.Duration{}
	}
	if _, ok := b.ttls[rk]; !ok {
		b.order = append(b.order, rk)
	}
	b.vals[rk], b.ttls[rk] = v, ttl
}

// commitScript stores a batch: KEYS are its locks (ARGV[2] of them) and
// then the keys it wrote; ARGV[1] is the locks' token, then for each key
// written the value it was read with ("\0unread": not read), its new value
// ("": delete) and its TTL in milliseconds (0: none). It stores nothing
// and answers 0 if a value read has changed; it releases the locks it
// holds in any case.
var commitScript = redis.NewScript(`
local token, nlocks = ARGV[1], tonumber(ARGV[2])
local ok = 1
for i = nlocks + 1, #KEYS do
  local j = 3 + 3 * (i - nlocks - 1)
  if ARGV[j] ~= '\0unread' and (redis.call('GET', KEYS[i]) or '') ~= ARGV[j] then ok = 0 end
end
if ok == 1 then
  for i = nlocks + 1, #KEYS do
    local j = 3 + 3 * (i - nlocks - 1)
    local v, ttl = ARGV[j + 1], tonumber(ARGV[j + 2])
    if v == '' then
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

// commit stores the batch's writes and releases its locks (token).
func (b *Batch) commit(token string) error {
	if len(b.order) == 0 && len(b.locks) == 0 {
		return nil
	}
	keys := append(slices.Clone(b.locks), b.order...)
	args := []any{token, len(b.locks)}
	for _, rk := range b.order {
		args = append(args, b.read[rk], b.vals[rk], ms(b.ttls[rk]))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.db.opts.Timeout)
	defer cancel()
	sent := b.db.cache.clock()
	ok, err := commitScript.Run(ctx, b.db.client, keys, args...).Int()
	for _, rk := range b.order {
		v := b.vals[rk]
		if err != nil || ok != 1 {
			v = "" // unknown: read again by the next call
		}
		b.db.cache.put(rk, v, deadline(sent, b.ttls[rk]))
	}
	switch {
	case err != nil && len(b.order) > 0:
		return fmt.Errorf("%w: %w", err, ratestore.ErrUncertain)
	case err != nil:
		return err
	case ok != 1:
		return ErrConflict
	}
	return nil
}

// ms is d in whole milliseconds, rounded up; 0 for none.
func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// AllowN is Limiter.AllowN in the batch.
func (b *Batch) AllowN(l *Limiter, key string, n int64) (Result, error) {
	return b.call(l, key, strategies.Call{N: n})
}

// Record is Limiter.Record in the batch.
func (b *Batch) Record(l *Limiter, key string, n int64) (Result, error) {
	return b.call(l, key, strategies.Call{N: n, Record: true})
}

// PeekN is Limiter.PeekN in the batch: it sees the batch's changes.
func (b *Batch) PeekN(l *Limiter, key string, n int64) (Result, error) {
	return b.call(l, key, strategies.Call{N: n, DryRun: true})
}

// call decides c on key's state in the batch.
func (b *Batch) call(l *Limiter, key string, c strategies.Call) (Result, error) {
	if err := l.check(b.ctx, key, c.N); err != nil {
		return Result{}, err
	}
	rk := b.db.key(l.name, key)
	cur, err := b.value(rk)
	if err != nil {
		return Result{}, fmt.Errorf("redisstore: limiter %q: key %q: %w", l.name, key, err)
	}
	o, err := l.decide(cur, c, b.now)
	if err != nil {
		return Result{}, fmt.Errorf("redisstore: limiter %q: key %q: %w", l.name, key, err)
	}
	if o.changed {
		b.set(rk, o.next, o.ttl)
	}
	return o.res, nil
}

// Reset forgets key's state under l, in the batch.
func (b *Batch) Reset(l *Limiter, key string) error {
	if err := l.check(b.ctx, key, 0); err != nil {
		return err
	}
	b.set(b.db.key(l.name, key), "", 0)
	return nil
}

// Modify replaces key's state under l by what fn returns, as
// ratestore.Batch.Modify does, and returns what a Peek says after.
func (b *Batch) Modify(l *Limiter, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (Result, error) {
	if err := l.check(b.ctx, key, 0); err != nil {
		return Result{}, err
	}
	rk := b.db.key(l.name, key)
	fail := func(err error) (Result, error) {
		return Result{}, fmt.Errorf("redisstore: limiter %q: key %q: modify: %w", l.name, key, err)
	}
	cur, err := b.value(rk)
	if err != nil {
		return fail(err)
	}
	seen, st, err := l.decode(cur)
	if err != nil {
		return fail(err)
	}
	if st == nil {
		st = l.d.NewState()
	}
	at, _ := l.instant(seen, b.now, st)
	if st, err = fn(st, at); err == nil && st == nil {
		err = errors.New("redisstore: Modify: the function returned a nil state")
	}
	if err != nil {
		return fail(err)
	}
	r, err := l.d.Decide(st, strategies.Call{Now: at, DryRun: true})
	if err != nil {
		return fail(err)
	}
	if r.ResetAfter == 0 {
		b.set(rk, "", 0)
	} else {
		b.set(rk, encode(at, st), r.ResetAfter+ttlSlack)
	}
	return r, nil
}

// Inspect calls fn with key's state under l in the batch (a fresh one if
// it has none) and the batch's instant, as Limiter.Inspect does.
func (b *Batch) Inspect(l *Limiter, key string, fn func(st strategies.State, now int64) error) error {
	if err := l.check(b.ctx, key, 0); err != nil {
		return err
	}
	cur, err := b.value(b.db.key(l.name, key))
	if err != nil {
		return fmt.Errorf("redisstore: limiter %q: key %q: %w", l.name, key, err)
	}
	return l.inspect(cur, b.now, fn)
}

// Get returns the record at key in the batch (see DB.Get).
func (b *Batch) Get(key []byte) ([]byte, error) {
	v, err := b.value(b.db.recordKey(key))
	if err != nil || v == "" {
		return nil, err
	}
	return unescape(v), nil
}

// Put stores value at key in the records, in the batch.
func (b *Batch) Put(key, value []byte) error {
	b.set(b.db.recordKey(key), escape(value), 0)
	return nil
}

// Delete removes the record at key, in the batch.
func (b *Batch) Delete(key []byte) error {
	b.set(b.db.recordKey(key), "", 0)
	return nil
}

// Reread returns the value of each record at keys, as the batch reads it:
// on Redis, which other processes change, every key, read in one round
// trip for all of them.
func (b *Batch) Reread(keys [][]byte) ([][]byte, error) {
	if err := b.Prefetch(keys, ""); err != nil {
		return nil, err
	}
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		v, err := b.Get(k)
		if err != nil {
			return nil, fmt.Errorf("redisstore: reread: %w", err)
		}
		vals[i] = v
	}
	return vals, nil
}

// A record's value is stored in Redis as it is, unless it is empty or
// starts with a zero byte: then a zero byte is put before it, so that an
// empty record is a value and not the absence of one. An empty string in
// a Batch means none.
func escape(v []byte) string {
	if len(v) == 0 || v[0] == 0 {
		return "\x00" + string(v)
	}
	return string(v)
}

// unescape is the record stored as v, not "".
func unescape(v string) []byte {
	if len(v) > 0 && v[0] == 0 {
		v = v[1:]
	}
	return []byte(v)
}

// recordKey is the Redis key of the record key.
func (db *DB) recordKey(key []byte) string { return db.opts.Prefix + "r:" + string(key) }

// Get returns the record stored at key by a Batch, or nil.
func (db *DB) Get(ctx context.Context, key []byte) ([]byte, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	defer cancel()
	v, err := db.client.Get(ctx, db.recordKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get: %w", err)
	}
	return unescape(v), nil
}

// Reread returns the stored value (nil: none) of each record at keys:
// other processes may have changed any of them.
func (db *DB) Reread(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	vals := make([][]byte, 0, len(keys))
	for chunk := range slices.Chunk(keys, 1000) {
		rks := make([]string, len(chunk))
		for i, k := range chunk {
			rks[i] = db.recordKey(k)
		}
		tctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
		got, err := db.client.MGet(tctx, rks...).Result()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("redisstore: reread: %w", err)
		}
		for _, g := range got {
			var v []byte
			if s, ok := g.(string); ok {
				v = unescape(s)
			}
			vals = append(vals, v)
		}
	}
	return vals, nil
}

// RereadPrefix is Scan: other processes may have added or changed any
// record.
func (db *DB) RereadPrefix(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return db.Scan(ctx, prefix, fn)
}

// Flush returns at once: an Update has stored its changes when it
// returns.
func (db *DB) Flush(ctx context.Context) error {
	if db.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// Scan calls fn with every record whose key starts with prefix, in key
// order, until fn returns an error, which Scan returns. It lists the keys
// first (SCAN), then reads them a thousand at a time: records changed
// meanwhile may be seen either way.
func (db *DB) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	keys, err := db.scanKeys(ctx, globEscape(db.recordKey(prefix))+"*")
	if err != nil {
		return fmt.Errorf("redisstore: scan: %w", err)
	}
	base := len(db.recordKey(nil))
	for chunk := range slices.Chunk(keys, 1000) {
		sctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
		vals, err := db.client.MGet(sctx, chunk...).Result()
		cancel()
		if err != nil {
			return fmt.Errorf("redisstore: scan: %w", err)
		}
		for i, k := range chunk {
			v, ok := vals[i].(string)
			if !ok {
				continue // deleted meanwhile
			}
			if err := fn([]byte(k[base:]), unescape(v)); err != nil {
				return err
			}
		}
	}
	return nil
}

// scanKeys returns the Redis keys matching match, sorted.
func (db *DB) scanKeys(ctx context.Context, match string) ([]string, error) {
	var all []string
	var cursor uint64
	for {
		sctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
		keys, next, err := db.client.Scan(sctx, cursor, match, 1000).Result()
		cancel()
		if err != nil {
			return nil, err
		}
		all = append(all, keys...)
		if cursor = next; cursor == 0 {
			slices.Sort(all)
			return slices.Compact(all), nil
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
