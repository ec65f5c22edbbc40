package backend

import "time"

// SystemClock returns the default clock of a backend: the wall clock read
// once, when SystemClock is called, and advanced by the monotonic clock
// from then on. It costs one clock read per call instead of time.Now's two
// (wall and monotonic), and a step of the wall clock while the program
// runs (an NTP correction, a manual change) does not move it, so no key
// gets a refill or a penalty from one. A new process starts from the wall
// clock again.
func SystemClock() func() time.Time {
	nanos := SystemNanos()
	return func() time.Time { return time.Unix(0, nanos()) }
}

// SystemNanos is SystemClock in Unix nanoseconds, the form the engines
// decide in, without building a time.Time only to take its UnixNano again.
func SystemNanos() func() int64 {
	anchor := time.Now()
	wall := anchor.UnixNano()
	return func() int64 { return wall + int64(time.Since(anchor)) }
}
