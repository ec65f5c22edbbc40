// Package gateway is a metering reverse proxy for a model API: it
// authenticates each request's API key against the key store of a ratestore
// database (keystore.Open), admits it under the key's whole
// keystore.Policy (token windows, request rate, concurrency cap, models)
// with keystore.Store.Admit, forwards it to its upstream (one per path
// prefix: see Routes), and charges the
// tokens that the upstream reports having spent with
// keystore.Admission.Finish.
//
//	db, err := ratestore.Open("ratestore.db", ratestore.Options{})
//	...
//	g, err := gateway.New(db, gateway.Options{Upstream: upstreamURL, UpstreamKey: os.Getenv("RATESTORE_UPSTREAM_KEY")})
//	...
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: g,
//		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
//
// The server's timeouts bound what the gateway cannot: a caller slow to send
// its header (ReadHeaderTimeout) and idle keep-alive connections
// (IdleTimeout); the gateway bounds the body itself (Options.BodyTimeout).
// Leave ReadTimeout and WriteTimeout at zero: streams run for minutes.
//
// # Requests
//
// A caller sends its ratestore secret as "Authorization: Bearer <secret>",
// or, when there is no bearer token, as "X-API-Key: <secret>" (Anthropic
// style) or "x-goog-api-key: <secret>" (Gemini style): the official SDKs
// work unchanged with the gateway as base URL and a ratestore secret as
// API key.
//
// # Endpoints
//
// The gateway forwards by allowlist: only the operations below, with the
// method each API uses, on a clean path (no "." or ".." segment, no "//",
// no trailing "/", no escaped "/" or "\"). Anything else is answered 404
// (unknown_endpoint) or 405 (method_not_allowed, with Allow) and never
// forwarded: an endpoint the gateway does not know it could not meter
// (batch jobs report their usage hours later, to nobody) nor tell which
// model it runs.
//
//	POST   /v1/chat/completions, /v1/completions, /v1/responses   OpenAI: generate
//	POST   /v1/embeddings                                         OpenAI: embed
//	GET    /v1/responses/{id}, /v1/responses/{id}/input_items     retrieve (never charged)
//	DELETE /v1/responses/{id}
//	POST   /v1/messages                                           Anthropic: generate
//	POST   /v1/messages/count_tokens                              Anthropic: count (model checked)
//	GET    /v1/models, /v1/models/{id}                            OpenAI and Anthropic
//	POST   /v1beta/models/{model}:generateContent, :streamGenerateContent,
//	       :embedContent, :batchEmbedContents, :countTokens       Gemini (also under /v1)
//	GET    /v1beta/models, /v1beta/models/{model}
//
// # Request bodies
//
// A POST's body is read whole, up to Options.MaxRequestBody (413 above
// it), within Options.BodyTimeout of its header (408 when slower), after a
// concurrency slot of its key is taken (see Slots), and parsed once,
// strictly: the gateway admits a request on its model and reserves on its
// maximum output, so it reads them exactly as the upstream will, and
// refuses with 400 (invalid_body, naming what is wrong) every body an
// upstream might read otherwise: anything but one JSON object (a byte
// order mark, trailing bytes, invalid UTF-8, NaN); a member name twice in
// an object, escaped or not, at any depth; a name that differs only in
// case from one the gateway reads ("Model", "MAX_TOKENS"), as Go's
// encoding/json would match it; a field of the wrong type; a count that is
// not a whole number >= 0 (100.0 and 1e2 are 100; a count too large
// saturates). A Content-Encoding (a gzip body would be forwarded unread) or
// a Content-Type other than application/json gets 415; a body on a GET or
// DELETE 400. What goes upstream is the body as it was read, byte for
// byte, but for the stream usage the gateway asks for (see Usage).
//
// A model endpoint's request names its model, in the "model" field of its
// body (required: 400 missing_model without it) or in the Gemini path. It
// must be valid UTF-8, printable, of at most 256 bytes (400 invalid_model),
// and the key's Policy.Models globs must allow it (403). A generating
// request reserves its estimated tokens while it runs: request bytes/4
// plus its maximum output (max_tokens, max_completion_tokens,
// max_output_tokens, or generationConfig.maxOutputTokens), times its
// choices (n, candidateCount). One that names no maximum reserves its
// prompt, and Options.DefaultMaxTokens per choice as far as every window of
// the key has room (keystore.Request.Optional): the default is the
// gateway's guess, and never refuses a request on its own account, while a
// request whose own maximum no window can hold is refused (429,
// x-should-retry: false), as OpenAI does. A request that got less than the
// whole default is short: it may generate past what it holds, so while one
// of a key runs (in this process) another is refused (429, retry after a
// second), and so is one whose reservation was decided before the last
// one ended (it did not count that request's usage past its
// reservation): a key's windows are overrun by at most one such request's
// usage, however its callers interleave. The reservation counts as used
// in every token window of the key while the request runs, so that
// requests of one key that run at the same time cannot together take it
// far past a limit: a window admits a request only when its usage plus
// the reservation fits. OpenAI background responses (background: true) are
// refused: their usage is reported to nobody. Requests that generate
// nothing (model lists, retrieving or deleting a stored response, token
// counts) reserve nothing; they count against the key's request rate and
// concurrency cap like any other.
//
// # Slots
//
// A key with Policy.MaxConcurrent n holds at most n request bodies in this
// process's memory, however slowly its callers send them: a slot is taken
// in the gateway before the body is read (429 when none is free), and the
// key store's own slot (keystore.Store.Admit, shared by every gateway on
// the store) is taken once the body is read. Shadow mode skips the first.
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
//   - 400 invalid_request_error: invalid_body, missing_model,
//     invalid_model, unexpected_body or unsupported_parameter (see Request
//     bodies); 408 request_timeout; 413 request_too_large (a body over
//     Options.MaxRequestBody); 415 unsupported_encoding or
//     unsupported_media_type
//   - 404 invalid_request_error, unknown_endpoint, and 405
//     method_not_allowed: not an endpoint the gateway serves (see
//     Endpoints)
//   - 502 api_error, upstream_unavailable: the upstream cannot be reached
//     or failed before its response header
//   - 504 api_error, upstream_timeout: the upstream did not connect or
//     send its response header in time (see Timeouts)
//   - 503 api_error, store_unavailable, when the database fails
//   - 404 invalid_request_error, no_route: no route serves the path (see
//     Routes)
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
// # Routes
//
// Options.Upstream is the default route. Options.Routes add routes by path
// prefix, each to an upstream of its own with a credential of its own (the
// upstreams only accept their own keys): a request goes to the route of the
// longest prefix that matches its path on segment boundaries
// ("/v1/messages" matches /v1/messages and /v1/messages/count_tokens, not
// /v1/messagesX), else to the default route; it is clean (see Endpoints)
// and forwarded as it came (a model that a pool serves goes there
// instead: see Upstreams). Each route is a pool of one, without limits,
// named by its prefix ("/" for the default route). A path that no route or
// pool serves is answered 404 once the key is authenticated, before its body is read: it is never
// forwarded, and charges nothing. New refuses (backend.ErrInvalid,
// naming the route) a prefix that does not start with "/" or is not clean,
// two routes of the same prefix (a trailing "/" is ignored, and "/" is the
// default route's), and an upstream that is not an http or https URL.
//
// # Upstreams
//
// Options.Upstreams are pools of upstreams, each of an api (APIOpenAI,
// APIAzureOpenAI, APIAnthropic, APIGemini) whose endpoints it serves, with
// model globs, a weight and the provider's limits on it (UpstreamLimits).
// A request for a model that an upstream serves goes to one of those, and
// never to a route; any other goes to its route. The shared model lists
// (/v1/models) are Anthropic's with an anthropic-version field, else
// OpenAI's; Azure upstreams serve OpenAI's model calls and stored
// responses, and the Azure client's own paths.
//
// The candidates are tried in the order of package pool (smooth weighted
// round robin, the cooling down left out), and the request is admitted on
// the first whose limits have room, in the same key store decision as its
// key's: an upstream's limits are a keystore.Quota, "upstream:" and its
// name (tokens per minute a rolling 61 s in 1 s buckets, which never
// forgets usage before a provider's exact minute does; requests per
// minute; requests in flight), reserved with the request's estimate and
// settled to its reported usage, shared by every gateway on one Redis.
// When none has room the request waits in a line (one per api and model),
// which serves its keys in turn, a request each; only the line's head
// tries again, when a request ends or the soonest refusal's wait has
// passed (at most every 250 ms: another gateway frees room without telling
// this one). A wait holds nothing of the key's in the store and charges
// nothing; it ends at Options.UpstreamQueueTimeout or the caller's going
// away with 429 upstream_capacity and Retry-After, and at once when the
// request is larger than every upstream allows in a minute (429,
// X-Should-Retry: false). The key's slot of Options' local bound (see
// Slots) stays taken while it waits: it bounds the bodies held in memory.
//
// An upstream that answers 429 or 5xx, or cannot be reached, cools down
// (its Retry-After or retry-after-ms, else 1 s doubling to 60 s) and the
// request goes to the next candidate with room that was not tried, its
// admission moved there (keystore.Admission.Move: the key is not counted
// twice), up to Options.UpstreamAttempts sends; the last answer is the
// caller's. The answer is judged from its status, before anything reaches
// the caller, so a request is never sent twice once the caller got a byte;
// a timeout is not retried (the upstream may be generating). A stored
// response an upstream does not have (404 to /v1/responses/{id}) is asked
// of the next, without a cooldown: it may be another organization's.
//
// For an Azure upstream, a model call on OpenAI's path goes to
// /openai/deployments/{deployment}/chat/completions (completions,
// embeddings) and a response to /openai/responses with the deployment as
// its model, each with the upstream's api-version, and the credential in
// api-key. The Azure client's paths (/openai/deployments/{d}/...,
// /openai/responses, the caller's secret in api-key) are served too: the
// deployment is read back as its model through the upstreams'
// Deployments, so that the key's models and prices apply to the model,
// and a request may fail over to a deployment of another name.
// SetUpstreams replaces the pools whole; GET /admin/upstreams (Upstreams)
// shows each upstream's limits and use, cooldown, requests and errors.
//
// # End users
//
// A request may name the end user it is for, the key's own customer: the
// header X-Ratestore-End-User (EndUserHeader), else OpenAI's body field
// user, else its safety_identifier, else Anthropic's metadata.user_id. The
// name is at most 256 bytes of printable UTF-8 (400 invalid_end_user
// otherwise, or for the header given twice), read as strictly as the
// model. The key store checks the end user's limits (keystore.EndUsers)
// and the key's model limits in the key's decision; a refusal names the
// end user ("end user "u-17" of key key_x is over its 1h0m0s token
// window"), a key whose policy requires one answers a request naming none
// with 400 end_user_required, and the rate-limit fields report the binding
// limit among the key's, its model limit's and its end user's. The header
// is the gateway's: never forwarded; the body's fields go to the upstream
// as they were. The ledger's entries name the end user.
//
// # Shadow mode
//
// With Options.Shadow, a request that a key's token windows, request rate,
// concurrency cap or models refuse is served all the same, and logged at
// level Warn as "gateway: shadow: would refuse" with its request ID, key
// ID, model, the reason (window, rate, concurrency, model, or rps for
// Options.RPS), the limit and retry_after (in seconds; -1 for never): to
// roll limits out and see whom they would refuse before they refuse
// anyone. Such a request has no admission: it reserves nothing and holds
// no slot, and its usage is charged at its end with
// keystore.Store.RecordUsage, past the limits, as usage is otherwise. The
// refusal it would have had is in the request's admission (shadowed), not
// in its refusal reason: it was not refused. A request over Options.RPS is
// served the same way, its RateLimit fields telling it is over but with no
// Retry-After. Unknown keys (401), disabled and expired ones (403), and
// requests the key store failed to decide (503) are refused still: shadow
// mode tries out limits, not who may call.
//
// # Headers
//
// Request fields go upstream by allowlist: Content-Type, Accept, and what
// the endpoint's API documents for requests (OpenAI-Beta; Anthropic-Version
// and Anthropic-Beta). Every other field is dropped: the caller's
// credentials in any form, cookies, OpenAI-Organization and
// OpenAI-Project (which choose whose account pays), method overrides,
// X-Forwarded-For (the caller's address is the gateway's to keep). So are
// query parameters but those an endpoint uses (alt=sse for Gemini
// streams, a listing's paging): a ?key= may hold the caller's secret. With
// Options.UpstreamKey set (Route.UpstreamKey, for a route), the gateway
// sends its own credential, to that route's upstream only, in
// Authorization as a bearer token or in the field that
// Options.UpstreamKeyHeader names (x-api-key for Anthropic's API): callers
// never see the upstream's key. Without it the request goes out with no
// credential, for an upstream that needs none. The transport asks for gzip
// itself and decompresses the response: the gateway reads usage from the
// plain body, and the caller receives it uncompressed.
//
// Response fields come back by allowlist too: Content-Type,
// Content-Length, Content-Encoding, Cache-Control, Retry-After,
// X-Should-Retry, and the upstream's request ID (X-Request-Id,
// Request-Id). The upstream's rate-limit fields (they tell the operator's
// account's limits, not the caller's key's), its organization, cookies,
// CORS fields and trailers are dropped, and so are its informational (1xx)
// responses. Every request gets a random ID of 64 bits, "req_" and 16
// hex digits, sent to the caller as Ratestore-Request-Id.
//
// # Usage
//
// Every response is metered as it streams through,
// without being held back: the body is wrapped in a reader that passes
// every byte on unchanged and as soon as it arrives, and scans it on the
// way. Neither a JSON body (application/json and +json) nor an event
// stream (text/event-stream) is kept: the scanner holds the containers it
// is in and copies out only the usage objects, so a body, a line or an
// event of any size is metered in a few kilobytes (see package meter).
//
// The usage objects are "usage" (or Gemini's "usageMetadata") at the top
// of a JSON document, or "usage" inside its "message" (Anthropic's
// message_start) or "response" (the OpenAI Responses API's events,
// response.completed, response.incomplete and response.failed alike),
// where a document is a JSON body, each object of a JSON array (Gemini's
// streamGenerateContent without alt=sse) or the data of each event of a
// stream. A "usage" anywhere else (in a string, in a choice) is not the
// response's. Tokens are counted by type, as each API defines them:
//
//   - input: OpenAI's prompt_tokens or input_tokens (which include the
//     cached tokens of prompt_tokens_details or input_tokens_details);
//     Anthropic's input_tokens plus cache_creation_input_tokens and
//     cache_read_input_tokens (which it counts apart); Gemini's
//     promptTokenCount (cachedContentTokenCount included) plus
//     toolUsePromptTokenCount;
//   - output: completion_tokens or output_tokens (reasoning tokens
//     included); Gemini's candidatesTokenCount plus thoughtsTokenCount,
//     which it counts apart;
//   - of which cache reads, cache writes and reasoning, for Options.Weights
//     and the metrics.
//
// A key is charged input + output, or with Options.Weights
// Input*(uncached input) + CacheRead*(cache reads) + CacheWrite*(cache
// writes) + Output*(output), rounded up (--weights in the command). A
// usage object with a total alone (total_tokens) is charged that total.
// In a stream each count is cumulative, so the latest value of each wins:
// Anthropic's message_start reports the input and cache tokens, its
// message_delta the final output_tokens, and every Gemini chunk its usage
// so far. An OpenAI chat or completions stream reports usage in its last
// chunk only when the request asks for it (stream_options.include_usage):
// when the caller did not, the gateway asks on its behalf and takes that
// chunk out of the stream the caller sees, which is otherwise passed on
// byte for byte.
//
// The upstream generates, and bills, to the end whether the caller waits
// for it or not. So a caller's hanging up does not end the upstream
// request of a generating endpoint: the gateway reads the rest of the
// response (passing it nowhere) to its usage, for up to
// Options.DrainTimeout (default 5 minutes) after the hang-up, and then
// ends it. Requests that generate nothing end with their caller.
//
// Every admission is finished exactly once, when the request is done: at
// the end of the response, when the upstream failed or broke off, after
// the caller went away (on a context that is not the request's, so the
// charge is stored even then), after the response has been flushed to the
// caller, so that the caller never waits for the record (in Sync mode, an
// fsync) and a graceful shutdown waits for it. It charges, in place of the
// reservation:
//
//   - a response that reports usage, read to its end, whatever its method
//     or status: that usage, but a retrieved stored response, charged
//     when it was made: 0;
//   - a request that generates nothing, or a model call the upstream
//     refused (status 400 to 499): what usage was reported, if any, else
//     0;
//   - a request that never reached the upstream (its connection was
//     refused): 0;
//   - any other model call (the upstream failed, timed out or broke off a
//     stream, the drain timeout ended it, no usage could be read): the
//     reservation, or the usage reported so far if more, logged at level
//     Warn as estimated.
//
// The usage an upstream reports is trusted up to
// Options.MaxTokensPerRequest (default 10M) per request: above it the
// bound is charged and the figure logged at level Error, so that one
// bogus response cannot lock a key out for its whole window.
//
// A usage object over 64 KiB (none is) is skipped, with a warning.
//
// # Money
//
// Every request is priced (Options.PricesFile over pricing.Default): the
// usage the upstream reports, by token type (pricing.Usage: uncached
// input, cache reads, five-minute and one-hour cache writes, output,
// reasoning), each at its model's price, the tier above 200k tokens
// applied by the prompt's size, in exact nano-dollars (pricing.USD). A
// key's budgets (keystore.Budget: a rolling window or a calendar period in
// a time zone) hold the request's worst case while it runs: its prompt
// estimate as uncached input and its most output at the dearer of the
// output and reasoning prices, reserved by Admit in the same decision as
// its tokens; Finish charges the real cost in its place (or the
// reservation, when no usage could be read). A key over a budget gets 429
// with the error code budget_exceeded, X-Should-Retry: false and a
// message naming the budget and when it has room again. A model the table
// does not price costs a key with a budget what Options.Unpriced says
// (refused with 403 model_not_priced, $0, or Options.DefaultPrice); a key
// without one, $0. ReloadPrices (SIGHUP, POST /admin/prices/reload)
// replaces the table whole or not at all.
//
// An admitted answer carries the caller's own limits, from its admission:
// X-Ratelimit-Limit-Tokens, -Remaining-Tokens and -Reset-Tokens (the
// binding window) when the key or its team has a token window, the same
// for -Requests when it has a request rate, in OpenAI's names and
// formats, and X-Ratestore-Budget-Remaining (USD) when it has a budget.
// The upstream's own rate-limit fields, which describe the operator's
// account, are never passed on.
//
// # Spend ledger and alerts
//
// Every finished request is entered in the spend ledger (package ledger;
// Options.Ledger, off with Options.NoLedger) by the commit that charges
// it: its request ID (Ratestore-Request-Id), key, team, model, endpoint, tokens by type (an
// estimate whole as input, marked estimated), cost, the status the
// caller got and its latency. A refusal of a known key is counted in its
// key's and team's rollups by reason (window, rate, concurrency, model,
// budget, disabled, expired, short); an unknown secret is not, so that
// guessing fills nothing. GET /admin/spend and /admin/requests read it.
// With Options.Alerts, each key's and team's usage after a request is
// given to an alert.Notifier, which sends a webhook call once per
// threshold (80% and 100% by default) of each token window and budget
// crossed, off the request path, counted in ratestore_alerts_total.
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
// request, as Stats: every token window, and the binding one (the most
// over its limit, else the least remaining) at the top level; its Used counts the reservations of
// requests in flight. It takes no arguments, so it cannot show another
// key's data, and it is neither token- nor rate-limited.
//
// # The operator's side
//
// The Gateway answers no path of the operator's (/admin, /admin/..., and
// /metrics): it answers them 404, never forwarding them, so that a
// Gateway served alone shows nothing of them. The gateway command mounts
// package console in front of it, which serves the console's page and
// sign-in, guards the admin API (package admin) and the metrics
// (Gateway.Metrics) with the admin token, and hands every other request
// to the Gateway. The admin API shows the tokens a key's requests in
// flight hold (keystore.Store.Reserved) and the Gateway's live traffic
// (Gateway.Traffic), and reloads its prices (Gateway.ReloadPrices):
// *Gateway is an admin.Gateway.
//
// # Metrics
//
// Gateway.Metrics serves Prometheus metrics (GET /metrics, behind the
// admin token) of a registry of the Gateway's own: the Go runtime's and the process's, and
//
//   - ratestore_gateway_requests_total{key_id, http_response_status_code,
//     reason}: requests ended, by the status the caller got and the
//     refusal's reason ("window", "rate", "concurrency", "model",
//     "unknown", "disabled", "expired", "short" (see Request bodies),
//     "rps", "upstream" (no upstream had room: see Upstreams); "" when
//     not refused on a key's account);
//   - ratestore_gateway_tokens_total{key_id, gen_ai_token_type}: tokens
//     the upstream reported, by type: input (with the cache reads and
//     writes), output (with the reasoning), cache_read, cache_write,
//     reasoning;
//   - ratestore_gateway_charged_tokens_total{key_id, estimated}: tokens
//     charged, and whether they were the estimate;
//   - gen_ai_client_token_usage{gen_ai_token_type, gen_ai_request_model}:
//     the OpenTelemetry GenAI histogram of input and output tokens per
//     model call;
//   - ratestore_gateway_upstream_latency_seconds{gen_ai_request_model}: a
//     histogram of the time to the upstream's response header, 0.05s to
//     600s;
//   - ratestore_gateway_requests_in_flight, ratestore_gateway_reservations
//     and ratestore_gateway_reserved_tokens: gauges of the requests in
//     flight, of those admitted, and of the tokens they reserved;
//   - ratestore_upstream_requests_total{upstream, status}: requests sent
//     to each upstream, failovers included, by the status it answered
//     ("error": none);
//   - ratestore_upstream_tokens_total{upstream, type}: the tokens each
//     reported, by type (as ratestore_gateway_tokens_total);
//   - ratestore_upstream_in_flight{upstream}: requests sent to each whose
//     response has not ended;
//   - ratestore_upstream_queue_seconds: a histogram of the waits for an
//     upstream with room, served or not, and ratestore_upstream_waiting,
//     a gauge of the requests waiting now.
//
// upstream is an upstream's name, or a route's prefix: an operator's.
// key_id has a value per key (never the secret; "" without a known key).
// gen_ai_request_model is never a caller's string: it is the model of an
// admitted request where its key's Policy.Models names it, or the glob
// that matched it, at most 100 values; every other model is "other".
//
// # Several instances
//
// New on a redisstore.DB keeps the keys and every limit in Redis, so that several gateways behind one load balancer
// meter each key as one: a key created, changed or deleted through one
// gateway's admin API is used as it now is by all of them at their next
// request; its windows, request rate, slots and Options.RPS are counted
// once for all. An admission is one decision across the gateways (see
// keystore.Open), so a key's window is overrun only as one gateway
// alone overruns it: by what requests in flight report beyond their
// reservations, never by two gateways admitting the same room. What a
// gateway keeps to itself is its metrics: each serves its own, without the
// database statistics a ratestore.DB keeps, and a dashboard sums them.
//
// # Logs
//
// Every request is logged once at its end, at level Info, with its request
// ID (also sent to the caller as Ratestore-Request-Id), method, path (never
// the query), key ID (never the secret), model, status, tokens charged,
// tokens reserved, latency, and "estimated":true when the tokens are the
// estimate. A failed charge is logged at level Error with the key ID and
// the tokens, so that it can be reconciled.
//
// # Shutdown
//
// http.Server.Shutdown stops accepting and waits for the connections to
// go idle, not for the handlers, and a model call whose caller went away
// still reads its upstream response for its usage (Options.DrainTimeout).
// Gateway.Abort ends the upstream requests in flight, which then charge the
// usage read so far or their estimate; Gateway.Wait waits for every
// request to have recorded its usage. A graceful stop is: Shutdown with a
// timeout (the streams in flight finish); if it times out, Close and
// Abort; Wait, bounded; then close the database, which flushes the last
// usage. The gateway command does so on SIGINT and SIGTERM.
package gateway
