package strategies

// merge combines the results of two limits that a call must both pass, the
// quotas of a FixedWindow or the parts of a Composite: the call is allowed
// only if both allow it, and the binding limit speaks for the rest. The
// smallest Remaining wins, with its Limit (on a tie, a's); ResetAfter is the
// largest, since the key is back to its initial state only when both are;
// RetryAfter is the largest, since each limit only gains room while nothing
// is taken, so the call fits both exactly when it fits the later one; and
// -1 (never) from either is -1.
func merge(a, b Result) Result {
	r := a
	r.Allowed = a.Allowed && b.Allowed
	if b.Remaining < a.Remaining {
		r.Remaining, r.Limit = b.Remaining, b.Limit
	}
	r.ResetAfter = max(a.ResetAfter, b.ResetAfter)
	if a.RetryAfter < 0 || b.RetryAfter < 0 {
		r.RetryAfter = -1
	} else {
		r.RetryAfter = max(a.RetryAfter, b.RetryAfter)
	}
	return r
}
