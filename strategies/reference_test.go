package strategies

import (
	"fmt"
	"math"
	"time"
)

// The decisions as they were before they were made cheaper, kept as the
// reference that TestReference holds the current ones to: a FixedWindow
// that compares the quota names on every call and merges one Result per
// quota, a Composite that asks both parts with a DryRun before taking from
// either, a bucket that checks the state in one function and decides in
// another, with the built-in min and max of floats, and sat.Add and sat.Sub
// as they compared before they added. (The rest of the arithmetic, and
// the decisions of the other strategies, did not change.) They work on the
// states of this package as they are, and call each other: refDecide
// decides any strategy as it used to.

// refDecide is s.Apply(st, c) as it was, writing the Result to *res.
func refDecide(s Strategy, st State, c Call, res *Result) error {
	switch v := Unprepare(s).(type) {
	case FixedWindow:
		return refFixedWindowDecide(&v, st, c, res)
	case Composite:
		return refCompositeDecide(&v, st, c, res)
	case TokenBucket:
		b := v.bucket()
		return refBucketDecide(&b, st, c, res)
	case LeakyBucket:
		b := v.bucket()
		return refBucketDecide(&b, st, c, res)
	}
	r, err := s.Apply(st, c)
	*res = r
	return err
}

// refApply is refDecide as an Apply.
func refApply(s Strategy, st State, c Call) (res Result, err error) {
	err = refDecide(s, st, c, &res)
	return res, err
}

func refCompositeDecide(cs *Composite, st State, c Call, res *Result) error {
	s, ok := st.(compositeState)
	if !ok {
		return wrongState(kindComposite, st)
	}
	sp, ss := s.parts()
	if cs.Primary == nil || cs.Secondary == nil {
		return cs.Validate()
	}
	// Ask both first: this also finds a mismatched part before either
	// part has taken anything.
	dry := c
	dry.DryRun = true
	var rp, rs Result
	if err := refDecide(cs.Primary, sp, dry, &rp); err != nil {
		return fmt.Errorf("strategies: composite: primary: %w", err)
	}
	if err := refDecide(cs.Secondary, ss, dry, &rs); err != nil {
		return fmt.Errorf("strategies: composite: secondary: %w", err)
	}
	switch {
	case c.Record || rp.Allowed && rs.Allowed:
		if c.N > 0 && !c.DryRun {
			// The same calls on the same states: they cannot fail now.
			refDecide(cs.Primary, sp, c, &rp)
			refDecide(cs.Secondary, ss, c, &rs)
		}
	case c.N > 0:
		// Denied: the part that would have allowed takes nothing, and
		// reports its state as it is.
		peek := Call{Now: c.Now, DryRun: true}
		if rp.Allowed {
			refDecide(cs.Primary, sp, peek, &rp)
		}
		if rs.Allowed {
			refDecide(cs.Secondary, ss, peek, &rs)
		}
	}
	refMerge(res, &rp, &rs)
	return nil
}

