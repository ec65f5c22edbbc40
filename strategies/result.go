package strategies

import "time"

// and merges into r the Result of one more limit that a call must pass
// with r's, given by its fields: the quotas of a FixedWindow, the parts of
// a Composite. The call is allowed only if both limits allow it, and the
// binding limit speaks for the rest. The smallest Remaining wins, with its
// Limit (on a tie, r's); ResetAfter is the largest, since the key is back
// to its initial state only when both are; RetryAfter is the largest,
// since each limit only gains room while nothing is taken, so the call fits
// both exactly when it fits the later one; and -1 (never) from either is
// -1. The other limit's Result comes by its fields, so that FixedWindow's
// quotas need not build one each.
func (r *Result) and(allowed bool, limit, remaining int64, reset, retry time.Duration) {
	r.Allowed = r.Allowed && allowed
	if remaining < r.Remaining {
		r.Limit, r.Remaining = limit, remaining
	}
	r.ResetAfter = max(r.ResetAfter, reset)
	if r.RetryAfter < 0 || retry < 0 {
		r.RetryAfter = -1
	} else {
		r.RetryAfter = max(r.RetryAfter, retry)
	}
}
