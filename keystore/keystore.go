package keystore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/strategies"
)

// Key is an API key as callers see it. It never holds the secret.
type Key struct {
	ID             string // public, stable; never the secret
	Name           string
	Model          string
	TokenLimit     int64     // tokens per usage window; > 0
	ExpiresAt      time.Time // zero: never
	CreatedAt      time.Time // zero: unknown (an imported key without created_at)
	LastUsed       time.Time // zero: never
	LifetimeTokens int64
	Disabled       bool
}

// Spec is what Create makes a key from.
type Spec struct {
	Name       string // at most MaxName bytes of UTF-8, no control characters; may be empty
	Model      string // the same
	TokenLimit int64  // tokens per usage window; must be > 0
	ExpiresAt  time.Time
}

// Usage is a key's usage window at one instant.
type Usage struct {
	Used       int64 // tokens that count in the window; may exceed Limit after RecordUsage
	Limit      int64 // the key's TokenLimit
	Remaining  int64 // max(0, Limit - Used)
	ResetAfter time.Duration
	// WindowEnd is the instant the oldest usage still counted stops
	// counting: when Used next goes down. Zero when Used is 0.
	WindowEnd time.Time
}

// Options configures a Store.
type Options struct {
	// Window and Bucket shape the usage window; Bucket must divide Window.
	// A zero field takes its default: 5 hours and 5 minutes, the legacy
	// window.
	Window, Bucket time.Duration
	// Now is the clock, in Unix nanoseconds; nil means the system clock.
	Now func() int64
	// Durable is called after every Commit that changed something,
	// outside any lock, and returns once that change is as durable as the
	// database promises (group commit lives behind it). nil means
	// calling the storage's Sync.
	Durable func(ctx context.Context) error
}

// Defaults of Options: the legacy usage window.
const (
	DefaultWindow = 5 * time.Hour
	DefaultBucket = 5 * time.Minute
)

var (
	// ErrNotFound is matched when no key has the id or secret given.
	ErrNotFound = errors.New("key not found")
	// ErrExpired is matched by Authenticate and Check for a key past its
	// ExpiresAt.
	ErrExpired = errors.New("key expired")
	// ErrDisabled is matched by Authenticate and Check for a disabled key.
	ErrDisabled = errors.New("key disabled")

	// ErrInvalid is strategies.ErrInvalid (and ratestore.ErrInvalid):
	// matched by every error about a bad argument or option.
	ErrInvalid = strategies.ErrInvalid
	// ErrCorrupt is strategies.ErrCorrupt (and ratestore.ErrCorrupt):
	// matched by every error about stored bytes that cannot be decoded.
	ErrCorrupt = strategies.ErrCorrupt
)

// numStripes is how many mutexes serialize the writes of keys: a key's
// is picked by a hash of its id.
const numStripes = 256

// Store is the key store of one database. It is safe for concurrent use.
type Store struct {
	store   storage.Store
	window  time.Duration
	bucket  time.Duration
	now     func() int64
	durable func(ctx context.Context) error

	stripes  [numStripes]sync.Mutex
	importMu sync.Mutex // serializes Import: two imports of one secret must not both add it
}

// New returns the key store kept in store. store must be owned by this
// process; the Store does not close it.
func New(store storage.Store, opts Options) (*Store, error) {
	if store == nil {
		return nil, fmt.Errorf("keystore: nil storage: %w", ErrInvalid)
	}
	window, bucket, err := usageWindow(opts.Window, opts.Bucket)
	if err != nil {
		return nil, err
	}
	s := &Store{store: store, window: window, bucket: bucket, now: opts.Now, durable: opts.Durable}
	if s.now == nil {
		s.now = func() int64 { return time.Now().UnixNano() }
	}
	if s.durable == nil {
		s.durable = func(context.Context) error { return store.Sync() }
	}
	return s, nil
}

