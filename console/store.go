package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ratestore/ratestore/backend"
)

// Sessions keeps a Console's sessions in a store of the backend contract
// (backend.Store), the gateway's own: they outlive a restart, and the
// gateways of one Redis share them, so that a session signed in at one is
// good at all and a sign-out at one ends it at all. Make one with
// StoreSessions and give it as Options.Sessions; without one a Console
// keeps its sessions in memory.
//
// Nothing in it is a credential: a session's record is named by the
// SHA-256 of its cookie and holds its expiry. The cookie, 32 random
// bytes, is not found from its hash, and the CSRF token is a hash of the
// cookie too (csrfOf), so the store holds nothing to sign in with or to
// forge a change with. The records, under "console/":
//
//	console/s/<id>/sessions            the session of id (64 hex digits): its expiry, 8 bytes
//	console/e/<expiry><id>/sessions    the same, named in order of expiry (16 hex digits); empty
//	console/n/sessions                 how many sessions there are, 8 bytes
//
// Times and counts are big-endian: Unix nanoseconds, and a uint64. The
// names share the part after their last "/", so that on a Redis Cluster
// they are in one slot and each change stores them together. Every change
// is an Update holding the lock console/sessions, which also keeps the
// changes of one process in turn (a DB runs concurrent Updates at once).
// Expired sessions are swept a page at a time (see sweep), reading the
// records in order of expiry from the first; a request reads one record.
type Sessions struct {
	get    func(ctx context.Context, key []byte) ([]byte, error)
	scan   func(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error
	update func(ctx context.Context, fn func(records) error) error
	mu     sync.Mutex // held by each change: a DB's Updates do not take turns
}

// records is what a session change does in a batch.
type records interface {
	Get(key []byte) ([]byte, error)
	Put(key, value []byte) error
	Delete(key []byte) error
}

// StoreSessions returns the Sessions kept in db.
func StoreSessions(db backend.Store) *Sessions {
	return &Sessions{
		get:  db.Get,
		scan: db.ScanFrom,
		update: func(ctx context.Context, fn func(records) error) error {
			return db.Update(ctx, []string{sessionLock}, func(b backend.Batch) error { return fn(b) })
		},
	}
}

// The names of the session records, and the bounds of their changes.
const (
	sessionPrefix = "console/s/"
	expiryPrefix  = "console/e/"
	sessionTag    = "/sessions"
	countKey      = "console/n" + sessionTag
	sessionLock   = "console/sessions"

	// sweepPage is the most expired sessions one sweep forgets.
	sweepPage = 100
	// maxEvict is the most sessions a sign-in forgets to keep
	// MaxSessions; more are left to the sweep.
	maxEvict = 16
	// changeTries is how often a change is tried on a shared store that
	// reports a conflict (another writer outside the lock).
	changeTries = 3
)

// errStop ends a scan early.
var errStop = errors.New("console: stop")

// errTooMany is matched when a sign-in found MaxSessions sessions and
// could not forget the oldest.
var errTooMany = errors.New("too many sessions")

// storeSessions is the sessionStore of a Sessions.
type storeSessions struct {
	*Sessions
	max int
}

func sessionKey(id [sha256.Size]byte) []byte {
	return []byte(sessionPrefix + hex.EncodeToString(id[:]) + sessionTag)
}

func expiryKey(id [sha256.Size]byte, expires int64) []byte {
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(expires))
	return []byte(expiryPrefix + hex.EncodeToString(e[:]) + hex.EncodeToString(id[:]) + sessionTag)
}

// parseExpiryKey returns the expiry and id an expiry record is named by;
// ok is false for a name that is not one.
func parseExpiryKey(k []byte) (expires int64, id [sha256.Size]byte, ok bool) {
	s, found := strings.CutPrefix(string(k), expiryPrefix)
	s, suffixed := strings.CutSuffix(s, sessionTag)
	var raw [8 + sha256.Size]byte
	if !found || !suffixed || hex.DecodedLen(len(s)) != len(raw) {
		return 0, id, false
	}
	if _, err := hex.Decode(raw[:], []byte(s)); err != nil {
		return 0, id, false
	}
	copy(id[:], raw[8:])
	return int64(binary.BigEndian.Uint64(raw[:8])), id, true
}

