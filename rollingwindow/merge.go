package rollingwindow

import "math"

// AddAt records n units of usage at the instant t, which may lie before
// the newest bucket: the legacy migration puts all the tokens of a legacy
// usage window into the bucket that holds its window_start, so that they
// expire when that window would have (to bucket precision). The bucket is
// found, or inserted, in time order.
//
// Usage whose bucket has expired at now adds nothing (a legacy window
// already over at migration time). An instant t later than now counts as
// now: usage cannot be recorded in the future. When the clock has gone
// backwards, usage never lands Window or more before the newest bucket
// (which the ring could not hold): it goes to the oldest bucket the ring
// can, newest - Window + Bucket, and so expires later, never earlier, as
// Add does. An n <= 0 adds nothing; the part of n that would take the used
// total past math.MaxInt64 is not counted.
//
// Unlike Add, AddAt costs O(buckets) when the bucket is not the newest: it
// shifts the newer buckets and adds n to their cumulative counts. That is
// fine for the rare path it serves.
func (s *State) AddAt(now, t, n int64) {
	s.Expire(now)
	if n = s.room(n); n == 0 {
		return
	}
	start := s.Config().BucketStart(min(t, now))
	if s.older(start, now) {
		return
	}
	if s.count == 0 || start > s.at(s.Len()-1).start {
		// Every bucket held starts after now - Window >= start - Window.
		s.push(start, s.top()+uint64(n))
		return
	}
	if newest := s.at(s.Len() - 1).start; s.older(start, newest) {
		start = newest - s.window() + s.bucket
	}
	i := s.search(start)
	if s.at(i).start != start {
		s.insert(i, start)
	}
	for ; i < s.Len(); i++ {
		s.at(i).cum += uint64(n)
	}
}

// search returns the index of the first bucket that starts at or after
// start, for a start no later than the newest bucket's.
func (s *State) search(start int64) int {
	lo, hi := 0, s.Len()-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.at(mid).start >= start {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// insert makes room at index i < s.Len() for an empty bucket at start,
// shifting the newer buckets one slot toward the newest end.
func (s *State) insert(i int, start int64) {
	if s.Len() == len(s.ring) {
		s.grow()
	}
	for j := s.Len(); j > i; j-- {
		*s.at(j) = *s.at(j - 1)
	}
	prev := s.base
	if i > 0 {
		prev = s.at(i - 1).cum
	}
	*s.at(i) = slot{start, prev}
	s.count++
}

// Reconfigure moves s to the configuration c, keeping all its usage, for a
// limiter whose Window or Bucket changed. Each bucket moves to the bucket of
// c that starts at or after its start, so no usage moves earlier, and none
// expires earlier than the new Window says (one whose start would pass the
// end of the int64 range, in 2262, moves to the last bucket of the range).
// Buckets that land Window or more before the newest move up to the oldest
// bucket a window of c can hold, as AddAt does; buckets that land together
// merge. It returns c's error from Validate, and then leaves s unchanged.
//
// It costs O(buckets), in place: the buckets only merge, so the ring never
// grows; it shrinks when it is larger than c needs.
func (s *State) Reconfigure(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.setConfig(c)
	if s.count == 0 {
		s.ring, s.head = nil, 0
		return nil
	}
	b, w := int64(c.Bucket), int64(c.Window)
	newest := c.alignUp(s.at(s.Len() - 1).start)
	kept := 0
	for i := range s.Len() {
		from := *s.at(i)
		start := c.alignUp(from.start)
		if s.older(start, newest) {
			start = newest - w + b
		}
		if kept > 0 && s.at(kept-1).start == start {
			s.at(kept - 1).cum = from.cum // merged: the later cumulative count covers both
			continue
		}
		*s.at(kept) = slot{start, from.cum}
		kept++
	}
	s.count = uint32(kept)
	if len(s.ring) > s.ringLimit() {
		s.resize(s.ringLimit()) // a shorter window, or a coarser Bucket
	}
	return nil
}

// alignUp returns the first multiple of c.Bucket at or after t, or, when
// that would pass math.MaxInt64, the last multiple before it.
func (c Config) alignUp(t int64) int64 {
	b := int64(c.Bucket)
	switch start := c.BucketStart(t); {
	case start >= t: // t is aligned, or before the first whole bucket
		return start
	case start > math.MaxInt64-b:
		return start
	default:
		return start + b
	}
}