func refMerge(r, a, b *Result) {
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

func refFixedWindowDecide(f *FixedWindow, st State, c Call, res *Result) error {
	s, ok := st.(*fixedWindowState)
	if !ok {
		return wrongState(kindFixedWindow, st)
	}
	laid := refLaidOut(s, f.Quotas)
	fits := true
	for i, q := range f.Quotas {
		if refSatAdd(refUsed(q, refGet(s, i, q.Name, laid), c.Now), c.N) > q.Limit {
			fits = false
		}
	}
	taken := (fits || c.Record) && c.N > 0
	if taken && !c.DryRun && !laid {
		refConform(s, f.Quotas)
		laid = true
	}
	need := c.N
	if fits || c.Record {
		need = 0
	}
	if len(f.Quotas) == 0 {
		*res = Result{} // not a valid configuration, but decide sets all of *res
	}
	for i, q := range f.Quotas {
		w := refGet(s, i, q.Name, laid)
		if taken {
			w = refTake(q, w, c.Now, c.N)
			if !c.DryRun {
				s.windows(len(*s.names))[i] = w.window
			}
		}
		if i == 0 {
			refResult(q, w, c.Now, need, res)
		} else {
			var r Result
			refResult(q, w, c.Now, need, &r)
			refMerge(res, res, &r)
		}
	}
	return nil
}

func refUsed(q Quota, w windowCount, now int64) int64 {
	if w.count > 0 && now < refEnd(q, w) {
		return w.count
	}
	return 0
}

func refEnd(q Quota, w windowCount) int64 { return refSatAdd(w.start, int64(q.Window)) }

func refTake(q Quota, w windowCount, now, n int64) windowCount {
	if refUsed(q, w, now) == 0 {
		w.start, w.count = now, 0
	}
	w.count = refSatAdd(w.count, n)
	return w
}

func refResult(q Quota, w windowCount, now, need int64, r *Result) {
	used := refUsed(q, w, now)
	*r = Result{
		Allowed:   refSatAdd(used, need) <= q.Limit,
		Limit:     q.Limit,
		Remaining: nonNeg(q.Limit - used),
	}
	if used > 0 {
		r.ResetAfter = refUntil(refEnd(q, w), now)
	}
	switch {
	case r.Allowed:
	case need > q.Limit:
		r.RetryAfter = -1
	default: // the window must end: a new one holds any need <= Limit
		r.RetryAfter = r.ResetAfter
	}
}

// windowCount is the window of one quota under its name, as the reference
// reads a state.
type windowCount struct {
	name string
	window
}

// refWindows returns the windows of s under their names.
func refWindows(s *fixedWindowState) []windowCount {
	names := *s.names
	ws := s.w[:min(len(names), len(s.w))]
	if len(names) > len(s.w) {
		ws = *s.more
	}
	wcs := make([]windowCount, len(names))
	for i := range names {
		wcs[i] = windowCount{names[i], ws[i]}
	}
	return wcs
}

func refLaidOut(s *fixedWindowState, qs []Quota) bool {
	wcs := refWindows(s)
	if len(wcs) != len(qs) {
		return false
	}
	for i, q := range qs {
		if wcs[i].name != q.Name {
			return false
		}
	}
	return true
}

func refGet(s *fixedWindowState, i int, name string, laid bool) windowCount {
	wcs := refWindows(s)
	if laid || i < len(wcs) && wcs[i].name == name {
		return wcs[i]
	}
	for _, w := range wcs {
		if w.name == name {
			return w
		}
	}
	return windowCount{name: name}
}

// refConform lays s out like qs, with names of its own and its windows in
// new storage when they are more than two.
func refConform(s *fixedWindowState, qs []Quota) {
	names := make(fixedNames, len(qs))
	ws := make([]window, len(qs))
	for i, q := range qs {
		w := refGet(s, i, q.Name, false)
		names[i], ws[i] = w.name, w.window
	}
	*s = fixedWindowState{names: &names}
	if len(ws) > len(s.w) {
		s.more = &ws
	} else {
		copy(s.w[:], ws)
	}
}

func refSatAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

func refSatSub(a, b int64) int64 {
	if b < 0 && a > math.MaxInt64+b {
		return math.MaxInt64
	}
	if b > 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

func refBucketDecide(b *bucket, st State, c Call, res *Result) error {
	s := b.stateOf(st) // unchanged: the check of the state
	if s == nil {
		return b.wrongState(st)
	}
	refBucketApply(b, s, c, res)
	return nil
}

func refBucketApply(b *bucket, s *bucketState, c Call, res *Result) {
	n := float64(c.N)
	v := b.at(*s, c.Now)
	allowed := b.fits(v.amount, n)

	// base is the state as stored after the call (as if made, for a
	// DryRun): the durations are measured on it exactly as later calls
	// will see it.
	base := *s
	if allowed || c.Record {
		v.amount = refClampAmount(v.amount - b.sign*n)
		if c.N > 0 {
			base = v
			if !c.DryRun {
				*s = v
			}
		}
		if c.Record {
			allowed = b.fits(v.amount, 0) // Record reports what Peek would say
			n = 0
		}
	}

	*res = Result{Allowed: allowed, Limit: b.limit, Remaining: floorCount(b.room(v.amount))}
	if short := b.inUse(v.amount); short > 0 {
		res.ResetAfter = refWait(b, base, c.Now, short, -1)
	}
	if !allowed {
		if !c.Record && c.N > b.limit {
			res.RetryAfter = -1
		} else {
			res.RetryAfter = refWait(b, base, c.Now, n-b.room(v.amount), n)
		}
	}
}

func refClampAmount(x float64) float64 { return min(max(x, -maxAmount), maxAmount) }

func refWait(b *bucket, base bucketState, now int64, short, need float64) time.Duration {
	x := short * b.perUnit // the wait in exact arithmetic, in nanoseconds
	if !(x < 0x1p62) {
		return b.search(base, now, math.MaxInt64/2, need)
	}
	up := math.Ceil(x)
	est := refSatAdd(nonNeg(refSatSub(base.last, now)), max(int64(up), 1))
	mag := max(math.Abs(base.amount), b.bound, need) + short
	if x-up+1 > mag*b.slack && b.reached(base, now, est, need) {
		return time.Duration(est)
	}
	return b.search(base, now, est, need)
}

func refUntil(t, now int64) time.Duration { return time.Duration(max(refSatSub(t, now), 1)) }
