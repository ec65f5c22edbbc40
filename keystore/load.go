package keystore

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/strategies"
)

// open loads the key store of db into memory (see Open).
func open(db backend.Store, o Options) (*Store, error) {
	s := &Store{
		db:      db,
		opts:    o,
		usage:   Window{Window: o.UsageWindow, Bucket: o.UsageBucket},
		byID:    make(map[string]*entry),
		byHash:  make(map[[sha256.Size]byte]*entry),
		corrupt: make(map[string]error),
		teams:   make(map[string]*team),
		lease:   strategies.SlidingLog{Window: o.LeaseTTL},
	}
	s.readOnly = backend.ReadOnly(db)
	ctx := context.Background()
	// Reread answers for the keys of a shared store, and nothing for one
	// only this process changes (see backend.Store).
	shared, err := db.Reread(ctx, [][]byte{recordKey("")})
	if err != nil {
		return nil, err
	}
	s.shared = len(shared) > 0
	v1, err := s.loadKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("keystore: open: loading the keys: %w", err)
	}
	if err := s.loadTeams(ctx); err != nil {
		return nil, fmt.Errorf("keystore: open: loading the teams: %w", err)
	}
	if s.readOnly {
		s.upgradeInMemory(v1)
		return s, nil
	}
	if err := s.upgrade(ctx, v1); err != nil {
		return nil, fmt.Errorf("keystore: open: rewriting version 1 records: %w", err)
	}
	return s, nil
}

// loadKeys reads every key's record into s, noting those it cannot decode
// in s.corrupt, and returns the keys of version 1 records, to upgrade.
func (s *Store) loadKeys(ctx context.Context) ([]upgrade, error) {
	var v1 []upgrade
	err := s.db.Scan(ctx, []byte(recordPrefix), func(k, v []byte) error {
		id := string(k[len(recordPrefix):])
		e, window, err := s.load(id, v)
		if err != nil {
			s.corrupt[id] = err
			return nil
		}
		if other := s.byHash[e.rec.hash]; other != nil {
			s.corrupt[id] = corrupt(id, "record: key %s has the same secret hash", other.id)
			return nil
		}
		s.byID[id] = e
		s.index(e)
		if window != nil {
			v1 = append(v1, upgrade{e, window})
		}
		return nil
	})
	return v1, err
}

// loadTeams reads every team's record into s, noting those it cannot
// decode in s.corrupt.
func (s *Store) loadTeams(ctx context.Context) error {
	return s.db.Scan(ctx, []byte(teamPrefix), func(k, v []byte) error {
		id := string(k[len(teamPrefix):])
		t, err := s.loadTeam(id, v)
		if err != nil {
			s.corrupt[id] = err
			return nil
		}
		s.teams[id] = t
		return nil
	})
}

// load decodes the record of id into an entry. For a version 1 record it
// also returns the usage window it held (non-nil, maybe empty), which
// upgrade moves into the engine.
func (s *Store) load(id string, v []byte) (*entry, []byte, error) {
	if !validID(id) {
		return nil, nil, fmt.Errorf("keystore: stored key %.60q does not end in a key id: %w", recordPrefix+id, ErrCorrupt)
	}
	st, err := decodeRecord(id, v, s.knownPolicy)
	if err != nil {
		return nil, nil, err
	}
	p := st.policy
	var window []byte
	if st.v1Limit > 0 {
		w := s.usage
		w.Limit = st.v1Limit
		p = Policy{Windows: []Window{w}}
		window = append([]byte{}, st.v1Window...)
	}
	e := newEntry(id, st.record)
	if e.rec.pol != nil {
		return e, window, nil // known: see stored.decodePolicy
	}
	if e.rec.pol, err = s.policy("load", p); err != nil {
		return nil, nil, corruptWrap(id, "record: policy", err)
	}
	return e, window, nil
}

// upgrade is a version 1 record to rewrite: its entry and the usage window
// it held.
type upgrade struct {
	e      *entry
	window []byte
}

// upgrade rewrites version 1 records as version 2, moving the usage
// window each held into the engine state of its token window, in two
// commits so that a crash between them loses nothing: first the states,
// then the records. A record still at version 1 after a crash has its
// state set again from its window, which replaces (never adds to) what the
// first commit wrote. A window that cannot be decoded makes its key
// corrupt, as reading it did before.
func (s *Store) upgrade(ctx context.Context, ups []upgrade) error {
	if len(ups) == 0 {
		return nil
	}
	err := s.update(ctx, nil, func(b batch) error {
		for _, u := range ups {
			if len(u.window) == 0 {
				continue
			}
			_, err := b.Modify(u.e.rec.pol.windows[0], u.e.id, func(strategies.State, int64) (strategies.State, error) {
				return u.e.rec.pol.v1State(u.window)
			})
			if err != nil {
				s.drop(u.e, corruptWrap(u.e.id, "usage window", err))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.update(ctx, nil, func(b batch) error {
		for _, u := range ups {
			if !u.e.rec.gone {
				if err := b.Put(recordKey(u.e.id), u.e.rec.encode()); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// upgradeInMemory is upgrade for a read-only Store, which writes nothing:
// each record stays version 1 in the database and, decoded, in memory as
// upgrade leaves it; a usage window that cannot be decoded makes its key
// corrupt, as in upgrade; the others are read again from their records
// when the key's usage is (see unwritten), rather than held in memory.
func (s *Store) upgradeInMemory(ups []upgrade) {
	for _, u := range ups {
		if len(u.window) == 0 {
			continue // nothing in use: the state stays as stored
		}
		if _, err := u.e.rec.pol.v1State(u.window); err != nil {
			s.drop(u.e, corruptWrap(u.e.id, "usage window", err))
			continue
		}
		u.e.rec.v1 = true
	}
}

// v1State decodes the usage window of a version 1 record whose policy,
// made by load, is pol: the state of its first token window.
func (pol *policy) v1State(window []byte) (strategies.State, error) {
	return pol.pub.Windows[0].strategy().Prepare().Decode(window)
}

// drop takes e out of the maps as a key whose stored data is corrupt.
func (s *Store) drop(e *entry, err error) {
	s.mu.Lock()
	delete(s.byID, e.id)
	s.unindex(e)
	s.corrupt[e.id] = err
	e.rec.gone = true
	s.mu.Unlock()
}