// decode8 decodes the 8 bytes of an expiry or a count stored at key.
func decode8(key, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("console: record %q holds %d bytes, want 8: %w", key, len(v), backend.ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
}

func (s *storeSessions) lookup(ctx context.Context, id [sha256.Size]byte) (time.Time, bool, error) {
	k := sessionKey(id)
	v, err := s.get(ctx, k)
	if err != nil || v == nil {
		return time.Time{}, false, err
	}
	e, err := decode8(k, v)
	if err != nil {
		return time.Time{}, false, err
	}
	return time.Unix(0, int64(e)), true, nil
}

// add stores the session id, expiring at expires, and forgets the
// sessions of forget. When that leaves MaxSessions, it forgets the
// oldest first, found in order of expiry before the change and checked
// within it; should others have been added meanwhile, it tries again.
func (s *storeSessions) add(ctx context.Context, id [sha256.Size]byte, _, expires time.Time, forget [][sha256.Size]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range changeTries {
		oldest, err := s.oldest(ctx)
		if err != nil {
			return err
		}
		full := false
		err = s.change(ctx, func(b records, n int64) (int64, error) {
			n, err := removeAll(b, n, forget)
			for i := 0; i < len(oldest) && n >= int64(s.max) && err == nil; i++ {
				var gone int64
				gone, err = removeExpiry(b, oldest[i])
				n -= gone
			}
			if full = n >= int64(s.max); full || err != nil {
				return n, err
			}
			return n + 1, putSession(b, id, expires.UnixNano())
		})
		if err != nil || !full {
			return err
		}
	}
	return fmt.Errorf("console: %d sessions, and the oldest could not be forgotten: %w", s.max, errTooMany)
}

// oldest returns the names in order of expiry of the sessions a sign-in
// may have to forget to keep MaxSessions (none while there is room),
// maxEvict at most. The sign-in forgets them only as far as it must,
// after the sessions it came with.
func (s *storeSessions) oldest(ctx context.Context) ([][]byte, error) {
	v, err := s.get(ctx, []byte(countKey))
	if err != nil || v == nil {
		return nil, err
	}
	n, err := decode8([]byte(countKey), v)
	if err != nil {
		return nil, err
	}
	over := int64(n) + 1 - int64(s.max)
	if over <= 0 {
		return nil, nil
	}
	return s.firstExpiries(ctx, int(min(over, maxEvict)), func(int64) bool { return true })
}

// firstExpiries returns the first n names in order of expiry, as far as
// take accepts their expiry.
func (s *storeSessions) firstExpiries(ctx context.Context, n int, take func(expires int64) bool) ([][]byte, error) {
	var keys [][]byte
	err := s.scan(ctx, []byte(expiryPrefix), nil, func(k, _ []byte) error {
		if e, _, ok := parseExpiryKey(k); ok && !take(e) {
			return errStop
		}
		keys = append(keys, bytes.Clone(k)) // a name that does not parse is forgotten too
		if len(keys) == n {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	return keys, nil
}

func (s *storeSessions) forget(ctx context.Context, ids [][sha256.Size]byte) error {
	if len(ids) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.change(ctx, func(b records, n int64) (int64, error) { return removeAll(b, n, ids) })
}

// removeAll forgets the sessions of ids, and returns n less the number
// forgotten.
func removeAll(b records, n int64, ids [][sha256.Size]byte) (int64, error) {
	for _, id := range ids {
		gone, err := removeSession(b, id, -1)
		if n -= gone; err != nil {
			return n, err
		}
	}
	return n, nil
}

// sweep forgets the sessions expired at now, sweepPage at most: the
// first records in order of expiry.
func (s *storeSessions) sweep(ctx context.Context, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	due, err := s.firstExpiries(ctx, sweepPage, func(e int64) bool { return e <= now.UnixNano() })
	if err != nil || len(due) == 0 {
		return err
	}
	return s.change(ctx, func(b records, n int64) (int64, error) {
		for _, k := range due {
			gone, err := removeExpiry(b, k)
			if n -= gone; err != nil {
				return n, err
			}
		}
		return n, nil
	})
}

// count sweeps, then returns the number of sessions stored: exact but for
// expired ones past the sweep's page.
func (s *storeSessions) count(ctx context.Context, now time.Time) (int, error) {
	if err := s.sweep(ctx, now); err != nil {
		return 0, err
	}
	v, err := s.get(ctx, []byte(countKey))
	if err != nil || v == nil {
		return 0, err
	}
	n, err := decode8([]byte(countKey), v)
	return int(n), err
}

// change runs fn in an Update with the number of sessions, and stores
// the number fn returns; s.mu is held. A conflict with another writer
// (on a shared store, outside the lock) stored nothing, and fn runs again.
func (s *storeSessions) change(ctx context.Context, fn func(b records, n int64) (int64, error)) error {
	var err error
	for range changeTries {
		err = s.update(ctx, func(b records) error {
			v, err := b.Get([]byte(countKey))
			if err != nil {
				return err
			}
			var n uint64
			if v != nil {
				if n, err = decode8([]byte(countKey), v); err != nil {
					return err
				}
			}
			next, err := fn(b, int64(n))
			var c [8]byte
			binary.BigEndian.PutUint64(c[:], uint64(max(next, 0)))
			return errors.Join(err, b.Put([]byte(countKey), c[:]))
		})
		if !errors.Is(err, backend.ErrConflict) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("console: sessions: %w", err)
	}
	return nil
}

// putSession stores the records of the session id expiring at expires.
func putSession(b records, id [sha256.Size]byte, expires int64) error {
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(expires))
	return errors.Join(b.Put(sessionKey(id), e[:]), b.Put(expiryKey(id, expires), nil))
}

// removeSession forgets the session id if it is stored, and its expiry
// is expires (-1: whatever it is), and returns the number it forgot, 0 or
// 1. A record that does not decode is forgotten when expires is -1: the
// sign-out of its cookie, or a sign-in with it.
func removeSession(b records, id [sha256.Size]byte, expires int64) (int64, error) {
	k := sessionKey(id)
	v, err := b.Get(k)
	if err != nil || v == nil {
		return 0, err
	}
	e, err := decode8(k, v)
	switch {
	case err != nil && expires < 0:
		return 1, b.Delete(k)
	case err != nil || (expires >= 0 && int64(e) != expires):
		return 0, nil
	}
	return 1, errors.Join(b.Delete(k), b.Delete(expiryKey(id, int64(e))))
}

// removeExpiry forgets the session an expiry record names, and the
// record, which without its session is an orphan; it returns the number
// of sessions it forgot.
func removeExpiry(b records, k []byte) (int64, error) {
	var n int64
	var err error
	if e, id, ok := parseExpiryKey(k); ok {
		n, err = removeSession(b, id, e)
	}
	return n, errors.Join(err, b.Delete(k))
}
