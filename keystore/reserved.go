package keystore

import (
	"sync"
	"sync/atomic"
)

// reservations are the tokens that one Store's admissions in flight hold,
// summed by key: what Admit reserved and Finish has not yet settled. They
// are this process's only (a Store shared through Redis does not count
// another process's), and kept in memory only: a process that stops has
// no admission in flight.
type reservations struct {
	byKey sync.Map // key ID -> *atomic.Int64; kept once made, 8 bytes a key that was ever admitted
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
func (s *Store) held(a *Admission) { s.reserved.add(a.e.id, a.reserve) }

// unheld notes that a no longer holds its reservation: its Finish was
// called, whatever it returned (a Finish that failed is not tried again:
// its reservation stays charged in the windows, not in flight). Only the
// first call counts.
func (s *Store) unheld(a *Admission) {
	if a.settled.CompareAndSwap(false, true) {
		s.reserved.add(a.e.id, -a.reserve)
	}
}

// Reserved returns the tokens that this process's admissions of key id
// in flight hold (Admission.Reserved, for every admission of the key not
// yet finished): the part of the key's used tokens (Usage) not yet
// charged.
func (s *Store) Reserved(id string) int64 {
	if v, ok := s.reserved.byKey.Load(id); ok {
		return max(v.(*atomic.Int64).Load(), 0)
	}
	return 0
}
