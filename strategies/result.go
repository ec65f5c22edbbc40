package strategies

import "time"

// merge combines the results of two limits that a call must both pass, the
// quotas of a FixedWindow or the parts of a Composite: the call is allowed
// only if both allow it, and the binding limit speaks for the rest. The
// smallest Remaining wins, with its Limit (on a tie, a's); ResetAfter is the
// largest, since the key is back to its initial state only when both are;
// RetryAfter is the largest, since each limit only gains room while nothing
// is taken, so the call fits both exactly when it fits the later one; and
// -1 (never) from either is -1.
//
// It sets *r, which may be a or b: results pass by pointer here, and are
// read and written field by field, because Go keeps a struct of more than
// four fields in memory and copies it with wide moves, which stall when
// they read back the narrower stores that just wrote it.
func merge(r, a, b *Result) {
	allowed, limit, remaining, reset, retry := b.Allowed, b.Limit, b.Remaining, b.ResetAfter, b.RetryAfter
	r.Allowed, r.Limit, r.Remaining, r.ResetAfter, r.RetryAfter = a.Allowed, a.Limit, a.Remaining, a.ResetAfter, a.RetryAfter
	r.and(allowed, limit, remaining, reset, retry)
}

// and merges into r, as b, the Result of one more limit that the call must
// pass, given by its fields: what merge does, for a caller that has the
// fields at hand (the quotas of a FixedWindow) and no Result of them.
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
