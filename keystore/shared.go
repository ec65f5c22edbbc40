package keystore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// A Store on a shared engine (Open on a redisstore.DB) holds its keys in memory as one
// on a ratestore.DB does, but other processes change them: what follows
// reads a key's record again before the key is used (refresh, fresh),
// finds the keys they created (lookup, and the feed of changes: see
// catchUp) and forgets those they deleted. A change of a key reads it
// under the lock of its id, in the batch that makes the change, so that
// it is made on the record as it is.

// hashLock is the lock name of a secret's hash: two processes adding a key
// with one secret (an import run twice at once) take it in turn.
func hashLock(h [sha256.Size]byte) string { return hashPrefix + hex.EncodeToString(h[:]) }

// refresh reads e's record again in b, where other processes change it
// (Reread). The caller holds e.mu.
func (s *Store) refresh(b batch, e *entry) error {
	if !s.shared || e.rec.gone {
		return nil // in memory, the record held is the record stored
	}
	// What the batch will read, as far as the record held says: one round
	// trip for them all, where there are round trips.
	if err := b.Prefetch(e.records(), e.id, e.rec.pol.all...); err != nil {
		return fmt.Errorf("keystore: key %s: %w", e.id, err)
	}
	if err := s.prefetchTeam(b, e.rec.team); err != nil {
		return err
	}
	vals, err := b.Reread([][]byte{recordKey(e.id)})
	if err != nil {
		return fmt.Errorf("keystore: key %s: reading its record: %w", e.id, err)
	}
	for _, v := range vals {
		if err := s.reload(e, v); err != nil {
			return err
		}
	}
	return nil
}

// prefetchTeam gathers the record and states of team id, as this Store
// holds it, into the batch's next read (Prefetch), so that an Admit or a
// Finish reads its key and its key's team in one round trip. The caller
// holds the key's entry lock, which comes before a team's.
func (s *Store) prefetchTeam(b batch, id string) error {
	if id == "" {
		return nil
	}
	s.mu.RLock()
	t := s.teams[id]
	s.mu.RUnlock()
	if t == nil {
		return nil
	}
	t.mu.Lock()
	pol := t.pol
	t.mu.Unlock()
	if err := b.Prefetch([][]byte{t.key}, t.id, pol.all...); err != nil {
		return fmt.Errorf("keystore: team %s: %w", id, err)
	}
	return nil
}

// fresh is refresh outside a batch, for the calls that only read a key.
func (s *Store) fresh(ctx context.Context, e *entry) error {
	if !s.shared {
		return nil // as in refresh; Authenticate runs this on every request
	}
	vals, err := s.db.Reread(ctx, [][]byte{recordKey(e.id)})
	if err != nil {
		return fmt.Errorf("keystore: key %s: reading its record: %w", e.id, err)
	}
	for _, v := range vals {
		e.mu.Lock()
		if !e.rec.gone {
			err = s.reload(e, v)
		}
		e.mu.Unlock()
	}
	return err
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
		s.unindex(e)
		s.mu.Unlock()
		s.unindexKey(e)
		return nil
	}
	if bytes.Equal(v, e.rec.encode()) {
		return nil
	}
	ne, _, err := s.load(e.id, v)
	if err != nil {
		return err
	}
	e.moved = reachAdd(e.moved, e.rec.pol, ne.rec.pol)
	if ne.rec.hash == e.rec.hash && ne.rec.prev.sameHash(e.rec.prev) {
		e.rec = ne.rec
	} else {
		// Another process rotated the key's secret, or dropped the previous
		// one: the maps follow.
		s.mu.Lock()
		s.unindex(e)
		e.rec = ne.rec
		s.index(e)
		s.mu.Unlock()
	}
	s.reindex(e)
	return nil
}

// lookup reads key id into the maps where other processes change the
// keys (Reread): a key another process created since this Store loaded
// its keys.
func (s *Store) lookup(ctx context.Context, id string) (*entry, error) {
	vals, err := s.db.Reread(ctx, [][]byte{recordKey(id)})
	if err != nil {
		return nil, fmt.Errorf("keystore: key %s: reading its record: %w", id, err)
	}
	if len(vals) == 0 || vals[0] == nil {
		return nil, notFound(id)
	}
	return s.adopt(id, vals[0])
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
	s.byID[id] = e
	s.index(e)
	s.indexKey(e)
	return e, nil
}

// syncKeys makes the maps those of the keys stored now, where other
// processes change them (Reread): after a gap in the feed of changes. It
// reads again the keys it holds, forgetting those deleted, then adds
// those it finds new.
func (s *Store) syncKeys(ctx context.Context) error {
	ids := s.sortedIDs()
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = recordKey(id) // a corrupt key's too
	}
	vals, err := s.db.Reread(ctx, keys)
	if err != nil {
		return fmt.Errorf("keystore: reading the keys: %w", err)
	}
	for i, v := range vals {
		if err := s.keyChanged(ids[i], v); err != nil {
			return err
		}
	}
	err = s.db.RereadPrefix(ctx, []byte(recordPrefix), func(k, v []byte) error {
		return s.keyChanged(string(k[len(recordPrefix):]), v)
	})
	if err != nil {
		return fmt.Errorf("keystore: reading the keys: %w", err)
	}
	return nil
}
