package strategies

import (
	"errors"
	"time"
)

var (
	// ErrInvalid is matched (errors.Is) by every error about a bad argument or
	// configuration: a rate that is not a positive finite number, a burst or
	// limit below 1, a bad quota name, a negative cost.
	ErrInvalid = errors.New("invalid argument")

	// ErrCorrupt is matched by every error about stored bytes that cannot be
	// decoded into a state: an unknown header, a malformed or out-of-range
	// number, NaN or Inf, trailing bytes.
	ErrCorrupt = errors.New("corrupt state")

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

// Strategy is a rate-limiting algorithm with its configuration. The
// configurations of this package implement it; package ratestore applies them
// to keys.
//
// A Strategy value is a plain configuration: it holds no state and may be used
// concurrently. States are owned by the caller, who must serialize the calls
// made on one State.
type Strategy interface {
	// Validate reports whether the configuration is usable. Its errors match
	// ErrInvalid and name the field that is wrong.
	Validate() error

	// NewState returns the state of a key that has never been seen: nothing in
	// use.
	NewState() State

	// Decode parses a stored state, in the current encoding or one of the
	// older encodings this strategy reads, for this configuration. Errors
	// match ErrCorrupt, or ErrMismatch for a well-formed state of another
	// strategy. Decode never panics and never returns a fresh state for bytes
	// it does not understand.
	Decode(b []byte) (State, error)

	// Apply decides call c against st. Unless c.DryRun is set, it changes st
	// exactly when the call takes something (c.N > 0 and the call is allowed
	// or recorded); a denied call changes nothing. st must come from this
	// strategy's NewState or Decode (possibly under an earlier configuration
	// of the same kind: a changed configuration is reconciled here);
	// otherwise Apply returns an error matching ErrMismatch. Apply does not
	// validate the configuration or c.N; callers do that once.
	Apply(st State, c Call) (Result, error)
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
