package main

// gatewayHelp is the help text of the gateway command.
const gatewayHelp = `A reverse proxy in front of a model API that meters tokens per API key (see
package gateway). Callers send their ratestore secret as "Authorization:
Bearer <secret>", "X-API-Key: <secret>", "x-goog-api-key: <secret>" or
"api-key: <secret>" (Azure OpenAI's).
Each key's whole policy is enforced (keys create --limit/--window, --rpm,
--max-concurrent, --models): unknown keys get 401, disabled or expired ones
and models the key may not use 403, a request over a token window, the
request rate or the concurrency cap 429 with Retry-After (and
x-should-retry: false when waiting will not help within a minute, so that the
SDKs fail at once). Errors have the body the official SDKs read:
{"type":"error","error":{"type","code","message"}}. --rps limits every key's
request rate alike, on top.

Only the endpoints of the OpenAI, Anthropic and Gemini APIs that the gateway
can meter are forwarded (chat completions, completions, responses,
embeddings, messages, count_tokens, generateContent, streamGenerateContent,
embedContent, countTokens, model lists, stored responses), with the methods
those APIs use, on clean paths: anything else gets 404 or 405 and never
reaches the upstream (batches, files, a trailing "/", "//", "%2F"). A request
body is read once, strictly, and forwarded as read: anything but one JSON
object, a duplicate field, a field named like one the gateway reads but for
case ("Model"), or a max_tokens that is not a whole number gets 400; a
Content-Encoding 415; a body slower than --body-timeout 408; a body over
--max-request-body 413. A model call names its model (400 without one; valid
UTF-8, at most 256 bytes) and reserves request bytes/4 + its max_tokens
(max_output_tokens, max_completion_tokens, generationConfig.maxOutputTokens)
times its choices in every window while it runs; one that names no maximum
reserves --default-max-tokens as far as the key's windows have room. At its
end the tokens the response reports are charged instead, whatever its method
or status (a retrieved stored response excepted), up to
--max-tokens-per-request (more is logged at error): input (with OpenAI's
cached, Anthropic's prompt-cache and Gemini's tool-use prompt tokens) plus
output (with reasoning and Gemini's thoughts), read from JSON or streamed
responses of any size, OpenAI, Anthropic and Gemini style, with the usage of
an OpenAI stream asked for when the caller did not. --weights
output=4,cache_read=0.1 weighs the types. A caller that hangs up does not end
the upstream request: the gateway reads on to its usage, for up to
--drain-timeout. When no usage can be read (the upstream failed, timed out or
broke off a stream, the drain timeout passed) the reservation is charged and
logged at warn as estimated. The upstream gets --connect-timeout to accept a
connection, --first-byte-timeout to send its response header (504 when it
does not) and --idle-timeout between reads of a response body (a stream
silent longer is ended); 0 means no bound. GET --stats-path shows callers
their own usage.

--upstream URL forwards every request to URL. Given as PREFIX=URL
(--upstream /v1/messages=https://api.anthropic.com), it forwards the paths
under PREFIX (/v1/messages and /v1/messages/count_tokens, not /v1/messagesX)
to URL instead; the longest prefix wins, and a bare URL takes the rest. It may
be given once per prefix. Without a bare URL, a path no prefix matches gets
404 and is never forwarded.

Request and response fields are forwarded by allowlist (Content-Type, Accept,
OpenAI-Beta, Anthropic-Version, Anthropic-Beta; back: the body's fields,
Retry-After and the upstream's request ID): the callers' credentials,
cookies, organization and project fields never leave the gateway, and the
upstream's own rate-limit, organization, cookie and CORS fields never reach
the callers. Each upstream's own credential
comes from the environment, never from the command line (which shows in the
process list): --upstream-key-env PREFIX=VAR names the variable that holds the
credential of the route of PREFIX, and --upstream-key-header PREFIX=FIELD
the field it goes in (Authorization, as a bearer token, by default; x-api-key
for Anthropic's API, as it is). The default route's credential is
$` + upstreamKeyEnv + ` (or a bare --upstream-key-env VAR; --upstream-key KEY also
works, but shows in the process list), and a bare --upstream-key-header FIELD its field. A
route without one sends no credential. For example:

  ANTHROPIC_KEY=... ` + upstreamKeyEnv + `=... ratestore gateway \
    --upstream https://api.openai.com \
    --upstream /v1/messages=https://api.anthropic.com \
    --upstream-key-env /v1/messages=ANTHROPIC_KEY \
    --upstream-key-header /v1/messages=x-api-key

--shadow serves the requests that a key's token windows, request rate,
concurrency cap or models (and --rps) would refuse, and logs each at warn
("gateway: shadow: would refuse", with the key ID, the reason, the limit and
retry_after in seconds, -1 for never): to roll limits out and see whom they
would refuse before they do. Their usage is charged as ever, past the limits.
Unknown keys (401) and disabled or expired ones (403) are refused still:
shadow mode tries out limits, not who may call.

The admin API (under /admin/) and /metrics answer requests that bear the admin
token, from $` + adminTokenEnv + ` or the file --admin-token-file names: 32
bytes at least (make one with: openssl rand -hex 32); without one they answer
404. With one, the operator's console is at /admin/ (open
http://127.0.0.1:8080/admin/ in a browser and sign in with the admin token):
keys, teams, spend, requests and live traffic, on a session cookie that lasts
12 hours. Sessions are kept in the database (or the Redis), by a hash of the
cookie: a restart keeps them, and gateways on one Redis share them, a
sign-out at one ending the session at all. A page of another site cannot use
the session, reads included. 5 wrong tokens in a minute from one address make
that address, and no other, wait out the minute; wrong tokens are logged at
most twice a minute per address. --tls-cert FILE and --tls-key FILE (PEM; both
or neither) serve everything over TLS, with Strict-Transport-Security, and
the session cookie is then Secure; behind a proxy that serves browsers over
TLS, --secure-cookie makes it Secure and tells the console that its pages'
origin is https (the proxy must pass the Host field through: the console
compares it with the Origin browsers send). Behind a reverse proxy,
--trusted-proxy CIDR (repeatable) names the proxies whose X-Forwarded-For is
believed: a client's address, which wrong tokens are counted by and the logs
name, is then the last entry not in those ranges; without it
X-Forwarded-For is ignored, and every client of the proxy is the proxy's
address. A warning is logged when the gateway listens beyond loopback, and
another when the admin API and console are reachable there without TLS. Every change made through the admin API or the
console is recorded in an audit log in the database (who, what, each field
from and to; never a secret), which GET /admin/audit and the audit command
read, kept for --audit-retention (a Go duration or days, 400d by default).

With --redis URL the keys and every limit are kept in that Redis (package
redisstore; one node, not a cluster) instead of the database: several gateways
behind one load balancer, given the same Redis, meter each key as one, and a
key created or changed through one's admin API is used by all. --durability
then does not apply, and --db is not opened.

It listens on ` + defaultListen + ` unless told otherwise: loopback only. It
creates the database if it does not exist (keys are then created through the
admin API). Logs go to stderr, a line per request with its key ID, model,
tokens and status (JSON lines with --json). SIGINT or SIGTERM stops it: it
stops accepting connections, lets the requests in flight (streams included)
finish for up to --shutdown-timeout, then cuts those still running, which are
charged their estimate (logged at warn as estimated); once every request has
recorded its usage, the database is closed, which writes every change to disk.

The gateway keeps a spend ledger in its database (package ledger): an entry
per finished request (its key, team, model, the upstream that answered it,
tokens by type, cost, status and latency; never a prompt) kept for --ledger-retention (a Go duration or days,
90d by default), and totals per key, team, model and day kept for good, which
GET /admin/spend and /admin/requests answer (and the spend and requests
commands print). --ledger-export FILE also writes each entry to FILE as a JSON
line, rotated at --ledger-export-max-bytes, keeping 5 old files; entries a
slow disk cannot take are dropped and logged, never waited for. --no-ledger
keeps none.

--alert-webhook URL POSTs a JSON alert ({"type":"budget"|"window","threshold",
"key","team","scope","name","limit","spent","resets_at"}) when a key's or its
team's usage crosses a threshold (--alert-thresholds, 0.8,1 by default) of a
token window or budget: once per crossing, retried with backoff, never making a
request wait; also logged at warn and counted in ratestore_alerts_total.

--config FILE takes the settings from a YAML file, each flag by its long
name, a repeatable one as a list; a flag given on the command line wins, and
a file with anything wrong in it is refused whole, naming its line:

  listen: 127.0.0.1:8080
  admin-token-file: /etc/ratestore/admin-token
  ledger-retention: 90d
  upstream-attempts: 3          # failover: the most upstreams a request is sent to
  upstream-queue-timeout: 30s   # the most a request waits for one with room
  upstreams:
    - name: openai-a            # in logs, metrics, the ledger, /admin/upstreams
      api: openai               # openai | azure-openai | anthropic | gemini
      url: https://api.openai.com
      key_env: OPENAI_KEY_A     # the variable holding its credential
      models: ["gpt-4o*", "gpt-4.1*"]   # globs; every model of its api when absent
      limits: {requests_per_minute: 5000, tokens_per_minute: 800000, max_concurrent: 200}
      weight: 2
    - name: azure-east
      api: azure-openai         # sent as api-key, to /openai/deployments/{d}/...
      url: https://east.example.openai.azure.com
      key_env: AZURE_EAST_KEY
      api_version: "2024-10-21"
      deployments: {gpt-4o: gpt4o-prod, gpt-4o-mini: mini}
      limits: {tokens_per_minute: 450000}
    - name: anthropic
      api: anthropic
      url: https://api.anthropic.com
      key_env: ANTHROPIC_API_KEY

Upstreams are pools: a request goes to one whose api serves its endpoint and
whose models match its model, with room in its limits (the provider's quota,
reserved with the key's in one decision: its tokens per minute, requests per
minute and requests in flight, shared by every gateway on one --redis), by
weight among those with room; a model no upstream serves goes to its
--upstream route, if any (404 otherwise). An upstream that answers 429 or
5xx, or cannot be reached, before the caller got a byte cools down (its
Retry-After, else 1s doubling to 60s) and the request goes to the next, up
to --upstream-attempts. When none has room the request waits, the keys
served in turn, up to --upstream-queue-timeout (0: no wait), then gets 429
upstream_capacity with Retry-After; a wait charges nothing. Azure OpenAI
callers keep the OpenAI SDK and model names, or use the AzureOpenAI client
(endpoint: the gateway; their ratestore secret as api-key). SIGHUP and POST
/admin/config/reload read the file again for its upstreams and the prices;
a file with anything wrong keeps the running ones (its other settings take
effect at the next start). ratestore upstreams --admin URL shows each
upstream's use of its limits, cooldown, requests and errors.
`
