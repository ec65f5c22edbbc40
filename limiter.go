package ratestore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/strategies"
)

// Result is the answer to one call; see strategies.Result.
type Result = strategies.Result

const (
	// MaxKeyLen is the longest key a Limiter accepts, in bytes.
	MaxKeyLen = backend.MaxKeyLen
	// MaxNameLen is the longest limiter name, in bytes.
	MaxNameLen = backend.MaxNameLen
)

// Limiter applies one strategy to any number of keys under one name. It is a
// cheap handle (no I/O): calling DB.Limiter per request with a per-key
// configuration is a supported pattern. Limiters with the same name share
// state; limiters with different names never do, even for the same key.
//
// When the configuration under a name changes (a new Limiter with the same
// name and the same kind of strategy), existing states are reconciled by the
// strategy on their next call: a lower burst or capacity clamps what is
// stored, a quota added to a fixed window starts empty, a removed one is
// dropped. A different kind of strategy under a name that has stored states
// gives errors matching ErrInvalid (strategies.ErrMismatch) for those keys
// until they are Reset.
type Limiter struct {
	db       *DB
	name     string
	s        strategies.Strategy // as given to DB.Limiter
	d        strategies.Decider  // s.Prepare(): what decides
	nameHash uint64
}

// Limiter returns a handle that applies s to keys under name. name is 1 to
// MaxNameLen bytes of [A-Za-z0-9_.:@+-].
func (db *DB) Limiter(name string, s strategies.Strategy) (*Limiter, error) {
	if err := backend.ValidName(name); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("ratestore: limiter %q: nil strategy: %w", name, ErrInvalid)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("ratestore: limiter %q: %w", name, err)
	}
	if db.closed.Load() {
		return nil, ErrClosed
	}
	return &Limiter{db: db, name: name, s: s, d: s.Prepare(), nameHash: maphash.String(db.seed, name)}, nil
}

// Name reports the limiter's name: never empty, except for a nil Limiter
// (that of a failed Limiter call), which so tells itself apart.
func (l *Limiter) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Strategy reports the limiter's strategy.
func (l *Limiter) Strategy() strategies.Strategy { return l.s }

// Allow is AllowN(ctx, key, 1). An error matching ErrUncertain means the
// call may have been counted (do not retry it); any other error, that it
// was not (see AllowN).
func (l *Limiter) Allow(ctx context.Context, key string) (r Result, err error) {
	// Not "return l.AllowN(ctx, key, 1)": see do on copies of a Result.
	err = l.do(ctx, key, strategies.Call{N: 1}, &r, nil)
	return r, err
}

// AllowN takes n from key's allowance if all of n fits, and otherwise takes
// nothing. n = 0 asks without taking. In Sync mode an allowed call with
// n > 0 returns once its change is on disk.
//
// The decision is made at once; ctx bounds only the wait for the commit
// (and, for a key not in memory while the table is full of changes not yet
// committed, a wait for room: see Options.MaxCachedKeys). If ctx ends
// during the wait for the commit, AllowN returns the Result with ctx's
// error: the change stands and is committed with its group, it is just not
// known to be on disk yet. The same holds for Record and Reset.
//
// If the commit itself fails, the error says which way it failed, and the
// same holds for Record, Reset and DB.Update:
//   - matching ErrUncertain: the commit failed after the change may have
//     reached the disk. The change stands in memory, counts for every later
//     call, and is retried by later commits; do not retry the call, which
//     would count it twice. After a crash before a later commit succeeds,
//     it is on disk or not, whole either way.
//   - any other error: the change was not made. A commit that failed
//     before writing anything is undone in memory too, so a retry counts
//     once. The Result is what the call would have answered.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (r Result, err error) {
	err = l.do(ctx, key, strategies.Call{N: n}, &r, nil)
	return r, err
}

// Peek reports what AllowN(ctx, key, 0) would: whether the key is within its
// limit, and how much remains. It writes nothing.
func (l *Limiter) Peek(ctx context.Context, key string) (r Result, err error) {
	err = l.do(ctx, key, strategies.Call{DryRun: true}, &r, nil)
	return r, err
}

// PeekN reports what AllowN(ctx, key, n) would say, RetryAfter included,
// without taking anything: it writes nothing. Callers that must check
// several limits before taking from any of them ask each with PeekN first.
func (l *Limiter) PeekN(ctx context.Context, key string, n int64) (r Result, err error) {
	err = l.do(ctx, key, strategies.Call{N: n, DryRun: true}, &r, nil)
	return r, err
}

