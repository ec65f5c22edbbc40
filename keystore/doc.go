// Package keystore keeps API keys and their token usage in a ratestore
// database: hashed secrets, per-key token limits over a rolling usage window
// (by default the legacy 100k-tokens-per-5-hours shape: 5 hours in 5-minute
// buckets), lifetime totals, expiry and disabling, and the legacy usage
// windows imported from older key files, migrated lazily.
//
// A Store works on a storage.Store that one process owns (both backends hold
// a file lock), so it serializes the writes of one key with an in-process
// striped mutex and needs no optimistic transactions.
//
// # Operations
//
// Every change is one read-modify-write of one record, committed in one
// storage Commit under the key's stripe lock; then, outside the lock,
// Options.Durable waits until that commit is as durable as the database
// promises. Its error is returned, but the change stays committed: an error
// from Durable (or a cancelled ctx it honours) says the change may not
// survive a crash, not that it did not happen.
//
// Check is read-only (two Gets: the hash index, then the record) unless the
// key has legacy usage pending. Authenticate and List never write. Get,
// Check, Usage, RecordUsage, MigrateLegacy and every other change of a key
// first merge its pending legacy usage, in the same Commit as the change.
//
// Authenticate and Check refuse a disabled key with ErrDisabled before they
// look at its expiry, then an expired one with ErrExpired: a key is expired
// from the instant ExpiresAt on (now >= ExpiresAt). Both errors come with the
// Key, so that callers can log which key was refused; an unknown secret gives
// ErrNotFound and a zero Key. RecordUsage records on any existing key, disabled
// or expired included: the tokens were spent.
//
// # Secrets
//
// Create makes a secret of 32 bytes from crypto/rand, written "rsk_" followed
// by the bytes in unpadded base64url (47 characters in all); the prefix makes
// leaked secrets easy to recognize for scanners. Imported legacy secrets
// ("pk_live_...") are kept working as they are. A secret is stored only as
// its SHA-256, and no error, record or log holds it: Create's return value is
// the only place it is ever seen.
//
// A fast, unsalted hash is the right one for secrets of 256 random bits:
// salting and key stretching (bcrypt, argon2) exist to slow down guessing of
// low-entropy passwords, and 2^256 candidates cannot be enumerated at any
// speed, so they would only make every request pay milliseconds for nothing.
// An unsalted hash also lets the secret be looked up by its hash in an index,
// in O(1). Legacy secrets keep whatever entropy they were made with: if one
// was short or guessable, an attacker holding a copy of the database could
// find it by hashing candidates fast. The remedy is to rotate such keys
// (Create a new one, Delete the old), not to slow down every lookup.
//
// The hash found through the index is compared with the one stored in the
// record with subtle.ConstantTimeCompare, so a damaged index entry cannot
// authenticate a secret against another key's record.
//
// IDs are "key_" followed by 16 lowercase hex digits (64 random bits): public,
// stable, never derived from the secret.
//
// # Storage layout
//
// Three prefixes of the database's flat keyspace belong to the key store:
//
//	k/<id>           the key's record: everything about it, usage window included
//	h/<sha256>       the hash index: the 32 raw bytes of SHA-256(secret) -> <id>
//	l/<id>           legacy usage windows written by Import, until migrated
//
// A record is binary, version 1:
//
//	byte    version      1
//	byte    flags        bit 0 disabled, 1 ExpiresAt set, 2 CreatedAt set,
//	                     3 LastUsed set, 4 legacy usage pending (l/<id> exists);
//	                     the other bits are 0
//	[32]    hash         SHA-256 of the secret
//	uvarint TokenLimit   1 .. 2^63-1
//	uvarint Lifetime     LifetimeTokens, 0 .. 2^63-1 (additions saturate there)
//	varint  ExpiresAt    Unix ns, zigzag, present iff flag bit 1
//	varint  CreatedAt    Unix ns, present iff flag bit 2
//	varint  LastUsed     Unix ns, present iff flag bit 3
//	uvarint+bytes Name   at most MaxName bytes of UTF-8 without control characters
//	uvarint+bytes Model  the same
//	uvarint+bytes Window the usage window: the encoding of a
//	                     strategies.RollingWindow state as AppendEncode writes
//	                     it, or empty when nothing is in use
//
// Varints are encoding/binary's, and must be minimal. Nothing may follow the
// window. Every field is checked when a record is read, the window by the
// strategy's Decode: any violation, and an unknown version, is an error
// matching strategies.ErrCorrupt (ratestore.ErrCorrupt) that names the key's
// id. A record is about 50 bytes plus its name and model; a window in use
// adds its encoding, about 55 bytes for one bucket and a few more for each
// further one.
//
// A legacy record (l/<id>) is binary, version 1:
//
//	byte    version   1
//	uvarint count     1 .. MaxLegacyWindows
//	then count windows, in order of start:
//	  varint start    Unix ns of window_start (the first), or uvarint
//	                  start - previous start (the others)
//	  uvarint tokens  1 .. 2^63-1; the sum of all stays within 2^63-1
//
// # Legacy usage
//
// Import stores each key's usage windows as they were, in its l/<id> record,
// and sets the record's pending flag. The first time the key is touched, the
// windows are merged into its rolling window (strategies.RollingWindow.Merge):
// all the tokens of a window land in the bucket that holds its window_start,
// so they expire when that window would have (to bucket precision), and a
// window already over at that instant contributes nothing. The merged record
// is written and l/<id> deleted in one Commit, under the key's lock, so a
// window is merged exactly once. LifetimeTokens is the imported total and is
// never recomputed from the windows.
//
// # Usage
//
// Usage reports the key's window at the current instant: Used tokens
// (which may exceed the Limit after RecordUsage), Remaining = max(0, Limit -
// Used), ResetAfter until nothing is in use any more, and WindowEnd: the
// instant the oldest usage still counted stops counting, when Used next goes
// down (zero when nothing is in use).
package keystore
