package keystore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// Key is an API key as callers see it. It never holds the secret. Its
// Policy's slices are shared with the Store and must not be modified.
type Key struct {
	ID             string // public, stable; never the secret
	Name           string
	Model          string // legacy: one model name, informational
	Policy         Policy
	TokenLimit     int64     // the limit of Policy.Windows[0]: the key's limit when it has one window; 0: none
	ExpiresAt      time.Time // zero: never
	CreatedAt      time.Time // zero: unknown (an imported key without created_at)
	LastUsed       time.Time // zero: never
	LifetimeTokens int64
	LifetimeSpend  pricing.USD // what FinishSpend charged it, in all
	Team           string      // its team's id; "" for none
	Disabled       bool
	// PreviousSecretExpiresAt is when the secret a Rotate replaced stops
	// authenticating; zero when there is none. It may be past until the
	// next write of the key drops that secret (see Rotate).
	PreviousSecretExpiresAt time.Time
}

// Policy is everything a key may do. Every limit present must allow a
// request.
type Policy struct {
	Windows           []Window // token windows, e.g. 100k per 5h and 1M per 7 days; none: no token limit
	RequestsPerMinute int64    // 0: no request-rate limit
	MaxConcurrent     int      // requests in flight at once; 0: no limit
	Models            []string // models the key may ask for (path.Match globs: "claude-*"); empty: any
	Budgets           []Budget // limits on what the key spends, in money; empty: none

	// ModelLimits are limits on the requests for some models only; every
	// entry whose Models match a request applies to it. At most
	// MaxModelLimits.
	ModelLimits []ModelLimit
	// EndUsers limits each end user of the key (Request.EndUser)
	// separately; the zero value: none.
	EndUsers EndUsers
}

// Window is one token window of a Policy: at most Limit tokens in any
// Window, counted in buckets of Bucket (strategies.RollingWindow).
type Window struct {
	Limit  int64
	Window time.Duration
	Bucket time.Duration // 0: Window/60, rounded down to a divisor of Window
}

// Spec is what Create makes a key from, and what Update changes.
type Spec struct {
	Name       string // at most MaxName bytes of UTF-8, no control or format characters (see the package doc); may be empty
	Model      string // the same
	TokenLimit int64  // shorthand for one window of Options.UsageWindow; ignored when Policy.Windows is set; 0: none
	Policy     Policy
	ExpiresAt  time.Time
	Team       string // the id of the key's team (CreateTeam); "" for none
}

// Usage is a key's usage at one instant: every window, and the binding
// one's figures at the top level for callers that show one. The binding
// window is the one that refuses first: one over its limit (the most over,
// by Used - Limit), else the one with the least Remaining. A key without
// a token window has none: Binding is -1 and the figures are zero.
type Usage struct {
	Windows []WindowUsage

	Used       int64 // tokens that count in the binding window; may exceed Limit after RecordUsage
	Limit      int64
	Remaining  int64 // max(0, Limit - Used)
	ResetAfter time.Duration
	WindowEnd  time.Time // when the binding window's Used next goes down; zero when it is 0

	Binding  int   // the index in Windows of the binding window: over its limit, else with the least Remaining; -1: none
	InFlight int   // admissions not finished (and not past Options.LeaseTTL)
	Requests int64 // admitted in the rolling minute of Policy.RequestsPerMinute; 0 without one

	Budgets []BudgetUsage // one for each of the policy's budgets
}

// Bind sets u's binding window and its top-level figures from u.Windows:
// the window most over its limit, else the first with the least
// Remaining (the one that refuses first); none (-1, and zero figures)
// when there is no window. It is the one rule for every view of a key's
// usage (the admin API, the CLI, the stats path).
func (u *Usage) Bind() {
	u.Binding = -1
	var b WindowUsage
	for i, w := range u.Windows {
		if i == 0 || w.Used-w.Limit > max(0, b.Used-b.Limit) || b.Used <= b.Limit && w.Remaining < b.Remaining {
			u.Binding, b = i, w
		}
	}
	u.Used, u.Limit, u.Remaining, u.ResetAfter, u.WindowEnd = b.Used, b.Limit, b.Remaining, b.ResetAfter, b.WindowEnd
}

// WindowUsage is one window's usage. Used includes the tokens reserved by
// admissions not finished yet.
type WindowUsage struct {
	Window, Bucket time.Duration
	Used           int64
	Limit          int64
	Remaining      int64         // max(0, Limit - Used)
	ResetAfter     time.Duration // until nothing is in use in the window
	WindowEnd      time.Time     // the instant the oldest usage still counted stops counting; zero when Used is 0
}

