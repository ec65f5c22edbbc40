package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/internal/waiting"
	"github.com/ratestore/ratestore/strategies"
)

// A Reservation is n taken from a key now, for an action its holder
// performs at TimeToAct, with the semantics of ratestore.Reservation: the
// reservations on a key, from every instance, are served in the order
// Redis stored them, and a later AllowN is denied until they have come.
type Reservation struct {
	l          *Limiter
	key        string
	n          int64
	act        int64  // Unix ns
	prev, next string // the stored value before and after
	mu         sync.Mutex
	canceled   bool
}

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
			return outcome{}, fmt.Errorf("n %d exceeds the limit %d: it can never be reserved: %w", n, probe.res.Limit, ratestore.ErrInvalid)
		}
		act = now
		return l.decide(cur, strategies.Call{N: n, Record: true}, now)
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: limiter %q: key %q: reserve: %w", l.name, key, err)
	}
	r := &Reservation{l: l, key: key, n: n, act: act, prev: o.prev, next: o.next}
	if !o.res.Allowed {
		r.act = sat.Add(act, int64(o.res.RetryAfter))
	}
	return r, nil
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

// TimeToAct is when the holder may perform the reserved action.
func (r *Reservation) TimeToAct() time.Time { return time.Unix(0, r.act).UTC() }

// Delay is how long from now, on the DB's clock, until TimeToAct.
func (r *Reservation) Delay() time.Duration {
	return time.Duration(max(sat.Sub(r.act, r.l.db.now().UnixNano()), 0))
}

// Cancel gives back what the reservation took, when its time has not come,
// as ratestore.Reservation.Cancel does: the key's state becomes exactly
// what it was before when nothing has changed it since (Redis still holds
// what the reservation stored), and otherwise nothing is given back.
func (r *Reservation) Cancel(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, db := r.l, r.l.db
	if r.canceled || r.n == 0 || db.now().UnixNano() >= r.act {
		return nil
	}
	if db.closed.Load() {
		return ErrClosed
	}
	restored := false // by the last run of fn, whose outcome was stored
	_, err := l.update(ctx, r.key, func(cur string, now int64) (outcome, error) {
		if restored = cur == r.next; !restored {
			// Changed since: nothing is given back, unless the changes are
			// undone before another Cancel (later reservations cancelled).
			return outcome{next: cur}, nil
		}
		o := outcome{next: r.prev, changed: true}
		if r.prev != "" {
			p, err := l.decide(r.prev, strategies.Call{DryRun: true}, now)
			if err != nil { // cannot fail: it was decided on before
				return outcome{}, err
			}
			o.ttl = p.res.ResetAfter + ttlSlack
		}
		return o, nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: limiter %q: key %q: cancel: %w", l.name, r.key, err)
	}
	r.canceled = restored
	return nil
}
