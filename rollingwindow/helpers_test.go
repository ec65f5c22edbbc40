package rollingwindow

import (
	"fmt"
	"testing"
	"time"
)

// t0 is the base instant of the tests: 2026-01-18T08:00:00Z, aligned to
// the hour, so to every bucket up to an hour.
const t0 = int64(1768723200) * int64(time.Second)

// at returns the instant d after t0.
func at(d time.Duration) int64 { return t0 + int64(d) }

// legacy is the keystore's default window: 5 hours in 5-minute buckets.
var legacy = Config{Window: 5 * time.Hour, Bucket: 5 * time.Minute}

// ev is usage recorded by Add.
type ev struct{ t, n int64 }

// bk is a bucket as All yields it.
type bk struct{ start, n int64 }

// newState returns a State of c that has recorded evs with Add, in order.
func newState(t testing.TB, c Config, evs ...ev) *State {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v): %v", c, err)
	}
	for _, e := range evs {
		s.Add(e.t, e.n)
	}
	checkState(t, s)
	return s
}

// bucketsOf returns the buckets of s, oldest first.
func bucketsOf(s *State) []bk {
	var out []bk
	for start, n := range s.All() {
		out = append(out, bk{start, n})
	}
	return out
}

// clone returns a copy of s made by the codec path, All then Rebuild.
func clone(t testing.TB, s *State) *State {
	t.Helper()
	c, err := Rebuild(s.Config(), s.All())
	if err != nil {
		t.Fatalf("Rebuild(All()) of %v: %v", bucketsOf(s), err)
	}
	return c
}

// checkState fails unless s keeps its invariants: at most Window/Bucket
// buckets, starts aligned, strictly increasing and less than Window apart,
// counts positive, a total within int64, and a ring of a power of two no
// larger than the window needs.
func checkState(t testing.TB, s *State) {
	t.Helper()
	if err := checkInvariants(s); err != nil {
		t.Fatalf("%v: %v", bucketsOf(s), err)
	}
}

func checkInvariants(s *State) error {
	c := s.Config()
	if s.Len() > c.Buckets() {
		return fmt.Errorf("%d buckets, more than %d", s.count, c.Buckets())
	}
	if len(s.ring) == 1 && &s.ring[0] != &s.one[0] {
		return fmt.Errorf("a ring of one slot that is not the State's own")
	}
	if l := len(s.ring); l&(l-1) != 0 || l > s.ringLimit() || l >= 2*c.Buckets() && l > minRing {
		return fmt.Errorf("ring of %d slots for %d buckets", l, c.Buckets())
	}
	var total int64
	var prev int64
	for i, b := range bucketsOf(s) {
		switch {
		case b.n <= 0:
			return fmt.Errorf("bucket %d: n = %d", i, b.n)
		case b.start%int64(c.Bucket) != 0:
			return fmt.Errorf("bucket %d: start %d not aligned", i, b.start)
		case i > 0 && b.start <= prev:
			return fmt.Errorf("bucket %d: start %d not after %d", i, b.start, prev)
		case i > 0 && s.older(s.at(0).start, b.start):
			return fmt.Errorf("bucket %d: start %d a Window or more after the oldest", i, b.start)
		case b.n > 1<<63-1-total:
			return fmt.Errorf("bucket %d: total overflows", i)
		}
		total += b.n
		prev = b.start
	}
	if total != s.used() {
		return fmt.Errorf("used %d, buckets sum to %d", s.used(), total)
	}
	return nil
}

// equalBuckets reports whether two bucket lists are the same, nil and
// empty alike.
func equalBuckets(a, b []bk) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
