package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/strategies"
)

// Result is the answer to one call; see strategies.Result.
type Result = strategies.Result

// Limiter applies one strategy to any number of keys under one name, as
// ratestore.Limiter does: limiters with the same name share state, those
// with different names never do. It is a cheap handle (no I/O).
type Limiter struct {
	db   *DB
	name string
	s    strategies.Strategy
	d    strategies.Decider
}

// Limiter returns a handle that applies s to keys under name, with the
// rules of ratestore.DB.Limiter: name is 1 to backend.MaxNameLen bytes of
// [A-Za-z0-9_.:@+-], and s must be valid.
func (db *DB) Limiter(name string, s strategies.Strategy) (*Limiter, error) {
	if err := backend.ValidName(name); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("redisstore: limiter %q: nil strategy: %w", name, backend.ErrInvalid)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: limiter %q: %w", name, err)
	}
	if db.closed.Load() {
		return nil, ErrClosed
	}
	return &Limiter{db: db, name: name, s: s, d: s.Prepare()}, nil
}

// Handle is Limiter as the contract's interface (backend.Store): the same
// handle, for code written once for every backend.
func (db *DB) Handle(name string, s strategies.Strategy) (backend.Limiter, error) {
	l, err := db.Limiter(name, s)
	if err != nil {
		return nil, err
	}
	return l, nil
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

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	r, _, err := l.do(ctx, key, strategies.Call{N: 1})
	return r, err
}

// AllowN takes n from key's allowance if all of n fits, and otherwise
// takes nothing; n = 0 asks without taking. It returns once Redis holds
// the change. Errors are as the package doc says: matching
// backend.ErrUncertain when the change may have been stored, and with
// Options.FailOpen, none at all (the call is allowed).
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Result, error) {
	r, _, err := l.do(ctx, key, strategies.Call{N: n})
	return r, err
}

// Peek reports what AllowN(ctx, key, 0) would, writing nothing.
func (l *Limiter) Peek(ctx context.Context, key string) (Result, error) {
	r, _, err := l.do(ctx, key, strategies.Call{DryRun: true})
	return r, err
}

// PeekN reports what AllowN(ctx, key, n) would, writing nothing.
func (l *Limiter) PeekN(ctx context.Context, key string, n int64) (Result, error) {
	r, _, err := l.do(ctx, key, strategies.Call{N: n, DryRun: true})
	return r, err
}

// Record takes n from key whether or not it fits, as
// ratestore.Limiter.Record does: for usage known after the fact.
func (l *Limiter) Record(ctx context.Context, key string, n int64) (Result, error) {
	r, _, err := l.do(ctx, key, strategies.Call{N: n, Record: true})
	return r, err
}

// Inspect calls fn with key's state as Redis holds it (a fresh one if it
// has none) and the instant of the call, in Unix nanoseconds, as
// ratestore.Limiter.Inspect does: for the queries a strategy offers
// besides its decisions. fn must not change the state.
func (l *Limiter) Inspect(ctx context.Context, key string, fn func(st strategies.State, now int64) error) error {
	if err := l.check(ctx, key, 0); err != nil {
		return err
	}
	_, err := l.update(ctx, key, func(cur string, now int64) (outcome, error) {
		return outcome{next: cur}, l.inspect(cur, now, fn)
	})
	if err != nil {
		return fmt.Errorf("redisstore: limiter %q: key %q: inspect: %w", l.name, key, err)
	}
	return nil
}

// inspect calls fn with the state of the stored value cur and the instant
// a call at now uses on it.
func (l *Limiter) inspect(cur string, now int64, fn func(st strategies.State, now int64) error) error {
	seen, st, err := l.decode(cur)
	if err != nil {
		return err
	}
	if st == nil {
		st = l.d.NewState()
	}
	at, _ := l.instant(seen, now, st)
	return fn(st, at)
}

// Reset forgets key's state under the limiter's name.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := l.check(ctx, key, 0); err != nil {
		return err
	}
	db := l.db
	rk := db.key(l.name, key)
	ctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	defer cancel()
	err := db.client.Del(ctx, rk).Err()
	db.cache.put(rk, "", 0)
	if err != nil {
		return fmt.Errorf("redisstore: limiter %q: key %q: reset: %w: %w", l.name, key, err, backend.ErrUncertain)
	}
	return nil
}

// check validates a call's arguments.
func (l *Limiter) check(ctx context.Context, key string, n int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.db.closed.Load() {
		return ErrClosed
	}
	if err := backend.ValidKey(key); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("redisstore: limiter %q: key %q: negative n %d: %w", l.name, key, n, backend.ErrInvalid)
	}
	return nil
}

// do decides c on key's state (see update). failedOpen reports a call
// allowed by Options.FailOpen, which Redis did not decide.
func (l *Limiter) do(ctx context.Context, key string, c strategies.Call) (r Result, failedOpen bool, err error) {
	if err := l.check(ctx, key, c.N); err != nil {
		return Result{}, false, err
	}
	o, err := l.update(ctx, key, func(cur string, now int64) (outcome, error) { return l.decide(cur, c, now) })
	var failure *swapError
	if errors.As(err, &failure) {
		return l.failed(key, failure.err, failure.changed)
	}
	if err != nil {
		return Result{}, false, fmt.Errorf("redisstore: limiter %q: key %q: %w", l.name, key, err)
	}
	return o.res, false, nil
}

// update makes a change of key's state with fn, which decides it on cur,
// the value stored, at now: first on the value this DB last saw, then, as
// long as Redis holds another, on the one it holds, until Redis stores the
// outcome (see the package doc). Concurrent calls of this DB on the key
// are decided one after the other in one batch, stored by one swap (see
// combine.go). A failure of Redis is a *swapError.
func (l *Limiter) update(ctx context.Context, key string, fn func(cur string, now int64) (outcome, error)) (outcome, error) {
	db := l.db
	p := ops.Get().(*op)
	p.ctx, p.fn = ctx, fn
	rk := db.key(l.name, key)
	combine(db.cache.lane(rk), p, &p.self, func(batch []*op) { db.decideBatch(rk, batch) })
	o, err := p.o, p.err
	*p = op{wake: p.wake}
	ops.Put(p)
	return o, err
}

// swapError is a failure of Redis to answer the swap script.
type swapError struct {
	err     error
	changed bool // the swap asked for a change, which may have been stored
}

// Error reports err, and backend.ErrUncertain's text for a change.
func (e *swapError) Error() string { return e.Unwrap().Error() }

// Unwrap returns err, wrapped with backend.ErrUncertain for a change.
func (e *swapError) Unwrap() error {
	if e.changed {
		return fmt.Errorf("%w: %w", e.err, backend.ErrUncertain)
	}
	return e.err
}

// outcome is a call decided on a stored value.
type outcome struct {
	res     Result
	prev    string        // the value it was decided on (set by update)
	next    string        // the value to store: the one decided on when nothing changed, "" for none
	ttl     time.Duration // next's
	changed bool          // next is a change of the state, not the same state or an idle one dropped
}

// failed is the outcome of a call that Redis did not answer: an error, or
// with Options.FailOpen an allowed Result. wrote says whether the call
// asked Redis to store a change, which it may have done.
func (l *Limiter) failed(key string, err error, wrote bool) (Result, bool, error) {
	if l.db.opts.FailOpen {
		l.db.log.Warn("redisstore: allowed a call that Redis did not decide (FailOpen)",
			"limiter", l.name, "err", err)
		return Result{Allowed: true}, true, nil
	}
	return Result{}, false, fmt.Errorf("redisstore: limiter %q: key %q: %w", l.name, key, &swapError{err, wrote})
}

// decide makes call c at now on cur, a stored value ("" for none). It is
// ratestore.Limiter's decision (see ratestore's DB.see): a clock behind
// the stored instant by no more than the strategy's Horizon decides at the
// stored instant, one further behind is taken as it is and the state
// clamped to it. A state that time has brought back to its initial value
// (ResetAfter 0) is deleted rather than stored, also by a call that takes
// nothing, as a ratestore.DB deletes it in passing.
func (l *Limiter) decide(cur string, c strategies.Call, now int64) (outcome, error) {
	seen, st, err := l.decode(cur)
	if err != nil {
		return outcome{}, err
	}
	if st == nil {
		st = l.d.NewState()
	}
	now, clamped := l.instant(seen, now, st)
	c.Now = now
	res, err := l.d.Decide(st, c)
	if err != nil {
		return outcome{}, err
	}
	o := outcome{res: res, next: cur, changed: c.Taken(res.Allowed) || clamped}
	switch {
	case res.ResetAfter == 0:
		o.next = ""
	case o.changed:
		o.next, o.ttl = encode(now, st), res.ResetAfter+ttlSlack
	}
	return o, nil
}

// instant is the instant a call at now uses on st, a state stored by a
// call at seen, as ratestore's DB.see has it: seen, when now is behind it
// by no more than the strategy's Horizon; otherwise now, with st clamped
// to it if it lies further ahead (clamped reports a change of st).
func (l *Limiter) instant(seen, now int64, st strategies.State) (at int64, clamped bool) {
	switch {
	case now >= seen:
		return now, false
	case uint64(seen)-uint64(now) <= uint64(l.d.Horizon()):
		return seen, false
	}
	return now, l.d.Clamp(st, now)
}

// encode is the stored value of st, written by a call at now.
func encode(now int64, st strategies.State) string {
	b := strconv.AppendInt(make([]byte, 0, 64), now, 10)
	b = append(b, ';')
	return string(st.AppendEncode(b))
}

// decode splits a stored value into its instant and its state: 0 and nil
// for "". A value that is not one is an error matching backend.ErrCorrupt.
func (l *Limiter) decode(v string) (int64, strategies.State, error) {
	if v == "" {
		return 0, nil, nil
	}
	at, enc, ok := bytes.Cut([]byte(v), []byte{';'})
	seen, err := strconv.ParseInt(string(at), 10, 64)
	if !ok || err != nil {
		return 0, nil, fmt.Errorf("stored value %.40q is not \"<unix ns>;<state>\": %w", v, backend.ErrCorrupt)
	}
	st, err := l.d.Decode(enc)
	if err != nil {
		return 0, nil, err
	}
	return seen, st, nil
}
