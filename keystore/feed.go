package keystore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ratestore/ratestore/backend"
)

// Where other processes change the keys (Open on a redisstore.DB), a
// Store learns of their changes from a feed (backend.Store.Changes):
// every batch that changes a key's or a team's record announces its id
// under feedTopic (Batch.Announce), and a call that answers from the
// Store's memory (a page, List, the keys of a team) first reads the
// changes since the Store's position in the feed and reads those records
// again (catchUp): what it costs follows what changed, not how many keys
// there are. A request's change of a key is announced only when it moved
// the key in the indexes of last use or spend (see index.go), so that
// the feed carries operators' changes and, now and then, requests'.
//
// On a store only this process changes, Announce and Changes do nothing,
// and the indexes are exact: every change goes through this Store.

// feedTopic is the topic of the key store's announcements: each message
// is the id of a key or a team.
const feedTopic = "keystore"

// feedBatch is how many changes catchUp reads, and records it reads
// again, per round trip; feedRounds bounds its round trips in one call.
// A feed keeps a bounded number of messages (redisstore: about 100k), so
// a Store that falls further behind gets backend.ErrGap and reads
// everything again.
const (
	feedBatch  = 1000
	feedRounds = 200
)

// feed is a Store's position in the feed of changes.
type feed struct {
	mu  sync.Mutex // one catchUp at a time
	pos string     // after the last change read; "" where nothing is shared
}

// announce tells the other processes that b changes the record of id, a
// key or a team, where there are any.
func (s *Store) announce(b batch, id string) error {
	if !s.shared {
		return nil
	}
	return b.Announce(feedTopic, []byte(id))
}

// catchUp reads, where other processes change the keys, the changes they
// announced since the Store's position in the feed, and the records they
// name again, in a round trip per feedBatch of them. After a gap in the
// feed (ErrGap) it reads every key and team again, as Open does (resync).
func (s *Store) catchUp(ctx context.Context) error {
	if !s.shared {
		return nil
	}
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	for range feedRounds {
		msgs, next, err := s.db.Changes(ctx, feedTopic, s.feed.pos, feedBatch)
		if errors.Is(err, backend.ErrGap) {
			return s.resync(ctx)
		}
		if err != nil {
			return fmt.Errorf("keystore: reading the changes of other processes: %w", err)
		}
		if err := s.rereadChanged(ctx, msgs); err != nil {
			return err
		}
		s.feed.pos = next
		if len(msgs) < feedBatch {
			break
		}
	}
	return nil
}

// rereadChanged reads again, in one round trip, the records of the keys
// and teams that msgs, messages of the feed, name.
func (s *Store) rereadChanged(ctx context.Context, msgs [][]byte) error {
	ids := make([]string, 0, len(msgs))
	keys := make([][]byte, 0, len(msgs))
	seen := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		id := string(m)
		switch {
		case seen[id]:
			continue
		case validID(id):
			keys = append(keys, recordKey(id))
		case validTeamID(id):
			keys = append(keys, teamKey(id))
		default:
			continue // not one of ours
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if len(keys) == 0 {
		return nil
	}
	vals, err := s.db.Reread(ctx, keys)
	if err != nil {
		return fmt.Errorf("keystore: reading what other processes changed: %w", err)
	}
	for i, v := range vals {
		if validID(ids[i]) {
			err = s.keyChanged(ids[i], v)
		} else {
			err = s.teamChanged(ids[i], v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// keyChanged makes v (nil: none) the record of key id, as another process
// stored it: the key is read into the maps and indexes, changed there or
// forgotten. A record that cannot be read makes the key one that every
// call naming it reports (ErrCorrupt), as Open does.
func (s *Store) keyChanged(id string, v []byte) error {
	s.mu.Lock()
	e, bad := s.byID[id], s.corrupt[id]
	if e == nil && bad != nil {
		delete(s.corrupt, id) // read again below, or deleted
	}
	s.mu.Unlock()
	switch {
	case e != nil:
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.rec.gone {
			return nil
		}
		err := s.reload(e, v)
		if errors.Is(err, ErrCorrupt) {
			s.forget(e, err)
			return nil
		}
		return err
	case v != nil:
		if _, err := s.adopt(id, v); err != nil && !errors.Is(err, ErrCorrupt) {
			return err
		}
	}
	return nil
}

// forget takes e out of the maps and indexes as a key whose record cannot
// be read (err). The caller holds e.mu.
func (s *Store) forget(e *entry, err error) {
	s.mu.Lock()
	if s.byID[e.id] == e {
		delete(s.byID, e.id)
	}
	s.unindex(e)
	s.corrupt[e.id] = err
	e.rec.gone = true
	s.mu.Unlock()
	s.unindexKey(e)
}

// teamChanged makes v (nil: none) the record of team id, as another
// process stored it.
func (s *Store) teamChanged(id string, v []byte) error {
	s.mu.RLock()
	t := s.teams[id]
	s.mu.RUnlock()
	if t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		return s.reloadTeam(t, v)
	}
	if v == nil {
		return nil
	}
	t, err := s.loadTeam(id, v)
	if err != nil {
		s.mu.Lock()
		s.corrupt[id] = err // as Open notes it
		s.mu.Unlock()
		return nil
	}
	s.adoptTeam(t)
	return nil
}

// resync reads every key and team again, after a gap in the feed: it
// takes the feed's position first, so that what changes while it reads is
// read again by the next catchUp. The caller holds s.feed.mu.
func (s *Store) resync(ctx context.Context) error {
	_, pos, err := s.db.Changes(ctx, feedTopic, "", 1)
	if err != nil {
		return fmt.Errorf("keystore: reading the changes of other processes: %w", err)
	}
	if err := s.syncKeys(ctx); err != nil {
		return err
	}
	if err := s.syncTeams(ctx); err != nil {
		return err
	}
	s.feed.pos = pos
	return nil
}

// syncTeams makes the map and the indexes of teams those of the teams
// stored now (see resync).
func (s *Store) syncTeams(ctx context.Context) error {
	stored := map[string]bool{}
	err := s.db.RereadPrefix(ctx, []byte(teamPrefix), func(k, v []byte) error {
		id := string(k[len(teamPrefix):])
		stored[id] = true
		return s.teamChanged(id, v)
	})
	if err != nil {
		return fmt.Errorf("keystore: reading the teams: %w", err)
	}
	s.mu.RLock()
	var gone []string
	for id := range s.teams {
		if !stored[id] {
			gone = append(gone, id)
		}
	}
	s.mu.RUnlock()
	for _, id := range gone {
		if err := s.teamChanged(id, nil); err != nil {
			return err
		}
	}
	return nil
}
