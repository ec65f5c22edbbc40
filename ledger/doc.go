// Package ledger keeps a spend ledger in a ratestore backend: an entry
// per finished request (time, request id, key, team, model, route, the
// upstream that served it, the end user it named, tokens by type, cost,
// status, latency, and whether its usage was estimated), and rollups of requests, tokens, cost and refusals by
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
//	L/e/day/writer/seq"b"   a block: 4096 entries, compacted from their chunks
//	L/k/day/key/writer      a key's day: a row per team and model
//	L/t/day/team/writer     a team's day: a row per model
//	L/u/day/key/writer      a key's day by end user: a row per team and end user, at most 256
//	L/d/key/enduser         an end user's totals over all time, and its last use: the directory, every writer's
//	L/s/day/writer/n        a closed day's key rollups per key and team, in a few records
//	L/m/day/writer/n        the same per key, team and model
//	L/S/month/writer/n      a month the writer has left: its day summaries added up
//	L/M/month/writer/n      the same per key, team and model
//	L/T/day/writer          a closed day's totals: every key's, those of keys without a team, a row per model
//	L/w/day/writer          the writers of a day
//	L/x/day                 the day has entries
//
// A day is a UTC date, YYYYMMDD; a month YYYYMM; a writer 16 hex digits;
// a seq 8 hex digits, and n a record's number within its summary.
//
// On a DB, which only this process writes and whose writes land in the
// order they are made, entries are appended to chunks of 16, each put
// whole with the entry: the commit stores the last value, holding every
// entry before it, one record where 16 entries would cost 16. On a shared
// store (Redis), where batches may commit in another order than they
// wrote, a chunk holds one entry. A few seconds after 4096 entries are
// written they are rewritten as one block, which keeps each key, team,
// model, route and upstream once in a table its entries refer to, ids
// (key_, team_, req_ and 16 hex digits) in 8 bytes, and times as
// differences from the block's first: an entry costs about 40 bytes and
// the block's overhead is spread over 4096. A day total costs about 30 bytes a model, written
// once a day per writer. Figures are in bench/REPORT.md.
//
// # Refusals, counted in memory
//
// A request a key's policy refuses changed nothing, and a key holder
// can send thousands a second: Refused counts it in memory, by (day, key,
// team, model, reason), and the counts are written as totals into the
// rollups: with the next entry the ledger writes, in that entry's batch
// (on a DB: no commit of their own; on a shared store, where a batch
// reads every rollup it writes before the ledger's lock, by the flush),
// a second after the first count when no entry comes, when 4096 distinct
// counts wait (the next refusal writes them first, so memory is bounded),
// and by Close. The process that counted them sees them in its queries
// at once. A crash loses the counts not written: at most a second's, and
// only counts of refusals, which used nothing. The gateway counts a
// refused request's model as (other) unless the key's policy allows it,
// so that names a key may not use do not take the 256 rows of its rollup.
//
// # End users
//
// A request may name an end user, the key's own customer; a key may
// have millions, most seen once, and nothing the ledger keeps grows
// with them but the entries and the directory. A key's day has a rollup
// of end users beside its rollup of models, bounded the same: at most 256
// rows, which are the day's top end users by cost as the day goes (a new
// end user in a full rollup takes the room of the one of least cost,
// then requests, whose totals move into the row of end user (other)).
// The requests that named none are the row of end user "", never moved:
// the rows add up to the key's day, refusals included. Spend grouped or
// filtered by end user reads these rollups (with a key asked for, one
// per day and writer; without, every key's of each day, as there are no
// summaries of them); by hour, the entries. The directory (L/d) holds
// each end user's totals since it was first seen, one record for every
// writer, read, added to and put in the batch of each entry (and of the
// refusals written), under the key's lock: no write of its own, and
// nothing of it held in memory. EndUsers pages through a key's end users
// by name, reading at most a page and one record.
//
// # Retention
//
// Entries are kept for Options.Retention (90 days by default), in whole
// UTC days: the days past it are dropped at Open and every hour, a day at
// a time, by deleting the records under its prefix (a block per 4096
// entries), not by reading entries. Rollups, summaries and the directory
// of end users are kept for good.
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
// # Queries, bounded
//
// No query reads more than it answers and a bounded overhead, whatever
// range it asks for. Requests accepts a range within the retention and
// reaching at most a day past now, Spend one of at most 3660 days, also
// ending at most a day past now; any other is refused with a *QueryError
// naming the parameter, before anything is read.
//
// Requests pages entries newest first, with filters. It reads the L/x
// marks of the retention's days at once (a round trip on Redis) and
// visits only the days that have entries. With a key or team asked for,
// it first reads that key's (team's) rollups of those days, at once, and
// visits only the days whose rollups count requests of it: a key with no
// entries reads none. A day is read block by block, skipping the blocks
// whose table lacks the key, team or model asked for (checked in place,
// without decoding the table), latest first, until the page is full. A
// filter on the model, end user or status alone has no such index: a page reads
// days until it is full or has read 64 MiB of entries, and then ends,
// with fewer entries than asked for, maybe none, and a cursor to go on.
// Paging on, a query reads only the days older than its cursor.
//
// Spend adds rollups up over the days of the range that have writers
// (their L/w marks, read once), grouped by key, team, model and day; by
// hour it reads the entries, within the retention and over 24 hours at
// most, so that what it reads is bounded by a day of entries. A day a writer has
// left is summarized (L/s, L/m), so that a month of spend by key reads 30
// summaries, not a record per key and day, and a month it has left too
// (L/S, L/M), so that a spend not grouped by time reads a summary per
// writer for each month its range holds whole: ten years by key read 120
// a writer, with a row per key active in the month. The groups of key, team and
// model are ranked by cost over the range; the first Limit (100 by
// default, at most 1000) are rows, and the rest one row, Other. Grouped
// by time as well, Spend reads twice: to rank, then to add up each day's
// rows of the top groups and of the other row, so that it holds at most
// Limit+1 groups a day, and a chart stacked by key shows the same keys
// every day. Grouped by day, the second read takes a day a writer has
// left from its day total (L/T, written with its summaries) and the
// rollups of the top keys (or teams), read directly: the other row is the
// total less the top groups' rows, so that ten years by key and day read
// Limit+1 records a day and writer, not a row per key active that day. A
// day without a total (today, a writer that crashed) is read from its
// summary or its key rollups, as are the questions a total does not
// answer: by team and model, and by key of a team and a model. By hour
// both reads are of the entries.
//
// # Redis
//
// On Redis the rollups live in Redis, shared by every gateway, and so do
// the entries: each gateway writes its own (its writer id), and any
// gateway's queries see all of them. Redis was chosen over a Stream per
// gateway and over each gateway's local disk because an operator asks
// one place what was spent, and the entries are small (a Stream repeats
// every field name in every entry). Retention deletes a day's keys. A
// query reads few prefixes: the writers' marks (one scan), the marks and
// rollups it needs by key (round trips of a thousand), and one scan per
// day it visits. Where a Redis Scan walks the whole keyspace, each of
// those scans costs that walk.
package ledger
