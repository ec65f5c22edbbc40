// Package waiting is what Limiter.Wait does once it holds a reservation,
// for ratestore's engine and for redisstore alike: sleep until the
// reservation's time, and cancel it if the context ends first.
package waiting

import (
	"context"
	"fmt"
	"time"
)

// Reservation is a reservation of either store.
type Reservation interface {
	Delay() time.Duration
	TimeToAct() time.Time
	Cancel(ctx context.Context) error
}

// For waits until r's time, on after's timer. If ctx ends first, or its
// deadline comes before that time, r is cancelled and ctx's error, or one
// matching context.DeadlineExceeded, returned, with Cancel's error if it
// failed. what names the call in errors ("ratestore: limiter %q: key %q").
func For(ctx context.Context, r Reservation, after func(time.Duration) <-chan time.Time, what func() string) error {
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Before(r.TimeToAct()) {
		cerr := r.Cancel(context.WithoutCancel(ctx))
		return fmt.Errorf("%s: wait of %v would pass the context's deadline: %w", what(), d, join(context.DeadlineExceeded, cerr))
	}
	select {
	case <-after(d):
		return nil
	case <-ctx.Done():
		return join(ctx.Err(), r.Cancel(context.WithoutCancel(ctx)))
	}
}

// join wraps err with a Cancel's error, if any.
func join(err, cancelErr error) error {
	if cancelErr != nil {
		return fmt.Errorf("%w (and cancelling the reservation: %w)", err, cancelErr)
	}
	return err
}
