package keystore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/ratestore/ratestore/internal/sat"
)

// A Store on a shared engine (OpenRedis) holds its keys in memory as one
// on a ratestore.DB does, but other processes change them: what follows
// reads a key's record again before the key is used (refresh, fresh),
// finds the keys they created (lookup, sync) and forgets those they
// deleted. A change of a key reads it under the lock of its id, in the
// batch that makes the change, so that it is made on the record as it is.

// hashLock is the lock name of a secret's hash: two processes adding a key
// with one secret (an import run twice at once) take it in turn.
func hashLock(h [sha256.Size]byte) string { return hashPrefix + hex.EncodeToString(h[:]) }

// refresh reads e's record again in b when the engine is shared. The
// caller holds e.mu.
func (s *Store) refresh(b batch, e *entry) error {
	if !s.eng.shared() || e.rec.gone {
		return nil
	}
	// What the batch will read, as far as the record held says: one round
	// trip for them all.
	records := [][]byte{recordKey(e.id)}
	if e.rec.legacy {
		records = append(records, legacyKey(e.id))
	}
	pol := e.rec.pol
	limiters := append(slices.Clip(pol.windows), pol.inflight)
	if pol.rate != nil {
		limiters = append(limiters, pol.rate)
	}
	if err := b.prefetch(records, e.id, limiters); err != nil {
		return fmt.Errorf("keystore: key %s: %w", e.id, err)
	}
	v, err := b.Get(recordKey(e.id))
	if err != nil {
		return fmt.Errorf("keystore: key %s: reading its record: %w", e.id, err)
	}
	return s.reload(e, v)
}

// fresh is refresh outside a batch, for the calls that only read a key.
func (s *Store) fresh(ctx context.Context, e *entry) error {
	if !s.eng.shared() {
		return nil
	}
	v, err := s.eng.get(ctx, recordKey(e.id))
	if err != nil {
		return fmt.Errorf("keystore: key %s: reading its record: %w", e.id, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.gone {
		return nil
	}
	return s.reload(e, v)
}

// reload makes v, the record of e as stored (nil: none), e's record: a
// key another process deleted is forgotten. The caller holds e.mu.
func (s *Store) reload(e *entry, v []byte) error {
	if v == nil {
		e.rec.gone = true
		s.mu.Lock()
		if s.byID[e.id] == e {
			delete(s.byID, e.id)
		}
		if s.byHash[e.rec.hash] == e {
			delete(s.byHash, e.rec.hash)
		}
		s.mu.Unlock()
		return nil
	}
	if bytes.Equal(v, e.rec.encode()) {
		return nil
	}
	ne, _, err := s.load(e.id, v)
	if err != nil {
		return err
	}
	if ne.rec.hash != e.rec.hash {
		return corrupt(e.id, "record: its secret hash changed")
	}
	e.moved = sat.Add(e.moved, reach(e.rec.pol, ne.rec.pol))
	e.rec = ne.rec
	return nil
}

// lookup reads key id from a shared engine into the maps: a key another
// process created since this Store loaded its keys.
func (s *Store) lookup(ctx context.Context, id string) (*entry, error) {
	v, err := s.eng.get(ctx, recordKey(id))
	if err != nil {
		return nil, fmt.Errorf("keystore: key %s: reading its record: %w", id, err)
	}
	if v == nil {
		return nil, notFound(id)
	}
	return s.adopt(id, v)
}

// adopt adds the key id whose record v another process stored to the
// maps, or returns the entry already there. A record that cannot be read
// is noted as corrupt, as Open notes one: Delete can then remove it.
func (s *Store) adopt(id string, v []byte) (*entry, error) {
	e, _, err := s.load(id, v)
	s.mu.Lock()
	defer s.mu.Unlock()
	if bad := s.corrupt[id]; bad != nil {
		return nil, bad
	}
	if cur := s.byID[id]; cur != nil {
		return cur, nil
	}
	if err == nil {
		if other := s.byHash[e.rec.hash]; other != nil {
			err = corrupt(id, "record: key %s has the same secret hash", other.id)
		}
	}
	if err != nil {
		s.corrupt[id] = err
		return nil, err
	}
	s.byID[id], s.byHash[e.rec.hash] = e, e
	return e, nil
}

// sync makes the maps those of the keys stored now, when the engine is
// shared: for List, which walks them all.
func (s *Store) sync(ctx context.Context) error {
	if !s.eng.shared() {
		return nil
	}
	stored := map[string]bool{}
	err := s.eng.scan(ctx, []byte(recordPrefix), func(k, v []byte) error {
		id := string(k[len(recordPrefix):])
		stored[id] = true
		s.mu.RLock()
		e := s.byID[id]
		s.mu.RUnlock()
		if e == nil {
			_, err := s.adopt(id, v)
			return err
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		return s.reload(e, v)
	})
	if err != nil {
		return fmt.Errorf("keystore: reading the keys: %w", err)
	}
	for _, id := range s.sortedIDs() {
		if stored[id] {
			continue
		}
		s.mu.RLock()
		e := s.byID[id]
		s.mu.RUnlock()
		if e != nil {
			e.mu.Lock()
			s.reload(e, nil) // deleted by another process
			e.mu.Unlock()
		}
	}
	return nil
}
