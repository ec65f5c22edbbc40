// Package fakeclock is the clock the tests give Options.Now: time moves
// only when a test moves it, so no test sleeps. It is safe for concurrent
// use: the engine reads it from many goroutines while a test advances it.
package fakeclock

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is a fake clock, in Unix nanoseconds (instants from 1678 to 2262).
type Clock struct {
	ns atomic.Int64

	mu      sync.Mutex
	pending []timer // timers After set that have not fired, by deadline
}

// timer is one channel of After, and the instant it fires at.
type timer struct {
	at int64
	ch chan time.Time
}

// New returns a clock that reads t.
func New(t time.Time) *Clock {
	c := &Clock{}
	c.Set(t)
	return c
}

// Now returns the clock's instant, in UTC.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock by d, backwards if d is negative, and fires the
// timers it reaches.
func (c *Clock) Advance(d time.Duration) {
	c.ns.Add(int64(d))
	c.fire()
}

// Set moves the clock to t, and fires the timers it reaches.
func (c *Clock) Set(t time.Time) {
	c.ns.Store(t.UnixNano())
	c.fire()
}

// After is time.After on the clock: the channel receives once the clock
// has been moved d past now (at once for d <= 0). It is Options.After of a
// DB whose Options.Now is c.Now.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	t := timer{c.ns.Load() + int64(d), ch}
	i, _ := slices.BinarySearchFunc(c.pending, t.at, func(p timer, at int64) int {
		if p.at <= at {
			return -1 // after the timers of the same instant: they fire in the order set
		}
		return 1
	})
	c.pending = slices.Insert(c.pending, i, t)
	c.mu.Unlock()
	c.fire()
	return ch
}

// Timers returns how many timers of After have not fired.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// fire sends the time to the timers whose instant has come, in the order
// of their instants.
func (c *Clock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.ns.Load()
	n := 0
	for n < len(c.pending) && c.pending[n].at <= now {
		c.pending[n].ch <- time.Unix(0, now).UTC()
		n++
	}
	c.pending = slices.Delete(c.pending, 0, n)
}
