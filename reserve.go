package ratestore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/internal/waiting"
	"github.com/ratestore/ratestore/strategies"
)

// Reserve takes n from key now, even when that takes it past its limit,
// and returns the Reservation, whose Delay says when to act on it. n over
// the key's limit, which could never be allowed, is an error matching
// ErrInvalid, and changes nothing; n = 0 reserves nothing, and says when
// the key is next within its limit. As for AllowN, an error matching
// ErrUncertain means the take may have been recorded.
func (l *Limiter) Reserve(ctx context.Context, key string, n int64) (*Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := backend.ValidKey(key); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("ratestore: limiter %q: key %q: negative n %d: %w", l.name, key, n, ErrInvalid)
	}
	db := l.db
	if db.readOnly {
		return nil, l.writeRefused(key)
	}
	now := db.now()
	sh, i, err := l.entry(ctx, key, now)
	if err != nil {
		return nil, err
	}
	now = db.see(sh, i, l.d, now)
	e := &sh.slots[i]
	st := e.st
	var prev []byte
	if st == nil {
		st = l.d.NewState()
	} else {
		prev = st.AppendEncode(nil)
	}
	fail := func(err error) (*Reservation, error) {
		sh.mu.Unlock()
		return nil, fmt.Errorf("ratestore: limiter %q: key %q: reserve: %w", l.name, key, err)
	}
	probe, err := l.d.Decide(st, strategies.Call{Now: now, N: n, DryRun: true})
	if err != nil {
		return fail(err)
	}
	if probe.RetryAfter < 0 {
		return fail(fmt.Errorf("n %d exceeds the limit %d: it can never be reserved: %w", n, probe.Limit, ErrInvalid))
	}
	res, err := l.d.Decide(st, strategies.Call{Now: now, N: n, Record: true})
	if err != nil {
		return fail(err)
	}
	u := &undo{l: l, key: key, prev: prev}
	act := now
	if !res.Allowed {
		act = sat.Add(now, int64(res.RetryAfter))
	}
	r := backend.NewReservation(n, time.Unix(0, act), u)
	if n == 0 {
		sh.mu.Unlock()
		return r, nil
	}
	u.next = st.AppendEncode(nil)
	e.st, e.idleAt = st, sat.Add(now, int64(res.ResetAfter))
	if err := db.committed(ctx, db.changed(sh, i)); err != nil {
		return nil, err
	}
	return r, nil
}

// Wait waits until key can take n, in turn with the other callers of Wait
// and Reserve on it: it reserves n and sleeps until the reservation's
// time (on Options.After's timer). If ctx ends first, or its deadline
// comes before that time, the reservation is cancelled (see Cancel) and
// ctx's error, or one matching context.DeadlineExceeded, is returned. n
// over the key's limit is an error matching ErrInvalid.
func (l *Limiter) Wait(ctx context.Context, key string, n int64) error {
	r, err := l.Reserve(ctx, key, n)
	if err != nil {
		return err
	}
	return waiting.For(ctx, r, l.db.after, func() string { return fmt.Sprintf("ratestore: limiter %q: key %q", l.name, key) })
}

// undo is what a DB keeps of a reservation: the encodings of the key's
// state before it (nil: the initial state) and after.
type undo struct {
	l          *Limiter
	key        string
	prev, next []byte
}

func (u *undo) Now() time.Time { return u.l.db.Now() }

func (u *undo) Undo(ctx context.Context) (bool, error) {
	l, db := u.l, u.l.db
	sh, i, err := l.entry(ctx, u.key, db.now())
	if err != nil {
		return false, err
	}
	e := &sh.slots[i]
	var cur []byte
	if e.st != nil {
		cur = e.st.AppendEncode(nil)
	}
	if !bytes.Equal(cur, u.next) {
		sh.mu.Unlock()
		return false, nil
	}
	var st strategies.State
	if u.prev != nil {
		if st, err = l.d.Decode(u.prev); err != nil { // cannot fail: it was encoded by the same Decider
			sh.mu.Unlock()
			return false, fmt.Errorf("ratestore: limiter %q: key %q: cancel: %w", l.name, u.key, err)
		}
	}
	e.st, e.idleAt = st, math.MaxInt64 // unknown until the next decision
	return true, db.committed(ctx, db.changed(sh, i))
}
