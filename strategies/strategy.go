package strategies

import (
	"time"

	"github.com/ratestore/ratestore/internal/errs"
)

var (
	// ErrInvalid is matched (errors.Is) by every error about a bad argument or
	// configuration: a rate that is not a positive finite number, a burst or
	// limit below 1, a bad quota name, a negative cost.
	ErrInvalid = errs.ErrInvalid

	// ErrCorrupt is matched by every error about stored bytes that cannot be
	// decoded into a state: an unknown header, a malformed or out-of-range
	// number, NaN or Inf, trailing bytes.
	ErrCorrupt = errs.ErrCorrupt

	// ErrMismatch is matched when a state is well formed but belongs to
	// another strategy than the one configured (a limiter name reused for a
	// different algorithm). It also matches ErrInvalid: the configuration, not
	// the data, is what is wrong.
	ErrMismatch = &mismatchError{}
)

type mismatchError struct{}

func (*mismatchError) Error() string { return "state belongs to another strategy" }

// Is makes errors.Is(ErrMismatch, ErrInvalid) true.
func (*mismatchError) Is(target error) bool { return target == ErrInvalid }

// Result is the answer to one call.
type Result struct {
	// Allowed reports whether the call was allowed. For Record, which always
	// takes its cost, it reports what Peek would say right after: whether the
	// key is still within its limit.
	Allowed bool
	// Limit is the most one call can ever take: the burst, capacity, or the
	// quota/window limit.
	Limit int64
	// Remaining is what AllowN could take right after this call: rounded
	// down, never negative.
	Remaining int64
	// ResetAfter is the time until the key is back to its initial state
	// (nothing in use); 0 if it already is. Engines rely on it: a state whose
	// ResetAfter is 0 is equivalent to a fresh one and need not be stored.
	ResetAfter time.Duration
	// RetryAfter is 0 when the call was allowed. When it was denied, it is the
	// time until the same call would be allowed, or -1 when it never can be
	// (n > Limit). For Record it is Peek's RetryAfter right after the call.
	RetryAfter time.Duration
}

// Call is one decision to make.
type Call struct {
	// Now is the instant of the call, in Unix nanoseconds. A Now earlier than
	// one seen before (a clock going backwards) gives no refill and no
	// penalty.
	Now int64
	// N is the cost of the call: tokens, requests, units. Never negative;
	// 0 asks what the state is without taking anything.
	N int64
	// Record takes N unconditionally, even past the limit: usage known only
	// after the fact. Later calls are denied until the excess has drained or
	// expired.
	Record bool
	// DryRun computes the result as if the call were made but changes
	// nothing. Composite uses it to ask both parts before taking from either.
	DryRun bool
}

// Strategy is a rate-limiting algorithm with its configuration: the
// configurations of this package implement it, and package ratestore
// applies them to keys. A Strategy value is a plain configuration: it holds
// no state and may be used concurrently.
//
// A strategy has two methods because deciding needs more than the
// configuration: what follows from it alone (a GCRA's emission interval,
// a bucket's rate per nanosecond, a divisor set up to multiply) is worth
// computing once rather than on every call. Prepare does that; an engine
// prepares a strategy once per limiter handle and decides every call made
// through the handle with the Decider it got.
//
// To add a strategy, implement Strategy, Decider and State; nothing else in
// this module needs to know it. A strategy of another package works in
// ratestore and as a part of a Composite: it is only not given the
// composite's one-pass take (see Composite).
type Strategy interface {
	// Validate reports whether the configuration is usable. Its errors
	// match ErrInvalid and name the field that is wrong.
	Validate() error

	// Prepare returns the Decider of this configuration. For a
	// configuration that Validate refuses, it returns a Decider whose every
	// method that can fail returns that error.
	Prepare() Decider
}

// Decider decides calls under one configuration: the prepared form of a
// Strategy. It is immutable and may be used concurrently; States are owned
// by the caller, who must serialize the calls made on one State.
type Decider interface {
	// NewState returns the state of a key that has never been seen:
	// nothing in use.
	NewState() State

	// Decode parses a stored state, in the current encoding or one of the
	// older encodings this strategy reads, for this configuration. Errors
	// match ErrCorrupt, or ErrMismatch for a well-formed state of another
	// strategy. Decode never panics and never returns a fresh state for
	// bytes it does not understand.
	Decode(b []byte) (State, error)

	// Decide decides call c against st. Unless c.DryRun is set, it changes st exactly when the call takes
	// something (c.N > 0 and the call is allowed or recorded); a denied call
	// changes nothing. st must come from NewState or Decode of a Decider of
	// the same kind of strategy, possibly under an earlier configuration (a
	// changed configuration is reconciled here); otherwise Decide returns an
	// error matching ErrMismatch, and the zero Result. c.N must not be
	// negative: callers check it once.
	Decide(st State, c Call) (Result, error)

	// Horizon returns the longest a state can make a key wait when no
	// Record took it past its limit: one burst, one window. An engine that
	// sees its clock go back by more than that since a key's last call
	// knows the clock jumped rather than stepped back a little, and clamps
	// the key's state.
	Horizon() time.Duration

	// Clamp bounds st, read at the instant now, to what a state can
	// legitimately hold at now, and reports whether it changed st.
	//
	// Every strategy keeps instants in its state, and none lies further
	// ahead of the call that wrote it than Horizon. A state further ahead
	// than that was written by a clock that ran ahead (a wrong NTP step, a
	// VM restored with a bad clock) and came back; decided as it is, it
	// would lock its key out until the clock got there again, since a clock
	// gone backwards gives no refill. Clamp moves what lies too far ahead
	// back to the latest instant now allows, so the key waits at most
	// Horizon from now. Each strategy's rule is next to its Decide. A state
	// within bounds, or of another strategy, is left exactly as it is.
	Clamp(st State, now int64) bool
}

// State is the decoded per-key state of a strategy.
type State interface {
	// AppendEncode appends the current encoding of the state to dst.
	AppendEncode(dst []byte) []byte
}

// Taken reports whether the call changed its state, given whether it was
// allowed: it took something. Engines mark a key dirty exactly then.
func (c Call) Taken(allowed bool) bool {
	return !c.DryRun && c.N > 0 && (allowed || c.Record)
}

// refused is the Decider of a configuration that Validate refuses: it
// fails with the Validate error.
type refused struct{ err error }

func (r refused) NewState() State                    { return nil }
func (r refused) Decode([]byte) (State, error)       { return nil, r.err }
func (r refused) Horizon() time.Duration             { return 0 }
func (r refused) Clamp(State, int64) bool            { return false }
func (r refused) Decide(State, Call) (Result, error) { return Result{}, r.err }
