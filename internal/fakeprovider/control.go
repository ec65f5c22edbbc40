package fakeprovider

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// Fail makes p answer every request with status (4xx or 5xx) and its
// API's error body, until Heal; a 429 says Retry-After: 1, as a
// provider's rate limit says when, any other status nothing. It panics
// on another status.
func (p *Provider) Fail(status int) {
	var retry time.Duration
	if status == http.StatusTooManyRequests {
		retry = time.Second
	}
	p.FailRetryAfter(status, retry)
}

// FailRetryAfter is Fail with a Retry-After of after (whole seconds,
// rounded up; 0: none).
func (p *Provider) FailRetryAfter(status int, after time.Duration) {
	if status < 400 || status > 599 {
		panic(fmt.Sprintf("fakeprovider: Fail(%d): not an error status", status))
	}
	p.failure.Store(&failure{mode: failing, status: status, retry: after})
}

// Down makes p close the connection of every request without an answer
// (hijacked and closed), until Heal: an upstream that cannot be reached
// once connected. A call held when Down is set is cut off as it is let go,
// a stream after its first event. A client may send an idempotent request
// again on a new connection when a reused one is closed (Go's Transport
// does, for a GET), which Stats counts twice.
func (p *Provider) Down() { p.failure.Store(&failure{mode: down}) }

// Hang makes p answer no request, each held until its context ends (the
// caller gives up, or the server closes), until Heal.
func (p *Provider) Hang() { p.failure.Store(&failure{mode: hanging}) }

// Heal ends the failure mode: p answers as its API would. It leaves
// holds and delays as they are.
func (p *Provider) Heal() { p.failure.Store(nil) }

// SetDelay makes p wait d before it answers an admitted call (a stream
// after its first event), or until the call's context ends; 0: none. It
// is for walkthroughs, in real time: a test holds calls with Hold.
func (p *Provider) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Hold makes the calls that come to their answer while it stands wait,
// admitted (in flight, their quotas held) and unanswered (a stream after
// its first event), until release is called or their context ends: a
// test keeps calls in flight as long as it needs, without sleeping.
// WaitHeld tells when they are there. release may be called more than
// once; a later Hold's calls wait for its own release.
func (p *Provider) Hold() (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			if p.gate == gate {
				p.gate = nil
			}
			p.mu.Unlock()
			close(gate)
		})
	}
}

// WaitHeld waits until at least n calls are held: waiting for Hold's
// release or SetDelay's delay, or hanging (Hang). It returns an error
// wrapping ctx's cause if ctx ends first.
func (p *Provider) WaitHeld(ctx context.Context, n int) error {
	return p.await(ctx, func() bool { return p.held >= n }, fmt.Sprintf("%d calls held", n))
}

// WaitIdle waits until p handles no request: each that came was
// answered, cut off or given up on, so that Stats are final. It returns
// an error wrapping ctx's cause if ctx ends first.
func (p *Provider) WaitIdle(ctx context.Context) error {
	return p.await(ctx, func() bool { return p.active == 0 }, "no request handled")
}

// await waits until cond, called under p.mu, holds, or ctx ends.
func (p *Provider) await(ctx context.Context, cond func() bool, what string) error {
	for {
		p.mu.Lock()
		ok, changed, held, active := cond(), p.changed, p.held, p.active
		p.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("fakeprovider: waiting for %s (%d held, %d handled): %w", what, held, active, context.Cause(ctx))
		}
	}
}

// Stats returns what p has seen.
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Paths = maps.Clone(p.stats.Paths)
	return s
}

// Last returns the last request p got (the zero Seen before any), a copy
// the caller may keep.
func (p *Provider) Last() Seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.last
	if p.stats.Requests == 0 {
		return s
	}
	s.Query, _ = url.ParseQuery(s.RawQuery)
	s.Header, s.Body = s.Header.Clone(), slices.Clone(s.Body)
	return s
}
