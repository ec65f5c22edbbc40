package gateway

import (
	"slices"
	"sync"
	"sync/atomic"
)

// lines are the requests waiting for an upstream with room, a line for
// each set of upstreams they wait for (their apis and model), so that a
// request for a model whose upstreams are full never holds up one for
// another model.
//
// A line serves its keys in turn, not its requests: only its head tries
// to be admitted, and when the head leaves (admitted, or given up) the
// turn passes to the first request of the next key that waits, its own
// key going to the back. So a key's hundred waiting requests hold up
// another key's one by one turn at most, and a key's own requests keep
// their order.
type lines struct {
	waiting atomic.Int64 // requests in every line: 0 spares finished its lock
	mu      sync.Mutex
	m       map[string]*line
	room    chan struct{} // closed, and replaced, when a request ends: an upstream may have room
}

// line is the requests of one line: the keys that wait, in turn.
type line struct {
	ring  []*keyTurn // ring[0] has the turn
	byKey map[string]*keyTurn
}

// keyTurn is the waiting requests of one key, in their order.
type keyTurn struct {
	key string
	ws  []*waiter
}

// waiter is a request in a line.
type waiter struct {
	name  string // its line's
	key   string
	ready chan struct{} // closed when it is the head
}

// join puts a request of key at the back of line name, and returns it.
// It is the head at once (ready closed) when the line was empty.
func (ls *lines) join(name, key string) *waiter {
	w := &waiter{name: name, key: key, ready: make(chan struct{})}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.waiting.Add(1)
	if ls.m == nil {
		ls.m = map[string]*line{}
	}
	l := ls.m[name]
	if l == nil {
		l = &line{byKey: map[string]*keyTurn{}}
		ls.m[name] = l
	}
	t := l.byKey[key]
	if t == nil {
		t = &keyTurn{key: key}
		l.byKey[key] = t
		l.ring = append(l.ring, t)
	}
	t.ws = append(t.ws, w)
	if l.ring[0].ws[0] == w {
		close(w.ready)
	}
	return w
}

// leave takes w out of its line. When it was the head, the turn passes
// to the next key's first request.
func (ls *lines) leave(w *waiter) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.waiting.Add(-1)
	l := ls.m[w.name]
	t := l.byKey[w.key]
	head := l.ring[0] == t && t.ws[0] == w
	t.ws = slices.Delete(t.ws, slices.Index(t.ws, w), slices.Index(t.ws, w)+1)
	switch {
	case len(t.ws) == 0:
		delete(l.byKey, w.key)
		ti := slices.Index(l.ring, t)
		l.ring = slices.Delete(l.ring, ti, ti+1)
	case head: // its key's turn is over
		l.ring = append(l.ring[1:], t)
	}
	if len(l.ring) == 0 {
		delete(ls.m, w.name)
		return
	}
	if head {
		close(l.ring[0].ws[0].ready)
	}
}

// busy reports whether the line of apis[0] and model has requests
// waiting: a request that finds it so queues behind them rather than
// trying first. Most of the time no line has any, which it tells without
// a lock or the line's name.
func (ls *lines) busy(api, model string) bool {
	if ls.waiting.Load() == 0 {
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[lineName(api, model)] != nil
}

// lineName is the name of the line of the requests for model that the
// apis whose first is api serve.
func lineName(api, model string) string { return api + "\x00" + model }

// roomChan returns the channel closed when a request next ends. Take it
// before trying an admission, so that one ending meanwhile is not missed.
func (ls *lines) roomChan() <-chan struct{} {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.room == nil {
		ls.room = make(chan struct{})
	}
	return ls.room
}

// finished tells the heads that a request has ended, giving back what it
// held of its upstream's limits.
func (ls *lines) finished() {
	if ls.waiting.Load() == 0 {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.room != nil {
		close(ls.room)
		ls.room = nil
	}
}
