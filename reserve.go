package ratestore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/internal/waiting"
	"github.com/ratestore/ratestore/strategies"
)

// A Reservation is n taken from a key now, for an action its holder
// performs at TimeToAct, as golang.org/x/time/rate's Reservation is. The
// take is in the key's state like any other, stored as the DB's
// durability says, and calls made meanwhile see it. After a restart the
// holders of reservations not yet due are gone with the process; the
// buckets and windows still count them, while a GCRA, whose state cannot
// tell reservations ahead from a clock that ran ahead, keeps at most one
// burst of them (see strategies.GCRA's Clamp).
//
// Reservations on a key are served in the order they were made: each one's
// time comes after the previous one's, and a later AllowN is denied until
// they have all come. How long a reservation waits is how long its
// strategy makes the key wait once it has taken n, as Record does: for a
// GCRA, a token bucket or a leaky bucket, exactly until the rate has made
// room for n, so that reservations act at the rate. A window strategy
// (fixed, sliding, rolling window, sliding log) counts the n when it is
// reserved, in the window of that instant, and the reservation waits until
// the key is back within its limit: an action that then comes in a later
// window is not counted in that window, so in it up to Limit more may be
// allowed. Wait with a window strategy bounds the rate of reservations, not
// of actions.
type Reservation struct {
	n    int64
	act  int64 // Unix ns: when the holder may act
	undo Undoer

	mu       sync.Mutex
	canceled bool
}

// An Undoer is what a backend keeps of the take of a Reservation it made,
// for NewReservation: its clock, and how to give the take back.
type Undoer interface {
	// Now reads the backend's clock.
	Now() time.Time
	// Undo makes the key's state what it was before the take when nothing
	// has changed it since, and reports whether it did.
	Undo(ctx context.Context) (bool, error)
}

// NewReservation returns the Reservation of n, taken by a backend's
// Limiter.Reserve, to act at act, that u gives back. Its Cancel calls
// u.Undo at most until it succeeds, and never once act has come or for n
// of 0.
func NewReservation(n int64, act time.Time, u Undoer) *Reservation {
	return &Reservation{n: n, act: act.UnixNano(), undo: u}
}

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
	if err := validKey(key); err != nil {
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
	r := &Reservation{n: n, act: now, undo: u}
	if !res.Allowed {
		r.act = sat.Add(now, int64(res.RetryAfter))
	}
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

// TimeToAct is when the holder may perform the reserved action.
func (r *Reservation) TimeToAct() time.Time { return time.Unix(0, r.act).UTC() }

// Delay is how long from now, on the backend's clock, until TimeToAct: 0
// when the action may be performed at once.
func (r *Reservation) Delay() time.Duration {
	return time.Duration(max(sat.Sub(r.act, r.undo.Now().UnixNano()), 0))
}

// Cancel gives back what the reservation took, when its time has not
// come: the holder will not act. When nothing has changed the key since
// the reservation (no call took from it, no time-driven change was
// written), the key's state becomes exactly what it was before, as if the
// reservation had never been made. When other calls have changed the key
// since, Cancel gives back nothing: what they were answered took the
// reservation into account, and later reservations keep their times. A
// reservation whose time has come, or that was cancelled, is left as it is
// (nil). The error is that of reading the key, or of the commit.
func (r *Reservation) Cancel(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.canceled || r.n == 0 || r.undo.Now().UnixNano() >= r.act {
		return nil
	}
	ok, err := r.undo.Undo(ctx)
	r.canceled = ok
	return err
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
