// Package strategies holds the rate-limiting algorithms of ratestore as pure
// decision functions: a configuration (TokenBucket, GCRA, LeakyBucket,
// FixedWindow, SlidingWindow, RollingWindow, SlidingLog, Composite) decides a call
// against a per-key State at a given instant, and encodes that State in a
// compact, versioned text form.
//
// Nothing here does I/O or reads a clock: the instant of every call is passed
// in as Unix nanoseconds. That is what lets package ratestore decide in memory
// under a per-key lock and persist states in groups, and what lets tests drive
// every strategy with a fake clock.
//
// The encodings, current and legacy, are specified in DATA_FORMAT.md.
//
// # Strategies, Deciders and States
//
// A configuration is a plain value that implements Strategy: Validate, and
// Prepare, which returns its Decider. A Decider computes once what every
// decision derives from the configuration alone (a GCRA's emission
// interval and a divisor by it, a bucket's rate per nanosecond), and
// decides calls, makes, decodes and clamps States. An engine prepares a
// configuration once per limiter handle. Each strategy is one file: its
// configuration, its Decider, its State and that State's encoding; adding
// one touches nothing else.
//
// # Rules every strategy keeps
//
//   - A denied call, a call of n = 0 (Peek) and a DryRun change nothing.
//     Record takes its n unconditionally, past the limit if need be; later
//     calls are then denied until the excess has drained or expired.
//   - Durations are rounded up to the nanosecond: a call made RetryAfter
//     after a denied one is allowed (by the very arithmetic Decide uses), and
//     one made a nanosecond earlier would not have been. Remaining is
//     rounded down and never negative.
//   - ResetAfter is 0 exactly when the state behaves like a fresh one for
//     every later call: the engine deletes such states instead of storing
//     them.
//   - A clock that goes backwards gives no refill and no penalty: elapsed
//     time is never negative, and stored instants do not move backwards
//     while they still matter. Decide never moves them; Clamp, which an
//     engine applies to a state that lies further ahead of the clock than
//     Horizon allows (a clock that ran ahead and came back), moves them
//     back to the clock, so that no key waits longer than its period.
//   - Every finite positive rate and every burst, capacity or limit from
//     1 to math.MaxInt64 is accepted: huge limits mean "effectively
//     unlimited", and extremes that no caller could tell apart saturate
//     rather than being refused (see GCRA for the one that needs to).
//   - Arithmetic saturates: no n up to math.MaxInt64 and no stored number
//     makes anything wrap around or panic. Durations that do not fit in
//     int64 nanoseconds (292 years) are reported as math.MaxInt64.
//   - Decide allocates nothing for a state of its own kind under an
//     unchanged configuration (a RollingWindow state once
//     its ring of buckets has grown to hold a window's worth).
//
// # Changed configurations
//
// A State belongs to a kind of strategy, not to one configuration: Decide
// accepts a state made under an earlier configuration of the same kind and
// reconciles it. A lowered Burst drops the tokens above it; a lowered
// Capacity or Limit keeps the level or counts, which then drain or expire
// like a Record's excess; a FixedWindow quota is matched by name, a new one
// starting fresh and a removed one forgotten; a SlidingWindow whose Window
// changed moves its window start forward to the next aligned instant; a
// RollingWindow whose Window or Bucket changed moves its usage to the new
// buckets, none earlier (rollingwindow.State.Reconfigure). A state of
// another kind is an error matching ErrMismatch.
package strategies
