// Package fakeclock is the clock the tests give Options.Now: time moves
// only when a test moves it, so no test sleeps. It is safe for concurrent
// use: the engine reads it from many goroutines while a test advances it.
package fakeclock

import (
	"sync/atomic"
	"time"
)

// Clock is a fake clock, in Unix nanoseconds (instants from 1678 to 2262).
type Clock struct{ ns atomic.Int64 }

// New returns a clock that reads t.
func New(t time.Time) *Clock {
	c := &Clock{}
	c.Set(t)
	return c
}

// Now returns the clock's instant, in UTC.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock by d, backwards if d is negative.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }
