package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ratestore/ratestore/keystore"
)

// shadowServes reports whether a request that Admit refused with err is to
// be served all the same: Options.Shadow is on and a limit of the key or
// its models refused it. It then logs the refusal the request would have
// had and notes it in ad, whose usage finish charges with
// keystore.Store.RecordUsage. An unknown, disabled or expired key is
// refused still, as is a request the key store could not decide: shadow
// mode tries limits out, it does not let in callers who may not call at
// all.
func (g *Gateway) shadowServes(ctx context.Context, rq *request, ad *admission, err error) bool {
	var d *keystore.Denial
	if !g.shadow || !errors.As(err, &d) {
		return false
	}
	switch d.Reason {
	case "window", "rate", "concurrency", "model":
	default:
		return false
	}
	ad.shadowed = d
	g.logShadow(ctx, rq, d)
	return true
}

// logShadow logs that rq would have been refused by d: at level Warn, which
// is what an operator rolling out limits watches for.
func (g *Gateway) logShadow(ctx context.Context, rq *request, d *keystore.Denial) {
	retry := int64(-1) // never
	if d.RetryAfter >= 0 {
		retry = max(1, ceilSeconds(d.RetryAfter))
	}
	g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: shadow: would refuse",
		slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.String("model", rq.model),
		slog.String("reason", d.Reason), slog.String("limit", d.Limit), slog.Int64("retry_after", retry))
}
