package gateway

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/keystore"
)

// shadowServes reports whether a request that Admit refused with err is to
// be served all the same: Options.Shadow is on and a limit of the key or
// its models refused it. It then logs the refusal the request would have
// had and notes it in x, whose usage finish charges with
// keystore.Store.RecordUsage. An unknown, disabled or expired key is
// refused still, as is a request the key store could not decide: shadow
// mode tries limits out, it does not let in callers who may not call at
// all.
func (g *Gateway) shadowServes(x *exchange, r *http.Request, err error) bool {
	var d *keystore.Denial
	if !g.shadow || !errors.As(err, &d) {
		return false
	}
	switch d.Reason {
	case "window", "rate", "concurrency", "model":
	default:
		return false
	}
	x.shadowed = d
	g.logShadow(r, x, d)
	return true
}

// shadowRate is the Deny of the Options.RPS middleware in shadow mode: a
// request over the rate is logged as it would have been refused and
// forwarded, with the RateLimit fields that tell it is over. A limiter
// that failed refuses it still, as the key store does.
func (g *Gateway) shadowRate(w http.ResponseWriter, r *http.Request, d httplimit.Decision) {
	x := exchangeOf(r.Context())
	if d.Status != http.StatusTooManyRequests || x == nil {
		denyRate(w, r, d)
		return
	}
	sd := &keystore.Denial{Reason: "rps", Limit: d.Policy, RetryAfter: d.Result.RetryAfter}
	if x.shadowed == nil {
		x.shadowed = sd
	}
	g.logShadow(r, x, sd)
	w.Header().Del("Retry-After") // of a refusal, which this is not
	g.proxy.ServeHTTP(w, r)
}

// logShadow logs that x would have been refused by d: at level Warn, which
// is what an operator rolling out limits watches for.
func (g *Gateway) logShadow(r *http.Request, x *exchange, d *keystore.Denial) {
	retry := int64(-1) // never
	if d.RetryAfter >= 0 {
		retry = max(1, ceilSeconds(d.RetryAfter))
	}
	g.log.LogAttrs(r.Context(), slog.LevelWarn, "gateway: shadow: would refuse",
		slog.String("request_id", x.id), slog.String("key_id", x.keyID), slog.String("model", x.model),
		slog.String("reason", d.Reason), slog.String("limit", d.Limit), slog.Int64("retry_after", retry))
}
