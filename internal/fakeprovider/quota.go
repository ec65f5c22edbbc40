package fakeprovider

import (
	"fmt"
	"net/http"
	"time"
)

// admit takes c's room in the quotas: a request, its need of tokens, a
// place in flight; or returns the 429 of a call that does not fit.
func (p *Provider) admit(c *call) *problem {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr := p.over(now, c); pr != nil {
		p.stats.Limited++
		return pr
	}
	p.requests.add(now, 1)
	p.tokens.held += c.need
	p.stats.InFlight++
	p.stats.MaxInFlight = max(p.stats.MaxInFlight, p.stats.InFlight)
	return nil
}

// quota is one of a provider's limits as a refusal names it.
type quota struct {
	name        string // as OpenAI's errors name it: "tokens per min (TPM)"
	typ         string // OpenAI's error type: "tokens", "requests"
	limit, used int64
	need        int64         // what the call asks of it
	wait        time.Duration // until the call fits it; never: no minute can hold the call
}

// over returns the 429 of c if it does not fit the quotas at now, naming
// the first it does not fit, with the Retry-After of the time until it
// fits them all (a second for a place in flight), or none when no minute
// can hold it.
func (p *Provider) over(now time.Time, c *call) *problem {
	var binding []quota
	if m := p.opts.MaxConcurrent; m > 0 && p.stats.InFlight >= m {
		binding = append(binding, quota{name: "concurrent requests", typ: "requests", limit: int64(m), used: int64(p.stats.InFlight), need: 1, wait: time.Second})
	}
	if d := p.requests.room(now, 1); d != 0 {
		binding = append(binding, quota{name: "requests per min (RPM)", typ: "requests", limit: p.requests.limit, used: p.requests.inUse(now), need: 1, wait: d})
	}
	if d := p.tokens.room(now, c.need); d != 0 {
		binding = append(binding, quota{name: "tokens per min (TPM)", typ: "tokens", limit: p.tokens.limit, used: p.tokens.inUse(now), need: c.need, wait: d})
	}
	if len(binding) == 0 {
		return nil
	}
	q := binding[0]
	pr := &problem{status: http.StatusTooManyRequests, code: "rate_limit_exceeded", typ: q.typ}
	for _, b := range binding {
		if b.wait == never {
			pr.typ, pr.retry = b.typ, 0
			pr.msg = fmt.Sprintf("Request too large for %s on %s: Limit %d, Requested %d. No minute can hold it (fakeprovider).",
				c.model, b.name, b.limit, b.need)
			return pr
		}
		pr.retry = max(pr.retry, b.wait)
	}
	pr.msg = fmt.Sprintf("Rate limit reached for %s on %s: Limit %d, Used %d, Requested %d. Please try again in %ss (fakeprovider).",
		c.model, q.name, q.limit, q.used, q.need, seconds(pr.retry))
	return pr
}

// commit charges c, whose answer is produced, its prompt and output, in
// place of what it held.
func (p *Provider) commit(c *call) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := c.prompt + c.completion
	p.tokens.held -= c.need
	c.need = 0
	p.tokens.add(now, n)
	p.stats.TokensCharged += n
	p.stats.Served++
}

// leave ends c, an admitted call: its place in flight, and what it holds
// if it was never charged.
func (p *Provider) leave(c *call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens.held -= c.need
	p.stats.InFlight--
}
