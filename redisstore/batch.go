package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/strategies"
)

// ErrConflict is backend.ErrConflict: matched by an Update that did not
// commit because a value it read was changed meanwhile by a writer that
// did not hold its locks (or after they had expired), and by an
// UpdateCached whose values this DB last saw had changed: nothing of the
// batch was stored, and the caller may run it again.
var ErrConflict = backend.ErrConflict

// DefaultLockTTL is how long the locks of an Update last if their holder
// never releases them (a crashed process).
const DefaultLockTTL = 5 * time.Second

// Update runs fn with a Batch holding the locks named by locks, and stores
// every change fn made through it in one atomic step, as
// ratestore.DB.Update does for the changes of one request (the key store's
// Admit, say): all of them or none. It is how several processes change
// several states and records of one entity (a key id) consistently.
//
// The locks are Redis keys, taken together or not at all with the batch's
// first read, in the same round trip (waiting until ctx ends while another
// holder has one), held while fn runs and released by the commit; a
// crashed holder's end after Options.LockTTL. They keep the batches of
// other processes out; they are not what makes the batch correct. The
// commit stores the batch only if every value it read is still what it
// read, and otherwise stores nothing and fails with ErrConflict: a batch is
// never applied on values another writer changed. A batch that reads
// nothing takes no lock, and its commit waits while another holds one.
//
// Within fn, the batch's reads see its own writes; Prefetch gathers the
// reads fn is about to make into one round trip. A batch therefore costs
// two round trips (its reads, with the locks, and its commit), or one when
// it only reads or only writes. As with a ratestore Batch, an error from fn
// does not undo the changes fn made: they are committed, and Update returns
// fn's error (joined with the commit's, if it failed). Each round trip is
// bounded by Options.Timeout; the wait for the locks by ctx.
//
// On a Redis Cluster, a script can only use the keys of one slot: the
// changes of each hash tag (one id's records and states, see layout.go)
// are stored atomically, and those of different tags in one round trip
// but not as one step. When the commit of one tag fails with ErrConflict,
// those of the others may have been stored, and the error matches
// backend.ErrUncertain too.
func (db *DB) Update(ctx context.Context, locks []string, fn func(backend.Batch) error) error {
	return db.update(ctx, locks, fn, false)
}

// UpdateCached is Update on the values this DB last stored or read under
// locks (see backend.Store.UpdateCached): a value it holds, and has not
// seen expire, is decided on with no read, and checked by the commit,
// which fails with ErrConflict, storing nothing, when it has changed. Only
// the values it does not hold are read, as Update reads them. A batch that
// finds every value it uses costs one round trip, its commit; the key
// store's Finish after an Admit in this process does.
func (db *DB) UpdateCached(ctx context.Context, locks []string, fn func(backend.Batch) error) error {
	return db.update(ctx, locks, fn, true)
}

// update is Update, deciding on the cache's values when cached is set.
func (db *DB) update(ctx context.Context, locks []string, fn func(backend.Batch) error, cached bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.closed.Load() {
		return ErrClosed
	}
	b := &batch{db: db, ctx: ctx, now: db.now().UnixNano(), cached: cached, vals: map[string]string{}, read: map[string]string{}}
	if len(locks) > 0 {
		keys := make([]string, 0, len(locks))
		for _, l := range locks {
			keys = append(keys, db.lockKey(l))
		}
		slices.Sort(keys)
		b.locks = slices.Compact(keys)
		var raw [16]byte
		rand.Read(raw[:])
		b.token = hex.EncodeToString(raw[:])
	}
	err := fn(b)
	cerr := b.commit()
	if cerr == nil || errors.Is(cerr, backend.ErrUncertain) {
		b.announce() // the changes are stored, or may be: tell the readers
	}
	if cerr != nil {
		return errors.Join(err, fmt.Errorf("redisstore: update: %w", cerr))
	}
	return err
}

// A batch is the changes of one Update (a DB's backend.Batch), made on
// values read from Redis once each and kept until the commit stores them
// all.
type batch struct {
	db      *DB
	ctx     context.Context
	now     int64
	locks   []string          // the Redis keys of the locks, sorted
	token   string            // the locks' value while the batch holds them
	locked  bool              // the locks are held: taken by the first read
	cached  bool              // values the cache holds are not read (UpdateCached)
	pending []string          // Redis keys to read with the next read (Prefetch)
	vals    map[string]string // Redis key → its value in the batch ("": none)
	read    map[string]string // Redis key → its value when first read
	order   []string          // the Redis keys written, in order
	ttls    map[string]time.Duration
	recs    map[string]string // Redis key of a record written → the record's key

	announced []announcement // sent with the commit, or after it (Announce)
}

// Now returns the batch's instant, read from the DB's clock once when
// Update began: every call of the batch decides at it (or at the instant a
// state was last stored, if that is later, as a Limiter does).
func (b *batch) Now() time.Time { return time.Unix(0, b.now) }

// value returns the value of the Redis key rk in the batch, reading it,
// with what Prefetch gathered, on first use.
func (b *batch) value(rk string) (string, error) {
	if v, ok := b.vals[rk]; ok {
		return v, nil
	}
	if err := b.fetch(append(b.pending, rk)); err != nil {
		return "", err
	}
	return b.vals[rk], nil
}

