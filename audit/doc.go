// Package audit keeps an audit log in a ratestore backend: an Event per
// change an operator makes (who, what, to which key or team, each field
// from what to what, and when), kept for Options.Retention, read newest
// first a page at a time. The admin API (package admin) records one for
// every change made through it, whether by a script with the admin token,
// a console session or the command line, and answers GET /admin/audit
// from it.
//
// # Records
//
// A Log is written once against the backend contract (backend.Store)
// and keeps its records under "A/". An event's place in the log is 40 hex
// digits: its time in Unix ns, complemented so that later sorts first,
// the id of the Log that recorded it (drawn at Open, so that gateways
// sharing a Redis never write the same record), and its number among that
// Log's events, complemented too. The event is stored twice, in one
// commit: under A/e/ by its place, and under A/t/<target>/ by its place,
// so that the whole log and each target's events are each one range in
// newest-first order. A page is one ScanFrom of that range from the
// later of its cursor and its To, stopped at the first event before its
// From or past the page: O(page + log n), on every backend, reading no
// other target's events. The cursor is the place of the page's last
// event: events recorded while an operator pages are newer than it and
// never shift the pages after it, so no event is read twice and none is
// skipped.
//
// An event's value is JSON: its actor, action, target, changes and
// address, its time being in the key. JSON rather than a binary encoding:
// events are few (an operator's changes, not requests), and a record read
// by hand reads as the API's answer. A typical event (a console session's
// change of a key's token window) is a value of about 250 bytes, stored
// twice, under keys of 44 and 65 bytes; BenchmarkRecord measures what
// that takes in a bbolt file, with the tree's pages.
//
// # Durability
//
// Record returns once the event's commit returns: on a DB in Sync mode,
// once it is on disk. The admin API records the event of a change after
// the key store has stored the change and before it answers, so an
// acknowledged change has its event; a crash between the two commits
// loses the event of a change that was made (and never acknowledged),
// never the change of an event. On Redis both are as durable as Redis
// makes them.
//
// # Retention
//
// The events older than Options.Retention (400 days by default) are
// dropped by a sweep, at Open and every Options.SweepInterval (an hour),
// in commits of 500 events, reading only those: they are the end of the
// log, from the retention's start on. Queries never reach before the
// retention's start (a From before it is refused), so an event past it
// that the sweep has not dropped yet is not shown either.
package audit
