package keystore

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// MaxGrace is the longest Rotate lets a key's previous secret keep
// working: long enough to roll a new secret out to every client, short
// enough that a leaked secret rotated away does not linger.
const MaxGrace = 30 * 24 * time.Hour

// Rotate gives key id a new secret, made as Create makes one, and returns
// the key with it: the secret is shown only here. The key keeps its id,
// usage, budgets, policy, lifetime totals and state (a disabled or expired
// key may be rotated, and stays so).
//
// The previous secret keeps authenticating (Authenticate, Check, Admit)
// until now + grace by the Store's clock, then is refused as unknown
// (ErrNotFound, the "unknown" denial); grace 0 refuses it at once. A key
// has one previous secret at most: rotating it again during a grace
// refuses the previous one at once, and the secret it replaces now has the
// new grace. Key.PreviousSecretExpiresAt tells when the grace ends. The
// previous secret's hash and its index entry (h/<hash>) are removed by the
// first write of the key's record at or after that instant (an Update,
// Disable or Enable that changes something, a RecordUsage, a Finish,
// another Rotate), or by Delete; until then the record keeps them, and
// every check refuses the secret by its end.
//
// grace < 0 or over MaxGrace is a *FieldError of the field "Grace"; an
// unknown id is ErrNotFound, a key whose record is corrupt ErrCorrupt, as
// for Update.
func (s *Store) Rotate(ctx context.Context, id string, grace time.Duration) (Key, string, error) {
	op := "rotate key " + id
	if !validID(id) {
		op = "rotate key"
	}
	if grace < 0 || grace > MaxGrace {
		return Key{}, "", fieldError(op, "Grace", "%v is out of range [0, %v]", grace, MaxGrace)
	}
	secret := newSecret()
	h := hashSecret(secret)
	var k Key
	err := s.change(ctx, id, func(b batch, e *entry, now int64) (edit, error) {
		if err := s.rotateIn(b, e, h, now, grace); err != nil {
			return unchanged, err
		}
		k = e.key()
		return byOperator, nil
	})
	if err != nil {
		return Key{}, "", err
	}
	return k, secret, nil
}

// rotateIn makes h the hash of e's secret in b and in the maps, keeping
// the one it replaces until now + grace (none when grace is 0) and
// dropping the previous one, if any. The caller holds e.mu and writes the
// record.
func (s *Store) rotateIn(b batch, e *entry, h [sha256.Size]byte, now int64, grace time.Duration) error {
	var drop [][sha256.Size]byte
	if p := e.rec.prev; p != nil {
		drop = append(drop, p.hash)
	}
	if grace == 0 {
		drop = append(drop, e.rec.hash)
	}
	for _, d := range drop {
		if err := b.Delete(hashKey(d)); err != nil {
			return err
		}
	}
	if err := b.Put(hashKey(h), []byte(e.id)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unindex(e)
	r := &e.rec
	r.prev = nil
	if grace > 0 {
		r.prev = &prevSecret{hash: r.hash, ends: sat.Add(now, int64(grace))}
	}
	r.hash = h
	s.index(e)
	return nil
}

// index maps the hashes of e's secrets to e: its secret's and, when it
// has one, its previous secret's unless another key has that hash. The
// caller holds s.mu.
func (s *Store) index(e *entry) {
	s.byHash[e.rec.hash] = e
	if p := e.rec.prev; p != nil && s.byHash[p.hash] == nil {
		s.byHash[p.hash] = e
	}
}

// unindex removes from the maps the hashes of e's secrets that map to e.
// The caller holds s.mu.
func (s *Store) unindex(e *entry) {
	if s.byHash[e.rec.hash] == e {
		delete(s.byHash, e.rec.hash)
	}
	if p := e.rec.prev; p != nil && s.byHash[p.hash] == e {
		delete(s.byHash, p.hash)
	}
}

// previous reports whether h is the hash of e's previous secret and its
// grace lasts past now: a secret that found e and is not its own (h !=
// e.rec.hash) authenticates it only then. The caller holds e.mu.
func (e *entry) previous(h [sha256.Size]byte, now int64) bool {
	p := e.rec.prev
	return p != nil && h == p.hash && now < p.ends
}

// putRecord writes e's record in b after a request (a Finish, a
// RecordUsage): see writeRecord.
func (s *Store) putRecord(b batch, e *entry, now int64) error { return s.writeRecord(b, e, now, false) }

// writeRecord writes e's record in b, after dropping its previous secret
// if its grace has ended by now: the hash's index entry, in b, and its
// map entry go with it. Then it moves e in the indexes where its record
// no longer has the values they hold, and, where other processes share
// the keys, announces the change to them (see catchUp): every change an
// operator makes (admin), and a request's when it moved the key's last use
// or spend in their indexes, which a request does now and then (see
// index.go). The caller holds e.mu.
func (s *Store) writeRecord(b batch, e *entry, now int64, admin bool) error {
	if p := e.rec.prev; p != nil && now >= p.ends {
		if err := b.Delete(hashKey(p.hash)); err != nil {
			return err
		}
		s.mu.Lock()
		if s.byHash[p.hash] == e {
			delete(s.byHash, p.hash)
		}
		e.rec.prev = nil
		s.mu.Unlock()
	}
	if err := b.Put(recordKey(e.id), e.rec.encode()); err != nil {
		return err
	}
	if admin {
		s.reindex(e)
	} else if !s.reindexUse(e) {
		return nil
	}
	return s.announce(b, e.id)
}
