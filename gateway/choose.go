package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/ratestore/ratestore/gateway/pool"
	"github.com/ratestore/ratestore/keystore"
)

// A request's upstream is chosen with its admission, in one decision of
// the key store: the upstream's limits are a keystore.Quota held with the
// key's (Request.Quotas). The candidates are tried in the pool's order
// (package pool: weighted, the cooling down left out); the first whose
// quota admits the request serves it. When every candidate refuses for
// want of room, the request waits in its line (lines), and its line's
// head tries again whenever a request ends or the soonest refusal's wait
// has passed. A refusal on the key's own account ends the request as it
// would without upstreams.

// capacityError is the refusal of a request that no upstream had room
// for: within wait, as far as the upstreams' limits tell; never, when the
// request is larger than every one of them allows (wait < 0).
type capacityError struct{ wait time.Duration }

func (e *capacityError) Error() string { return "gateway: no upstream has room" }

// maxPoll bounds a head's wait between two tries: another gateway on the
// same Redis frees room without telling this one.
const maxPoll = 250 * time.Millisecond

// admitOn admits req for rq's key (secret) on an upstream with room, the
// request's member, waiting for one as long as Options.UpstreamQueueTimeout
// and ctx allow. It returns Admit's result, or a *capacityError.
func (g *Gateway) admitOn(ctx context.Context, rq *request, secret string, req keystore.Request) (*keystore.Admission, error) {
	if rq.member != nil { // its route's: a pool of one, without limits
		return g.keys.Admit(ctx, secret, req)
	}
	var a *keystore.Admission
	err := g.inLine(ctx, rq, func(ctx context.Context) (err error) {
		a, err = g.tryUpstreams(ctx, rq, secret, req)
		return err
	})
	return a, err
}

// inLine calls try until it returns anything but a *capacityError with a
// wait (>= 0): at once, if no request waits in rq's line, then, as long
// as Options.UpstreamQueueTimeout and ctx allow, as the line's head, each
// time a request ends or the wait try returned has passed. It returns
// try's last error.
func (g *Gateway) inLine(ctx context.Context, rq *request, try func(context.Context) error) error {
	if !g.lines.busy(rq.apis[0], rq.model) {
		err := try(ctx)
		var ce *capacityError
		if !errors.As(err, &ce) || ce.wait < 0 || g.queue <= 0 {
			return err
		}
	}
	start := time.Now()
	defer func() { g.metrics.queued(time.Since(start)) }()
	// The wait is bounded, not the tries: a try cut off by the queue's
	// deadline in the middle of its Admit would be a store failure (503).
	queue, cancel := context.WithTimeout(ctx, g.queue)
	defer cancel()
	w := g.lines.join(lineName(rq.apis[0], rq.model), rq.keyID)
	defer g.lines.leave(w)
	select {
	case <-w.ready:
	case <-queue.Done():
		return &capacityError{wait: time.Second}
	}
	for {
		room := g.lines.roomChan()
		err := try(ctx)
		var ce *capacityError
		if !errors.As(err, &ce) || ce.wait < 0 {
			return err
		}
		t := time.NewTimer(min(max(ce.wait, time.Millisecond), maxPoll))
		select {
		case <-room:
		case <-t.C:
		case <-queue.Done():
			t.Stop()
			return ce
		}
		t.Stop()
	}
}

// tryUpstreams admits req on the first of rq's candidates whose quota has
// room, and makes it rq's member. When none has, it returns a
// *capacityError with the soonest wait the refusals (and cooldowns) tell.
func (g *Gateway) tryUpstreams(ctx context.Context, rq *request, secret string, req keystore.Request) (*keystore.Admission, error) {
	var buf [8]*pool.Upstream
	now := g.now()
	cands := rq.ups.pool.Order(buf[:0], rq.apis, rq.model, now)
	wait := time.Duration(-1)
	if len(cands) == 0 { // every one cooling down
		wait = rq.ups.coolingWait(rq.apis, rq.model, now, nil)
	}
	for _, pu := range cands {
		m := rq.ups.members[pu.Index]
		req.Quotas = m.quotas
		a, err := g.keys.Admit(ctx, secret, req)
		var d *keystore.Denial
		if !errors.As(err, &d) || d.Quota == "" {
			rq.member = m
			return a, err
		}
		wait = sooner(wait, quotaWait(d))
	}
	return nil, &capacityError{wait: wait}
}

// quotaWait is how long until an upstream's quota that refused with d may
// have room: d's RetryAfter, but for its requests in flight, whose oldest
// lease's end is a bound, not an estimate: a slot frees when a request in
// flight ends (see limitMessage).
func quotaWait(d *keystore.Denial) time.Duration {
	if d.Reason == "concurrency" {
		return concurrencyRetry
	}
	return d.RetryAfter
}

// sooner returns the sooner of two waits, either < 0 for none.
func sooner(wait, w time.Duration) time.Duration {
	if w >= 0 && (wait < 0 || w < wait) {
		return w
	}
	return wait
}

// coolingWait returns how long until the first upstream that serves model
// on apis, and is not one of tried, is back from its cooldown; -1 when none
// cools down.
func (u *upstreams) coolingWait(apis []string, model string, now time.Time, tried []*member) time.Duration {
	wait := time.Duration(-1)
	for _, m := range u.members {
		if until := m.pu.CoolingUntil(now); !until.IsZero() && m.pu.Serves(apis, model) && !slices.Contains(tried, m) {
			wait = sooner(wait, until.Sub(now))
		}
	}
	return wait
}

// capacityRefusal is the refusal of a request no upstream had room for.
func capacityRefusal(rq *request, ce *capacityError) *refusal {
	if ce.wait < 0 {
		return &refusal{status: http.StatusTooManyRequests, typ: typeRate, code: "upstream_capacity", noRetry: true, reason: "upstream",
			msg: fmt.Sprintf("the request for model %q asks for more than any upstream serving it allows in a minute", rq.model)}
	}
	return &refusal{status: http.StatusTooManyRequests, typ: typeRate, code: "upstream_capacity", retry: true, wait: ce.wait, reason: "upstream",
		msg: fmt.Sprintf("no upstream serving model %q has room for this request now; retry after %v", rq.model, roundWait(max(ce.wait, time.Second)))}
}

// upstreamFor checks that an upstream serves model for rq: one of its
// pools, chosen at its admission, else its route, which it is given.
func upstreamFor(rq *request, model string) *refusal {
	switch {
	case rq.ups.serves(rq.apis, model):
		return nil
	case rq.route != nil:
		rq.member = rq.route.m
		return nil
	}
	return invalid(http.StatusNotFound, "model_not_found", fmt.Sprintf("no upstream of this gateway serves model %q on this endpoint", model))
}
