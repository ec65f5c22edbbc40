// Package legacy reads the data older systems left, in one place: the
// legacy API-key file (LEGACY.md section 1), parsed and judged as a whole
// (Parse), and the record in which the key store keeps a key's legacy
// usage windows until the key's first use merges them (AppendRecord,
// DecodeRecord). It knows nothing of the database or the key store:
// package migrate imports a file into a key store, and package keystore
// stores the record and merges it.
//
// Its errors name no package: the caller says what it was doing (migrate's
// are "migrate: ...", the key store's name the key whose record it read).
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
//
// # The legacy usage record
//
// The key store keeps an imported key's usage windows, until their merge,
// in one binary record (AppendRecord), version 1:
//
//	byte    version   1
//	uvarint count     1 .. MaxWindows
//	then count windows, in order of start:
//	  varint start    Unix ns of window_start (the first), or uvarint
//	                  start - previous start (the others)
//	  uvarint tokens  1 .. 2^63-1; the sum of all stays within 2^63-1
//
// Varints are minimal (package internal/varint), so that a record decodes
// only from the bytes AppendRecord writes.
package legacy