// Options configures a Store.
type Options struct {
	// UsageWindow and UsageBucket are the window of Spec.TokenLimit and of
	// legacy usage; UsageBucket must divide UsageWindow. Zero means the
	// legacy window: DefaultWindow in DefaultBucket buckets.
	UsageWindow, UsageBucket time.Duration
	// LeaseTTL is how long an Admission holds its concurrency slot: one
	// not finished by then (a crashed or lost client) frees it, and its
	// reservation stays charged. 0 means DefaultLeaseTTL.
	LeaseTTL time.Duration
}

// Defaults of Options.
const (
	DefaultWindow   = 5 * time.Hour
	DefaultBucket   = 5 * time.Minute
	DefaultLeaseTTL = 10 * time.Minute
)

var (
	// ErrNotFound is matched when no key has the id or secret given.
	ErrNotFound = errors.New("key not found")
	// ErrExpired is matched for a key past its ExpiresAt.
	ErrExpired = errors.New("key expired")
	// ErrDisabled is matched for a disabled key.
	ErrDisabled = errors.New("key disabled")
	// ErrModel is matched by Admit for a model the key's Policy does not
	// allow.
	ErrModel = errors.New("model not allowed")
	// ErrLimited is matched by Admit when a limit of the key's Policy
	// refuses the request: a token window, the request rate or the
	// concurrency cap.
	ErrLimited = errors.New("rate limited")

	// ErrInvalid is backend.ErrInvalid: matched by every error about a
	// bad argument or option.
	ErrInvalid = backend.ErrInvalid
	// ErrCorrupt is backend.ErrCorrupt: matched by every error about
	// stored bytes that cannot be decoded.
	ErrCorrupt = backend.ErrCorrupt
	// ErrReadOnly is backend.ErrReadOnly: matched by every call that
	// would change a key or a team of a Store on a database opened
	// read-only.
	ErrReadOnly = backend.ErrReadOnly
)

// Store is the key store of one database. It is safe for concurrent use.
type Store struct {
	db         backend.Store
	shared     bool       // other processes change the store (Redis): reads are batches, one round trip each
	readOnly   bool       // the database is open read-only: nothing is written (see unwritten)
	opts       Options    // with the defaults applied
	quotaLocks quotaLocks // held by an Admit from its quotas' checks to their takes
	usage      Window     // the window of Spec.TokenLimit and of legacy keys

	mu      sync.RWMutex
	byID    map[string]*entry
	byHash  map[[sha256.Size]byte]*entry
	corrupt map[string]error // ids whose record cannot be decoded
	teams   map[string]*team

	ix   *indexes // ordered indexes of byID and teams, for pages (see index.go)
	feed feed     // where other processes change the keys: what this Store read of their changes

	policies policies
	lease    strategies.SlidingLog // the requests in flight of a key: one unit per Admission, for LeaseTTL
	importMu sync.Mutex            // two imports of one secret must not both add it
}

// entry is one key in memory. Its fields are guarded by mu, except id,
// which never changes. The hashes of its secrets (rec.hash, and
// rec.prev) change only under both mu and the
// Store's mu, with the maps (Rotate): either lock reads them.
type entry struct {
	mu    sync.Mutex
	id    string
	rec   record
	moved int64 // how far the key's policy changes have moved reservations: the sum of their reach (see adjust)
	ix    ixed  // what the indexes hold of it (see index.go)
	// reserved is the tokens this process's admissions of the key in
	// flight hold (see Store.Reserved).
	reserved atomic.Int64
}

func newEntry(id string, rec record) *entry { return &entry{id: id, rec: rec} }

// records are the keys of the records of e's key: its record, and its
// legacy usage if it has any. They are made for each call rather than
// held: a shared store's reads need them, and those cost a round trip; an
// entry holding them cost every key in memory about 100 bytes more.
func (e *entry) records() [][]byte {
	if e.rec.legacy {
		return [][]byte{recordKey(e.id), legacyKey(e.id)}
	}
	return [][]byte{recordKey(e.id)}
}

// storeKey attaches the Store to its DB (ratestore.DB.Attach).
type storeKey struct{}

