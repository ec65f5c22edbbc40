package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// op is a call on a key waiting for its outcome: fn decides it on a
// stored value (see Limiter.update).
type op struct {
	ctx  context.Context
	fn   func(cur string, now int64) (outcome, error)
	o    outcome
	err  error
	wake chan []*op
	self [1]*op // the batch of the op alone
}

func (p *op) wakeup() chan []*op { return p.wake }

var ops = sync.Pool{New: func() any { return &op{wake: make(chan []*op, 1)} }}

// decideBatch decides the calls of batch, on the Redis key rk, one after
// the other at one instant, each on the value the one before it left, and
// stores the last value by one swap: on the value this DB last saw, and
// again on the value Redis holds as long as that differs. A call whose ctx
// has ended is not decided.
func (db *DB) decideBatch(rk string, batch []*op) {
	live := batch[:0:0]
	for _, p := range batch {
		if p.err = p.ctx.Err(); p.err == nil {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), db.opts.Timeout)
	defer cancel()
	now := db.now().UnixNano()
	cur := db.cache.get(rk)
	for {
		next, ttl, failed := decideAll(live, cur.v, now)
		if failed == len(live) {
			db.cache.put(rk, "", 0) // read it again next time
			return
		}
		stored, held, err := db.swap(ctx, rk, cur, next, ttl)
		if err != nil {
			db.cache.put(rk, "", 0)
			for _, p := range live {
				if p.err == nil {
					p.err = &swapError{err: err, changed: p.o.changed}
				}
			}
			return
		}
		if stored {
			if failed > 0 {
				held = cached{}
			}
			db.cache.put(rk, held.v, held.expires)
			return
		}
		cur = held
	}
}

// decideAll decides ops in turn on cur at now, and returns the value they
// leave, its TTL, and how many of them failed (which change nothing).
func decideAll(ops []*op, cur string, now int64) (next string, ttl time.Duration, failed int) {
	next = cur
	for _, p := range ops {
		if p.o, p.err = p.fn(next, now); p.err != nil {
			failed++
			continue
		}
		p.o.prev = next
		if p.o.next != next {
			next, ttl = p.o.next, p.o.ttl
		}
	}
	return next, ttl, failed
}

// swapScript stores ARGV[2] at KEYS[1] (deletes it when ""), with a TTL of
// ARGV[3] milliseconds, if KEYS[1] holds ARGV[1] ("": nothing), and answers
// {1}; otherwise it changes nothing and answers {0, what KEYS[1] holds,
// its TTL in milliseconds (PTTL: negative for none)}.
var swapScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then
  return {0, cur, redis.call('PTTL', KEYS[1])}
end
if ARGV[2] ~= cur then
  if ARGV[2] == '' then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  end
end
return {1}
`)

// swapOp is a swap waiting to be sent, then its answer.
type swapOp struct {
	key    string
	cur    cached
	next   string
	ttl    time.Duration
	stored bool
	held   cached
	err    error
	wake   chan []*swapOp
	self   [1]*swapOp
}

func (s *swapOp) wakeup() chan []*swapOp { return s.wake }

var swapOps = sync.Pool{New: func() any { return &swapOp{wake: make(chan []*swapOp, 1)} }}

// swap runs swapScript: it stores next at key, with ttl, if key holds
// cur.v. It returns what key holds then, and when Redis expires it: next
// when it stored it (cur, expiring as before, when next is cur.v), and
// otherwise the value the script found, with the TTL it reported. Swaps of
// concurrent calls share pipelines (see combine.go).
func (db *DB) swap(ctx context.Context, key string, cur cached, next string, ttl time.Duration) (stored bool, held cached, err error) {
	s := swapOps.Get().(*swapOp)
	s.key, s.cur, s.next, s.ttl = key, cur, next, ttl
	combine(&db.pipe, s, &s.self, func(batch []*swapOp) { db.sendSwaps(ctx, batch) })
	stored, held, err = s.stored, s.held, s.err
	*s = swapOp{wake: s.wake}
	swapOps.Put(s)
	return stored, held, err
}

// sendSwaps runs the swaps of batch: a lone one as a script, more as one
// pipeline of them.
func (db *DB) sendSwaps(ctx context.Context, batch []*swapOp) {
	sent := db.cache.clock()
	calls := make([]scriptCall, len(batch))
	for i, s := range batch {
		calls[i] = scriptCall{[]string{s.key}, []any{s.cur.v, s.next, max(1, ms(s.ttl))}}
	}
	for i, c := range db.runScripts(ctx, swapScript, calls) {
		batch[i].answer(c.Slice())
		batch[i].done(sent)
	}
}

// answer notes the script's reply v, or its failure err.
func (s *swapOp) answer(v []any, err error) {
	switch {
	case err != nil:
		s.err = err
	case len(v) == 0:
		s.err = errors.New("swap script: empty reply")
	case v[0] == int64(1):
		s.stored = true
	case len(v) != 3:
		s.err = fmt.Errorf("swap script: reply of %d elements", len(v))
	default:
		s.held.v, _ = v[1].(string)
		if pttl, _ := v[2].(int64); pttl > 0 {
			s.held.expires = time.Duration(pttl) * time.Millisecond // from sent: see done
		}
	}
}

// done makes the expiry of what the key holds a time on the cache's
// clock, for a swap sent at sent.
func (s *swapOp) done(sent time.Duration) {
	switch {
	case s.err != nil:
	case !s.stored:
		s.held.expires = deadline(sent, s.held.expires)
	case s.next == s.cur.v:
		s.held = s.cur
	default:
		s.held = cached{s.next, deadline(sent, s.ttl)}
	}
}
