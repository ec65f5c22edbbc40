package gateway

import (
	"sync/atomic"
	"time"
)

// LiveWindow is what Traffic averages over.
const LiveWindow = 10 * time.Second

// Traffic returns the requests ended (refused ones too) and the tokens
// charged per second over the last LiveWindow, and the requests in
// flight, for the console's live page.
func (g *Gateway) Traffic() (requestsPerSecond, tokensPerSecond float64, inFlight int64) {
	reqs, toks := g.live.rates(g.now())
	return reqs, toks, g.live.inFlight.Load()
}

// liveSlots is the number of one-second buckets of live: more than
// LiveWindow's seconds, so that the second being filled never overwrites
// one being read.
const liveSlots = 16

// live counts the requests ended and the tokens charged per second, in a
// ring of one-second buckets, and the requests in flight. Every request
// adds to it, so it takes no lock: a bucket of a past second is replaced
// whole (compare-and-swap), never reset in place, so no count lands in a
// bucket being cleared.
type live struct {
	slots    [liveSlots]atomic.Pointer[liveBucket]
	inFlight atomic.Int64
}

// liveBucket is the counts of one second.
type liveBucket struct {
	sec              int64 // Unix seconds
	requests, tokens atomic.Int64
}

func (l *live) begin() { l.inFlight.Add(1) }

// end counts a request that ended at now, charged tokens.
func (l *live) end(now time.Time, tokens int64) {
	l.inFlight.Add(-1)
	sec := now.Unix()
	slot := &l.slots[uint64(sec)%liveSlots]
	for {
		b := slot.Load()
		switch {
		case b != nil && b.sec == sec:
			b.requests.Add(1)
			b.tokens.Add(tokens)
			return
		case b != nil && b.sec > sec:
			return // the clock went back by a whole ring: too old to show
		}
		slot.CompareAndSwap(b, &liveBucket{sec: sec})
	}
}

// rates returns the requests and tokens per second over the LiveWindow
// that ends with the second of now, that second included: the live page
// shows a request at once.
func (l *live) rates(now time.Time) (requests, tokens float64) {
	sec := now.Unix()
	n := int64(LiveWindow / time.Second)
	var r, t int64
	for i := range l.slots {
		if b := l.slots[i].Load(); b != nil && b.sec > sec-n && b.sec <= sec {
			r += b.requests.Load()
			t += b.tokens.Load()
		}
	}
	return float64(r) / float64(n), float64(t) / float64(n)
}