// Inspect calls fn with key's state (a fresh one if it has none) and the
// instant of the call, in Unix nanoseconds as Call.Now, under the key's
// lock: for the queries a strategy offers besides its decisions, such as
// strategies.RollingWindow.Used. fn must not change the state; Inspect
// writes nothing. fn's error is returned, wrapped.
func (l *Limiter) Inspect(ctx context.Context, key string, fn func(st strategies.State, now int64) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := backend.ValidKey(key); err != nil {
		return err
	}
	now := l.db.now()
	sh, i, err := l.entry(ctx, key, now)
	if err != nil {
		return err
	}
	now = l.db.see(sh, i, l.d, now)
	st := sh.slots[i].st
	if st == nil {
		st = l.d.NewState()
	}
	err = fn(st, now)
	sh.mu.Unlock()
	if err != nil {
		return fmt.Errorf("ratestore: limiter %q: key %q: %w", l.name, key, err)
	}
	return nil
}

// Record takes n unconditionally, even past the limit: it is for usage known
// only afterwards, such as LLM tokens counted from a response. Later calls are
// denied until the excess has drained or expired. The Result says whether the
// key is still within its limit after the call. As for AllowN, an error
// matching ErrUncertain means the usage may have been recorded, and must
// not be recorded again; any other error, that it was not.
func (l *Limiter) Record(ctx context.Context, key string, n int64) (r Result, err error) {
	err = l.do(ctx, key, strategies.Call{N: n, Record: true}, &r, nil)
	return r, err
}

// Reset forgets key's state: the next call sees a fresh key. It works on a
// key whose stored state is corrupt, and is the way to recover one.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g, err := l.reset(ctx, key)
	if err != nil {
		return err
	}
	return l.db.committed(ctx, g)
}

// reset forgets key's state and returns the generation that holds the
// change. It does not read the stored state, so it cannot fail on it.
// ctx bounds a wait for room in the table (see DB.lookupWait); noWait: none.
func (l *Limiter) reset(ctx context.Context, key string) (*generation, error) {
	if err := backend.ValidKey(key); err != nil {
		return nil, err
	}
	db := l.db
	if db.readOnly {
		return nil, l.writeRefused(key)
	}
	sh, at, err := l.lock(key)
	if err != nil {
		return nil, err
	}
	i, err := db.lookupWait(ctx, sh, at, l.name, key, l.d, db.now(), false) // no load: fails only waiting for room
	if err != nil {
		sh.mu.Unlock()
		return nil, err
	}
	sh.slots[i].st = nil
	return db.changed(sh, i), nil
}

// do decides c for key under the key's shard lock and waits, if the call
// changed the state, until that change is as durable as the DB's mode
// promises; within a batch b (not nil) it notes the change's generation in
// b instead of waiting, and ctx is noWait: a batch's call never waits for
// room in the table either. It writes the answer to *res. do is one function,
// with the lookup written out (see entry), because each call level added
// to the hot path costs a measurable share of a decision.
func (l *Limiter) do(ctx context.Context, key string, c strategies.Call, res *Result, b *batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := backend.ValidKey(key); err != nil {
		return err
	}
	if c.N < 0 {
		return fmt.Errorf("ratestore: limiter %q: key %q: negative n %d: %w", l.name, key, c.N, ErrInvalid)
	}
	db := l.db
	if db.readOnly && !c.DryRun {
		return l.writeRefused(key)
	}
	c.Now = db.now()
	sh, at, err := l.lock(key)
	if err != nil {
		return err
	}
	i, err := db.lookupWait(ctx, sh, at, l.name, key, l.d, c.Now, true)
	if err != nil {
		sh.mu.Unlock()
		return err
	}
	e := &sh.slots[i]   // valid until sh.mu is unlocked: nothing is inserted until then
	if c.Now < e.seen { // db.see, written out
		c.Now = db.rewind(sh, i, l.d, c.Now)
	} else {
		e.seen = c.Now
	}
	st := e.st
	if st == nil {
		st = l.d.NewState()
	}
	if *res, err = l.d.Decide(st, c); err != nil {
		sh.mu.Unlock()
		return fmt.Errorf("ratestore: limiter %q: key %q: %w", l.name, key, err)
	}
	e.idleAt = sat.Add(c.Now, int64(res.ResetAfter))
	if !c.Taken(res.Allowed) {
		// Nothing taken, nothing to wait for; but a stored state that time
		// has brought back to its initial value is deleted in passing.
		sh.dropIfIdle(i, c.Now, db.gen.Load().seq)
		sh.mu.Unlock()
		return nil
	}
	if res.ResetAfter == 0 {
		st = nil // back at its initial value: delete rather than store
	}
	e.st = st
	g := db.gen.Load() // db.changed, written out
	sh.markDirty(i, g.seq)
	sh.mu.Unlock()
	if b != nil {
		b.joined(g)
		return nil
	}
	return db.committed(ctx, g)
}

