package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
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
// on requests in flight (see limitMessage).
const concurrencyRetry = time.Second

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

// keyRefused is the refusal of a request whose key Authenticate, Lookup
// or Admit refused with err, reserving reserve tokens; or 503 when the
// key store failed.
func (g *Gateway) keyRefused(ctx context.Context, rq *request, k keystore.Key, err error, reserve int64) *refusal {
	var d *keystore.Denial
	if !errors.As(err, &d) {
		switch {
		case errors.Is(err, keystore.ErrNotFound):
			d = &keystore.Denial{Reason: "unknown", RetryAfter: -1}
		case errors.Is(err, keystore.ErrDisabled):
			d = &keystore.Denial{Reason: "disabled", RetryAfter: -1}
		case errors.Is(err, keystore.ErrExpired):
			d = &keystore.Denial{Reason: "expired", RetryAfter: -1}
		}
	}
	if d == nil {
		level := slog.LevelError
		if ctx.Err() != nil {
			level = slog.LevelDebug // the caller went away
		}
		g.log.LogAttrs(ctx, level, "gateway: key store failed",
			slog.String("request_id", rq.id), slog.String("key_id", rq.keyID), slog.String("error", err.Error()))
		return &refusal{status: http.StatusServiceUnavailable, typ: typeAPI, code: "store_unavailable", msg: "the gateway's key store failed; retry later"}
	}
	return g.deny(ctx, rq, k, d, reserve)
}

// deny counts the refusal d of a request of key k in the ledger and
// returns its answer; reserve is the tokens it asked to reserve.
func (g *Gateway) deny(ctx context.Context, rq *request, k keystore.Key, d *keystore.Denial, reserve int64) *refusal {
	g.refused(ctx, rq, k, d)
	if d.Reason == "end_user" {
		return &refusal{status: http.StatusBadRequest, typ: typeInvalid, code: "end_user_required", reason: d.Reason,
			msg: fmt.Sprintf("key %s requires each request to name its end user: send %s, or the body's user (OpenAI) or metadata.user_id (Anthropic)", k.ID, EndUserHeader)}
	}
	o := g.deniedBy(ctx, k, d)
	if status, code, msg := keyRefusal(rq.model, k, o, d); status != 0 {
		typ := typePermission
		if status == http.StatusUnauthorized {
			typ = typeAuth
		}
		return &refusal{status: status, typ: typ, code: code, msg: msg, reason: d.Reason}
	}
	if d.Reason == "budget" {
		// Over a budget until it resets, an hour or a month away: no
		// client should retry on its own.
		return &refusal{status: http.StatusTooManyRequests, typ: typeRate, code: "budget_exceeded", msg: budgetMessage(o, d),
			reason: d.Reason, retry: true, wait: d.RetryAfter, noRetry: true}
	}
	msg, wait := limitMessage(o, d, reserve)
	return &refusal{status: http.StatusTooManyRequests, typ: typeRate, code: "rate_limit_exceeded", msg: msg,
		reason: d.Reason, retry: true, wait: wait}
}

// refused counts the refusal d of rq's key in the ledger's rollups (in
// memory; the ledger writes the counts as totals).
func (g *Gateway) refused(ctx context.Context, rq *request, k keystore.Key, d *keystore.Denial) {
	if g.ledger == nil || k.ID == "" || d.Reason == "unknown" {
		return
	}
	err := g.ledger.Refused(context.WithoutCancel(ctx), ledger.Refusal{Key: k.ID, Team: k.Team, Model: refusedModel(rq.model, k, d), EndUser: rq.endUser, Reason: d.Reason})
	g.ledgerFailed(ctx, rq, err)
}

// refusedModel is the model a refusal d of key k is counted under: the
// one asked for when k's policy allows it, else ledger.OtherModel. A key
// holder chooses the names it sends, and a rollup keeps a row for at
// most 256 models: names its policy refuses would fill them, and the
// model it does use would then be counted as (other).
func refusedModel(model string, k keystore.Key, d *keystore.Denial) string {
	if d.Reason == "model" || !allows(k.Policy.Models, model) {
		return ledger.OtherModel
	}
	return model
}

// allows reports whether the model globs of a policy allow model, as
// the key store checks them (path.Match; none: any model; a request
// naming none is not checked).
func allows(globs []string, model string) bool {
	if len(globs) == 0 || model == "" {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
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
	o := owner{who: "key " + k.ID, pol: k.Policy}
	if d.Team != "" {
		o = owner{who: fmt.Sprintf("key %s's team %s", k.ID, d.Team)}
		if t, err := g.keys.GetTeam(ctx, d.Team); err == nil {
			o.pol = t.Policy
		}
	}
	return o.sub(d)
}

// sub is o narrowed to the sub-limit of its policy that d names, if any:
// the end user's ("end user u-17 of key key_x", with the end users'
// limits), or a model limit's ("key key_x's limit on models gpt-4o*").
func (o owner) sub(d *keystore.Denial) owner {
	u := o.pol.EndUsers
	switch {
	case d.EndUser != "":
		return owner{who: fmt.Sprintf("end user %q of %s", d.EndUser, o.who),
			pol: u.Policy()}
	case d.Models != nil:
		n := owner{who: fmt.Sprintf("%s's limit on models %s", o.who, strings.Join(d.Models, ","))}
		for _, m := range o.pol.ModelLimits {
			if slices.Equal(m.Models, d.Models) {
				n.pol = m.Policy()
			}
		}
		return n
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

// keyRefusal returns the answer to a request of key k for model that d
// refused for who it is or what it asked, not for a limit: 401 or 403,
// and 0 for a limit. A model is refused by o's policy: the key's, or its
// team's.
func keyRefusal(model string, k keystore.Key, o owner, d *keystore.Denial) (status int, code, msg string) {
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
		msg := fmt.Sprintf("%s may not use model %q", o.who, model)
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
