// Package gateway is a metering reverse proxy for a model API: it
// authenticates each request's API key against the key store of a ratestore
// database (keystore.Open), admits it under the key's whole
// keystore.Policy (token windows, request rate, concurrency cap, models)
// with keystore.Store.Admit, forwards it to one upstream, and charges the
// tokens that the upstream reports having spent with
// keystore.Admission.Finish.
//
//	db, err := ratestore.Open("ratestore.db", ratestore.Options{})
//	...
//	g, err := gateway.New(db, gateway.Options{Upstream: upstreamURL, UpstreamKey: os.Getenv("RATESTORE_UPSTREAM_KEY")})
//	...
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: g}
//
// # Requests
//
// A caller sends its ratestore secret as "Authorization: Bearer <secret>",
// or, when there is no bearer token, as "X-API-Key: <secret>" (Anthropic
// style) or "x-goog-api-key: <secret>" (Gemini style): the official SDKs
// work unchanged with the gateway as base URL and a ratestore secret as
// API key.
//
// The gateway reads the request body whole, up to Options.MaxRequestBody
// (413 above it), and forwards the same bytes. A model call is a request
// that names a model: the "model" field of its JSON body (OpenAI chat
// completions, completions, responses, embeddings; Anthropic messages) or
// the Gemini path /v1beta/models/{model}:generateContent or
// :streamGenerateContent. It is admitted with the model (refused when the
// key's Policy.Models globs do not match it) and a reservation of its
// estimated tokens: request bytes/4 plus its maximum output (max_tokens,
// max_output_tokens, max_completion_tokens or
// generationConfig.maxOutputTokens), or Options.DefaultMaxTokens when it
// names none. The reservation counts as used in every token window of the
// key while the request runs, so that requests of one key that run at the
// same time cannot together take it far past a limit: a window admits a
// request only when its usage plus the reservation fits. Other requests
// (a POST that names no model) reserve nothing. GET, HEAD, DELETE and
// OPTIONS requests (model lists, retrieving a stored response) are
// admitted with no reservation and never charged tokens; they count
// against the key's request rate and concurrency cap like any other.
//
// Every answer the gateway writes itself is JSON of the shape the
// official SDKs read, {"type":"error","error":{"type","code","message"}},
// with a message a person understands, and never holds the secret:
//
//   - 401 authentication_error: missing_api_key or invalid_api_key (with
//     WWW-Authenticate: Bearer)
//   - 403 permission_error: key_disabled, key_expired or
//     model_not_allowed (the message names the model and the globs)
//   - 429 rate_limit_error, code rate_limit_exceeded: a token window, the
//     key's request rate or its concurrency cap refused the request; the
//     message names the limit ("key key_… is over its 5h0m0s token
//     window: 100000 tokens; retry after 4m10s"). Retry-After is the
//     seconds, rounded up, until the limit admits the request, as
//     keystore.Denial.RetryAfter tells; when it never will (a reservation
//     larger than a window's limit) there is no Retry-After. When that is
//     never or more than a minute away, x-should-retry: false tells the
//     SDKs to fail at once rather than retry (they honour Retry-After and
//     would otherwise sleep, up to hours). Of the concurrency cap,
//     Retry-After is when the oldest request in flight loses its slot
//     (keystore.Options.LeaseTTL): an upper bound.
//   - 429 as above, with the RateLimit fields, when Options.RPS is set
//     and the key is over that request rate (see below)
//   - 413 invalid_request_error, request_too_large: a body over
//     Options.MaxRequestBody
//   - 502 api_error, upstream_unavailable: the upstream cannot be reached
//     or failed before its response header
//   - 504 api_error, upstream_timeout: the upstream did not connect or
//     send its response header in time (see Timeouts)
//   - 503 api_error, store_unavailable, when the database fails
//
// A refused request changes nothing (keystore.Store.Admit is all or
// nothing) and never reaches the upstream.
//
// # Request rate
//
// With Options.RPS > 0, every key is also limited to RPS requests per
// second in bursts of Burst: a strategies.GCRA limiter of the same
// database, named "gateway.requests", keyed by the key's ID, applied by
// an httplimit.Middleware (so the answers carry the IETF RateLimit and
// RateLimit-Policy fields, and a denial
// the error body above). It is applied after the admission, so a request
// it refuses was admitted and is finished at once, charged nothing.
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
//     Options.MaxJSONBody, and parsed at their end. A larger body is
//     passed on whole, its usage not read (see below).
//   - text/event-stream bodies are parsed line by line as they pass, in a
//     line and an event buffer of at most Options.MaxEventBytes each; an
//     event larger than that is skipped. Only events whose data mentions
//     "usage" are decoded.
//
// The tokens are read from a "usage" object at the top of a JSON document,
// or inside its "message" (Anthropic's message_start) or "response"
// (OpenAI's Responses API events): total_tokens when present (OpenAI),
// else input_tokens + output_tokens + cache_creation_input_tokens +
// cache_read_input_tokens (Anthropic, which counts its prompt cache apart
// from input_tokens; prompt_tokens and completion_tokens count as input
// and output, and OpenAI's prompt_tokens already include cached ones). In
// a stream each count is cumulative, so the latest value of each wins:
// Anthropic's message_start reports the input and cache tokens, its
// message_delta the final output_tokens, and the tokens are their sum,
// each counted once. An OpenAI chat or completions stream reports usage in
// its last chunk only when the request asks for it
// (stream_options.include_usage): when the caller did not, the gateway
// asks on its behalf and takes that chunk out of the stream the caller
// sees, which is otherwise passed on byte for byte.
//
// Every admission is finished exactly once, when the request is done: at
// the end of the response, when the upstream failed or broke off, when the
// caller went away (on a context that is not the request's, so the charge
// is stored even then), after the response has been flushed to the caller,
// so that the caller never waits for the record (in Sync mode, an fsync)
// and a graceful shutdown waits for it. It charges, in place of the
// reservation:
//
//   - a request that generates nothing (GET, HEAD, DELETE, OPTIONS): 0;
//   - a response read to its end that reported usage: that usage;
//   - a request that names no model: what usage was reported, if any,
//     else 0;
//   - a model call the upstream refused (status 400 to 499): what usage
//     was reported, if any, else 0;
//   - any other model call (the upstream failed, timed out or broke off a
//     stream, the caller hung up, no usage could be read): the
//     reservation, or the usage reported so far if more, logged at level
//     Warn as estimated.
//
// A JSON body over Options.MaxJSONBody is passed on but its usage is not
// read (a warning is logged), and a model call is charged its estimate.
//
// # Timeouts
//
// Options.ConnectTimeout (default 10s) bounds connecting to the upstream
// (the dial and the TLS handshake), Options.FirstByteTimeout (default 10
// minutes, the official SDKs' own request timeout: a non-streamed
// response's header comes only after the whole generation) the wait for
// its response header; either gives the caller 504. They are fields of
// the default Transport (net.Dialer.Timeout, TLSHandshakeTimeout,
// ResponseHeaderTimeout), so a Transport of the caller's brings its own.
// Options.IdleTimeout (default 60s) bounds each read of the response body:
// an upstream silent for longer has its request cancelled, and the
// caller's response (a stream, mostly) is cut off where it is; the model
// call is charged its estimate.
//
// # Stats
//
// GET Options.StatsPath (default "/stats") is answered by the gateway, not
// forwarded: the usage of the caller's own key, authenticated like any
// request, as Stats: every token window, and the binding one (the least
// remaining) at the top level; its Used counts the reservations of
// requests in flight. It takes no arguments, so it cannot show another
// key's data, and it is neither token- nor rate-limited.
//
// # Logs
//
// Every request is logged once at its end, at level Info, with its request
// ID (also sent to the caller as Ratestore-Request-Id), method, path (never
// the query), key ID (never the secret), model, status, tokens charged,
// tokens reserved, latency, and "estimated":true when the tokens are the
// estimate. A failed charge is logged at level Error with the key ID and
// the tokens, so that it can be reconciled.
package gateway
