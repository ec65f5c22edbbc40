// Package attach holds the values attached to a database (its key store):
// one per key, made by the first caller that asks for it.
package attach

import "sync"

// Set is the values attached to one database. The zero Set is empty and
// ready for use.
type Set struct {
	mu   sync.Mutex
	vals map[any]any
}

// Get returns the value attached under key, calling open to make it the
// first time. An open that fails attaches nothing: the next caller opens
// again.
func (s *Set) Get(key any, open func() (any, error)) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vals[key]; ok {
		return v, nil
	}
	v, err := open()
	if err != nil {
		return nil, err
	}
	if s.vals == nil {
		s.vals = make(map[any]any)
	}
	s.vals[key] = v
	return v, nil
}
