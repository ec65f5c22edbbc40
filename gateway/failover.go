package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/gateway/pool"
	"github.com/ratestore/ratestore/keystore"
)

// answer is what the gateway makes of an upstream's answer: whether the
// request goes on to the next upstream, and whether this one cools down,
// for how long (0: the pool's own doubling wait).
type answer struct {
	next, cool bool
	wait       time.Duration
}

// verdict judges an upstream's answer res (nil, with err, when there is
// none) to rq. A 429 or 5xx, or no answer for a reason other than a
// timeout or the request's end, is a failure: the upstream cools down and
// the request may go on. A stored response (/v1/responses/{id}) that an
// upstream does not have (404) may be another's: the request goes on,
// and that upstream does not cool down.
func (g *Gateway) verdict(ctx context.Context, rq *request, res *http.Response, err error) answer {
	if err != nil {
		var ne net.Error
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return answer{}
		}
		return answer{next: true, cool: true}
	}
	switch s := res.StatusCode; {
	case s == http.StatusTooManyRequests || s >= 500:
		return answer{next: true, cool: true, wait: retryAfter(res.Header, g.now())}
	case s == http.StatusNotFound && (rq.ep.retrieve || rq.ep == &epDeleteResponse):
		return answer{next: true}
	}
	return answer{}
}

// noteAnswer notes m's answer v at now: its count, and its cooldown or
// the end of its run of failures.
func (m *member) noteAnswer(v answer, now time.Time) {
	m.requests.Add(1)
	switch {
	case v.cool:
		m.errors.Add(1)
		m.pu.Failed(now, v.wait)
	case !v.next:
		m.pu.Succeeded()
	}
}

// retryAfter is the wait an upstream's answer asks for: OpenAI's
// retry-after-ms, else Retry-After in seconds or as a date; 0 when it
// names none (or one past).
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 && ms < 1e9 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
		return time.Duration(min(s, int64(pool.MaxCooldown/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// failover moves rq's admission to the next upstream with room that has
// not been tried, and makes it rq's member, waiting in rq's line for one
// (holding the key's admission) when those that serve it have none. It
// reports whether there was one; when not, rq stays where it was.
func (g *Gateway) failover(ctx context.Context, rq *request, ad *admission, tried []*member) bool {
	if rq.route != nil && rq.member == rq.route.m {
		return false // a pool of one
	}
	err := g.inLine(ctx, rq, func(ctx context.Context) error { return g.moveOn(ctx, rq, ad, tried) })
	if err != nil && !errors.As(err, new(*capacityError)) {
		g.log.LogAttrs(ctx, slog.LevelError, "gateway: moving a request to another upstream failed",
			slog.String("request_id", rq.id), slog.String("error", err.Error()))
	}
	return err == nil
}

// moveOn moves rq's admission to the first upstream, in the pool's order,
// that has not been tried and has room. When none has, it returns a
// *capacityError: with the soonest wait, or -1 when no untried upstream
// serves the request at all.
func (g *Gateway) moveOn(ctx context.Context, rq *request, ad *admission, tried []*member) error {
	var buf [8]*pool.Upstream
	now := g.now()
	wait := rq.ups.coolingWait(rq.apis, rq.model, now, tried)
	for _, pu := range rq.ups.pool.Order(buf[:0], rq.apis, rq.model, now) {
		m := rq.ups.members[pu.Index]
		if slices.Contains(tried, m) {
			continue
		}
		if ad.adm != nil {
			err := ad.adm.Move(context.WithoutCancel(ctx), m.quotas)
			var d *keystore.Denial
			if errors.As(err, &d) {
				wait = sooner(wait, quotaWait(d))
				continue // no room there
			}
			if err != nil && !errors.Is(err, backend.ErrUncertain) {
				return err
			}
		}
		rq.member = m
		return nil
	}
	return &capacityError{wait: wait}
}
