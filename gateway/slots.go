package gateway

import "sync"

// slots counts, per key, the requests of this process that hold a
// concurrency slot from before their body is read to their end, so that a
// key of Policy.MaxConcurrent n holds at most n request bodies in memory,
// however slowly its callers send them. The key store's slots (Admit)
// still decide, for every gateway sharing the store: these only come
// first, in this process.
type slots struct {
	mu   sync.Mutex
	used map[string]int // key ID -> slots taken; absent: none
}

// take takes one of the n slots of key id, if one is free.
func (s *slots) take(id string, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used == nil {
		s.used = make(map[string]int)
	}
	if s.used[id] >= n {
		return false
	}
	s.used[id]++
	return true
}

// give gives back a slot that take took.
func (s *slots) give(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used[id] <= 1 {
		delete(s.used, id)
		return
	}
	s.used[id]--
}

// shortSlots are the slots of short admissions (see Gateway.admit): one
// per key at a time, and an epoch per key that each one ending advances.
// An admission's reservation is decided before it takes the slot; one
// decided while another short request of its key was still running did
// not count that request's usage past its reservation, charged when it
// ended, so it must not take the slot after it: the epoch tells.
type shortSlots struct {
	slots
	mu    sync.Mutex
	epoch map[string]uint64 // key ID -> short requests ended; kept, 8 bytes a key that ever had one
}

// epochOf returns the number of short requests of key id that ended.
func (s *shortSlots) epochOf(id string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch[id]
}

// takeSince takes key id's slot if it is free and no short request of the
// key ended since epochOf returned since.
func (s *shortSlots) takeSince(id string, since uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch[id] == since && s.take(id, 1)
}

// end gives back key id's slot, once its request is charged.
func (s *shortSlots) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch == nil {
		s.epoch = make(map[string]uint64)
	}
	s.epoch[id]++
	s.give(id)
}
