// Package httplimit is net/http middleware that rate-limits requests with
// ratestore limiters.
//
// A Middleware applies a list of rules to every request. A Rule names a
// Limiter (a ratestore or a redisstore one), a KeyFunc that says whose allowance the request
// spends (an API key, a client IP, a route, or a combination of those) and
// a CostFunc that says how much of it (1 by default). The request reaches
// the wrapped handler only if every rule allows it; otherwise the Deny
// handler answers, by default with 429 Too Many Requests, and the wrapped
// handler is not called.
//
//	db, err := ratestore.Open("ratestore.db", ratestore.Options{})
//	...
//	perKey, err := db.Limiter("per-key", strategies.GCRA{Rate: 5, Burst: 20})
//	...
//	lim, err := httplimit.New(httplimit.Options{
//		Rules: []httplimit.Rule{{Limiter: perKey, Key: httplimit.APIKey()}},
//	})
//	...
//	mux.Handle("POST /v1/chat", lim.Wrap(chat))
//
// # Several rules, one decision
//
// ratestore decides one limiter at a time, and it has no refund: what an
// allowed AllowN took cannot be given back. Calling AllowN on each rule in
// turn would let a request that the second rule denies still spend the
// first rule's allowance. So with more than one rule a request is decided
// in two steps, while the Middleware holds a lock on each (limiter, key)
// pair that the request touches:
//
//  1. Peek every rule. A rule fits when Peek allows and its Remaining is
//     at least the request's cost for that rule; Remaining is by contract
//     what AllowN can take (see strategies.Result).
//  2. If a rule does not fit, the request is denied and nothing is taken
//     from any rule: AllowN is called only on the rules that do not fit,
//     which deny it and change nothing, to learn their RetryAfter.
//     Otherwise AllowN takes the cost from every rule.
//
// The locks belong to the Middleware, so the decision is exact among the
// requests that go through the same Middleware: a denied request takes
// nothing from any rule, and every rule counts exactly the requests that
// were allowed, under any concurrency. A caller outside the Middleware
// that takes from the same limiters and keys (another Middleware, or a
// handler calling AllowN or Record, as one does to count LLM tokens after
// the response) can change a rule between the two steps: a rule that fit
// in step 1 may then deny in step 2 after the rules before it took their
// cost, and those takes stand. They also stand when a limiter fails in
// step 2. Each such request over-counts the rules that took by its cost;
// nothing is ever allowed past a limit. Other processes sharing a
// limiter of a shared store (redisstore) are such callers.
//
// The lock is held while AllowN waits for its commit. In Sync mode,
// requests that share a key under a Middleware of several rules are
// therefore decided one after the other, each after one commit per rule.
// With a single rule no lock is taken: AllowN alone is atomic. When all
// the limits apply to the same key, one limiter with a strategies.Composite
// or a strategies.FixedWindow of several quotas is better than several
// rules: the store decides those in one step.
//
// # Response fields
//
// Every response the middleware decided carries, whether the request was
// served or denied, the fields of the IETF draft "RateLimit header fields
// for HTTP", draft-ietf-httpapi-ratelimit-headers-11 (May 2026): two
// Structured Field lists (RFC 9651) of sf-string policy names with integer
// parameters,
//
//	RateLimit-Policy: "per-key";q=20;w=4, "daily";q=1000;w=86400
//	RateLimit: "per-key";r=17;t=1
//
// and the older fields that clients widely read,
//
//	X-RateLimit-Limit: 20
//	X-RateLimit-Remaining: 17
//	X-RateLimit-Reset: 1
//
// RateLimit-Policy lists every rule: its quota q and window w in seconds,
// derived from the limiter's strategy (see Rule), or as Rule.Quota and
// Rule.Window give them. A FixedWindow of several quotas, or a Composite,
// lists one item per quota or part. RateLimit and the X- fields report the
// binding rule alone, which the draft allows (appendix B.1.2): the rule
// with the smallest Remaining, or for a denied request the rule that
// denies it the longest. r is its Remaining; t and X-RateLimit-Reset are
// its ResetAfter in seconds, rounded up, except that on a denial t is the
// Retry-After, since the draft asks that Retry-After not point before the
// end of the effective window t. No partition key (pk) is sent, as a key
// may be a secret. A request served because of FailOpen carries none of
// these fields.
//
// # Denials and errors
//
// The Deny handler receives a Decision, with the response fields already
// set. DefaultDeny, the default, answers with a JSON body:
//
//   - 429 Too Many Requests, when a rule denies: Retry-After in whole
//     seconds, rounded up and at least 1, and
//     {"error":"rate_limited","policy":"per-key","retry_after_seconds":1,"limit":20,"remaining":0,"reset_seconds":4}.
//   - 413 Content Too Large, when the cost can never fit (RetryAfter -1: a
//     cost above the limit), without Retry-After: the same request will
//     never be allowed, and a 429 would invite the client to retry it.
//     The body's error is "cost_exceeds_limit", with the cost.
//   - 401 Unauthorized, with WWW-Authenticate: Bearer, when a KeyFunc
//     returns ErrNoAPIKey (the request has no API key).
//   - 400 Bad Request for any other error of a KeyFunc or CostFunc (they
//     are functions of the request, so their failure is the request's), or
//     a key the store cannot hold: empty, or longer than
//     backend.MaxKeyLen. A StatusError chooses another status.
//   - 500 Internal Server Error for a negative cost, a CostFunc bug.
//   - 503 Service Unavailable when a limiter fails (ErrClosed, ErrCorrupt,
//     I/O, a strategy that no longer matches the stored state) and
//     Options.FailOpen is false. With FailOpen the request is served
//     instead. Either way the failure is logged, with the rule and a short
//     hash of the key, never the key itself. A request whose context ends
//     before it is decided (and, in Sync mode, committed) is answered 503
//     too, whatever FailOpen says, and logged only at debug level.
//
// Bodies never echo a key or an error's text. The keys of APIKey are
// hashes of the secret, so that neither the database nor an error that
// names a key ever holds an API key.
package httplimit