// Open returns the key store inside db, loading its keys into memory: every
// key record and the index of secret hashes, so that authenticating a
// request reads no storage. There is one Store per DB, which Open makes the
// first time: opening it again returns the same Store, whatever opts were
// then when opts is the zero Options (so packages that only need the keys,
// such as migrate, pass Options{}), and otherwise an error matching
// ErrInvalid when opts differ from those it was opened with.
//
// Records written by earlier versions are rewritten in the current format
// on the way (see the package doc); a record that cannot be decoded is
// reported, with ErrCorrupt, by every call naming its key. On a DB opened
// read-only, nothing is written, by Open or later: see the package doc.
//
// db is any backend meeting the backend contract (backend.Store): a
// *ratestore.DB, or a *redisstore.DB, where every process that opens the
// key store shares its keys, their windows, request rates, requests in
// flight and reservations. Each process holds the keys in memory, and
// reads a key's record again before it uses it where other processes
// change them (Store.Reread), so that a key created, changed, disabled or
// deleted by another process is used as it now is. A change of a key (an
// Admit, a Finish, an update) is one Update holding a lock of the key
// against the other processes' changes: the checks of an Admit and what it
// takes are one decision across all of them.
func Open(db backend.Store, opts Options) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("keystore: open: nil database: %w", ErrInvalid)
	}
	o, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	v, err := db.Attach(storeKey{}, func() (any, error) { return openIndexed(db, o) })
	if err != nil {
		return nil, fmt.Errorf("keystore: open: %w", err)
	}
	s := v.(*Store)
	if s.opts != o && opts != (Options{}) {
		return nil, fmt.Errorf("keystore: open: the key store of this database is open with %+v already, not %+v: %w", s.opts, o, ErrInvalid)
	}
	return s, nil
}

// openIndexed opens the key store of db (open) and indexes it. Where
// other processes change the keys, it first notes the position of their
// feed of changes, so that a change made while the keys load is read
// again by the first page (see catchUp) rather than missed.
func openIndexed(db backend.Store, o Options) (*Store, error) {
	_, pos, err := db.Changes(context.Background(), feedTopic, "", 1)
	if err != nil {
		return nil, fmt.Errorf("keystore: open: %w", err)
	}
	s, err := open(db, o)
	if err != nil {
		return nil, err
	}
	s.feed.pos = pos
	s.buildIndexes()
	return s, nil
}

