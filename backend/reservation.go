package backend

import (
	"context"
	"sync"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
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