// ValidateWindow reports whether window and bucket (zero: the defaults)
// make a usage window: bucket must divide window. Its errors match
// ErrInvalid and name the field.
func ValidateWindow(window, bucket time.Duration) error {
	_, _, err := usageWindow(window, bucket)
	return err
}

// usageWindow applies the defaults to window and bucket and validates them.
func usageWindow(window, bucket time.Duration) (time.Duration, time.Duration, error) {
	if window == 0 {
		window = DefaultWindow
	}
	if bucket == 0 {
		bucket = DefaultBucket
	}
	rw := strategies.RollingWindow{Limit: 1, Window: window, Bucket: bucket}
	if err := rw.Validate(); err != nil {
		return 0, 0, fmt.Errorf("keystore: usage window: %w", err)
	}
	return window, bucket, nil
}

// strategy is the usage window of a key whose TokenLimit is limit.
func (s *Store) strategy(limit int64) strategies.RollingWindow {
	return strategies.RollingWindow{Limit: limit, Window: s.window, Bucket: s.bucket}
}

// stripe returns the mutex that serializes the writes of key id.
func (s *Store) stripe(id string) *sync.Mutex {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return &s.stripes[h%numStripes]
}

// wait waits for the commit just made to be durable.
func (s *Store) wait(ctx context.Context) error {
	if err := s.durable(ctx); err != nil {
		return fmt.Errorf("keystore: making the change durable: %w", err)
	}
	return nil
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

func recordKey(id string) []byte { return append([]byte(recordPrefix), id...) }
func legacyKey(id string) []byte { return append([]byte(legacyPrefix), id...) }
func hashKey(h [sha256.Size]byte) []byte {
	return append([]byte(hashPrefix), h[:]...)
}

// notFound is the error for an id no key has. A malformed id names none.
func notFound(id string) error {
	if !validID(id) {
		return fmt.Errorf("keystore: malformed key id %.40q: %w", id, ErrNotFound)
	}
	return fmt.Errorf("keystore: key %s: %w", id, ErrNotFound)
}

// errUnknownSecret is the error of Authenticate and Check for a secret no
// key has.
var errUnknownSecret = fmt.Errorf("keystore: no key has this secret: %w", ErrNotFound)

func invalid(format string, args ...any) error {
	return fmt.Errorf("keystore: %s: %w", fmt.Sprintf(format, args...), ErrInvalid)
}

// badText says what is wrong with a name or model, or returns "".
func badText(s string) string {
	if len(s) > MaxName {
		return fmt.Sprintf("is %d bytes long, more than %d", len(s), MaxName)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			return fmt.Sprintf("holds the control character %U", c)
		}
	}
	return ""
}

// The instants a time.Time can be stored as: Unix nanoseconds in int64.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// checkTime says what is wrong with an instant to store, or returns "";
// the zero Time (not set) is fine.
func checkTime(t time.Time) string {
	if !t.IsZero() && (t.Before(minTime) || t.After(maxTime)) {
		return fmt.Sprintf("%v is outside the years 1678 to 2262", t)
	}
	return ""
}

// checkSpec validates the fields of a Spec; op names the call in errors.
func checkSpec(op string, name, model string, limit int64, expires time.Time) error {
	if limit <= 0 {
		return invalid("%s: TokenLimit must be positive, got %d", op, limit)
	}
	if why := badText(name); why != "" {
		return invalid("%s: Name %s", op, why)
	}
	if why := badText(model); why != "" {
		return invalid("%s: Model %s", op, why)
	}
	if why := checkTime(expires); why != "" {
		return invalid("%s: ExpiresAt %s", op, why)
	}
	return nil
}

// timeOf returns the instant ns, or the zero Time when has is false.
func timeOf(ns int64, has bool) time.Time {
	if !has {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// nanos returns t in Unix nanoseconds and whether it is set (not zero).
// t must have passed checkTime.
func nanos(t time.Time) (int64, bool) {
	if t.IsZero() {
		return 0, false
	}
	return t.UnixNano(), true
}

// satAdd returns a + b for b >= 0, saturated at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
