package strategies

import (
	"fmt"
	"math"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/rollingwindow"
)

// RollingWindow counts usage over a rolling window cut into time buckets:
// "100000 tokens per 5 hours, in 5-minute buckets". Package rollingwindow
// does all the bucket arithmetic; its package doc has the details.
//
// Usage recorded at instant t lands in the bucket that starts at
// floor(t/Bucket)*Bucket (aligned to the Unix epoch), and a bucket counts
// while bucketStart > now - Window: it stops counting at exactly
// bucketStart + Window: usage counts for more than Window - Bucket, and at
// most Window, after it was recorded. For a call of n:
//
//	Allowed    used + n <= Limit (Peek: used <= Limit, so a key exactly
//	           at its limit is still allowed)
//	Remaining  max(0, Limit - used) after the call
//	ResetAfter until every bucket in use has expired; 0 if none is
//	RetryAfter until enough of the oldest buckets have expired for
//	           used + n <= Limit, exact to the nanosecond; -1 when n > Limit
//
// With Record, used may exceed Limit until enough buckets have expired. A
// clock gone backwards expires nothing early, and usage recorded then goes
// to the newest bucket, so it expires no earlier than what was recorded
// before it.
//
// A state remembers the Window and Bucket it was written under. A changed
// Limit applies to the usage as it is; a changed Window or Bucket moves the
// usage to the new buckets (rollingwindow.State.Reconfigure): each old
// bucket's usage goes to the new bucket that starts at or after it, so
// nothing moves earlier, and nothing expires earlier than the new Window
// says.
type RollingWindow struct {
	Limit  int64
	Window time.Duration // at most MaxWindow
	Bucket time.Duration // divides Window, into at most rollingwindow.MaxBuckets buckets
}

// kindRollingWindow names rolling window states:
// "72|window|bucket|start|count|gap|count|...".
var kindRollingWindow = newKind('7', '2', "rolling window", func() Decider { return new(rollingDecider) })

// rollingWindowState holds the buckets of one key, under the Window and
// Bucket that last wrote them (which its encoding keeps).
//
// Calls that take nothing query a copy of win, a shallow one: the ring is
// shared, and the queries (Used, RetryAfter, ResetAfter), which expire
// first, move only the copy's own indices and never write to the ring. So a
// Peek or a denied call leaves the state exactly as it was, expired buckets
// included: only a call that takes something drops them.
type rollingWindowState struct {
	win rollingwindow.State
}

// config returns the shape of rw's window.
func (rw *RollingWindow) config() rollingwindow.Config {
	return rollingwindow.Config{Window: rw.Window, Bucket: rw.Bucket}
}

// Validate implements Strategy.
func (rw RollingWindow) Validate() error {
	if err := checkAtLeastOne(kindRollingWindow, "limit", rw.Limit); err != nil {
		return err
	}
	if err := checkWindow(kindRollingWindow, "window", rw.Window); err != nil {
		return err
	}
	if err := rw.config().Validate(); err != nil { // bucket: positive, divides window, few enough
		return fmt.Errorf("strategies: %v: %w: %w", kindRollingWindow, err, ErrInvalid)
	}
	return nil
}

// Prepare implements Strategy. A rolling window has nothing to compute
// from its configuration ahead of the calls (its rollingwindow.Config is
// its Window and Bucket as they are): its Decider is a copy of it.
func (rw RollingWindow) Prepare() Decider {
	if err := rw.Validate(); err != nil {
		return refused{err}
	}
	empty, _ := rollingwindow.New(rw.config()) // valid: checked above
	return &rollingDecider{rw, *empty}
}

// rollingDecider is a prepared RollingWindow.
type rollingDecider struct {
	RollingWindow
	empty rollingwindow.State // of its configuration, holding nothing (no ring): what a new state copies
}

// NewState implements Decider: nothing counted. It copies rw.empty, one
// allocation, the state's own.
func (rw *rollingDecider) NewState() State {
	return &rollingWindowState{win: rw.empty}
}