// entry locks the shard of key and returns it with the slot of the key's
// entry, loaded from the store on a miss; ctx bounds a wait for room in the
// table (noWait: none, see DB.lookupWait). The caller unlocks the shard; on
// an error nothing is locked.
func (l *Limiter) entry(ctx context.Context, key string, now int64) (*shard, int, error) {
	sh, at, err := l.lock(key)
	if err != nil {
		return nil, -1, err
	}
	i, err := l.db.lookupWait(ctx, sh, at, l.name, key, l.d, now, true)
	if err != nil {
		sh.mu.Unlock()
		return nil, -1, err
	}
	return sh, i, nil
}

// see returns the instant a call at now on the entry of slot i, under the
// Decider d, uses: never one earlier than a call on it used before, unless
// the clock jumped (see rewind). While a key is in memory, a clock that goes
// backwards gives it no refill and no penalty, whatever its strategy stores.
// This is where a state in memory meets the current time; lookupWait is
// where one read from the store does.
func (db *DB) see(sh *shard, i int, d strategies.Decider, now int64) int64 {
	e := &sh.slots[i]
	if now < e.seen {
		return db.rewind(sh, i, d, now)
	}
	e.seen = now
	return now
}

// rewind is see for an instant before the key's last call. A step back no
// longer than the strategy's longest wait (Decider.Horizon) uses the
// last call's instant: the key waits for the clock to catch up, at most
// that long. A longer one is a clock that ran ahead and came back, whose
// last instant would lock the key out until the clock got there again (100
// years for a clock that ran 100 years ahead): the key takes the clock's
// instant from now on, and its state is clamped to it (Decider.Clamp),
// and stored so. The caller holds sh.mu.
func (db *DB) rewind(sh *shard, i int, d strategies.Decider, now int64) int64 {
	e := &sh.slots[i]
	back := uint64(e.seen) - uint64(now) // > 0: no overflow in uint64
	if back <= uint64(d.Horizon()) {
		return e.seen
	}
	e.seen = now
	if e.st != nil && d.Clamp(e.st, now) {
		e.idleAt = math.MaxInt64 // unknown until the next decision
		sh.markDirty(i, db.gen.Load().seq)
		db.clockJumped(e.sk, time.Duration(min(back, math.MaxInt64)))
	}
	return now
}

// clockJumped logs, once per DB, that the state of sk (see joinKey) lay
// further ahead of the clock than its strategy can reach: the clock ran
// ahead and came back, by ahead if known (> 0).
func (db *DB) clockJumped(sk string, ahead time.Duration) {
	if db.clockWarned.Swap(true) {
		return
	}
	name, key := splitKey(sk)
	args := []any{"limiter", name, "key", key}
	if ahead > 0 {
		args = append(args, "clock_back", ahead)
	}
	db.log.Warn("ratestore: a state lies further ahead of the clock than its strategy can reach: the clock ran ahead and came back; such states are clamped to the clock as they are read (logged once per DB)", args...)
}

// changed marks the entry of slot i, whose state a call changed, dirty in
// the open generation, unlocks the shard and returns that generation: the
// commit the caller waits for.
func (db *DB) changed(sh *shard, i int) *generation {
	g := db.gen.Load()
	sh.markDirty(i, g.seq)
	sh.mu.Unlock()
	return g
}

// writeRefused is the error of a call that would change key's state on a
// DB opened read-only (see Options.ReadOnly).
func (l *Limiter) writeRefused(key string) error {
	return fmt.Errorf("ratestore: limiter %q: key %q: %w", l.name, key, ErrReadOnly)
}

// lock locks the shard of key and returns it with the key's slot, or
// ErrClosed (and nothing locked) once Close has begun: checked under the
// lock, which is what Close's barrier relies on.
func (l *Limiter) lock(key string) (*shard, slot, error) {
	at := l.db.locate(l.nameHash, key)
	sh := &l.db.shards[at.idx]
	sh.mu.Lock()
	if l.db.closed.Load() {
		sh.mu.Unlock()
		return nil, at, ErrClosed
	}
	return sh, at, nil
}

// committed returns once a change made in generation g is as durable as the
// DB's mode promises: on disk in Sync mode, at once in Async mode.
func (db *DB) committed(ctx context.Context, g *generation) error {
	if db.async {
		return nil
	}
	db.wake()
	return db.wait(ctx, g)
}
