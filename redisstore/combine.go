package redisstore

import "sync"

// Concurrent calls share round trips in two places, by one rule: a call
// that finds fewer than max batches running runs its own work at once, as
// a batch of one; a call that finds max running joins a queue, and when a
// running batch ends, the first call queued runs the whole queue as the
// next batch. A lone call waits for nothing; under load a batch is what
// arrived during one round trip, so the round trips per call fall as the
// load rises, with no timer and no goroutine of the DB's own.
//
//   - A lane (max 1) is one key's calls in this DB: a batch is decided call
//     after call on the key's state, in Go, and stored by one
//     compare-and-swap, so n calls on a hot key cost one round trip, and
//     the calls of this DB never race each other's swaps.
//   - The pipe (max pipelines) is the DB's swaps of every key: a batch is
//     sent as one pipeline, one round trip for the swaps of many keys.

// waiter is a call that may wait in a queue: wakeup is its channel, which
// receives the batch it is to run, or nil once another ran its work.
type waiter[T any] interface{ wakeup() chan []T }

// place is where calls of type T combine: join adds t, reporting whether
// it runs at once; next ends a batch, returning the queue to run next, or
// nil (and one batch fewer running) when it is empty.
type place[T any] interface {
	join(t T) bool
	next() []T
}

// queue is the state of a place. Its owner's lock guards it.
type queue[T any] struct {
	waiting []T
	running int
}

func (q *queue[T]) join(t T, max int) bool {
	if q.running < max {
		q.running++
		return true
	}
	q.waiting = append(q.waiting, t)
	return false
}

func (q *queue[T]) next() []T {
	b := q.waiting
	if len(b) == 0 {
		q.running--
		return nil
	}
	q.waiting = nil
	return b
}

// combine does t's work at p: it runs a batch holding t (first, as the
// runner's own), or returns once a batch run by another call has done it.
// run does a batch's work; combine then wakes the batch's other calls,
// which are done, and hands the queue, if any, to its first.
func combine[T waiter[T]](p place[T], t T, self *[1]T, run func([]T)) {
	var batch []T
	if p.join(t) {
		self[0] = t
		batch = self[:]
	} else if batch = <-t.wakeup(); batch == nil {
		return
	}
	run(batch)
	next := p.next()
	for _, w := range batch[1:] {
		w.wakeup() <- nil
	}
	if next != nil {
		next[0].wakeup() <- next
	}
}

// lane is one key's place in the cache: the queue of its calls, in a map
// of the key's shard while any runs.
type lane struct {
	sh *shard
	rk string
}

func (l lane) join(p *op) bool {
	l.sh.mu.Lock()
	defer l.sh.mu.Unlock()
	q := l.sh.lanes[l.rk]
	if q == nil {
		q = new(queue[*op])
		l.sh.lanes[l.rk] = q
	}
	return q.join(p, 1)
}

func (l lane) next() []*op {
	l.sh.mu.Lock()
	defer l.sh.mu.Unlock()
	q := l.sh.lanes[l.rk]
	b := q.next()
	if q.running == 0 {
		delete(l.sh.lanes, l.rk)
	}
	return b
}

// pipe is the DB's place for swaps.
type pipe struct {
	mu  sync.Mutex
	q   queue[*swapOp]
	max int
}

func (p *pipe) join(s *swapOp) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.q.join(s, p.max)
}

func (p *pipe) next() []*swapOp {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.q.next()
}