// Decide implements Decider.
func (rw *rollingDecider) Decide(st State, c Call) (res Result, err error) {
	s, ok := st.(*rollingWindowState)
	if !ok {
		return Result{}, wrongState(kindRollingWindow, st)
	}
	w, err := rw.window(s)
	if err != nil {
		return Result{}, err
	}
	v := *w // a shallow copy to query: see rollingWindowState
	used := v.Used(c.Now)
	allowed := used <= sat.Sub(rw.Limit, c.N)
	switch {
	case c.N <= 0 || !allowed && !c.Record: // takes nothing
		res = Result{
			Allowed:    allowed,
			Limit:      rw.Limit,
			Remaining:  nonNeg(rw.Limit - used),
			ResetAfter: v.ResetAfter(c.Now),
		}
		if !allowed {
			res.RetryAfter = v.RetryAfter(c.Now, rw.Limit, c.N)
		}
	case c.DryRun:
		rw.dryRun(&v, c, used, &res)
	default:
		if w != &s.win {
			s.win.Set(w) // the configuration changed: the moved copy is the state now
		}
		s.win.Add(c.Now, c.N)
		used = s.win.Used(c.Now)
		res = Result{
			Allowed:    used <= rw.Limit,
			Limit:      rw.Limit,
			Remaining:  nonNeg(rw.Limit - used),
			ResetAfter: s.win.ResetAfter(c.Now),
		}
		if !res.Allowed { // only after a Record: Peek's RetryAfter
			res.RetryAfter = s.win.RetryAfter(c.Now, rw.Limit, 0)
		}
	}
	return res, nil
}

// dryRun writes to *res the Result of a call c that would take its N > 0
// from v (allowed, or a Record), without taking it: what Add(c.Now, c.N)
// then the queries would report, v holding used at c.Now.
func (rw *rollingDecider) dryRun(v *rollingwindow.State, c Call, used int64, res *Result) {
	k := min(c.N, math.MaxInt64-used) // what Add would count
	after := used + k
	*res = Result{
		Allowed:    after <= rw.Limit,
		Limit:      rw.Limit,
		Remaining:  nonNeg(rw.Limit - after),
		ResetAfter: v.ResetAfter(c.Now),
	}
	if k > 0 {
		// Add puts k in now's bucket, or in the newest bucket when that
		// is newer (a clock gone backwards), which expires later: the
		// state resets when the later of the two expires.
		start := v.Config().BucketStart(c.Now)
		res.ResetAfter = max(res.ResetAfter, rw.Window-time.Duration(c.Now-start))
	}
	switch {
	case res.Allowed:
	case k <= rw.Limit:
		// Peek after the Record waits until used + k - Limit has expired,
		// which is at most used: the same oldest buckets as a call of k
		// waits for now, their counts unchanged by the k added newest.
		res.RetryAfter = v.RetryAfter(c.Now, rw.Limit, k)
	default:
		// More than used must expire: the k itself, in the newest bucket.
		res.RetryAfter = res.ResetAfter
	}
}

// Clamp implements Decider: buckets that start after now's bucket, which only
// a clock that ran ahead and came back leaves behind, and which would count
// until the clock got past them again. Their usage moves to now's bucket
// (of the Window and Bucket the state was written under): none of it is
// lost, and all of it expires within one Window. It allocates, once, for
// the rare state it changes.
func (rw *rollingDecider) Clamp(st State, now int64) bool {
	s, ok := st.(*rollingWindowState)
	if !ok || s.win.Len() == 0 {
		return false
	}
	cfg := s.win.Config()
	at := cfg.BucketStart(now)
	var newest int64
	for start := range s.win.All() {
		newest = start
	}
	if newest <= at {
		return false
	}
	s.win.Expire(now) // drops nothing after now; what it drops no longer counts
	var ahead int64
	kept := func(yield func(start, n int64) bool) {
		for start, n := range s.win.All() {
			if start >= at {
				ahead += n // cannot overflow: the total fits in an int64
				continue
			}
			if !yield(start, n) {
				return
			}
		}
		yield(at, ahead)
	}
	w, err := rollingwindow.Rebuild(cfg, kept)
	if err != nil { // cannot happen: the buckets kept are s's own, older than at
		s.win.Reset()
		return true
	}
	s.win.Set(w)
	return true
}

// Horizon implements Decider: one Window.
func (rw *rollingDecider) Horizon() time.Duration { return rw.Window }

