// Package admin is the admin API of a gateway: the routes under /admin/
// that manage API keys and teams (package keystore) and read the spend
// ledger (package ledger), their JSON shapes (Key, Team, Spend, ...),
// built by the one set of functions that converts between them and the
// key store's types (NewKey, NewTeam, Key.Spec, NewKeyRequest, ...), and
// the Client that calls them, which the command line uses for a running
// gateway (NewClient) and for a database it opens (NewLocalClient).
//
// An API authenticates nobody: whoever mounts it decides who may call it.
// Package console does, for the gateway command: it takes the admin token
// as a bearer token or a session cookie, and tells the API who made each
// call (WithActor).
//
// # Routes
//
// The API answers these routes. Bodies are JSON, at most MaxBody bytes
// (413 above), and fields the API does not have are refused:
//
//	POST   /admin/keys       KeyRequest -> 201 Created {"key":KEY,"secret"}
//	GET    /admin/keys       -> 200 Keys {"keys":[KEY,...],"next_cursor"}: a page
//	GET    /admin/keys/{id}  -> 200 KEY
//	PATCH  /admin/keys/{id}  KeyRequest, any subset, and "disabled" -> 200 KEY
//	DELETE /admin/keys/{id}  -> 204
//	POST   /admin/keys/{id}/rotate  {"grace":"24h"} -> 200 Created: a new secret
//	POST   /admin/prices/reload     -> 200 {"models":N}, or 400 naming the entry
//	POST   /admin/config/reload     -> 200 Reloaded {"upstreams":N,"models":N}, or 400 naming the file's line;
//	       404 for a gateway started without --config
//	POST   /admin/teams       {"name", and a key's policy fields} -> 201 Team
//	GET    /admin/teams       -> 200 Teams {"teams":[TEAM,...],"next_cursor"}: a page
//	GET    /admin/live        -> 200 Live: the gateway's requests and tokens per second, in flight
//	GET    /admin/upstreams   -> 200 Upstreams {"upstreams":[UPSTREAM,...]}: every upstream, not paged;
//	       each with its limits, their use now, its cooldown and its requests and errors
//	GET, PATCH, DELETE /admin/teams/{id}  as for keys; DELETE 409 team_has_keys while keys belong
//	GET    /admin/keys/{id}/end-users?limit=&cursor=&q=  -> 200 EndUserPage {"end_users":[END USER,...],"next_cursor"}:
//	       a page of the key's end users by name, q the start of their names; 404 no_ledger without a ledger
//	GET    /admin/keys/{id}/end-users/{name}  -> 200 END USER, 404 for one the ledger has not seen
//	GET    /admin/spend?from=&to=&group_by=key|team|model|end_user|day|hour&key=&team=&model=&end_user=  -> 200 Spend
//	GET    /admin/requests?key=&team=&model=&end_user=&status=&from=&to=&limit=&cursor=      -> 200 Requests
//	       (both as text/csv with Accept: text/csv; the next cursor also in X-Next-Cursor)
//	GET    /admin/audit?target=&from=&to=&limit=&cursor=  -> 200 AuditPage {"events":[EVENT,...],"next_cursor"}
//
// The request's fields are "name", "model", "models" (globs; [] for any),
// "windows" ([{"limit":100000,"window":"5h","bucket":"5m"}], Go durations,
// bucket optional), "requests_per_minute", "max_concurrent" (0: no limit),
// "budgets" ([{"limit_usd":5,"window":"24h"}, {"limit_usd":500,"period":
// "month","timezone":"Europe/Paris"}]; [] for none), "expires_at" (RFC
// 3339; null for never), "team" (a team's id; "" for none),
// "model_limits" ([{"models":["gpt-4o*"],"windows":[...],"budgets":[...],
// "requests_per_minute","max_concurrent"}]: limits on the requests for
// those models; [] for none), "end_users" ({"windows","budgets",
// "requests_per_minute","max_concurrent","required"}: the limits of each
// end user; null or {} for none) and "disabled". A KEY of one key also has
// "model_usage", each model limit's windows and budgets with their use.
// END USER is EndUser: "id" (its name), its "windows", "binding",
// "budgets" and "in_flight" under the key's end-user limits (or its
// team's), and its "requests", "tokens", "cost_usd", "refused" and
// "last_used" over all time, as the ledger keeps them. A rotated key keeps its id, usage,
// budgets and history; its old secret works until the grace ends
// ("previous_secret_expires_at"). A POST needs
// "windows". A PATCH changes the fields it gives and no other; its
// "windows" replace the key's whole list (a window whose length stays
// keeps its usage, see keystore.Store.Update). KEY is Key: the key's
// fields and, per window, "used" (with the tokens reserved by requests in
// flight), "remaining" and "reset_after_seconds". The secret is in the
// answer to POST only. A field that is wrong gets 400 with the error body
// every SDK reads, {"type":"error","error":{"type","code","message",
// "param"}}, whose message and param name it (`windows[1].window: "5x":
// not a duration`), and changes nothing; an unknown id 404; a wrong method 405
// with Allow. Every admin call is logged at level Info with its method,
// path, status and key id, never a body.
//
// UPSTREAM is Upstream: "name"; "api" (openai, azure-openai, anthropic or
// gemini; "" for an --upstream route, with its "prefix"); "url", without
// a password; "models" (globs; [] for every model of its api); "limits"
// ({"requests_per_minute", "tokens_per_minute", "max_concurrent"}, a limit
// it does not have left out); "weight"; "used" (the requests and tokens of
// the last minute and the requests in flight, counted with or without
// limits); "cooling_down_until" (null when it is not); and "requests" and
// "errors" (its 429s, 5xx and failed connections) since the gateway
// started. The console's Upstreams page polls it.
//
// # Audit log
//
// With Options.Audit, every change made through the API is recorded in
// the audit log (package audit) as one EVENT, {"time", "actor", "action",
// "target", "changes": {FIELD: {"from", "to"}}, "address"}: the actor is
// who the caller's context says made it (WithActor: "admin-token",
// "session:<8 hex>", "cli"), and a change with none is refused (500
// no_actor); the action one of the Action constants; the target the key's
// or team's id; the changes the fields that changed, in the request's
// names and JSON, never a secret or a secret's hash; the address the
// caller's, when its context has one (WithClient). A PATCH that changes
// nothing, and a change refused, record nothing. The event is recorded
// after the key store has stored the change and before the answer: an
// acknowledged change has its event (on disk, in Sync mode), and a change
// whose event cannot be recorded is answered 500 audit_failed, which says
// it was made. A crash between the two loses the event of a change never
// acknowledged, never the change of an event. GET /admin/audit pages
// through the events, newest first: target keeps one key's or team's
// (or "prices", or "config"), from and to bound their times as for /admin/requests
// (400 naming the parameter for a range before the log's retention or
// past now + 1 day), limit is 1 to 1000 (100), cursor a next_cursor.
package admin
