// Package gateway is a metering reverse proxy for a model API: it
// authenticates each request's API key against the key store of a ratestore
// database (keystore.Open), refuses keys that are unknown, disabled,
// expired or past one of their token windows, optionally limits each key's
// request rate, forwards the rest to one upstream, and records the tokens
// that the upstream reports having spent against the key.
//
// Of a key's keystore.Policy the gateway enforces the token windows only:
// it checks them before the request (keystore.Store.Check) and records
// usage after it (RecordUsage). The policy's request rate, concurrency cap
// and models are enforced by keystore.Store.Admit, which the gateway does
// not use yet.
//
//	db, err := ratestore.Open("ratestore.db", ratestore.Options{})
//	...
//	g, err := gateway.New(db, gateway.Options{Upstream: upstreamURL, UpstreamKey: os.Getenv("RATESTORE_UPSTREAM_KEY")})
//	...
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: g}
//
// # Requests
//
// A caller sends its ratestore secret as "Authorization: Bearer <secret>"
// or, when there is no bearer token, as "X-API-Key: <secret>". Every answer
// the gateway writes itself is JSON with an "error" code and a "message",
// and never holds the secret:
//
//   - 401 missing_api_key or invalid_api_key (with WWW-Authenticate: Bearer)
//   - 403 key_disabled or key_expired
//   - 429 token_limit_exceeded: the key used more than the limit of one of
//     its token windows (keystore.Store.Check). Retry-After is the seconds,
//     rounded up, until the key is allowed again, and the body is
//     {"error","window","tokens_used","token_limit","window_end","retry_after_seconds"},
//     about the window past its limit (of several, the one whose usage
//     takes longest to expire): window is its length as a Go duration
//     ("5h0m0s"), window_end (RFC 3339, UTC) when the oldest usage it
//     still counts stops counting, as keystore.WindowUsage.WindowEnd.
//   - 429 rate_limited, with the RateLimit fields, when Options.RPS is set
//     and the key is over its request rate (see below)
//   - 502 upstream_unavailable when the upstream cannot be reached
//   - 503 store_unavailable (or service_unavailable from the rate limit)
//     when the database fails
//
// A refused request never reaches the upstream. The token windows are
// checked before the request and usage recorded after the response, so
// requests of one key that run at the same time are all let through while
// the key is within its limit, and may together take it past the limit:
// usage is only known afterwards. The key is then refused until enough of
// the window past its limit has expired.
//
// # Request rate
//
// With Options.RPS > 0, every key is also limited to RPS requests per
// second in bursts of Burst: a strategies.GCRA limiter of the same
// database, named "gateway.requests", keyed by the key's ID, applied by
// an httplimit.Middleware (so the answers carry the IETF RateLimit and
// RateLimit-Policy fields, and a denial the 429 body of
// httplimit.DefaultDeny). It is applied after the token check, which takes
// nothing, so a request refused for its tokens spends no request.
//
// # Headers
//
// The caller's Authorization and X-API-Key fields are never forwarded: they
// carry the ratestore secret, which the upstream has no use for. With
// Options.UpstreamKey set, the gateway sends its own credential instead, in
// Authorization as a bearer token or in the field that
// Options.UpstreamKeyHeader names (x-api-key for Anthropic's API): callers
// never see the upstream's key. Without it the request goes out with no
// credential, for an upstream that needs none. X-Forwarded-For, -Host and
// -Proto are set; the Host is the upstream's. Accept-Encoding is dropped, so
// that the transport asks for gzip itself and decompresses the response:
// the gateway reads usage from the plain body, and the caller receives it
// uncompressed.
//
// # Usage
//
// A response of status 200 to 399 is metered as it streams through,
// without being held back: the body is wrapped in a reader that passes
// every byte on unchanged and as soon as it arrives, and parses a copy.
//
//   - application/json (and +json) bodies are kept, up to
//     Options.MaxJSONBody, and parsed at their end. A larger body records
//     nothing (and a warning is logged).
//   - text/event-stream bodies are parsed line by line as they pass, in a
//     line and an event buffer of at most Options.MaxEventBytes each; an
//     event larger than that is skipped. Only events whose data mentions
//     "usage" are decoded.
//
// The tokens are read from a "usage" object at the top of a JSON document,
// or inside its "message" (Anthropic's message_start) or "response"
// (OpenAI's Responses API events): total_tokens when present (OpenAI),
// else input_tokens + output_tokens (Anthropic; prompt_tokens and
// completion_tokens count as those). In a stream each count is cumulative,
// so the latest value of each wins: Anthropic's message_start reports
// input_tokens, its message_delta the final output_tokens, and the tokens
// are their sum, each counted once. Anthropic's cache_* input counts are
// not added. An OpenAI stream reports usage in its last chunk when the
// request asks for it (stream_options.include_usage).
//
// The usage is recorded once, in every token window of the key, with
// keystore.Store.RecordUsage under the key's ID, after the body has ended (at its end, or cut short: the caller
// went away, the upstream broke off) and the response has been flushed to
// the caller, before the request is done: so the caller never waits for
// the record (in Sync mode, an fsync) to get the end of the response, and
// a graceful shutdown waits for it. A stream records whatever usage it
// reported before it ended; a JSON body only when complete.
// Nothing is recorded for an upstream error (a status of 400 or more, or no
// response), for a body that reports no usage or zero tokens, or one of
// another type or still encoded. The record does not depend on the
// caller's context: tokens spent are recorded even when the caller has
// gone away.
//
// # Stats
//
// GET Options.StatsPath (default "/stats") is answered by the gateway, not
// forwarded: the usage of the caller's own key, authenticated like any
// request, as Stats: every token window, and the binding one (the least
// remaining) at the top level. It takes no arguments, so it cannot show another
// key's data, and it is neither token- nor rate-limited.
//
// # Logs
//
// Every request is logged once at its end, at level Info, with its request
// ID (also sent to the caller as Ratestore-Request-Id), method, path (never
// the query), key ID (never the secret), status, tokens recorded and
// latency. A failed record is logged at level Error with the key ID and
// the tokens, so that it can be reconciled.
package gateway