// window returns the buckets to decide on: s's own, or, when the Window
// or Bucket changed since s was written, a copy of them moved to the
// configuration (rollingwindow.State.Reconfigure), which becomes the state
// only when a call takes something. An invalid configuration is an error.
func (rw *RollingWindow) window(s *rollingWindowState) (*rollingwindow.State, error) {
	if s.win.Config() == rw.config() {
		return &s.win, nil // valid: the state was made under it
	}
	return rw.moved(s)
}

// moved returns a copy of the buckets of s moved to rw's configuration.
// It allocates, once per state after a change of the configuration.
func (rw *RollingWindow) moved(s *rollingWindowState) (*rollingwindow.State, error) {
	if err := rw.Validate(); err != nil {
		return nil, err
	}
	if s.win.Len() == 0 {
		return rollingwindow.New(rw.config())
	}
	w, err := rollingwindow.Rebuild(s.win.Config(), s.win.All())
	if err == nil {
		err = w.Reconfigure(rw.config())
	}
	if err != nil { // cannot happen: s holds what a State held, and rw is valid
		return nil, fmt.Errorf("strategies: %v: moving the buckets to %v in %v buckets: %w", kindRollingWindow, rw.Window, rw.Bucket, err)
	}
	return w, nil
}

// Used returns the usage that st, a state of a RollingWindow, counts at
// now: expired buckets left out, and under rw's Window and Bucket if st
// was written under others. It changes nothing. It returns an error
// matching ErrMismatch for a state of another strategy, and rw's Validate
// error when rw is invalid and its Window or Bucket differ from st's.
func (rw RollingWindow) Used(st State, now int64) (int64, error) {
	s, ok := st.(*rollingWindowState)
	if !ok {
		return 0, wrongState(kindRollingWindow, st)
	}
	w, err := rw.window(s)
	if err != nil {
		return 0, err
	}
	v := *w // a shallow copy to query: see rollingWindowState
	return v.Used(now), nil
}

// Merge adds n units of usage to st, a state of a RollingWindow, at the
// instant at, which may lie in the past (rollingwindow.State.AddAt): the
// migration of legacy usage puts all the tokens of a legacy window into
// the bucket that holds its window start, so that they expire when that
// window would have, to bucket precision. Usage whose bucket has expired
// at now adds nothing; an at later than now counts as now. A state written
// under another Window or Bucket is moved to rw's first, as Decide does.
//
// n < 0 is an error matching ErrInvalid; n = 0 changes nothing. A state of
// another strategy is an error matching ErrMismatch.
func (rw RollingWindow) Merge(st State, now, at, n int64) error {
	s, ok := st.(*rollingWindowState)
	if !ok {
		return wrongState(kindRollingWindow, st)
	}
	if n < 0 {
		return invalid(kindRollingWindow, "merge: n must not be negative, got %d", n)
	}
	w, err := rw.window(s)
	if err != nil || n == 0 {
		return err
	}
	if w != &s.win {
		s.win.Set(w)
	}
	s.win.AddAt(now, at, n)
	return nil
}

// Refund removes up to n units of usage from st, a state of a RollingWindow,
// from the bucket that holds the instant at, never below zero, and returns
// what it removed (rollingwindow.State.SubAt): at most n, and at most what
// that bucket holds at now. It is the other half of a reservation: a key
// store that reserves a request's usage when the request starts (Decide at
// at) and learns its real usage only when it ends gives back the part it
// did not use, so that what counts is the real usage, in the bucket the
// reservation went to, expiring when it would have. A refund of everything
// reserved leaves the key as if nothing had been reserved.
//
// Refund cannot tell a reservation from other usage in the same bucket, so
// the caller gives back only what it took: nothing for a denied call,
// which took nothing, and no more than was counted (the part of a Record
// that would take the total past math.MaxInt64 is not).
//
// A bucket that has expired at now, that was never used, or that is later
// than the newest gives back nothing: the reservation has stopped counting,
// or was never recorded there. An at whose bucket was older than the
// newest when the reservation was made (a clock gone backwards, when Add
// records in the newest bucket) finds its own bucket, not the newest: it
// gives back from that one, if held, or nothing, and usage then counts
// longer than it should, never shorter. A state written under another
// Window or Bucket is moved to rw's first, as Decide does, and at's bucket
// is one of rw's.
//
// n < 0 is an error matching ErrInvalid; n = 0 changes nothing. A state of
// another strategy is an error matching ErrMismatch.
func (rw RollingWindow) Refund(st State, now, at, n int64) (int64, error) {
	s, ok := st.(*rollingWindowState)
	if !ok {
		return 0, wrongState(kindRollingWindow, st)
	}
	if n < 0 {
		return 0, invalid(kindRollingWindow, "refund: n must not be negative, got %d", n)
	}
	w, err := rw.window(s)
	if err != nil || n == 0 {
		return 0, err
	}
	if w != &s.win {
		s.win.Set(w)
	}
	return s.win.SubAt(now, at, n), nil
}