// fetch reads the values of rks the batch has not, in one round trip,
// taking the batch's locks if it holds them not yet.
func (b *batch) fetch(rks []string) error {
	rks = slices.DeleteFunc(slices.Clone(rks), func(rk string) bool {
		if _, ok := b.vals[rk]; ok {
			return true
		}
		if c := b.db.cache.get(rk); b.cached && c.v != "" {
			b.vals[rk], b.read[rk] = c.v, c.v
			return true
		}
		return false
	})
	slices.Sort(rks)
	rks = slices.Compact(rks)
	b.pending = b.pending[:0]
	if len(rks) == 0 {
		return nil
	}
	var vals []string
	var err error
	if len(b.locks) > 0 && !b.locked {
		vals, err = b.lockAndRead(rks)
	} else {
		ctx, cancel := context.WithTimeout(b.ctx, b.db.opts.Timeout)
		vals, err = b.db.mget(ctx, rks)
		cancel()
	}
	if err != nil {
		return err
	}
	for i, rk := range rks {
		b.vals[rk], b.read[rk] = vals[i], vals[i]
	}
	return nil
}

// Prefetch gathers the values the batch is about to use, which its calls
// would otherwise read one at a time, into its next read: one round trip
// for the records at records, and key's state under each of limiters, and
// what other Prefetch calls gathered. A value the batch has read or
// written already is left as it is.
func (b *batch) Prefetch(records [][]byte, key string, limiters ...backend.Limiter) error {
	for _, r := range records {
		b.pending = append(b.pending, b.db.recordKey(r))
	}
	for _, bl := range limiters {
		l, err := b.limiter(bl)
		if err != nil {
			return fmt.Errorf("redisstore: prefetch: %w", err)
		}
		if err := l.check(b.ctx, key, 0); err != nil {
			return err
		}
		b.pending = append(b.pending, b.db.key(l.name, key))
	}
	return nil
}

// unread is the value a key written blind was read with: none, and the
// commit does not check it.
const unread = "\x00unread"

// exists is what the commit checks of a record put blind that must exist
// (see assumeKey).
const exists = "\x00exists"

// set makes v (none: "") the value of rk in the batch, stored with ttl (0:
// none) by the commit.
func (b *batch) set(rk, v string, ttl time.Duration) {
	if _, ok := b.read[rk]; !ok {
		b.read[rk] = unread // written blind: the commit does not check it
	}
	if b.ttls == nil {
		b.ttls = map[string]time.Duration{}
	}
	if _, ok := b.ttls[rk]; !ok {
		b.order = append(b.order, rk)
	}
	b.vals[rk], b.ttls[rk] = v, ttl
}

// ms is d in whole milliseconds, rounded up; 0 for none.
func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// limiter returns bl as a limiter of the batch's DB.
func (b *batch) limiter(bl backend.Limiter) (*Limiter, error) {
	l, ok := bl.(*Limiter)
	switch {
	case !ok || l == nil:
		return nil, fmt.Errorf("redisstore: batch: %T is not a limiter of a redisstore.DB: %w", bl, backend.ErrInvalid)
	case l.db != b.db:
		return nil, fmt.Errorf("redisstore: batch: limiter %q belongs to another DB: %w", l.name, backend.ErrInvalid)
	}
	return l, nil
}

// AllowN is Limiter.AllowN in the batch.
func (b *batch) AllowN(l backend.Limiter, key string, n int64) (Result, error) {
	return b.call(l, key, strategies.Call{N: n})
}

// Record is Limiter.Record in the batch.
func (b *batch) Record(l backend.Limiter, key string, n int64) (Result, error) {
	return b.call(l, key, strategies.Call{N: n, Record: true})
}

// PeekN is Limiter.PeekN in the batch: it sees the batch's changes.
func (b *batch) PeekN(l backend.Limiter, key string, n int64) (Result, error) {
	return b.call(l, key, strategies.Call{N: n, DryRun: true})
}

// call decides c on key's state in the batch.
func (b *batch) call(bl backend.Limiter, key string, c strategies.Call) (Result, error) {
	l, err := b.limiter(bl)
	if err != nil {
		return Result{}, err
	}
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
func (b *batch) Reset(bl backend.Limiter, key string) error {
	l, err := b.limiter(bl)
	if err != nil {
		return err
	}
	if err := l.check(b.ctx, key, 0); err != nil {
		return err
	}
	b.set(b.db.key(l.name, key), "", 0)
	return nil
}

// Modify replaces key's state under l by what fn returns, as
// the embedded DB's batch does, and returns what a Peek says after.
func (b *batch) Modify(bl backend.Limiter, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (Result, error) {
	l, err := b.limiter(bl)
	if err != nil {
		return Result{}, err
	}
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
func (b *batch) Inspect(bl backend.Limiter, key string, fn func(st strategies.State, now int64) error) error {
	l, err := b.limiter(bl)
	if err != nil {
		return err
	}
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
func (b *batch) Get(key []byte) ([]byte, error) {
	v, err := b.value(b.db.recordKey(key))
	if err != nil || v == "" {
		return nil, err
	}
	return unescape(v), nil
}

// Put stores value at key in the records, in the batch.
func (b *batch) Put(key, value []byte) error {
	b.setRecord(key, escape(value))
	return nil
}

// Delete removes the record at key, in the batch.
func (b *batch) Delete(key []byte) error {
	b.setRecord(key, "")
	return nil
}

// setRecord makes v (none: "") the value of the record at key in the
// batch.
func (b *batch) setRecord(key []byte, v string) {
	rk := b.db.recordKey(key)
	if b.recs == nil {
		b.recs = map[string]string{}
	}
	if _, ok := b.recs[rk]; !ok {
		b.recs[rk] = string(key)
	}
	b.set(rk, v, 0)
}

// Reread returns the value of each record at keys, as the batch reads it:
// on Redis, which other processes change, every key, read in one round
// trip for all of them.
func (b *batch) Reread(keys [][]byte) ([][]byte, error) {
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
