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
