// Package ledger keeps a spend ledger in a ratestore backend: an entry
// per finished request (time, request id, key, team, model, route,
// tokens by type, cost, status, latency, and whether its usage was
// estimated), and rollups of requests, tokens, cost and refusals by
// reason per (day, key) and per (day, team), with a row per model. It
// answers what a team spent last month on which models, and which key is
// burning through its budget, from the embedded database, without a
// database server.
//
// # One commit for the usage and its record
//
// A Note is a keystore.Recorder: keystore.Admission.FinishWith writes
// the entry and its rollups in the batch that charges the request, so
// they are stored by the same commit as its usage (group commit; no
// fsync of their own). In Sync mode an acknowledged request's entry is on
// disk, and after a crash the rollups are exactly the sum of the entries
// and of the usage charged: both or neither of a request are there.
// Prompts and outputs are never stored.
//
// # Records and their cost
//
// Each Ledger writes as a writer of its own, an id drawn at Open, and
// keys its records by it: on a store several processes share, no two
// write the same record, and a writer's rollup is the sum of its own
// entries. Queries add the writers up. The records, all under "L/":
//
//	L/e/day/writer/seq"c"   a chunk of entries, as written
//	L/e/day/writer/seq"b"   a block: 256 entries, compacted from their chunks
//	L/k/day/key/writer      a key's day: a row per team and model
//	L/t/day/team/writer     a team's day: a row per model
//	L/s/day/writer/n        a closed day's key rollups per key and team, in a few records
//	L/m/day/writer/n        the same per key, team and model
//	L/w/day/writer          the writers of a day
//	L/x/day                 the day has entries
//
// On a DB, which only this process writes and whose writes land in the
// order they are made, entries are appended to chunks of 16, each put
// whole with the entry: the commit stores the last value, holding every
// entry before it, one record where 16 entries would cost 16. On a shared
// store (Redis), where batches may commit in another order than they
// wrote, a chunk holds one entry. A few seconds after 256 entries are
// written they are rewritten as one block, which keeps each key, team,
// model and route once in a table its entries refer to, ids (key_, team_,
// req_ and 16 hex digits) in 8 bytes, and times as differences from the
// block's first: an entry costs about 30 bytes and the block's overhead
// is spread over 256. Figures are in bench/REPORT.md.
//
// # Retention
//
// Entries are kept for Options.Retention (90 days by default), in whole
// UTC days: the days past it are dropped at Open and every hour, a day at
// a time, by deleting the records under its prefix (a block per 256
// entries), not by reading entries. Rollups and summaries are kept for
// good.
//
// # Read-only
//
// A Ledger opened with Options.ReadOnly, or on a database opened read-only
// (ratestore.Options.ReadOnly: the console's view of a closed database),
// writes nothing: Open starts no background work, so no day past the
// retention is dropped and no chunk is compacted, and Note, Add, Refused,
// DropExpired and Compact fail with ErrReadOnly. Its queries read what is
// stored: the entries of days past the retention that no writer has
// dropped yet are read by a query that asks for those days, and chunks not
// compacted yet are read as they are.
//
// # Queries
//
// Spend adds rollups up over a range of UTC days, grouped by key, team,
// model and day; by hour it reads the entries, within the retention.
// Requests pages entries newest first, with filters, reading a day's
// blocks and skipping those whose table lacks the key, team or model
// asked for. A day a writer has left is summarized (L/s) so that a
// month of spend by key reads 30 summaries, not a record per key and day.
//
// # Redis
//
// On Redis the rollups live in Redis, shared by every gateway, and so do
// the entries: each gateway writes its own (its writer id), and any
// gateway's queries see all of them. Redis was chosen over a Stream per
// gateway and over each gateway's local disk because an operator asks
// one place what was spent, and the entries are small (a Stream repeats
// every field name in every entry). Retention deletes a day's keys. A
// Redis Scan walks the whole keyspace, so queries on Redis are slower
// than on a DB; the targets are the DB's.
package ledger
