// Package migrate brings the API keys of older systems' legacy key files
// into a key store, and merges their legacy usage ahead of its first use.
//
// # The flow
//
// A legacy API-key file (LEGACY.md, section 1) comes over in two steps, so
// that nothing is lost and nothing counted twice:
//
//  1. Import (ImportLegacyFile, ImportLegacy). The file is read and judged
//     as a whole (below); a refused file writes nothing. Otherwise every
//     key is created in the database's key store (keystore.Open) in one
//     commit: all of them or none. Each keeps its legacy secret, stored
//     only as its SHA-256, so clients keep working unchanged; its name,
//     model, limit (token_limit_per_5h), dates and lifetime total
//     (total_lifetime_tokens, never recomputed) come over as they are, and
//     its policy is one token window of 5 hours, in 5-minute buckets, with
//     that limit. Its usage windows are stored as they are, in a legacy
//     record of the key, and are not converted yet. Importing is
//     idempotent: a key whose secret the database already has is skipped
//     (Report.Skips), so the same file imported twice changes nothing.
//     CheckLegacyFile is the dry run: the same judgement, nothing written.
//  2. Migration. The first time a key is touched (Check, Admit, Get, Usage,
//     RecordUsage, any change), its legacy windows are merged into every
//     token window of its policy (engine states: rolling windows), at that
//     instant, in the same commit that deletes the legacy record: all the
//     tokens of a window land in the bucket that holds its window_start, so
//     they expire when the old window would have (to the 5-minute bucket),
//     and windows already over count nothing. This lazy migration needs no
//     downtime and no pass over the database (Authenticate and List read
//     without migrating). Pending counts the keys not migrated yet;
//     MigrateAll migrates them all now, one key and one commit at a time,
//     with progress, and can be cancelled between keys and run again.
//     ImportLegacyInto and MigrateAllIn do the same for a key store in
//     Redis (keystore.Open on a redisstore.DB), which gateways share.
//
// On badger, one transaction holds some thousands of keys at most (its
// memtable bounds it): the engine splits the commit of a larger import
// into several transactions (ratestore.DB.Update), so a file of any size
// imports, but a crash in the middle of that commit can leave part of it
// on disk.
//
// # Reading a legacy key file
//
// A legacy key file is one JSON object {"keys": [...]}, each element an
// entry: a key with its secret ("key"), its limit and its usage windows.
// The file is read strictly, as a stream, and judged as a whole before
// anything is imported. Every problem and oddity found becomes an Issue of
// the Report, naming the entry by its position in "keys" (Issue.Index) and
// its name, and the field, with a reason. No Issue, error or log ever holds
// a secret.
//
// An Issue is one of three kinds:
//
//   - a refusal: the file is refused as a whole and nothing is imported; the
//     error matches ErrRefused and the Report lists every refusal;
//   - a skip: the entry is left out and the rest imports;
//   - a note: an oddity tolerated, the entry imports.
//
// The cases, and the kind of each:
//
//	case                                                            kind
//	--------------------------------------------------------------  ------
//	the file: empty or white space only                             refuse
//	  not JSON, or cut short                                        refuse
//	  anything after the top-level object but white space           refuse
//	  the top level not an object                                   refuse
//	  "keys" missing, null or not an array                          refuse
//	  a member name twice in one object (anywhere in the file)      refuse
//	  unknown top-level member                                      note
//	  a leading UTF-8 byte order mark                               note
//	an entry that is not an object                                  refuse
//	key: missing, null, not a string, empty or blank                refuse
//	  holds invalid UTF-8 or U+FFFD (could not be kept exactly)     refuse
//	  the same secret as an earlier entry, same content             skip
//	  the same secret as an earlier entry, other content            refuse
//	  the same secret, this entry with problems of its own          refuse
//	token_limit_per_5h: missing, null, not a number, 0, negative,   refuse
//	  fractional or beyond int64
//	name, model: not a string                                       refuse
//	  holds the secret (it would be stored in plain text)           refuse
//	  missing, null or empty                                        note
//	name: the same as another entry's, with another secret          note
//	expiry_date, created_at, last_used: not a string, unparsable,   refuse
//	  or before 1970 ("" is unparsable)
//	expiry_date missing or null: the key never expires              note
//	created_at missing or null                                      note
//	last_used missing or null: never used                           (none)
//	total_lifetime_tokens: not a number, negative, fractional or    refuse
//	  beyond int64
//	  missing or null: starts at 0                                  note
//	  less than the sum of usage_windows: kept as is                note
//	usage_windows: not an array, or an element not an object        refuse
//	  missing or null: no windows                                   note
//	  [] (no windows)                                               (none)
//	  the tokens_used of an entry add up past int64                 refuse
//	window_start: missing, null, not a string, unparsable, before   refuse
//	  1970 or after 2262-04-11T23:47:16Z (Unix nanoseconds)
//	tokens_used: missing, null, not a number, negative, fractional  refuse
//	  or beyond int64 (0 is fine)
//	unknown member of an entry                                      note
//	unknown member of windows (one note per name and entry)         note
//	rolling_window_cache, whatever it holds: ignored                note
//	what the key store cannot keep (checked after the rest):
//	  name, model: longer than 256 bytes (keystore.MaxName), or     refuse
//	  holding a control character (tab, newline, ...), a format
//	  character (U+200B, U+202E, ...) or a line or paragraph
//	  separator (U+2028, U+2029): one that reads as another name
//	  created_at, last_used after 2262-04-11T23:47:16Z              refuse
//	  expiry_date after 2262-04-11T23:47:16Z: expires then          note
//	  more than keystore.MaxLegacyWindows (1,048,576) windows       refuse
//	at import, the secret already has a key in the database         skip
//
// "Same content" compares what was read: the same values and instants, in
// the same order of windows, whatever their spelling (1e5 and 100000,
// 2027-01-01T01:00:00+01:00 and 2027-01-01T00:00:00Z) and whatever was
// ignored (unknown members, rolling_window_cache). Of two such entries the
// first imports.
//
// Numbers are read exactly, never rounded: an integer field accepts any
// spelling of an integer value (1e5, 100000.0) and refuses any other,
// however close (20001.000000000001). A window's tokens_used may exceed
// token_limit_per_5h: the old check let usage known only afterwards take a
// key past its limit.
//
// Timestamps are RFC 3339, with or without fractional seconds (1 to 9
// digits), and Z or a numeric offset with a colon, upper-case T and Z:
// 2026-01-18T08:00:00Z, 2026-01-18T08:00:00.677Z,
// 2026-01-12T16:45:00.000+01:00. Anything else is unparsable: no zone, a
// space for the T, a date alone, +0100, a comma before the fraction, epoch
// milliseconds, a leap second.
//
// rolling_window_cache is never read, not even checked: it may be stale,
// never pruned, and the old code double-counted the request that created
// it. usage_windows is the source of truth. Report.IgnoredCaches counts the
// entries that had one.
//
// The secret is the entry's own: a name or unknown member name that holds
// it shows as [redacted] in the report; a secret written in another entry
// is not looked for.
package migrate
