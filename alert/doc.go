// Package alert tells a webhook when a key or a team nears or passes one of
// its limits: a token window ("window") or a money budget ("budget").
//
// The metering gateway calls Notifier.Observe after every finished request
// with the usage of each limit of the request's key and of its team. When a
// usage reaches a threshold (by default 80% and 100% of the limit), one
// alert is POSTed to Options.URL as JSON:
//
//	{"type":"budget","threshold":0.8,"key":"key_1","team":"team_a","scope":"team",
//	 "name":"budget month Europe/Paris","limit":500,"spent":412.5,"resets_at":"2026-03-01T00:00:00+01:00"}
//
// A window's limit and spent are whole tokens; a budget's are USD, written
// as exact decimals (pricing.USD). "team" is the key's team, absent when it
// has none; "scope" says whose limit was crossed: "key" or "team".
//
// # Exactly once per crossing
//
// Usage u of a limit L reaches a threshold t when u >= t*L. Thresholds are
// kept in permille p = round(1000*t), so the test is u*1000 >= L*p, done in
// 128-bit integers (math/bits): exact for every int64 usage and limit, with
// no float rounding at the boundary.
//
// A crossing of threshold p by limit Name of subject S (the key, or the
// team for a team's limit) fires once. For a calendar period
// (Level.Period) the crossing is remembered for that period, identified by
// its end (Level.ResetsAt): usage that drops within the period (a
// reservation refunded) does not re-arm it, and the next period fires
// again. For a rolling window the crossing is remembered until an
// observation sees the usage below p again (the window rolled), which
// forgets it: the next crossing fires again. Since concurrent requests
// report their usage out of order (a request that finished first may be
// observed last), a usage below p re-arms the threshold only when seen
// at least Options.Rearm (a minute) after the last one at or above p:
// what it reports is then not a stale view of the moments before the
// crossing, and a usage that dips under p and back within that time
// alerts once.
//
// What is remembered is one small state per (subject, limit, threshold)
// currently over its threshold, in a sharded map bounded by
// Options.MaxStates. Observe takes a shard's lock only when a usage
// reaches the lowest threshold or when some state exists at all (one
// atomic load): a request whose limits are all below the lowest threshold
// costs a few comparisons and allocates nothing. The lock makes the check
// and the record of a crossing one step, so concurrent observations of
// the same crossing send one alert.
//
// # Delivery
//
// Observe never waits: a crossing is logged at warn level and put in a
// bounded queue, or dropped (counted, logged at error level) when the
// queue is full, so a webhook that is slow or down never slows a request.
// One goroutine sends the queue in order; a failed POST (a transport
// error or a status other than 2xx) is retried after Options.Backoff,
// doubling up to Options.MaxBackoff, Options.Retries times, then counted
// as failed and logged. Close stops the queue and delivers what it holds
// until its context ends.
package alert
