package rollingwindow

import (
	"fmt"
	"iter"
	"math"
	"time"
)

// State is the usage of one key over a rolling window: its live buckets,
// oldest first, in a sparse ring (see the package doc). Make one with New
// or Rebuild; the zero State has no Config and counts nothing.
//
// Every method that takes an instant first expires the buckets that no
// longer count at that instant; nothing else changes a State but Add, AddAt,
// SubAt, Append, Reconfigure and Reset.
//
// Expiring moves only the State's own fields (head, count, base), never the
// ring's contents: only Add, AddAt, SubAt, Append and Reconfigure write the
// ring.
// So a shallow copy (c := *s) may be queried, expired included, without
// changing s; strategies.RollingWindow relies on it for calls that must
// change nothing. A copy shares s's ring, even the one slot that s holds in
// itself (see one below); Set copies a State without that.
//
// A State is 64 bytes, one of Go's size classes, its ring of one bucket
// included: most keys of a large population (the end users of an API key,
// most seen once) hold a single bucket.
type State struct {
	ring   []slot  // len is 0 or a power of two; a ring of 1 is one[:]
	bucket int64   // Config.Bucket
	base   uint64  // the cumulative count of the buckets popped, 0 when empty
	one    [1]slot // the ring while it has one slot: no allocation of its own
	span   uint16  // Config.Buckets() - 1: Window is bucket * (span + 1)
	head   uint16  // the ring index of the oldest bucket: < len(ring) <= MaxBuckets
	count  uint32  // live buckets, at ring[head], ring[(head+1)&mask], ...
}

// slot is one bucket: its start and the cumulative count c_i of every
// bucket up to and including it, modulo 2^64.
type slot struct {
	start int64
	cum   uint64
}

// minRing is the ring's first size: one bucket, held in the State itself
// (one). A key that uses more buckets doubles its ring to 2 and 4 as it
// goes, two allocations of 32 and 64 bytes.
const minRing = 1

// New returns an empty State for c, or c's error from Validate.
func New(c Config) (*State, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s := new(State)
	s.setConfig(c)
	return s, nil
}

// Config returns the configuration of s.
func (s *State) Config() Config {
	return Config{Window: time.Duration(s.window()), Bucket: time.Duration(s.bucket)}
}

// setConfig makes c, valid, the configuration of s.
func (s *State) setConfig(c Config) {
	s.bucket, s.span = int64(c.Bucket), uint16(c.Buckets()-1)
}

// window returns Config.Window, which fits in an int64: 0 for the zero State.
func (s *State) window() int64 { return s.bucket * (int64(s.span) + 1) }

// Set makes s a copy of w: *s = *w, except that a ring of one slot, which
// w holds in itself, is copied to s's own, so that s refers to nothing of
// w. A larger ring is shared, as by a shallow copy: w must not be changed
// afterwards.
func (s *State) Set(w *State) {
	*s = *w
	if len(s.ring) == 1 {
		s.ring = s.one[:]
	}
}

// Len returns the number of buckets s holds, as of the last instant it
// was given: the buckets All yields.
func (s *State) Len() int { return int(s.count) }

// Reset empties s, keeping its ring for reuse.
func (s *State) Reset() { s.head, s.count, s.base = 0, 0, 0 }

// at returns the i-th bucket from the oldest, 0 <= i < s.Len().
func (s *State) at(i int) *slot { return &s.ring[(int(s.head)+i)&(len(s.ring)-1)] }

// top returns the cumulative count of the newest bucket: base when empty.
func (s *State) top() uint64 {
	if s.count == 0 {
		return s.base
	}
	return s.at(int(s.Len()) - 1).cum
}

// used returns the usage in the buckets held.
func (s *State) used() int64 { return int64(s.top() - s.base) }

// room returns what of n >= 0 can be added without taking the used total
// past math.MaxInt64: 0 for n <= 0.
func (s *State) room(n int64) int64 { return min(max(n, 0), math.MaxInt64-s.used()) }

// older reports whether a is Window or more before b: a <= b - Window,
// computed without overflow. A bucket that starts at a is expired at b.
func (s *State) older(a, b int64) bool {
	return a <= b && uint64(b)-uint64(a) >= uint64(s.window())
}

// until returns the time from now until the bucket starting at start, live
// at now, stops counting: start + Window - now, at least 1ns, saturated at
// math.MaxInt64.
func (s *State) until(start, now int64) time.Duration {
	w := uint64(s.window())
	if now >= start {
		return time.Duration(w - (uint64(now) - uint64(start))) // live: now - start < w
	}
	d := uint64(start) - uint64(now) // a clock gone back before start
	if d > math.MaxInt64-w {
		return math.MaxInt64
	}
	return time.Duration(d + w)
}

// Expire drops the buckets that no longer count at now: those that start
// at or before now - Window. An instant earlier than one s has seen drops
// nothing that it had kept.
func (s *State) Expire(now int64) {
	if s.count == 0 || !s.older(s.at(0).start, now) {
		return
	}
	// The starts increase, so the expired buckets are a prefix: find the
	// first live one, 1 <= lo <= count, by a galloping search, probing 1,
	// 2, 4, ... then bisecting the last gap: O(1 + log j) for j expired.
	lo, hi := 1, s.Len()
	for p := 1; p < s.Len(); p *= 2 {
		if !s.older(s.at(p).start, now) {
			hi = p
			break
		}
		lo = p + 1
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.older(s.at(mid).start, now) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == s.Len() {
		s.Reset()
		return
	}
	s.base = s.at(lo - 1).cum
	s.head = uint16((int(s.head) + lo) & (len(s.ring) - 1))
	s.count -= uint32(lo)
}

// Used returns the usage that counts at now.
func (s *State) Used(now int64) int64 {
	s.Expire(now)
	return s.used()
}

// Add records n units of usage at now, in now's bucket: or, when now's
// bucket is older than the newest bucket (a clock gone backwards), in the
// newest bucket. An n <= 0 adds nothing; the part of n that would take the
// used total past math.MaxInt64 is not counted.
func (s *State) Add(now, n int64) {
	s.Expire(now)
	if n = s.room(n); n == 0 {
		return
	}
	start := s.Config().BucketStart(now)
	if s.count > 0 {
		if newest := s.at(s.Len() - 1); start <= newest.start {
			newest.cum += uint64(n)
			return
		}
	}
	s.push(start, s.top()+uint64(n))
}

// SubAt removes up to n units of usage from the bucket that holds the
// instant at (the bucket starting at floor(at/Bucket)*Bucket), as of now,
// and returns how much it removed: min(n, the bucket's count). It serves a
// key store that reserves usage when a request starts and, when the request
// ends, charges the real count in place of the reservation: it gives back
// what was reserved and not used, in the bucket the reservation went to.
//
// It removes nothing, and returns 0, for an n <= 0, or when that bucket is
// not held at now: expired (its usage no longer counts, so there is
// nothing left to give back), never used, or later than the newest bucket.
// It never takes a bucket below zero and never touches another bucket:
// what is left of the usage expires when it would have.
//
// Add puts usage whose bucket is older than the newest (a clock gone
// backwards) into the newest bucket, which SubAt does not look in for such
// an at: there it finds at's own bucket, if held, or nothing. It then
// gives back from the wrong bucket or not at all, which leaves usage
// counting longer than it should, never shorter.
//
// The counts are cumulative, c_i = n_1 + ... + n_i, so taking k from
// bucket i is subtracting k from c_i and from every later c_j: each later
// n_j = c_j - c_(j-1) is unchanged, n_i drops by k, and so does used =
// c_last - base. A bucket left at zero is dropped, the newer buckets
// shifting one slot toward the oldest end: a State holds only buckets with
// usage, as All promises and Append requires (the encoding round-trips),
// and ResetAfter, which reads the newest bucket, is 0 exactly when nothing
// counts. Dropping the last bucket leaves a fresh State, as Expire does.
//
// It costs O(1) for the newest bucket, where the reservation of a request
// in flight usually is, and O(buckets) at worst, like AddAt.
func (s *State) SubAt(now, at, n int64) int64 {
	s.Expire(now)
	if n <= 0 || s.count == 0 {
		return 0
	}
	start := s.Config().BucketStart(at)
	if start > s.at(s.Len()-1).start {
		return 0 // later than the newest: never used
	}
	i := s.search(start)
	if s.at(i).start != start {
		return 0 // expired, or never used
	}
	prev := s.base
	if i > 0 {
		prev = s.at(i - 1).cum
	}
	k := min(n, int64(s.at(i).cum-prev)) // n_i <= used <= math.MaxInt64
	for j := i; j < s.Len(); j++ {
		s.at(j).cum -= uint64(k)
	}
	if s.at(i).cum != prev {
		return k
	}
	// Emptied: drop it. Its cumulative count is c_(i-1), so the newer
	// buckets' counts stay as they are.
	for j := i + 1; j < s.Len(); j++ {
		*s.at(j - 1) = *s.at(j)
	}
	if s.count--; s.count == 0 {
		s.Reset()
	}
	return k
}

// push appends a bucket newer than every bucket held.
func (s *State) push(start int64, cum uint64) {
	if s.Len() == len(s.ring) {
		s.grow()
	}
	*s.at(s.Len()) = slot{start, cum}
	s.count++
}

// grow doubles the ring, from minRing slots up to ringLimit. A State whose
// invariant was broken would keep doubling rather than lose usage, up to
// MaxBuckets slots, the most that head (16 bits) indexes: past that it
// panics rather than count wrong.
func (s *State) grow() {
	n := min(max(2*len(s.ring), minRing), s.ringLimit())
	if n <= len(s.ring) {
		n = 2 * len(s.ring)
	}
	if n > MaxBuckets {
		panic(fmt.Sprintf("rollingwindow: %d buckets held, more than a window of %d holds", s.count, s.span+1))
	}
	s.resize(n)
}

// ringLimit returns the largest ring: the power of two at or above
// Window/Bucket, which holds every bucket of a window.
func (s *State) ringLimit() int {
	limit := 1
	for limit < int(s.span)+1 {
		limit <<= 1
	}
	return limit
}

// resize moves the buckets into a new ring of n >= s.Len() slots, a power
// of two, the oldest first.
func (s *State) resize(n int) {
	if n == 1 { // held in s itself: s.Len() <= 1
		if s.count == 1 {
			s.one[0] = *s.at(0)
		}
		s.ring, s.head = s.one[:], 0
		return
	}
	ring := make([]slot, n)
	for i := range s.Len() {
		ring[i] = *s.at(i)
	}
	s.ring, s.head = ring, 0
}

// RetryAfter returns the time from now until a call of n fits: until
// enough buckets have expired for used + n <= limit, exactly to the
// nanosecond. It returns 0 if the call fits now (used + n == limit fits),
// and -1 if it never can, for n > limit. An n < 0 counts as 0.
func (s *State) RetryAfter(now, limit, n int64) time.Duration {
	s.Expire(now)
	n = max(n, 0)
	if n > limit {
		return -1
	}
	used := s.used()
	if used <= limit-n {
		return 0
	}
	// The oldest buckets must go until they have freed need; the bucket
	// whose cumulative count reaches it is the last to go, and when it
	// goes, at its start + Window, every newer bucket still counts. The
	// newest reaches it (need <= used, as n <= limit), so lo ends on one.
	need := uint64(used - (limit - n))
	lo, hi := 0, s.Len()-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.at(mid).cum-s.base >= need {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return s.until(s.at(lo).start, now)
}

// ResetAfter returns the time from now until every bucket in use has
// expired, when s counts nothing again: 0 if and only if it counts nothing
// at now.
func (s *State) ResetAfter(now int64) time.Duration {
	s.Expire(now)
	if s.count == 0 {
		return 0
	}
	return s.until(s.at(s.Len()-1).start, now)
}

// All yields the buckets of s as (start, n), oldest first: the starts
// strictly increase, each is a multiple of Bucket, and each n is positive.
// It yields what s holds as of the last instant it was given; call Expire
// first to leave out what has expired since. s must not change during the
// iteration.
func (s *State) All() iter.Seq2[int64, int64] {
	return func(yield func(start, n int64) bool) {
		prev := s.base
		for i := range s.Len() {
			b := s.at(i)
			if !yield(b.start, int64(b.cum-prev)) {
				return
			}
			prev = b.cum
		}
	}
}

// Rebuild returns the State of c that holds buckets, a sequence of (start,
// n) oldest first, as All yields them; Append says what it rejects, with an
// error matching ErrCorrupt. Buckets that have expired by the time the
// State is next used are dropped then, like any other.
func Rebuild(c Config, buckets iter.Seq2[int64, int64]) (*State, error) {
	s, err := New(c)
	if err != nil {
		return nil, err
	}
	for start, n := range buckets {
		if err := s.Append(start, n); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Append adds a bucket newer than every bucket of s, as Rebuild does. It
// rejects with an error matching ErrCorrupt, and leaves s unchanged, a
// bucket that no State could hold: a start that is not a multiple of
// Bucket or not after the newest bucket's, one Window or more after the
// oldest bucket's (so s never holds more than Window/Bucket buckets), an n
// that is not positive, or one that takes the total past math.MaxInt64.
func (s *State) Append(start, n int64) error {
	if err := s.Config().Validate(); err != nil {
		return err
	}
	switch {
	case n <= 0:
		return s.corrupt(start, n, "count is not positive")
	case s.bucket == 0 || start%s.bucket != 0:
		return s.corrupt(start, n, fmt.Sprintf("start is not a multiple of Bucket %v", time.Duration(s.bucket)))
	case s.count > 0 && start <= s.at(s.Len()-1).start:
		return s.corrupt(start, n, fmt.Sprintf("start is not after the previous bucket's, %d", s.at(s.Len()-1).start))
	case s.count > 0 && s.older(s.at(0).start, start):
		return s.corrupt(start, n, fmt.Sprintf("start is Window %v or more after the oldest bucket's, %d", time.Duration(s.window()), s.at(0).start))
	case n > math.MaxInt64-s.used():
		return s.corrupt(start, n, "the total passes math.MaxInt64")
	}
	s.push(start, s.top()+uint64(n))
	return nil
}

func (s *State) corrupt(start, n int64, why string) error {
	return fmt.Errorf("rollingwindow: bucket %d (start %d, n %d): %s: %w", s.Len(), start, n, why, ErrCorrupt)
}
