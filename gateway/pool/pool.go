// Package pool chooses the upstream a request goes to, among those that
// can serve it: the ones whose api serves the request's endpoint and whose
// model globs match its model, that are not cooling down, in proportion
// to their weights. It decides nothing about room: an upstream's quota is
// the key store's (keystore.Quota), checked in the request's admission,
// and a caller that is refused by one upstream's quota asks the pool's
// Order for the next.
//
// An upstream that answered 429 or 5xx, or could not be reached, cools
// down: for its Retry-After, else 1 s, doubling with each failure in a
// row up to 60 s. An answer that is not a failure ends the run.
package pool

import (
	"path"
	"slices"
	"sync"
	"time"
)

// Cooling down: the first wait when an upstream gives none, and the most.
const (
	FirstCooldown = time.Second
	MaxCooldown   = 60 * time.Second
)

// Upstream is one member of a pool.
type Upstream struct {
	Name   string
	API    string   // what it speaks: its requests' endpoints are that api's
	Models []string // globs (path.Match) of the models it serves; none: all
	Weight int      // its share among the upstreams that can serve; at least 1
	Index  int      // its place in its pool (New): which of the caller's upstreams it is

	mu       sync.Mutex
	until    time.Time     // cooling down until then
	failures int           // in a row
	next     time.Duration // the next cooldown without a Retry-After
	current  int           // smooth weighted round robin's running weight
}

// Serves reports whether u serves model on one of apis; model "" (an
// endpoint that names none, as a model list) is served by every upstream
// of those apis.
func (u *Upstream) Serves(apis []string, model string) bool {
	if !slices.Contains(apis, u.API) {
		return false
	}
	if model == "" || len(u.Models) == 0 {
		return true
	}
	for _, g := range u.Models {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

// Failed notes a failure of u at now: it cools down for retryAfter when
// the upstream said how long (> 0), else for a wait that doubles with each
// failure in a row, from FirstCooldown to MaxCooldown.
func (u *Upstream) Failed(now time.Time, retryAfter time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failures++
	wait := retryAfter
	if wait <= 0 {
		wait = max(u.next, FirstCooldown)
		u.next = min(2*wait, MaxCooldown)
	}
	u.until = now.Add(min(wait, MaxCooldown))
}

// Succeeded notes an answer of u that is not a failure: the run of
// failures ends.
func (u *Upstream) Succeeded() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failures, u.next, u.until = 0, 0, time.Time{}
}

// CoolingUntil reports until when u cools down (zero: it does not).
func (u *Upstream) CoolingUntil(now time.Time) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !now.Before(u.until) {
		return time.Time{}
	}
	return u.until
}

// Pool is the upstreams a gateway may send requests to.
type Pool struct {
	ups []*Upstream
	mu  sync.Mutex // guards the round robin's running weights
}

// New returns the pool of ups, in their order (which breaks ties), and
// sets their Index.
func New(ups []*Upstream) *Pool {
	for i, u := range ups {
		u.Weight, u.Index = max(u.Weight, 1), i
	}
	return &Pool{ups: ups}
}

// Upstreams returns the pool's upstreams, in their order.
func (p *Pool) Upstreams() []*Upstream { return p.ups }

// Order returns the upstreams that serve model on one of apis and are not cooling
// down at now, the one to try first first: the pick of a smooth weighted
// round robin (nginx's: each candidate's running weight grows by its
// weight, the largest is picked and loses the sum), so that over any run
// of requests each candidate gets its weight's share, evenly spread. The
// others follow by weight, heaviest first, for the caller's failover. It
// appends to dst.
func (p *Pool) Order(dst []*Upstream, apis []string, model string, now time.Time) []*Upstream {
	start := len(dst)
	for _, u := range p.ups {
		if u.Serves(apis, model) && u.CoolingUntil(now).IsZero() {
			dst = append(dst, u)
		}
	}
	cands := dst[start:]
	if len(cands) < 2 {
		return dst
	}
	p.mu.Lock()
	total, best := 0, 0
	for i, u := range cands {
		u.current += u.Weight
		total += u.Weight
		if u.current > cands[best].current {
			best = i
		}
	}
	cands[best].current -= total
	p.mu.Unlock()
	cands[0], cands[best] = cands[best], cands[0]
	rest := cands[1:]
	for i := 1; i < len(rest); i++ { // insertion sort: a handful of upstreams
		for j := i; j > 0 && rest[j].Weight > rest[j-1].Weight; j-- {
			rest[j], rest[j-1] = rest[j-1], rest[j]
		}
	}
	return dst
}
