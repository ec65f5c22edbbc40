package keystore

import (
	"runtime"
	"sync"
	"sync/atomic"
	"weak"
)

// reservations are the tokens that one Store's admissions in flight hold,
// summed by key: what Admit reserved and Finish has not yet settled. They
// are this process's only (a Store shared through Redis does not count
// another process's), and kept in memory only: a process that stops has
// no admission in flight.
type reservations struct {
	byKey sync.Map // key ID -> *atomic.Int64; kept once made, 8 bytes a key that was ever admitted
}

// reservationsOf holds the reservations of every Store, by a weak
// pointer, so that a Store that is collected takes its table with it.
var reservationsOf sync.Map // weak.Pointer[Store] -> *reservations

// reservations returns s's table of reservations, making it on first use.
func (s *Store) reservations() *reservations {
	wp := weak.Make(s)
	if v, ok := reservationsOf.Load(wp); ok {
		return v.(*reservations)
	}
	v, loaded := reservationsOf.LoadOrStore(wp, new(reservations))
	if !loaded {
		runtime.AddCleanup(s, func(wp weak.Pointer[Store]) { reservationsOf.Delete(wp) }, wp)
	}
	return v.(*reservations)
}

// add adds n to the tokens key id's admissions in flight hold.
func (r *reservations) add(id string, n int64) {
	v, ok := r.byKey.Load(id)
	if !ok {
		v, _ = r.byKey.LoadOrStore(id, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(n)
}

// held notes that a holds its reservation, from its Admit on.
func (s *Store) held(a *Admission) { s.reservations().add(a.e.id, a.reserve) }

// unheld notes that a no longer holds its reservation: its Finish was
// called, whatever it returned (a Finish that failed is not tried again:
// its reservation stays charged in the windows, not in flight). Only the
// first call counts.
func (s *Store) unheld(a *Admission) {
	if a.settled.CompareAndSwap(false, true) {
		s.reservations().add(a.e.id, -a.reserve)
	}
}

// Reserved returns the tokens that this process's admissions of key id
// in flight hold (Admission.Reserved, for every admission of the key not
// yet finished): the part of the key's used tokens (Usage) not yet
// charged.
func (s *Store) Reserved(id string) int64 {
	if v, ok := s.reservations().byKey.Load(id); ok {
		return max(v.(*atomic.Int64).Load(), 0)
	}
	return 0
}
