package fakeprovider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ServeHTTP answers r: by the failure mode, if one is set; else as the
// API would refuse it, if it would; else by the quotas, if it does not
// fit; else with the answer, once any hold or delay is over.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	id := p.arrive(r, body)
	defer p.change(func() { p.active-- })
	if f := p.failure.Load(); f != nil {
		p.fail(w, r, f)
		return
	}
	if err != nil {
		p.count(&p.stats.Canceled)
		return
	}
	c, pr := p.parse(r, body)
	if pr != nil {
		p.count(&p.stats.Refused)
		p.writeProblem(w, pr)
		return
	}
	c.id, c.created = id, p.now().Unix()
	if pr := p.admit(c); pr != nil {
		p.writeProblem(w, pr)
		return
	}
	defer p.leave(c)
	p.answer(w, r, c)
}

// arrive notes r, whose body is body, and returns its ID.
func (p *Provider) arrive(r *http.Request, body []byte) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active++
	p.stats.Requests++
	p.stats.Paths[r.URL.Path]++
	p.last = Seen{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	return fmt.Sprintf("fake%d", p.stats.Requests)
}

// count adds one to a counter of p.stats.
func (p *Provider) count(n *int64) {
	p.mu.Lock()
	*n++
	p.mu.Unlock()
}

// fail answers r by the failure mode f.
func (p *Provider) fail(w http.ResponseWriter, r *http.Request, f *failure) {
	p.count(&p.stats.Failed)
	switch f.mode {
	case down:
		cut(w)
	case hanging:
		p.change(func() { p.held++ })
		defer p.change(func() { p.held-- })
		<-r.Context().Done()
	default:
		pr := &problem{status: f.status, retry: f.retry,
			msg: fmt.Sprintf("%s (fakeprovider: set to fail with %d)", http.StatusText(f.status), f.status)}
		if f.status == http.StatusTooManyRequests {
			pr.code, pr.typ = "rate_limit_exceeded", "requests"
		}
		p.writeProblem(w, pr)
	}
}

// cut closes w's connection without a word more: what was sent (nothing,
// or the start of a stream) is all the caller gets.
func cut(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // not HTTP/1: the server resets the stream
	}
	conn.Close()
}

// answer writes the reply to c, an admitted call. A stream sends its
// first event, then waits out any hold or delay (a caller has a byte of
// it); a JSON answer waits before anything. A call that Down was set for
// while it waited is cut off there; one whose caller went away ends.
func (p *Provider) answer(w http.ResponseWriter, r *http.Request, c *call) {
	rep := p.reply(c)
	h := w.Header()
	h.Set("X-Request-Id", c.id)
	h.Set("Content-Type", "application/json")
	parts := rep.parts
	if rep.sse {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		io.WriteString(w, parts[0])
		http.NewResponseController(w).Flush()
		parts = parts[1:]
	}
	if !p.wait(r.Context()) {
		p.count(&p.stats.Canceled)
		return
	}
	if f := p.failure.Load(); f != nil && f.mode == down {
		p.count(&p.stats.Failed)
		cut(w)
		return
	}
	p.commit(c)
	for _, part := range parts {
		io.WriteString(w, part)
		if rep.sse {
			http.NewResponseController(w).Flush()
		}
	}
}

// wait waits for Hold's release, then for SetDelay's delay, as they were
// when it was called, and reports whether they ended before ctx did.
func (p *Provider) wait(ctx context.Context) bool {
	p.mu.Lock()
	gate, d := p.gate, time.Duration(p.delay.Load())
	p.mu.Unlock()
	if gate == nil && d <= 0 {
		return true
	}
	p.change(func() { p.held++ })
	defer p.change(func() { p.held-- })
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return false
		}
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// change runs f, which changes what WaitHeld and WaitIdle wait for,
// under p.mu, and wakes them.
func (p *Provider) change(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
}
