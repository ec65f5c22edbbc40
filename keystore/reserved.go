package keystore

// The tokens a key's admissions in flight hold (what Admit reserved and
// Finish has not yet settled) are counted on the key's entry, where the
// admission keeps its key: this process's only (a Store shared through
// Redis does not count another process's), and in memory only, since a
// process that stops has no admission in flight.

// held notes that a holds its reservation, from its Admit on.
func (s *Store) held(a *Admission) { a.e.reserved.Add(a.reserve) }

// unheld notes that a no longer holds its reservation: its Finish was
// called, whatever it returned (a Finish that failed is not tried again:
// its reservation stays charged in the windows, not in flight). Only the
// first call counts.
func (s *Store) unheld(a *Admission) {
	if a.settled.CompareAndSwap(false, true) {
		a.e.reserved.Add(-a.reserve)
	}
}

// Reserved returns the tokens that this process's admissions of key id
// in flight hold (Admission.Reserved, for every admission of the key not
// yet finished): the part of the key's used tokens (Usage) not yet
// charged. A key this process does not hold has none.
func (s *Store) Reserved(id string) int64 {
	s.mu.RLock()
	e := s.byID[id]
	s.mu.RUnlock()
	if e == nil {
		return 0
	}
	return max(e.reserved.Load(), 0)
}
