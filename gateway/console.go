package gateway

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/console"
)

// openConsole checks the admin options of opts and, with an admin token,
// makes the console that serves /admin/ and authorizes the admin API.
func (g *Gateway) openConsole(opts Options) error {
	switch {
	case opts.AdminOnly && opts.AdminToken == "":
		return fmt.Errorf("gateway: AdminOnly without an AdminToken would serve nothing: %w", ratestore.ErrInvalid)
	case opts.AdminOnly && (opts.Upstream != nil || len(opts.Routes) > 0):
		return fmt.Errorf("gateway: AdminOnly forwards nothing: leave Upstream and Routes out: %w", ratestore.ErrInvalid)
	case opts.ReadOnlyAdmin && !opts.AdminOnly:
		return fmt.Errorf("gateway: ReadOnlyAdmin needs AdminOnly: a gateway that forwards requests writes their usage: %w", ratestore.ErrInvalid)
	case opts.ConsoleSessionTTL < 0:
		return fmt.Errorf("gateway: ConsoleSessionTTL %v: want >= 0: %w", opts.ConsoleSessionTTL, ratestore.ErrInvalid)
	}
	g.adminOnly, g.now = opts.AdminOnly, opts.Now
	if g.now == nil {
		g.now = time.Now
	}
	if opts.AdminToken != "" {
		g.console = console.New(console.Options{
			Token: opts.AdminToken, SessionTTL: opts.ConsoleSessionTTL, ReadOnly: opts.ReadOnlyAdmin,
			Now: g.now, Log: g.log,
		})
	}
	return nil
}

// Console returns the gateway's console, which serves /admin/ and
// authorizes the admin API; nil without Options.AdminToken.
func (g *Gateway) Console() *console.Console { return g.console }

// authorizeAdmin answers the refusal of an admin call that the console
// does not authorize (console.Console.Authorize), and reports whether it
// is authorized.
func (g *Gateway) authorizeAdmin(w http.ResponseWriter, r *http.Request) bool {
	ok, status, code, msg := g.console.Authorize(r)
	if ok {
		return true
	}
	if status == http.StatusTooManyRequests {
		retryFields(w.Header(), g.console.RetryAfter(r))
	}
	writeError(w, status, console.ErrorType(status), code, msg)
	return false
}

// adminRoutes is the admin API's mux, which notes its patterns: the
// tests try every route without a session, with an expired one and with a
// forged CSRF token, and a route added later is among them.
type adminRoutes struct {
	*http.ServeMux
	patterns []string
}

// HandleFunc registers h for pattern, as http.ServeMux does, and notes it.
func (m *adminRoutes) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.ServeMux.HandleFunc(pattern, h)
	m.patterns = append(m.patterns, pattern)
}

// AdminLive is the answer to GET /admin/live: the gateway's traffic over
// the last LiveWindow, for the console's live page.
type AdminLive struct {
	Time              time.Time `json:"time"`
	RequestsPerSecond float64   `json:"requests_per_second"` // requests ended, refused ones too, not the admin API's
	TokensPerSecond   float64   `json:"tokens_per_second"`   // tokens charged to keys
	InFlight          int64     `json:"in_flight"`           // requests begun and not ended, the admin API's left out
}

// LiveWindow is what GET /admin/live averages over.
const LiveWindow = 10 * time.Second

// adminLive answers GET /admin/live.
func (g *Gateway) adminLive(w http.ResponseWriter, r *http.Request) {
	now := g.now()
	reqs, toks := g.live.rates(now)
	writeJSON(w, http.StatusOK, AdminLive{
		Time: now.UTC().Truncate(time.Second), RequestsPerSecond: reqs, TokensPerSecond: toks,
		InFlight: g.live.inFlight.Load(),
	})
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
