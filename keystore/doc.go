// Package keystore keeps API keys, their policies and their token usage in
// a ratestore database: hashed secrets, per-key limits (several rolling
// token windows, a request rate, a cap on requests in flight, allowed
// models), lifetime totals, expiry and disabling, and the legacy usage
// windows imported from older key files, migrated lazily.
//
// The key store is a client of the engine, not part of it: package
// ratestore knows nothing of keys. Open loads every key into memory once;
// from then on the Store keeps memory and disk in step by its own writes,
// and a request's check reads no storage.
//
// # What a request costs
//
// Authenticating a secret is one SHA-256 and one map lookup. Each token
// window of a key is an engine state: a strategies.RollingWindow of the
// window's Limit, Window and Bucket, under the limiter name "keys:w:"
// followed by the window's length ("keys:w:5h0m0s") and the key's id as
// the limiter key. So Check is a Peek of each window, an in-memory decision
// whose cost does not depend on the usage history (at most Window/Bucket
// buckets live); RecordUsage, Admit and Finish are engine calls made
// together in one backend.Batch, so they join the engine's group commit:
// in Sync mode they return once on disk, sharing one fsync with every
// concurrent caller; in Async mode at once. A key's record (name, policy,
// lifetime tokens, last use) is written in the same commit as the usage
// that changed it, never on its own.
//
// The request rate (Policy.RequestsPerMinute) is a RollingWindow of one
// minute in one-second buckets under the limiter name "keys:rpm". The
// requests in flight are leases as ratestore.DB.Concurrency holds them:
// a strategies.SlidingLog of Options.LeaseTTL
// under "keys:inflight", one unit per Admission, its Limit the key's
// MaxConcurrent. Like a reservation, a slot is engine state: a crash keeps
// the slots of the requests then in flight held until their leases end,
// rather than let a restarted gateway admit more than MaxConcurrent while
// upstream may still be serving them.
//
// # Admission
//
// Admit checks every limit of a key as one decision, under the key's lock:
// enabled and unexpired, the model allowed, a free slot, room for the
// request's Reserve in every window (Limiter.PeekN, which changes
// nothing), and last the request rate, the only check that takes
// something. A refusal therefore changes nothing. An admitted request then
// records Reserve in every window, so that concurrent requests see it as
// used: 64 requests at once on a key with room for one cannot spend 64
// times its budget. Finish replaces the reservation by the real tokens in
// the bucket the reservation went to (strategies.RollingWindow.Merge and
// Refund), so the tokens expire when the reservation would have; usage
// never goes below zero there. A reservation is engine state like any
// usage: a crash keeps it charged. An admission not finished within
// Options.LeaseTTL (a client lost, a process that died) frees its slot
// and keeps its reservation charged; its late Finish charges only what
// exceeds it. Never less than the real usage is charged.
//
// # Several processes: Open on a redisstore.DB
//
// Open on a redisstore.DB keeps the same records and states in Redis, for
// gateways that run several instances. The Store's code is the same: it is
// written once against the backend contract (backend.Store), and what
// differs is behind the contract's methods (Reread, Update's locks,
// Prefetch), which do nothing on a ratestore.DB. Each process still holds the
// keys in memory, but another may change them: a call reads the key's
// record again before it uses it, and a key another process created is
// read on first sight, so that a key is used as it now is, never as this
// process last saw it. The changes of one request are one
// redisstore.DB.Update holding a lock named by the key's id: the checks of
// an Admit and what it takes are one decision across every process, and
// its commit stores nothing if a record or state it read was changed by a
// writer without the lock. On Redis, an Admit is two round trips (the
// lock, taken with one read of the key's record and states and its
// team's, and the commit); a Finish is one, its commit, deciding on the
// values the Admit left in this process (backend.Store.UpdateCached):
// when another process changed them in between, the commit stores
// nothing, the Finish takes back what it did in memory (the Recorder's
// Discard) and runs again under the locks, as an Admit does. Check,
// Usage and TeamUsage are one round trip; Authenticate is none for a
// key this process has seen (BenchmarkAdmitFinish/redis,
// BenchmarkCheckRedis). Every record and state of a key shares the key's
// hash slot, and its team's theirs, so the key store runs on a Redis
// Cluster, where a batch of a key and its team is stored slot by slot
// while it holds both locks (see redisstore.DB.Update).
//
// Redis is then where the keys are, as durable as its persistence makes
// them (appendonly; appendfsync always for what Sync promises): a Redis
// restarted empty has no keys. A batch whose commit finds a value changed
// by a writer without the lock (a lock that expired under a process
// stalled past redisstore.Options.LockTTL) stores nothing and fails with
// redisstore.ErrConflict: an Admit then fails with that error, and so does
// a Finish, which has charged nothing (the gateway logs such a Finish's
// tokens at Error, to be reconciled).
//
// # Policies
//
// A policy is validated once and shared by every key that has an equal
// one, with a ratestore.Limiter per limit; a key holds a pointer to it.
// Update replaces a key's policy while the key is in use: the next request
// sees it, and usage counted stays counted in every window whose length
// stays (a changed Limit or Bucket is reconciled by the strategy). Legacy
// keys and Spec.TokenLimit get one window of Options.UsageWindow.
//
// A policy may have no token window: a key or team held to budgets alone
// ("$5 a day"), or to no limit at all, metered only. Such a key reserves
// and charges nothing in windows; Admit still checks its budgets, request
// rate, concurrency cap and models, and Finish still adds its tokens to
// LifetimeTokens and its cost to its spend and budgets. Its TokenLimit is
// 0, Check answers Allowed with a zero Limit, its Usage has no window
// (Binding -1, the figures zero), and an admission's Limits has no Tokens
// (HasTokens false) unless its team has a window.
//
// Authenticate and Check refuse a disabled key with ErrDisabled before they
// look at its expiry, then an expired one with ErrExpired: a key is expired
// from the instant ExpiresAt on (now >= ExpiresAt). Both errors are a
// *Denial and come with the Key, so that callers can log which key was
// refused; an unknown secret gives ErrNotFound and a zero Key. RecordUsage
// records on any existing key, disabled or expired included: the tokens
// were spent.
//
// # Names
//
// A key's Name and Model, a team's Name and the model patterns of a policy
// are free text an operator sets, shown in the admin API, the console, the
// CLI, logs and the ledger. A text that reads as another is refused when
// it comes in (Create, Update, CreateTeam, UpdateTeam, Import), with an
// error matching ErrInvalid that names the field and the character: one
// holding a control character, a format character (Unicode category Cf:
// bidi overrides such as U+202E, zero-width characters such as U+200B) or
// a line or paragraph separator. Records written before format characters
// and separators were refused still read, their texts as stored: a change
// that leaves such a text where it was is made, and only new text is
// checked.
//
// # Teams
//
// A team (CreateTeam) has a policy of its own, whose windows, budgets,
// request rate, concurrency cap and models count the requests of all its
// keys together: its states are the engine's under the same limiter names
// as a key's, for the team's id. A key belongs to one team at most
// (Spec.Team). Admit checks the key, then its team, taking nothing, then
// takes from both: one decision, all or nothing, under the key's lock and
// the team's (and, on a shared store, both ids' locks), so that a team's
// budget holds across its keys under any concurrency. A refusal by the
// team is a *Denial whose Team names it. Finish charges the team the
// admission was made in. A change of a team's policy, or of a key's team,
// takes effect on the next request; DeleteTeam is refused while keys
// belong to the team.
//
// # Quotas
//
// A Quota (Store.Quota) is a policy on a name that is neither a key nor a
// team: an upstream's quota, shared by the requests of every key sent to
// it. A request names its quotas (Request.Quotas); Admit checks them after
// the key and its team, and takes from all of them or none, in the same
// decision, under the quotas' locks (stripes by name in this process, the
// quotas' names on a shared store). A refusal by a quota is a *Denial
// whose Quota names it. Finish settles them as it settles the key. A
// quota's usage is engine state under "q/" and its name, and nothing
// else: quotas have no records, and a Store may have as many as its engine
// has states.
//
// # Model limits and end users
//
// A policy's ModelLimits are limits on the requests for some models only:
// every entry whose globs match a request's model applies to it, besides
// the policy's own limits. Its EndUsers are the limits of each end user of
// the key (the key's own customer, Request.EndUser) separately, or of each
// end user of a team's keys together. Admit checks them after the key and
// its team, and takes from all of them or none, in the same decision.
//
// They are limiter states and nothing else, as quotas are: a model limit's
// under the owner's id, "/m:" and its globs; an end user's under the
// owner's id, "/u:" and its name. An end user has no record, is never
// loaded for a name never seen (the engine's filter of stored keys), is
// cached while used and evicted when idle, so a key may have millions. A
// sub-limit takes a slot for a request in flight only when it caps them
// (MaxConcurrent): an end user of one window is one state. Its states are
// its owner's to lock: the key's lock guards a key's sub-limits, the
// team's a team's. A refusal by one is a *Denial whose EndUser or Models
// name it; a request naming no end user to a policy that requires one
// (EndUsers.Required) is refused with ErrNoEndUser. EndUserUsage and
// ModelUsage read them. Changing a model limit's globs starts its count
// anew; changing its limits keeps it.
//
// # Pages of keys and teams
//
// Keys and Teams answer a page at a time, searched, filtered and sorted on
// ordered indexes the Store keeps in memory beside its maps (index.go), so
// that a page costs O(page + log n) at any key count, with bounded work
// whatever its filters (plan.go), and a cursor that stays valid while keys
// are added and deleted (cursor.go). Last use and spend are indexed coarse
// (to the second; in cents to 1/1024), so that a request
// moves its key in them now and then rather than every time. Where
// processes share the keys, every change of a record is announced in the
// batch that makes it (backend.Batch.Announce), and a page first
// reads the changes since its Store last did and those records again
// (feed.go): never the whole keyspace, but after a gap in the feed.
//
// # Secrets
//
// Create makes a secret of 32 bytes from crypto/rand, written "rsk_"
// followed by the bytes in unpadded base64url (47 characters in all); the
// prefix makes leaked secrets easy to recognize for scanners. Imported
// legacy secrets ("pk_live_...") are kept working as they are. A secret is
// stored only as its SHA-256, and no error, record or log holds it:
// Create's return value is the only place it is ever seen.
//
// A fast, unsalted hash is the right one for secrets of 256 random bits:
// salting and key stretching (bcrypt, argon2) exist to slow down guessing
// of low-entropy passwords, and 2^256 candidates cannot be enumerated at
// any speed, so they would only make every request pay milliseconds for
// nothing. An unsalted hash also lets the secret be looked up by its hash,
// in O(1). Legacy secrets keep whatever entropy they were made with: if one
// was short or guessable, an attacker holding a copy of the database could
// find it by hashing candidates fast. The remedy is to rotate such keys
// (Rotate), not to slow down every lookup.
//
// Rotate gives a key a new secret and keeps everything else of it. The
// secret it replaces keeps working for a grace (at most MaxGrace), so that
// clients can move to the new one, then is refused as unknown: the record
// holds its hash and the instant it stops, and h/ indexes both hashes
// until the key's record is next written after that instant. A key has at
// most one previous secret.
//
// IDs are "key_" followed by 16 lowercase hex digits (64 random bits):
// public, stable, never derived from the secret.
//
// # Storage layout
//
// The key store's records (backend.Batch.Put) use three prefixes of the
// database's keyspace; the usage windows are engine states under the
// limiter names above:
//
//	k/<id>           the key's record
//	h/<sha256>       the 32 raw bytes of SHA-256(secret) -> <id>: read only to name the
//	                 key of a secret whose record cannot be decoded (ErrCorrupt, not ErrNotFound),
//	                 and where processes share the keys; a rotated key's previous secret has one too
//	l/<id>           legacy usage windows written by Import, until merged
//	t/<team id>      a team's record: byte version 1, its name (uvarint+bytes),
//	                 CreatedAt (varint Unix ns) and its policy (uvarint+bytes, as a key's)
//
// A record is binary, version 3:
//
//	byte    version      3
//	byte    flags        bit 0 disabled, 1 ExpiresAt set, 2 CreatedAt set,
//	                     3 LastUsed set, 4 legacy usage pending (l/<id> exists),
//	                     5 a previous secret, 6 a team (version 3 only); the other bits are 0
//	[32]    hash         SHA-256 of the secret
//	uvarint Lifetime     LifetimeTokens, 0 .. 2^63-1 (additions saturate there)
//	varint  ExpiresAt    Unix ns, zigzag, present iff flag bit 1
//	varint  CreatedAt    Unix ns, present iff flag bit 2
//	varint  LastUsed     Unix ns, present iff flag bit 3
//	uvarint+bytes Name   at most MaxName bytes of UTF-8 without control characters (see Names)
//	uvarint+bytes Model  the same
//	uvarint+bytes Policy uvarint window count (0 .. MaxWindows; 1 .. in version 2), then for each
//	                     uvarint Limit, Window and Bucket (ns); uvarint
//	                     RequestsPerMinute; uvarint MaxConcurrent; uvarint
//	                     model count (0 .. MaxModels), then each pattern as
//	                     uvarint+bytes; then (version 3) uvarint budget count
//	                     (0 .. MaxBudgets) and each budget
//	uvarint Spend        LifetimeSpend in nano-dollars (version 3)
//	[32]    previous     SHA-256 of the previous secret, present iff flag bit 5
//	varint  previous end Unix ns, when it stops authenticating, present iff flag bit 5
//	uvarint+bytes Team   the id of the key's team, present iff flag bit 6
//
// Varints are encoding/binary's, and must be minimal. Nothing may follow
// the last field. Version 2 records end with the policy, which has no
// budgets, and at least one window. A version 3 policy (a key's or a
// team's) may have none, a window count of 0: records written before
// policies without windows were allowed all have one and read as they
// did, and a key store from before reads a count of 0 as corrupt. Every field is checked when a record is read, the policy as
// Create checks one: any violation, and an unknown version, is an error
// matching ErrCorrupt that names the key's id. A key whose record cannot be
// read is reported by every call that names it, and Delete removes it.
//
// Version 1 records, written by earlier versions of this package, held one
// token limit and the usage window itself (a RollingWindow state of the
// usage window). Open rewrites them as version 2, moving each usage window
// into its engine state, in two commits: the states first, then the
// records, so that a crash in between loses nothing (a record still at
// version 1 sets its state again, replacing what the first commit wrote);
// on a read-only database, in memory only (see below).
//
// A legacy record (l/<id>) is package legacy's (legacy.AppendRecord,
// whose package doc has its layout): the key store writes it at Import
// and reads it for the merge, and a record it cannot decode is an error
// matching ErrCorrupt that names the key.
//
// # Legacy usage
//
// Import stores each key's usage windows as they were, in its l/<id>
// record, and sets the record's pending flag. The first time the key is
// touched (Check, Admit, Get, Usage, RecordUsage, Update, MigrateLegacy),
// the windows are merged into every token window of the key
// (strategies.RollingWindow.Merge): all the tokens of a legacy window land
// in the bucket that holds its window_start, so they expire when that
// window would have (to bucket precision), and a window already over at
// that instant contributes nothing. The merged states, the record without
// its flag and the deletion of l/<id> are one commit, made under the key's
// lock, so a window is merged exactly once. LifetimeTokens is the imported
// total and is never recomputed from the windows.
//
// # A read-only database
//
// Open on a ratestore.DB opened read-only (ratestore.Options.ReadOnly),
// such as the console's view of a closed database, writes nothing, and
// shows the keys as a writable Store would have left them. Version 1
// records are decoded and upgraded in memory only: the key is as upgrade
// makes it, and its usage window, read again from its record when the
// key's usage is read, is the state of its first token window. A key's
// pending legacy usage is not merged: Usage and Check read its token
// windows with the legacy windows merged into copies of their states, by
// the functions a merge uses (a legacy record that cannot be decoded fails
// Get, Usage and Check, as the merge would), while the stored states, the
// legacy record and the pending flag stay as they are (PendingLegacy and
// LegacyIDs still count the key). Get and List return each key as a merge
// leaves it: the merge changes no field of a Key. Every call that would
// change a key or a team (Create, Import, Update, Disable, Enable,
// Delete, Rotate, RecordUsage, Admit, MigrateLegacy with usage pending,
// CreateTeam, UpdateTeam, DeleteTeam) fails with an error matching
// ErrReadOnly before it changes anything, in memory either.
package keystore
