package keystore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Team is a group of keys with a Policy of its own: token windows,
// budgets, a request rate, a concurrency cap and models, each of which
// counts the requests of all its keys together. A key belongs to one team
// at most (Spec.Team); Admit checks the key and its team in one decision,
// all or nothing, and Finish charges both.
type Team struct {
	ID        string
	Name      string
	Policy    Policy
	CreatedAt time.Time
}

// TeamSpec is what CreateTeam makes a team from, and what UpdateTeam
// changes.
type TeamSpec struct {
	Name   string
	Policy Policy
}

// team is one team in memory. Its fields are guarded by mu, except id.
type team struct {
	mu      sync.Mutex
	id      string
	name    string
	pol     *policy
	created int64 // Unix ns
	moved   int64 // as entry.moved: how far policy changes moved reservations
	gone    bool
	key     []byte // its record key, made once
	ixName  string // its name case-folded, as the indexes hold it: guarded by them (see index.go)
	ixIn    bool   // whether it is in the indexes: guarded by them
}

// Team records and ids.
const (
	teamPrefix    = "t/"
	teamIDPrefix  = "team_"
	teamVersion   = 1
	maxTeamRecord = 2 << 20
)

func teamKey(id string) []byte { return prefixed(teamPrefix, id) }

func newTeamID() string {
	var b [idHexLen / 2]byte
	rand.Read(b[:])
	return teamIDPrefix + hex.EncodeToString(b[:])
}

func validTeamID(id string) bool {
	if len(id) != len(teamIDPrefix)+idHexLen || id[:len(teamIDPrefix)] != teamIDPrefix {
		return false
	}
	_, err := hex.DecodeString(id[len(teamIDPrefix):])
	return err == nil
}

// encode is t's record: its version, name, creation instant and policy.
func (t *team) encode() []byte {
	dst := []byte{teamVersion}
	dst = appendBytes(dst, t.name)
	dst = binary.AppendVarint(dst, t.created)
	return appendBytes(dst, t.pol.enc)
}