// withDefaults validates opts and fills in its zero fields.
func withDefaults(o Options) (Options, error) {
	if o.UsageWindow == 0 {
		o.UsageWindow = DefaultWindow
	}
	if o.UsageBucket == 0 {
		o.UsageBucket = DefaultBucket
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	rw := strategies.RollingWindow{Limit: 1, Window: o.UsageWindow, Bucket: o.UsageBucket}
	if err := rw.Validate(); err != nil {
		return Options{}, fmt.Errorf("keystore: usage window: %w", err)
	}
	if o.LeaseTTL < 0 || o.LeaseTTL > strategies.MaxWindow {
		return Options{}, invalid("LeaseTTL %v is out of range (0, %v]", o.LeaseTTL, strategies.MaxWindow)
	}
	return o, nil
}

// now reads the DB's clock, in Unix nanoseconds.

// find returns the entry of key id: on a shared engine, read from it when
// another process created the key.
func (s *Store) find(ctx context.Context, id string) (*entry, error) {
	s.mu.RLock()
	e, bad := s.byID[id], s.corrupt[id]
	s.mu.RUnlock()
	switch {
	case bad != nil:
		return nil, bad
	case e == nil && validID(id):
		return s.lookup(ctx, id)
	case e == nil:
		return nil, notFound(id)
	}
	return e, nil
}

// bySecret returns the entry that h, the hash of a secret, names: the
// caller checks that h still authenticates it (entry.previous), once it
// holds its lock.
func (s *Store) bySecret(ctx context.Context, h [sha256.Size]byte) (*entry, error) {
	s.mu.RLock()
	e, anyCorrupt := s.byHash[h], len(s.corrupt) > 0
	s.mu.RUnlock()
	if e != nil {
		return e, nil
	}
	// A key another process created since this Store loaded its keys.
	ids, err := s.db.Reread(ctx, [][]byte{hashKey(h)})
	if err != nil {
		return nil, fmt.Errorf("keystore: authenticate: %w", err)
	}
	if len(ids) > 0 && ids[0] != nil {
		e, err := s.lookup(ctx, string(ids[0]))
		if errors.Is(err, ErrNotFound) {
			return nil, errUnknownSecret
		}
		return e, err
	}
	if anyCorrupt {
		// The key may be one whose record cannot be read: the stored index
		// of hashes still names it.
		id, err := s.db.Get(ctx, hashKey(h))
		if err != nil {
			return nil, fmt.Errorf("keystore: authenticate: %w", err)
		}
		s.mu.RLock()
		bad := s.corrupt[string(id)]
		s.mu.RUnlock()
		if bad != nil {
			return nil, bad
		}
	}
	return nil, errUnknownSecret
}

// ID and secret formats.
const (
	idPrefix     = "key_"
	idHexLen     = 16
	secretPrefix = "rsk_"
	secretBytes  = 32
)

// newID returns a fresh random key id.
func newID() string {
	var b [idHexLen / 2]byte
	rand.Read(b[:]) // never fails (crypto/rand crashes the program instead)
	return idPrefix + hex.EncodeToString(b[:])
}

// newSecret returns a fresh random secret.
func newSecret() string {
	var b [secretBytes]byte
	rand.Read(b[:])
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// validID reports whether id has the form of a key id: "key_" and 16
// lowercase hex digits.
func validID(id string) bool {
	if len(id) != len(idPrefix)+idHexLen || id[:len(idPrefix)] != idPrefix {
		return false
	}
	for i := len(idPrefix); i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func hashSecret(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// The key store's records (see the package doc).
const (
	recordPrefix = "k/"
	hashPrefix   = "h/"
	legacyPrefix = "l/"
)

func recordKey(id string) []byte         { return prefixed(recordPrefix, id) }
func legacyKey(id string) []byte         { return prefixed(legacyPrefix, id) }
func hashKey(h [sha256.Size]byte) []byte { return prefixed(hashPrefix, string(h[:])) }

// prefixed returns prefix followed by s, in one allocation.
func prefixed(prefix, s string) []byte {
	return append(append(make([]byte, 0, len(prefix)+len(s)), prefix...), s...)
}

// notFound is the error for an id no key has. A malformed id names none.
func notFound(id string) error {
	if !validID(id) {
		return fmt.Errorf("keystore: malformed key id %.40q: %w", id, ErrNotFound)
	}
	return fmt.Errorf("keystore: key %s: %w", id, ErrNotFound)
}

// errUnknownSecret is the error for a secret no key has.
var errUnknownSecret = fmt.Errorf("keystore: no key has this secret: %w", ErrNotFound)

// invalid returns the InvalidError of a refused argument.
func invalid(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// InvalidError is an argument refused that is not one field of a Spec
// (those are FieldErrors): what is wrong, as a caller may show it in its
// own terms. It matches ErrInvalid.
type InvalidError struct {
	Msg string // what is wrong: "a key with this secret exists already"
}

func (e *InvalidError) Error() string { return "keystore: " + e.Msg + ": " + ErrInvalid.Error() }

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// FieldError is a field of a Spec (or of an Imported key) that is wrong:
// which one, as data, and why, so that a caller can name it in its own
// terms (the admin API's "windows[1].limit"). It matches ErrInvalid.
type FieldError struct {
	Op    string // "create", "update key key_…"
	Field string // its path in the Spec: "Policy.Windows[1].Limit", "Name"
	Msg   string // what is wrong, not naming the field: "must be positive, got 0"
	Err   error  // the cause, if any: a strategy's validation
}

func (e *FieldError) Error() string {
	msg := "keystore: " + e.Op + ": " + e.Field + ": " + e.Msg
	if e.Err != nil {
		return msg + ": " + e.Err.Error()
	}
	return msg + ": " + ErrInvalid.Error()
}

// Unwrap returns ErrInvalid, and the cause if any.
func (e *FieldError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// fieldError returns the FieldError of field of op.
func fieldError(op, field, format string, args ...any) error {
	return &FieldError{Op: op, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// sortedIDs returns the ids of every key, corrupt ones included, in order.
func (s *Store) sortedIDs() []string {
	s.ix.mu.RLock()
	ids := make([]string, 0, s.ix.id.Len())
	s.ix.id.Scan(func(e *entry) bool {
		ids = append(ids, e.id)
		return true
	})
	s.ix.mu.RUnlock()
	n := len(ids)
	s.mu.RLock()
	for id := range s.corrupt {
		ids = append(ids, id)
	}
	s.mu.RUnlock()
	if len(ids) > n { // keys whose record cannot be read: few, if any
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	return ids
}
