package strategies

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
	allowed := a.Allowed && b.Allowed
	limit, remaining := a.Limit, a.Remaining
	if b.Remaining < remaining {
		limit, remaining = b.Limit, b.Remaining
	}
	reset := max(a.ResetAfter, b.ResetAfter)
	retry := max(a.RetryAfter, b.RetryAfter)
	if a.RetryAfter < 0 || b.RetryAfter < 0 {
		retry = -1
	}
	r.Allowed, r.Limit, r.Remaining, r.ResetAfter, r.RetryAfter = allowed, limit, remaining, reset, retry
}