// loadTeam decodes the record of team id.
func (s *Store) loadTeam(id string, v []byte) (*team, error) {
	d := decoder{id: id, what: "team record", b: v}
	if ver := d.byte("version"); d.err == nil && ver != teamVersion {
		return nil, corrupt(id, "team record: unsupported version %d", ver)
	}
	t := &team{id: id, name: d.text("name"), created: d.varint("created"), key: teamKey(id)}
	p := decoder{id: id, what: "team record: policy", b: d.bytes("policy", maxTeamRecord)}
	var pub Policy
	if d.err == nil {
		pub = p.policy(true)
		p.subs(&pub)
		d.err = p.done()
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	var err error
	if t.pol, err = s.policy("load team", pub); err != nil {
		return nil, corruptWrap(id, "team record: policy", err)
	}
	return t, nil
}

func (t *team) public() Team {
	return Team{ID: t.id, Name: t.name, Policy: t.pol.pub, CreatedAt: time.Unix(0, t.created).UTC()}
}

// CreateTeam makes a team of spec. Its name and policy are checked as a
// key's are.
func (s *Store) CreateTeam(ctx context.Context, spec TeamSpec) (Team, error) {
	pol, err := s.teamPolicy("create team", spec, TeamSpec{})
	if err != nil {
		return Team{}, err
	}
	t := &team{id: newTeamID(), name: spec.Name, pol: pol, created: s.now()}
	t.key = teamKey(t.id)
	err = s.update(ctx, []string{t.id}, func(b batch) error {
		if err := b.Put(t.key, t.encode()); err != nil {
			return err
		}
		return s.announce(b, t.id)
	})
	if err != nil {
		return Team{}, err
	}
	s.mu.Lock()
	s.teams[t.id] = t
	s.indexTeam(t)
	s.mu.Unlock()
	return t.public(), nil
}

// teamPolicy validates spec, which replaces old (the zero TeamSpec for a
// new team), and returns its policy. Its texts are checked as a key's
// (see Store.specRecord).
func (s *Store) teamPolicy(op string, spec, old TeamSpec) (*policy, error) {
	if why := newText(spec.Name, old.Name); why != "" {
		return nil, fieldError(op, "Name", "%s", why)
	}
	if err := newModels(op, &spec.Policy, &old.Policy); err != nil {
		return nil, err
	}
	return s.policy(op, spec.Policy)
}

// findTeam returns team id: where other processes change teams, read from
// the store when this Store has not seen it.
func (s *Store) findTeam(ctx context.Context, id string) (*team, error) {
	s.mu.RLock()
	t := s.teams[id]
	s.mu.RUnlock()
	if t == nil && validTeamID(id) {
		vals, err := s.db.Reread(ctx, [][]byte{teamKey(id)})
		if err != nil {
			return nil, fmt.Errorf("keystore: team %s: %w", id, err)
		}
		if len(vals) > 0 && vals[0] != nil {
			if t, err = s.loadTeam(id, vals[0]); err != nil {
				return nil, err
			}
			t = s.adoptTeam(t)
		}
	}
	if t == nil {
		return nil, fmt.Errorf("keystore: team %s: %w", id, ErrNotFound)
	}
	return t, nil
}

// adoptTeam adds t, a team read from the store, to the map and the
// indexes, and returns it, or the team of its id already there.
func (s *Store) adoptTeam(t *team) *team {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.teams[t.id]; cur != nil {
		return cur
	}
	s.teams[t.id] = t
	s.indexTeam(t)
	return t
}

// refreshTeam reads t's record again in b, where other processes change
// it (Reread). The caller holds t.mu.
func (s *Store) refreshTeam(b batch, t *team) error {
	vals, err := b.Reread([][]byte{t.key})
	if err != nil {
		return fmt.Errorf("keystore: team %s: %w", t.id, err)
	}
	for _, v := range vals {
		if err := s.reloadTeam(t, v); err != nil {
			return err
		}
	}
	return nil
}

// reloadTeam makes v, the record of t as stored (nil: none), t's: a team
// another process deleted is forgotten. The caller holds t.mu.
func (s *Store) reloadTeam(t *team, v []byte) error {
	if v == nil {
		if !t.gone {
			t.gone = true
			s.forgetTeam(t)
		}
		return nil
	}
	nt, err := s.loadTeam(t.id, v)
	if err != nil {
		return err
	}
	t.moved = reachAdd(t.moved, t.pol, nt.pol)
	t.name, t.pol = nt.name, nt.pol
	s.reindexTeam(t)
	return nil
}

// forgetTeam takes t, a deleted team, out of the map and the indexes.
func (s *Store) forgetTeam(t *team) {
	s.mu.Lock()
	if s.teams[t.id] == t {
		delete(s.teams, t.id)
	}
	s.unindexTeam(t)
	s.mu.Unlock()
}

// GetTeam returns team id.
func (s *Store) GetTeam(ctx context.Context, id string) (Team, error) {
	t, err := s.findTeam(ctx, id)
	if err != nil {
		return Team{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone {
		return Team{}, fmt.Errorf("keystore: team %s: %w", id, ErrNotFound)
	}
	return t.public(), nil
}

// ListTeams calls fn with every team, in id order. Where other processes
// change the teams, it first reads what they changed (see catchUp).
func (s *Store) ListTeams(ctx context.Context, fn func(Team) error) error {
	if err := s.catchUp(ctx); err != nil {
		return err
	}
	s.ix.mu.RLock()
	ids := make([]string, 0, s.ix.teamID.Len())
	s.ix.teamID.Scan(func(t *team) bool {
		ids = append(ids, t.id)
		return true
	})
	s.ix.mu.RUnlock()
	for _, id := range ids {
		t, err := s.GetTeam(ctx, id)
		if err == nil {
			err = fn(t)
		}
		if err != nil && !isNotFound(err) {
			return err
		}
	}
	return nil
}

// UpdateTeam lets fn change team id's name and policy, which take effect
// on the next request of its keys; what its keys used stays counted.
func (s *Store) UpdateTeam(ctx context.Context, id string, fn func(*TeamSpec) error) (Team, error) {
	t, err := s.findTeam(ctx, id)
	if err != nil {
		return Team{}, err
	}
	var out Team
	err = s.update(ctx, []string{id}, func(b batch) error {
		t.mu.Lock()
		defer t.mu.Unlock()
		if err := s.refreshTeam(b, t); err != nil {
			return err
		}
		if t.gone {
			return fmt.Errorf("keystore: team %s: %w", id, ErrNotFound)
		}
		old := TeamSpec{Name: t.name, Policy: t.pol.pub}
		spec := old
		spec.Policy = old.Policy.clone()
		if err := fn(&spec); err != nil {
			return err
		}
		pol, err := s.teamPolicy("update team "+id, spec, old)
		if err != nil {
			return err
		}
		t.moved = reachAdd(t.moved, t.pol, pol)
		t.name, t.pol = spec.Name, pol
		s.reindexTeam(t)
		out = t.public()
		if err := b.Put(t.key, t.encode()); err != nil {
			return err
		}
		return s.announce(b, id)
	})
	return out, err
}

// TeamKeyCount returns how many keys belong to team id (0 for an id no
// team has): a count the indexes keep, not a walk of the keys. Keys with
// KeyQuery.Team pages through them.
func (s *Store) TeamKeyCount(ctx context.Context, id string) (int, error) {
	if err := s.catchUp(ctx); err != nil {
		return 0, err
	}
	s.ix.mu.RLock()
	defer s.ix.mu.RUnlock()
	return s.ix.teamKeys[id], nil
}

// DeleteTeam removes team id and its usage. It is refused, with a
// *TeamInUseError (matching ErrInvalid), while keys belong to it.
func (s *Store) DeleteTeam(ctx context.Context, id string) error {
	t, err := s.findTeam(ctx, id)
	if err != nil {
		return err
	}
	n, err := s.TeamKeyCount(ctx, id)
	if err != nil {
		return err
	}
	if n > 0 {
		e := &TeamInUseError{Team: id, Keys: n}
		if page, err := s.Keys(ctx, KeyQuery{Team: id, Limit: 1}); err == nil && len(page.Keys) > 0 {
			e.Example = page.Keys[0].Key.ID
		}
		return e
	}
	return s.update(ctx, []string{id}, func(b batch) error {
		t.mu.Lock()
		defer t.mu.Unlock()
		if err := t.pol.reset(b, id); err != nil {
			return err
		}
		if err := b.Delete(t.key); err != nil {
			return err
		}
		if err := s.announce(b, id); err != nil {
			return err
		}
		t.gone = true
		s.forgetTeam(t)
		return nil
	})
}

// TeamUsage reports the usage of team id now, as Usage does for a key:
// every window and budget of its policy, counting all its keys.
func (s *Store) TeamUsage(ctx context.Context, id string) (Usage, error) {
	t, err := s.findTeam(ctx, id)
	if err != nil {
		return Usage{}, err
	}
	c := s.newCall(ctx, nil)
	defer c.free()
	c.t = t
	err = s.read(c, c.usageIn, s.usageFrom)
	return c.u, err
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// teamIn returns the team id of a key being admitted or finished in b,
// locked and read again where other processes change it; nil when id is
// "" or the team is gone (DeleteTeam refuses to delete a team with keys,
// so only a key whose team another process deleted meanwhile has one).
func (s *Store) teamIn(ctx context.Context, b batch, id string) (*team, error) {
	if id == "" {
		return nil, nil
	}
	t, err := s.findTeam(ctx, id)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if err := s.refreshTeam(b, t); err != nil {
		t.mu.Unlock()
		return nil, err
	}
	if t.gone {
		t.mu.Unlock()
		return nil, nil
	}
	return t, nil
}

// TeamInUseError is DeleteTeam's refusal of a team that keys belong to.
// It matches ErrInvalid.
type TeamInUseError struct {
	Team    string
	Keys    int    // how many keys belong to it
	Example string // the id of one of them, "" if it could not be read
}

// Reason is the refusal without the package's prefix: "team team_… has 2
// keys (key_…): move them out first".
func (e *TeamInUseError) Reason() string {
	one := ""
	if e.Example != "" {
		one = " (" + e.Example + ")"
	}
	return fmt.Sprintf("team %s has %d keys%s: move them out first", e.Team, e.Keys, one)
}

func (e *TeamInUseError) Error() string { return "keystore: " + e.Reason() + ": " + ErrInvalid.Error() }

// Unwrap returns ErrInvalid.
func (e *TeamInUseError) Unwrap() error { return ErrInvalid }
