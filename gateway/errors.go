package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/keystore"
)

// The error types of the gateway's own answers, as the official SDKs
// know them.
const (
	typeAuth       = apierror.Auth
	typePermission = apierror.Permission
	typeRate       = apierror.Rate
	typeInvalid    = apierror.Invalid
	typeAPI        = apierror.API
)

// maxRetryWait is the longest wait after which a refused request is worth
// retrying by a client by itself: beyond it, x-should-retry: false.
const maxRetryWait = 60 * time.Second

// concurrencyRetry is the Retry-After of a request refused by a key's cap
// on requests in flight (see deny).
const concurrencyRetry = time.Second

// writeError answers status with the gateway's error body (package
// apierror).
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	apierror.Write(w, status, typ, code, msg)
}

// retryFields sets Retry-After (seconds, rounded up, at least 1) when
// wait >= 0, and x-should-retry: false when waiting will not help within
// maxRetryWait.
func retryFields(h http.Header, wait time.Duration) {
	if wait >= 0 {
		h.Set("Retry-After", strconv.FormatInt(max(1, ceilSeconds(wait)), 10))
	}
	if wait < 0 || wait > maxRetryWait {
		h.Set("X-Should-Retry", "false")
	}
}

// roundWait is wait rounded up to the second, for messages.
func roundWait(wait time.Duration) time.Duration {
	return time.Duration(max(1, ceilSeconds(wait))) * time.Second
}

// deny answers a request of key k that d refused; reserve is the tokens
// it asked to reserve.
func (g *Gateway) deny(ctx context.Context, x *exchange, k keystore.Key, d *keystore.Denial, reserve int64) {
	x.reason = d.Reason
	g.refused(ctx, x, k, d)
	o := g.deniedBy(ctx, k, d)
	if status, code, msg := refusal(x, k, o, d); status != 0 {
		typ := typePermission
		if status == http.StatusUnauthorized {
			typ = typeAuth
		}
		writeError(x, status, typ, code, msg)
		return
	}
	if d.Reason == "budget" {
		// Over a budget until it resets, an hour or a month away: no
		// client should retry on its own.
		retryFields(x.Header(), d.RetryAfter)
		x.Header().Set("X-Should-Retry", "false")
		writeError(x, http.StatusTooManyRequests, typeRate, "budget_exceeded", budgetMessage(o, d))
		return
	}
	msg, wait := limitMessage(o, d, reserve)
	retryFields(x.Header(), wait)
	writeError(x, http.StatusTooManyRequests, typeRate, "rate_limit_exceeded", msg)
}

// owner is whose limit refused a request, for its message: the key's
// own, or its team's, and the policy that holds that limit.
type owner struct {
	who string // "key key_x", or "key key_x's team team_y"
	pol keystore.Policy
}

// deniedBy returns whose limit d refused a request of key k by. A team's
// policy is read from the key store, which has it in memory since it
// admitted the key's requests; if the team is gone meanwhile, its policy
// is empty and the messages leave its limits' figures out.
func (g *Gateway) deniedBy(ctx context.Context, k keystore.Key, d *keystore.Denial) owner {
	if d.Team == "" {
		return owner{who: "key " + k.ID, pol: k.Policy}
	}
	o := owner{who: fmt.Sprintf("key %s's team %s", k.ID, d.Team)}
	if t, err := g.keys.GetTeam(ctx, d.Team); err == nil {
		o.pol = t.Policy
	}
	return o
}

// budgetMessage is the message of a request d refused for a budget of o:
// which one, and when it resets.
func budgetMessage(o owner, d *keystore.Denial) string {
	budget := strings.TrimPrefix(d.Limit, "budget ")
	if d.RetryAfter < 0 {
		return fmt.Sprintf("%s: this request may cost more than its budget of %s allows in all", o.who, budget)
	}
	return fmt.Sprintf("%s is over its budget of %s; it has room again in %v", o.who, budget, roundWait(d.RetryAfter))
}

