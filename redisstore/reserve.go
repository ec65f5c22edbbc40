package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/internal/waiting"
	"github.com/ratestore/ratestore/strategies"
)

// Reservation is the one Reservation of every backend.
type Reservation = backend.Reservation

// Reserve takes n from key now, even past its limit, and returns the
// Reservation, whose Delay says when to act, as ratestore.Limiter.Reserve
// does. n over the key's limit is an error matching ErrInvalid and
// changes nothing. Failures are those of AllowN; with Options.FailOpen, a
// failed Reserve returns an error all the same, since no time to act can
// be given.
func (l *Limiter) Reserve(ctx context.Context, key string, n int64) (*Reservation, error) {
	if err := l.check(ctx, key, n); err != nil {
		return nil, err
	}
	var act int64
	o, err := l.update(ctx, key, func(cur string, now int64) (outcome, error) {
		probe, err := l.decide(cur, strategies.Call{N: n, DryRun: true}, now)
		if err != nil {
			return outcome{}, err
		}
		if probe.res.RetryAfter < 0 {
			return outcome{}, fmt.Errorf("n %d exceeds the limit %d: it can never be reserved: %w", n, probe.res.Limit, backend.ErrInvalid)
		}
		act = now
		return l.decide(cur, strategies.Call{N: n, Record: true}, now)
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: limiter %q: key %q: reserve: %w", l.name, key, err)
	}
	if !o.res.Allowed {
		act = sat.Add(act, int64(o.res.RetryAfter))
	}
	return backend.NewReservation(n, time.Unix(0, act), &undo{l: l, key: key, prev: o.prev, next: o.next}), nil
}

// Wait waits until key can take n, in turn with the other callers of Wait
// and Reserve on it, in every instance, as ratestore.Limiter.Wait does: it
// reserves n and sleeps until the reservation's time (on Options.After's
// timer); when ctx ends first, or its deadline comes before that time, the
// reservation is cancelled and ctx's error returned.
func (l *Limiter) Wait(ctx context.Context, key string, n int64) error {
	r, err := l.Reserve(ctx, key, n)
	if err != nil {
		return err
	}
	return waiting.For(ctx, r, l.db.after, func() string { return fmt.Sprintf("redisstore: limiter %q: key %q", l.name, key) })
}

// undo is what a reservation took: the value stored before and after it.
type undo struct {
	l          *Limiter
	key        string
	prev, next string
}

func (u *undo) Now() time.Time { return u.l.db.now() }

// Undo stores the value before the reservation if Redis still holds the
// one it stored.
func (u *undo) Undo(ctx context.Context) (bool, error) {
	l := u.l
	if l.db.closed.Load() {
		return false, ErrClosed
	}
	restored := false // by the last run of fn, whose outcome was stored
	_, err := l.update(ctx, u.key, func(cur string, now int64) (outcome, error) {
		if restored = cur == u.next; !restored {
			// Changed since: nothing is given back, unless the changes are
			// undone before another Cancel (later reservations cancelled).
			return outcome{next: cur}, nil
		}
		o := outcome{next: u.prev, changed: true}
		if u.prev != "" {
			p, err := l.decide(u.prev, strategies.Call{DryRun: true}, now)
			if err != nil { // cannot fail: it was decided on before
				return outcome{}, err
			}
			o.ttl = p.res.ResetAfter + ttlSlack
		}
		return o, nil
	})
	if err != nil {
		return false, fmt.Errorf("redisstore: limiter %q: key %q: cancel: %w", l.name, u.key, err)
	}
	return restored, nil
}
