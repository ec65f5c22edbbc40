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
// # What the import adds to the file's judgement
//
// A legacy key file is read and judged by package legacy, whose
// documentation lists every case and whether it refuses the file, skips
// the entry or notes an oddity. The import then refuses what the key
// store cannot keep, and skips what a database already has:
//
//	case                                                            kind
//	--------------------------------------------------------------  ------
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
// The Report (legacy.Report) lists all of it, and no Issue, error or log
// ever holds a secret.
package migrate