// refusal returns the answer to a request of key k that d refused for
// who it is or what it asked, not for a limit: 401 or 403, and 0 for a
// limit. A model is refused by o's policy: the key's, or its team's.
func refusal(x *exchange, k keystore.Key, o owner, d *keystore.Denial) (status int, code, msg string) {
	id := k.ID
	switch d.Reason {
	case "unknown":
		return http.StatusUnauthorized, "invalid_api_key", "the API key is not known to this gateway"
	case "disabled":
		return http.StatusForbidden, "key_disabled", fmt.Sprintf("key %s is disabled", id)
	case "expired":
		msg := fmt.Sprintf("key %s has expired", id)
		if !k.ExpiresAt.IsZero() {
			msg = fmt.Sprintf("key %s expired at %s", id, k.ExpiresAt.UTC().Format(time.RFC3339))
		}
		return http.StatusForbidden, "key_expired", msg
	case "model":
		msg := fmt.Sprintf("%s may not use model %q", o.who, x.model)
		if len(o.pol.Models) > 0 {
			msg += "; it may use " + strings.Join(o.pol.Models, ", ")
		}
		return http.StatusForbidden, "model_not_allowed", msg
	}
	return 0, "", ""
}

// limitMessage returns the message of a request, reserving reserve
// tokens, that the limit of d, o's, refused, and the wait to advise.
func limitMessage(o owner, d *keystore.Denial, reserve int64) (msg string, wait time.Duration) {
	retry := ""
	if d.RetryAfter > 0 {
		retry = fmt.Sprintf("; retry after %v", roundWait(d.RetryAfter))
	}
	wait = d.RetryAfter
	switch d.Reason {
	case "window":
		msg = windowMessage(o, d, reserve, retry)
	case "rate":
		msg = fmt.Sprintf("%s is over its request rate: %s%s", o.who, d.Limit, retry)
	case "short":
		// See Gateway.admit.
		msg = fmt.Sprintf("%s: a request that names no maximum output is already running on the last room of its token window; retry shortly, or name max_tokens", o.who)
	case "concurrency":
		// A slot frees when a request in flight ends, which nothing can
		// foresee; the key store's RetryAfter is the end of the oldest
		// lease, a bound, not an estimate. Ask for a short wait instead,
		// which the SDKs' own retries honour.
		wait = concurrencyRetry
		msg = fmt.Sprintf("%s is at its limit of %s; retry shortly", o.who, d.Limit)
	default:
		msg = fmt.Sprintf("%s is over a limit: %s%s", o.who, d.Limit, retry)
	}
	return msg, wait
}

// windowMessage is limitMessage's message for a token window of o: its
// limit, when o's policy has it (a team deleted meanwhile has none).
func windowMessage(o owner, d *keystore.Denial, reserve int64, retry string) string {
	window, limit := strings.TrimPrefix(d.Limit, "window "), ""
	for _, w := range o.pol.Windows {
		if w.Window.String() == window {
			limit = fmt.Sprintf("%d tokens", w.Limit)
		}
	}
	if d.RetryAfter < 0 {
		if limit != "" {
			limit = " (" + limit + ")"
		}
		return fmt.Sprintf("%s: this request reserves %d tokens (request bytes/4 + its maximum output), more than its %s token window allows%s; ask for fewer output tokens",
			o.who, reserve, window, limit)
	}
	if limit != "" {
		limit = ": " + limit
	}
	return fmt.Sprintf("%s is over its %s token window%s%s", o.who, window, limit, retry)
}

// denyRate is the Deny of the Options.RPS middleware: the gateway's error
// body, with the RateLimit fields httplimit has set.
func denyRate(w http.ResponseWriter, r *http.Request, d httplimit.Decision) {
	if d.Status != http.StatusTooManyRequests {
		writeError(w, d.Status, typeAPI, "rate_limit_failed", "the gateway could not apply its request rate; retry later")
		return
	}
	id := ""
	if x := exchangeOf(r.Context()); x != nil {
		id, x.reason = x.keyID, "rps"
	}
	wait := d.Result.RetryAfter
	w.Header().Del("Retry-After")
	retryFields(w.Header(), wait)
	writeError(w, http.StatusTooManyRequests, typeRate, "rate_limit_exceeded",
		fmt.Sprintf("key %s is over the gateway's request rate (--rps); retry after %v", id, roundWait(wait)))
}