// Decode implements Decider. It reads
// "72|window|bucket|start|count|gap|count|...": the Window and Bucket the
// state was written under, then its buckets oldest first, the first by its
// start and each later one by its gap, in buckets, after the previous one.
// rollingwindow.State.Append validates them.
func (rw *rollingDecider) Decode(b []byte) (State, error) {
	f, r, err := openState(b, kindRollingWindow)
	if err != nil {
		return nil, err
	}
	if f != formatCurrent {
		return nil, corrupt(kindRollingWindow, "no legacy encoding exists, got %s", quote(b[:min(len(b), 2)]))
	}
	cfg := rollingwindow.Config{
		Window: time.Duration(r.int("window", 1, int64(MaxWindow))),
		Bucket: time.Duration(r.int("bucket", 1, int64(MaxWindow))),
	}
	if r.err != nil {
		return nil, r.err
	}
	s := &rollingWindowState{win: rw.empty}
	if cfg != rw.empty.Config() { // written under another configuration, or rw is no prepared one
		w, err := rollingwindow.New(cfg)
		if err != nil {
			return nil, corrupt(kindRollingWindow, "fields 2-3 (window, bucket): %v", err)
		}
		s.win = *w // empty: no ring to share
	}
	bucket := uint64(cfg.Bucket)
	var prev int64
	for i := 0; r.more && r.err == nil; i++ {
		start := prev
		if i == 0 {
			start = r.int("start", math.MinInt64, math.MaxInt64)
		} else {
			gap := uint64(r.int("gap", 1, math.MaxInt64))
			if r.err == nil && gap > (math.MaxInt64-uint64(prev))/bucket {
				return nil, corrupt(kindRollingWindow, "field %d (gap): %d buckets after %d passes the int64 range", r.field, gap, prev)
			}
			start = int64(uint64(prev) + gap*bucket)
		}
		n := r.int("count", 1, math.MaxInt64)
		if r.err != nil {
			break
		}
		if err := s.win.Append(start, n); err != nil {
			return nil, corrupt(kindRollingWindow, "field %d (count): %v", r.field, err)
		}
		prev = start
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return s, nil
}

// AppendEncode implements State: "72|window|bucket|start|count|gap|count|...".
func (s *rollingWindowState) AppendEncode(dst []byte) []byte {
	cfg := s.win.Config()
	dst = appendInt(kindRollingWindow.appendHeader(dst), int64(cfg.Window))
	dst = appendInt(dst, int64(cfg.Bucket))
	first, prev := true, int64(0)
	for start, n := range s.win.All() {
		if first {
			dst = appendInt(dst, start)
		} else {
			dst = appendInt(dst, int64((uint64(start)-uint64(prev))/uint64(cfg.Bucket)))
		}
		dst = appendInt(dst, n)
		first, prev = false, start
	}
	return dst
}

func (s *rollingWindowState) kind() *kind { return kindRollingWindow }

func (s *rollingWindowState) describe() Description {
	cfg := s.win.Config()
	buckets, total := []map[string]any{}, int64(0)
	for start, n := range s.win.All() {
		buckets = append(buckets, map[string]any{"start": instant(start), "count": n})
		total = sat.Add(total, n)
	}
	return describeAs(kindRollingWindow, map[string]any{
		"window": cfg.Window, "bucket": cfg.Bucket, "total": total, "buckets": buckets,
	})
}
