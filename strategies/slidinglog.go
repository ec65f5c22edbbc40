package strategies

import (
	"math"
	"slices"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// SlidingLog is the exact sliding window: it remembers when each unit was
// taken, and a unit counts for exactly Window after the call that took it.
// SlidingWindow approximates the same limit with two counters; SlidingLog
// pays for exactness with memory: one entry per call that took something
// in the last Window, at most Limit of them.
//
// The state is the log of the calls still counting, oldest first, each an
// instant and the units it took. For a call of n at now, where used is
// the sum of the entries whose instant t has now < t + Window:
//
//	Allowed    used + n <= Limit
//	Remaining  Limit - used after the call, never negative
//	ResetAfter until the newest entry expires: t + Window - now
//	RetryAfter until enough of the oldest entries have expired for
//	           used + n <= Limit; -1 when n > Limit
//
// With Record, used may exceed Limit until enough has expired. A clock gone
// backwards expires nothing early, and a call then is logged at the
// newest instant, so the log stays in order and nothing expires earlier than
// it should. The log never holds more than Limit entries: a Record beyond
// that is merged into the newest entry, which then expires no earlier than
// either would have.
//
// A changed Limit applies to the log as it is; a changed Window applies to
// every entry's expiry, as the log stores only the instants.
type SlidingLog struct {
	Limit  int64
	Window time.Duration // at most MaxWindow
}

// kindSlidingLog names sliding log states:
// "81|start|count|gap|count|...".
var kindSlidingLog = newKind('8', '1', "sliding log", func() Decider { return new(slidingLogDecider) })

// logEntry is one call in a sliding log: its instant, and what it took.
type logEntry struct {
	at, n int64
}

// slidingLogState is the log, oldest first, instants strictly increasing.
type slidingLogState struct {
	log []logEntry
}

// Validate implements Strategy.
func (sl SlidingLog) Validate() error {
	if err := checkAtLeastOne(kindSlidingLog, "limit", sl.Limit); err != nil {
		return err
	}
	return checkWindow(kindSlidingLog, "window", sl.Window)
}

// Prepare implements Strategy. A sliding log has nothing to compute from
// its configuration ahead of the calls: its Decider is a copy of it.
func (sl SlidingLog) Prepare() Decider {
	if err := sl.Validate(); err != nil {
		return refused{err}
	}
	return &slidingLogDecider{sl}
}

// slidingLogDecider is a prepared SlidingLog.
type slidingLogDecider struct{ SlidingLog }

// NewState implements Decider: nothing logged.
func (sl *slidingLogDecider) NewState() State { return new(slidingLogState) }

// live returns the entries of s that count at now: those whose instant
// plus Window lies after now.
func (sl *slidingLogDecider) live(s *slidingLogState, now int64) []logEntry {
	for i, e := range s.log {
		if now < sat.Add(e.at, int64(sl.Window)) {
			return s.log[i:]
		}
	}
	return nil
}

// Decide implements Decider.
func (sl *slidingLogDecider) Decide(st State, c Call) (Result, error) {
	s, ok := st.(*slidingLogState)
	if !ok {
		return Result{}, wrongState(kindSlidingLog, st)
	}
	log := sl.live(s, c.Now)
	used := sum(log)
	allowed := sat.Add(used, c.N) <= sl.Limit
	need := c.N
	newest := int64(math.MinInt64) // the newest entry's instant, once the call is logged
	if len(log) > 0 {
		newest = log[len(log)-1].at
	}
	if allowed || c.Record {
		need = 0
		if c.N > 0 {
			if c.DryRun {
				if c.Record && sat.Add(used, c.N) > sl.Limit {
					log = slices.Clone(log) // fitsAfter walks the log as it would be
					log = sl.logged(log, c.Now, c.N)
				}
			} else {
				log = sl.logged(log, c.Now, c.N)
				s.log = log
			}
			newest = max(newest, c.Now)
			used = sat.Add(used, c.N)
		}
		if c.Record {
			allowed = used <= sl.Limit
		}
	}
	r := Result{Allowed: allowed, Limit: sl.Limit, Remaining: nonNeg(sl.Limit - used)}
	if used > 0 {
		r.ResetAfter = until(sat.Add(newest, int64(sl.Window)), c.Now)
	}
	if !allowed {
		if need > sl.Limit {
			r.RetryAfter = -1
		} else {
			r.RetryAfter = sl.fitsAfter(log, need, c.Now)
		}
	}
	return r, nil
}

// logged returns log with n more taken at now: a new entry, or the newest
// one grown, and moved to now if it was before, when now is not after it
// (a clock gone backwards, or the same instant) or when the log already
// holds Limit entries. The units of the newest entry then count until
// Window after the later of the two instants: never shorter than they
// should.
func (sl *slidingLogDecider) logged(log []logEntry, now, n int64) []logEntry {
	if k := len(log); k > 0 && (now <= log[k-1].at || int64(k) >= sl.Limit) {
		log[k-1] = logEntry{max(log[k-1].at, now), sat.Add(log[k-1].n, n)}
		return log
	}
	if len(log) == cap(log) && len(log) > 0 {
		// Move what counts to fresh storage, dropping the expired entries
		// the slice's start still holds on to.
		log = append(make([]logEntry, 0, 2*len(log)), log...)
	}
	return append(log, logEntry{now, n})
}

// fitsAfter returns the time from now until a call of need <= Limit fits
// log, which it does not fit now: until the newest entry that does not fit
// with those after it and need has expired. The log is walked from the
// newest, whose sum stays within Limit, rather than from the oldest, whose
// sum may have saturated.
func (sl *slidingLogDecider) fitsAfter(log []logEntry, need, now int64) time.Duration {
	room := sl.Limit - need
	for j := len(log) - 1; j >= 0; j-- {
		if log[j].n > room {
			return until(sat.Add(log[j].at, int64(sl.Window)), now)
		}
		room -= log[j].n
	}
	return 0 // not reached: the call does not fit
}

// Clamp implements Decider: entries logged after now, which only a clock
// that ran ahead and came back leaves behind, and which would count until
// the clock got past them again, are merged into one entry at now, their
// units kept: they expire within one Window.
func (sl *slidingLogDecider) Clamp(st State, now int64) bool {
	s, ok := st.(*slidingLogState)
	if !ok || len(s.log) == 0 || s.log[len(s.log)-1].at <= now {
		return false
	}
	i := len(s.log)
	var ahead int64
	for i > 0 && s.log[i-1].at >= now {
		i--
		ahead = sat.Add(ahead, s.log[i].n)
	}
	s.log = append(s.log[:i], logEntry{now, ahead})
	return true
}

// Horizon implements Decider: one Window.
func (sl *slidingLogDecider) Horizon() time.Duration { return sl.Window }

// Decode implements Decider. It reads "81|start|count|gap|count|...": the
// oldest entry's instant and units, then each later entry's gap in
// nanoseconds after the one before it (at least 1) and its units (at least
// 1).
func (sl *slidingLogDecider) Decode(b []byte) (State, error) {
	f, r, err := openState(b, kindSlidingLog)
	if err != nil {
		return nil, err
	}
	if f != formatCurrent {
		return nil, corrupt(kindSlidingLog, "no legacy encoding exists, got %s", quote(b[:min(len(b), 2)]))
	}
	s := new(slidingLogState)
	for r.more && r.err == nil {
		var at int64
		if len(s.log) == 0 {
			at = r.int("start", math.MinInt64, math.MaxInt64)
		} else {
			prev := s.log[len(s.log)-1].at
			gap := r.int("gap", 1, math.MaxInt64)
			if r.err == nil && prev > 0 && gap > math.MaxInt64-prev {
				return nil, corrupt(kindSlidingLog, "field %d (gap): %d after %d passes the int64 range", r.field, gap, prev)
			}
			at = prev + gap
		}
		n := r.int("count", 1, math.MaxInt64)
		if r.err == nil {
			s.log = append(s.log, logEntry{at, n})
		}
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return s, nil
}

// AppendEncode implements State: "81|start|count|gap|count|...".
func (s *slidingLogState) AppendEncode(dst []byte) []byte {
	dst = kindSlidingLog.appendHeader(dst)
	var prev int64
	for i, e := range s.log {
		if i == 0 {
			dst = appendInt(dst, e.at)
		} else {
			dst = appendInt(dst, e.at-prev)
		}
		dst = appendInt(dst, e.n)
		prev = e.at
	}
	return dst
}

func (s *slidingLogState) kind() *kind { return kindSlidingLog }

func (s *slidingLogState) describe() Description {
	entries := make([]map[string]any, len(s.log))
	for i, e := range s.log {
		entries[i] = map[string]any{"at": instant(e.at), "count": e.n}
	}
	return describeAs(kindSlidingLog, map[string]any{"entries": entries})
}

// Used returns the units that st, a state of a SlidingLog, counts at now:
// the entries whose instant plus sl's Window lies after now, however many
// that is (after a lower Limit, more than Limit). It changes nothing; a
// state of another strategy is an error matching ErrMismatch.
func (sl SlidingLog) Used(st State, now int64) (int64, error) {
	s, ok := st.(*slidingLogState)
	if !ok {
		return 0, wrongState(kindSlidingLog, st)
	}
	return sum((&slidingLogDecider{sl}).live(s, now)), nil
}

// sum is the units of log's entries.
func sum(log []logEntry) int64 {
	var n int64
	for _, e := range log {
		n = sat.Add(n, e.n)
	}
	return n
}

// Release gives back up to n units of the call logged at the instant at,
// from st, a state of a SlidingLog, and returns what it gave back: at most
// n, and at most what that call still holds at now. It is how a
// concurrency limit built on a sliding log (ratestore's DB.Concurrency:
// each unit a slot, the Window its lease's lifetime) frees a slot before
// its lease ends. The units are taken from the first entry at or after at
// (a call made while the clock was behind the newest entry was logged in
// that entry), never from an earlier one. A call that has expired, at +
// Window <= now, gives back nothing, even when its units were logged in a
// later entry that still counts: taking them from there would free the
// slot of a later call.
//
// n < 0 is an error matching ErrInvalid; n = 0 changes nothing. A state of
// another strategy is an error matching ErrMismatch.
func (sl SlidingLog) Release(st State, now, at, n int64) (int64, error) {
	s, ok := st.(*slidingLogState)
	if !ok {
		return 0, wrongState(kindSlidingLog, st)
	}
	if n < 0 {
		return 0, invalid(kindSlidingLog, "release: n must not be negative, got %d", n)
	}
	if now >= sat.Add(at, int64(sl.Window)) {
		return 0, nil
	}
	for i := range s.log {
		e := &s.log[i]
		if e.at < at {
			continue
		}
		k := min(n, e.n)
		if e.n -= k; e.n == 0 {
			s.log = slices.Delete(s.log, i, i+1)
		}
		return k, nil
	}
	return 0, nil
}
