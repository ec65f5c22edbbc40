package keystore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// Create makes a key from spec and returns it with its secret. The secret
// is shown only here: the store keeps its hash. A spec without a token
// window (TokenLimit 0 and no Policy.Windows) makes a key without a token
// limit, metered and held to the rest of its policy. A bad limit, Name or
// Model, or an ExpiresAt that is not after now gives an error matching
// ErrInvalid and creates nothing.
func (s *Store) Create(ctx context.Context, spec Spec) (Key, string, error) {
	if err := ctx.Err(); err != nil {
		return Key{}, "", err
	}
	rec, err := s.fromSpec("create", spec)
	if err != nil {
		return Key{}, "", err
	}
	if rec.hasExpiry && rec.expiresAt <= s.now() {
		return Key{}, "", fieldError("create", "ExpiresAt", "%v is not after now", spec.ExpiresAt)
	}
	secret := newSecret()
	rec.hash = hashSecret(secret)
	rec.createdAt, rec.hasCreated = s.now(), true
	var k Key
	err = s.update(ctx, []string{hashLock(rec.hash)}, func(b batch) error {
		e, err := s.add(b, "", rec, false)
		if err == nil {
			k = e.key()
		}
		return err
	})
	if err != nil {
		return Key{}, "", err
	}
	return k, secret, nil
}

// fromSpec validates spec, a new key's, and returns the record it
// describes.
func (s *Store) fromSpec(op string, spec Spec) (record, error) { return s.specRecord(op, spec, Spec{}) }

// specRecord validates spec, which replaces old (the zero Spec for a new
// key), and returns the record it describes. Its texts are checked as
// newText and newModels say: what old holds already passes as it is.
func (s *Store) specRecord(op string, spec, old Spec) (record, error) {
	if why := newText(spec.Name, old.Name); why != "" {
		return record{}, fieldError(op, "Name", "%s", why)
	}
	if why := newText(spec.Model, old.Model); why != "" {
		return record{}, fieldError(op, "Model", "%s", why)
	}
	if err := newModels(op, &spec.Policy, &old.Policy); err != nil {
		return record{}, err
	}
	if why := checkTime(spec.ExpiresAt); why != "" {
		return record{}, fieldError(op, "ExpiresAt", "%s", why)
	}
	p := spec.Policy
	if len(p.Windows) == 0 && spec.TokenLimit != 0 {
		if spec.TokenLimit < 0 {
			return record{}, fieldError(op, "TokenLimit", "must be positive, got %d", spec.TokenLimit)
		}
		w := s.usage
		w.Limit = spec.TokenLimit
		p.Windows = []Window{w}
	}
	pol, err := s.policy(op, p)
	if err != nil {
		return record{}, err
	}
	if spec.Team != "" {
		if _, err := s.findTeam(context.Background(), spec.Team); err != nil {
			return record{}, &FieldError{Op: op, Field: "Team", Msg: "no team has the id " + spec.Team, Err: ErrInvalid}
		}
	}
	r := record{name: spec.Name, model: spec.Model, pol: pol, team: spec.Team}
	r.expiresAt, r.hasExpiry = nanos(spec.ExpiresAt)
	return r, nil
}

// add stores rec, whose hash no key has, in b as a new key: the key id,
// or one drawn now when id is "". legacy says whether the key's legacy
// usage windows are stored (see Import). It adds the key to the maps.
func (s *Store) add(b batch, id string, rec record, legacy bool) (*entry, error) {
	// Another process may have added it: its hash is stored.
	ids, err := b.Reread([][]byte{hashKey(rec.hash)})
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 && ids[0] != nil {
		return nil, invalid("a key with this secret exists already (%s)", ids[0])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byHash[rec.hash] != nil {
		return nil, invalid("a key with this secret exists already")
	}
	if id == "" {
		id = s.freeID(nil)
	} else if s.byID[id] != nil || s.corrupt[id] != nil {
		return nil, invalid("key id %s was taken meanwhile", id)
	}
	rec.legacy = legacy
	e := newEntry(id, rec)
	err = b.Put(recordKey(id), rec.encode())
	if err == nil {
		err = b.Put(hashKey(rec.hash), []byte(id))
	}
	if err == nil {
		err = s.announce(b, id)
	}
	if err != nil {
		return nil, err
	}
	s.byID[id] = e
	s.index(e)
	s.indexKey(e)
	return e, nil
}

// freeID draws a key id that no key has and that is not in taken. The
// caller holds s.mu.
func (s *Store) freeID(taken map[string]bool) string {
	for {
		// 64 random bits meet an existing id about never; draw again if so.
		if id := newID(); s.byID[id] == nil && s.corrupt[id] == nil && !taken[id] {
			return id
		}
	}
}

// Get returns the key id. It merges the key's pending legacy usage, if
// any (on a read-only database it only reads it: see the package doc).
func (s *Store) Get(ctx context.Context, id string) (Key, error) {
	e, err := s.settled(ctx, id)
	if err != nil {
		return Key{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.key(), nil
}

// List calls fn for every key, in id order, until fn returns an error,
// which List returns. fn may call the Store. It does not merge legacy
// usage. A key whose record is corrupt stops it with that error. Where
// other processes change the keys, it first reads what they changed (see
// catchUp).
func (s *Store) List(ctx context.Context, fn func(Key) error) error {
	if err := s.catchUp(ctx); err != nil {
		return err
	}
	bad := s.corruptIDs()
	for after := ""; ; {
		es := s.keysAfter(after, listChunk)
		for _, e := range es {
			for len(bad) > 0 && bad[0] < e.id {
				if err := s.stopAt(ctx, bad[0]); err != nil {
					return err
				}
				bad = bad[1:]
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			e.mu.Lock()
			k, gone := e.key(), e.rec.gone
			e.mu.Unlock()
			if gone {
				continue
			}
			if err := fn(k); err != nil {
				return err
			}
		}
		if len(es) < listChunk {
			break
		}
		after = es[len(es)-1].id
	}
	for _, id := range bad {
		if err := s.stopAt(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// listChunk is how many keys List takes from the index of ids at a time:
// it holds the indexes' lock while it takes them, and not while it calls.
const listChunk = 256

// keysAfter returns at most n keys whose ids follow after, in id order.
func (s *Store) keysAfter(after string, n int) []*entry {
	es := make([]*entry, 0, n)
	s.ix.mu.RLock()
	defer s.ix.mu.RUnlock()
	s.ix.id.Ascend(&entry{id: after}, func(e *entry) bool {
		if e.id != after {
			es = append(es, e)
		}
		return len(es) < n
	})
	return es
}

// corruptIDs returns the ids of the keys whose record cannot be read, in
// order.
func (s *Store) corruptIDs() []string {
	s.mu.RLock()
	ids := make([]string, 0, len(s.corrupt))
	for id := range s.corrupt {
		ids = append(ids, id)
	}
	s.mu.RUnlock()
	slices.Sort(ids)
	return ids
}

// stopAt returns the error that stops List at key id, whose record could
// not be read: nil if it was deleted, or read, since.
func (s *Store) stopAt(ctx context.Context, id string) error {
	_, err := s.find(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Update changes key id: fn gets a Spec of the key as it is (its Name,
// Model, Policy, ExpiresAt, and TokenLimit, the limit of its first
// window, 0 when it has none) and changes what it wants. TokenLimit
// counts only when fn changes it: with the Policy's windows left as they
// were it sets the first window's limit, and with none it is the
// shorthand for one window, as for Create; left as it was, it is not, so
// that fn removes every window by setting Policy.Windows to nil. An error
// from fn, or an invalid result, changes nothing. An ExpiresAt in the
// past is allowed: it expires the key at once.
//
// The new policy takes effect on the next request, and the usage already
// counted stays counted: a window keeps its usage while its length stays
// (its Limit and Bucket may change), a window of a new length starts
// empty, and admissions in flight finish in the windows they reserved in.
func (s *Store) Update(ctx context.Context, id string, fn func(*Spec) error) (Key, error) {
	var k Key
	err := s.change(ctx, id, func(b batch, e *entry, _ int64) (edit, error) {
		old := e.spec()
		spec := old
		spec.Policy = old.Policy.clone()
		if err := fn(&spec); err != nil {
			return unchanged, err
		}
		switch {
		case spec.TokenLimit == old.TokenLimit:
			spec.TokenLimit = 0 // not a shorthand: the windows are what fn left
		case slices.Equal(spec.Policy.Windows, old.Policy.Windows) && len(spec.Policy.Windows) > 0:
			spec.Policy.Windows[0].Limit = spec.TokenLimit
		}
		rec, err := s.specRecord("update key "+id, spec, old)
		if err != nil {
			return unchanged, err
		}
		e.moved = reachAdd(e.moved, e.rec.pol, rec.pol)
		e.rec.name, e.rec.model, e.rec.pol, e.rec.team = rec.name, rec.model, rec.pol, rec.team
		e.rec.expiresAt, e.rec.hasExpiry = rec.expiresAt, rec.hasExpiry
		k = e.key()
		return byOperator, nil
	})
	return k, err
}

// spec returns the Spec of e as it is. The caller holds e.mu.
func (e *entry) spec() Spec {
	return Spec{
		Name:       e.rec.name,
		Model:      e.rec.model,
		TokenLimit: e.rec.pol.pub.tokenLimit(),
		Policy:     e.rec.pol.pub,
		ExpiresAt:  timeOf(e.rec.expiresAt, e.rec.hasExpiry),
		Team:       e.rec.team,
	}
}

// Disable disables key id: it is refused with ErrDisabled until Enable.
func (s *Store) Disable(ctx context.Context, id string) error { return s.setDisabled(ctx, id, true) }

// Enable lifts Disable.
func (s *Store) Enable(ctx context.Context, id string) error { return s.setDisabled(ctx, id, false) }

func (s *Store) setDisabled(ctx context.Context, id string, disabled bool) error {
	return s.change(ctx, id, func(_ batch, e *entry, _ int64) (edit, error) {
		if e.rec.disabled == disabled {
			return unchanged, nil
		}
		e.rec.disabled = disabled
		return byOperator, nil
	})
}

// Delete removes key id: its record, its usage and its legacy usage, in
// one commit. Its secret no longer authenticates, and its admissions in
// flight finish with ErrNotFound. A key whose record is corrupt can be
// deleted too.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A key another process created is read into the maps.
	if _, err := s.find(ctx, id); err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	keys, err := s.keysToDelete(ctx, id)
	if err != nil {
		return err
	}
	return s.update(ctx, []string{id}, func(b batch) error {
		return s.deleteIn(b, id, keys)
	})
}

// keysToDelete returns the keys Delete removes for key id besides those
// its entry names: its record, its legacy usage and, for a key whose record
// is corrupt, its index entries. The hash of such a key is unknown: its
// index entries are found by a scan, made before the batch (a scan
// flushes, which must not happen inside one).
func (s *Store) keysToDelete(ctx context.Context, id string) ([][]byte, error) {
	s.mu.RLock()
	bad := s.corrupt[id] != nil
	s.mu.RUnlock()
	keys := [][]byte{recordKey(id), legacyKey(id)}
	if bad {
		err := s.db.Scan(ctx, []byte(hashPrefix), func(k, v []byte) error {
			if string(v) == id {
				keys = append(keys, slices.Clone(k))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("keystore: delete key %s: %w", id, err)
		}
	}
	return keys, nil
}

// deleteIn is Delete inside the batch b that stores it: it drops key id
// from the maps, marks its entry gone, resets its usage and deletes keys
// and its index entry.
func (s *Store) deleteIn(b batch, id string, keys [][]byte) error {
	s.mu.Lock()
	e, bad := s.byID[id], s.corrupt[id]
	if e == nil && bad == nil {
		s.mu.Unlock()
		return notFound(id)
	}
	delete(s.byID, id)
	delete(s.corrupt, id)
	if e != nil {
		s.unindex(e)
		s.unindexKey(e)
	}
	s.mu.Unlock()
	if err := s.announce(b, id); err != nil {
		return err
	}
	if e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		if err := s.refresh(b, e); err != nil { // its policy names the states to reset
			return err
		}
		e.rec.gone = true
		s.mu.Lock()
		s.unindex(e) // the hashes refresh found, if another process rotated the key
		s.mu.Unlock()
		keys = append(keys, hashKey(e.rec.hash))
		if p := e.rec.prev; p != nil {
			keys = append(keys, hashKey(p.hash))
		}
		if err := e.rec.pol.reset(b, id); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Authenticate returns the key whose secret is secret: its secret, or the
// previous one during the grace Rotate gave it. An unknown secret gives
// ErrNotFound; a disabled key ErrDisabled, else an expired one ErrExpired,
// both with the Key. It never writes.
func (s *Store) Authenticate(ctx context.Context, secret string) (Key, error) {
	if err := ctx.Err(); err != nil {
		return Key{}, err
	}
	h := hashSecret(secret)
	e, err := s.bySecret(ctx, h)
	if err == nil {
		err = s.fresh(ctx, e)
	}
	if err != nil {
		return Key{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.gone || h != e.rec.hash && !e.previous(h, s.now()) {
		return Key{}, errUnknownSecret
	}
	return e.key(), e.refusal(s.expiryNow(e))
}

// Lookup is Authenticate for a caller that admits the request next, as a
// gateway does: Admit checks the key again, as it is stored. Where other
// processes change the keys (a shared store), Lookup answers from the key
// as this process last read it, reading nothing, when that key is usable,
// and reads it again, as Authenticate does, before it refuses: a key
// another process disabled is refused by Admit, one it enabled again is
// never refused here. It saves a round trip per request on Redis; on a
// ratestore.DB it is Authenticate.
func (s *Store) Lookup(ctx context.Context, secret string) (Key, error) {
	if err := ctx.Err(); err != nil {
		return Key{}, err
	}
	h := hashSecret(secret)
	if e, err := s.bySecret(ctx, h); err == nil {
		e.mu.Lock()
		usable := !e.rec.gone && (h == e.rec.hash || e.previous(h, s.now())) && e.refusal(s.expiryNow(e)) == nil
		k := e.key()
		e.mu.Unlock()
		if usable {
			return k, nil
		}
	}
	return s.Authenticate(ctx, secret)
}

// Check authenticates secret as Authenticate does, then reports the key's
// binding token window without changing it: Allowed iff the tokens used in
// every window are at most its limit (a key at exactly its limit is
// allowed), with the binding window's Limit and Remaining, the largest
// ResetAfter, and when denied the RetryAfter until it is allowed again.
// Tokens reserved by admissions in flight count as used. A key without a
// token window is allowed, with a zero Limit (none, as Key.TokenLimit),
// Remaining and ResetAfter. It writes only to merge the key's pending
// legacy usage (on a read-only database, nothing: it checks the key as the
// merge would leave it).
func (s *Store) Check(ctx context.Context, secret string) (Key, strategies.Result, error) {
	if err := ctx.Err(); err != nil {
		return Key{}, strategies.Result{}, err
	}
	h := hashSecret(secret)
	e, err := s.bySecret(ctx, h)
	if err != nil {
		return Key{}, strategies.Result{}, err
	}
	c := s.newCall(ctx, e)
	defer c.free()
	c.hash = h
	for range 2 {
		err := s.read(c, c.check, s.checkIn)
		if !c.legacy || err != nil {
			return c.k, c.res, err
		}
		// Rare: merge the key's legacy usage first, then check again.
		if err := s.settle(ctx, e); err != nil {
			return Key{}, strategies.Result{}, err
		}
	}
	return Key{}, strategies.Result{}, fmt.Errorf("keystore: key %s: legacy usage pending after a merge", e.id)
}

// read reads for c through in: on a shared store in a batch that writes
// nothing (inBatch, in's callback bound to c), one round trip for all it
// reads; otherwise directly.
func (s *Store) read(c *call, inBatch func(batch) error, in func(*call, reader) error) error {
	if s.shared {
		return s.update(c.ctx, nil, inBatch)
	}
	return in(c, &c.direct)
}

// checkIn is Check of c's key read through r (see read). It sets c.k and
// c.res, or c.legacy for a key with legacy usage to merge first, which it
// leaves unchecked; a read-only Store, which merges nothing, checks the
// key as the merge would leave it (see unwritten).
func (s *Store) checkIn(c *call, r reader) error {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := r.(batch); ok {
		if err := s.refresh(b, e); err != nil {
			return err
		}
	}
	if c.legacy = e.rec.legacy && !s.readOnly; c.legacy {
		return nil
	}
	if e.rec.gone || c.hash != e.rec.hash && !e.previous(c.hash, s.now()) {
		return errUnknownSecret
	}
	c.k = e.key()
	if err := e.refusal(s.expiryNow(e)); err != nil {
		return err
	}
	r, err := s.unwritten(c.ctx, e, r)
	if err == nil {
		c.res, _, err = e.rec.pol.peek(r, e.id, 0)
	}
	if err != nil {
		c.k = Key{}
	}
	return err
}

// RecordUsage adds tokens to every window of key id, to its LifetimeTokens
// (saturating) and sets its LastUsed, in one commit. It records past the
// limits, and on disabled or expired keys: the tokens were spent. The
// Result says whether the key is still within its limits, as Check would
// right after (for a key without a token window, always). tokens < 0
// gives an error matching ErrInvalid.
func (s *Store) RecordUsage(ctx context.Context, id string, tokens int64) (strategies.Result, error) {
	if tokens < 0 {
		return strategies.Result{}, invalid("record usage: key %s: negative tokens %d", id, tokens)
	}
	res := unlimited
	err := s.change(ctx, id, func(b batch, e *entry, now int64) (edit, error) {
		for i, l := range e.rec.pol.windows {
			r, err := b.Record(l, id, tokens)
			if err != nil {
				return unchanged, fmt.Errorf("keystore: key %s: %w", id, err)
			}
			fold(i, r, &res)
		}
		e.used(tokens, now)
		return byRequest, nil
	})
	return res, err
}

// used adds tokens to e's lifetime and sets its LastUsed to now. The
// caller holds e.mu.
func (e *entry) used(tokens, now int64) {
	e.rec.lifetime = sat.Add(e.rec.lifetime, tokens)
	if !e.rec.hasUsed || now > e.rec.lastUsed { // a clock gone backwards keeps the latest
		e.rec.lastUsed, e.rec.hasUsed = now, true
	}
}

// Usage reports the usage of key id now: every window, the binding one,
// and the admissions in flight. It merges the key's pending legacy usage,
// if any; on a read-only database it reports the windows as the merge
// would leave them, and writes nothing.
func (s *Store) Usage(ctx context.Context, id string) (Usage, error) {
	e, err := s.settled(ctx, id)
	if err != nil {
		return Usage{}, err
	}
	c := s.newCall(ctx, e)
	defer c.free()
	err = s.read(c, c.usageIn, s.usageFrom)
	return c.u, err
}

// usageFrom sets c.u to the usage of c's key, or of its team c.t, read
// through r (see read).
func (s *Store) usageFrom(c *call, r reader) error {
	b, _ := r.(batch)
	if t := c.t; t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.gone {
			return fmt.Errorf("keystore: team %s: %w", t.id, ErrNotFound)
		}
		if b != nil {
			if err := b.Prefetch(nil, t.id, t.pol.all...); err != nil {
				return err
			}
		}
		return s.usageFor(c, r, t.id, t.pol)
	}
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.gone {
		return notFound(e.id)
	}
	if b != nil {
		if err := b.Prefetch(nil, e.id, e.rec.pol.all...); err != nil {
			return err
		}
	}
	r, err := s.unwritten(c.ctx, e, r)
	if err != nil {
		return err
	}
	return s.usageOf(c, r)
}

// usageOf sets c.u to the usage of c's key, read through r. The caller
// holds the key's entry lock.
func (s *Store) usageOf(c *call, r reader) error {
	return s.usageFor(c, r, c.e.id, c.e.rec.pol)
}

// usageFor sets c.u to the usage of id (a key or a team) under pol, read
// through r.
func (s *Store) usageFor(c *call, r reader, id string, pol *policy) error {
	c.u = Usage{}
	if len(pol.windows) > 0 {
		c.u.Windows = make([]WindowUsage, len(pol.windows))
	}
	if err := r.Inspect(pol.inflight, id, c.inflight); err != nil {
		return fmt.Errorf("keystore: %s: requests in flight: %w", id, err)
	}
	for i, w := range pol.pub.Windows {
		c.wu, c.rw = &c.u.Windows[i], w.strategy()
		*c.wu = WindowUsage{Window: w.Window, Bucket: w.Bucket, Limit: w.Limit}
		if err := r.Inspect(pol.windows[i], id, c.usage); err != nil {
			return fmt.Errorf("keystore: %s: usage: %w", id, err)
		}
	}
	c.u.Bind()
	if pol.rate != nil {
		w := rateWindow
		w.Limit = pol.pub.RequestsPerMinute
		c.wu, c.rw, c.ru = &c.ru, w.strategy(), WindowUsage{}
		if err := r.Inspect(pol.rate, id, c.usage); err != nil {
			return fmt.Errorf("keystore: %s: request rate: %w", id, err)
		}
		c.u.Requests = c.ru.Used
	}
	if len(pol.budgets) > 0 {
		c.u.Budgets = make([]BudgetUsage, len(pol.budgets))
	}
	for i, b := range pol.pub.Budgets {
		c.bud, c.bu = b, &c.u.Budgets[i]
		if err := r.Inspect(pol.budgets[i], id, c.budgetUsage); err != nil {
			return fmt.Errorf("keystore: %s: budget: %w", id, err)
		}
	}
	return nil
}

// windowUsage fills in wu, the usage of a window of strategy rw, from st,
// its state at now.
func windowUsage(rw strategies.RollingWindow, wu *WindowUsage, st strategies.State, now int64) error {
	used, err := rw.Used(st, now)
	if err != nil {
		return err
	}
	r, err := rw.Prepare().Decide(st, strategies.Call{Now: now, DryRun: true})
	if err != nil {
		return err
	}
	wu.Used, wu.Remaining, wu.ResetAfter = used, max(0, wu.Limit-used), r.ResetAfter
	if used == 0 {
		return nil
	}
	// With the limit at used, one more token fits once the oldest usage
	// still counted has expired, and not before.
	probe := rw
	probe.Limit = used
	if r, err = probe.Prepare().Decide(st, strategies.Call{Now: now, N: 1, DryRun: true}); err != nil {
		return err
	}
	if r.RetryAfter > 0 {
		wu.WindowEnd = timeOf(sat.Add(now, int64(r.RetryAfter)), true)
	}
	return nil
}

// edit is what a change did to a key's record (see change).
type edit uint8

const (
	unchanged  edit = iota
	byRequest       // a request's: its totals and last use (RecordUsage)
	byOperator      // an operator's: Update, Disable, Enable, Rotate
)

// change runs fn on key id, after merging its pending legacy usage in the
// same commit, in a Batch and under the key's lock, then writes its record
// if fn reports that it changed it (see writeRecord). An error from fn
// commits nothing of the record.
func (s *Store) change(ctx context.Context, id string, fn func(b batch, e *entry, now int64) (edit, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e, err := s.find(ctx, id)
	if err != nil {
		return err
	}
	return s.update(ctx, []string{id}, func(b batch) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		if err := s.refresh(b, e); err != nil {
			return err
		}
		if e.rec.gone {
			return notFound(id)
		}
		if err := s.mergePending(ctx, b, e); err != nil {
			return err
		}
		now := b.Now().UnixNano()
		ed, err := fn(b, e, now)
		if err != nil || ed == unchanged {
			return err
		}
		return s.writeRecord(b, e, now, ed == byOperator)
	})
}

// settled returns the entry of key id after merging its pending legacy
// usage, if any.
func (s *Store) settled(ctx context.Context, id string) (*entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, err := s.find(ctx, id)
	if err == nil {
		err = s.fresh(ctx, e)
	}
	if err != nil {
		return nil, err
	}
	return e, s.settle(ctx, e)
}

// expiryNow returns the instant to check e's expiry at: now, or 0 for a
// key that never expires, whose check needs no clock (a clock read is a
// tenth of a Check). The caller holds e.mu.
func (s *Store) expiryNow(e *entry) int64 {
	if !e.rec.hasExpiry {
		return 0
	}
	return s.now()
}

// refusal returns why e is refused at now: disabled first, then expired;
// or nil. The caller holds e.mu.
func (e *entry) refusal(now int64) error {
	switch {
	case e.rec.disabled:
		return &Denial{Reason: "disabled", RetryAfter: -1, key: e.id, err: ErrDisabled}
	case e.rec.hasExpiry && now >= e.rec.expiresAt:
		return &Denial{Reason: "expired", RetryAfter: -1, key: e.id, err: ErrExpired,
			Limit: "expired at " + timeOf(e.rec.expiresAt, true).Format(time.RFC3339)}
	}
	return nil
}

// key returns e as a Key. The caller holds e.mu.
func (e *entry) key() Key {
	r := &e.rec
	k := Key{
		ID:             e.id,
		Name:           r.name,
		Model:          r.model,
		Policy:         r.pol.pub,
		TokenLimit:     r.pol.pub.tokenLimit(),
		ExpiresAt:      timeOf(r.expiresAt, r.hasExpiry),
		CreatedAt:      timeOf(r.createdAt, r.hasCreated),
		LastUsed:       timeOf(r.lastUsed, r.hasUsed),
		LifetimeTokens: r.lifetime,
		LifetimeSpend:  pricing.USD(r.spent),
		Team:           r.team,
		Disabled:       r.disabled,
	}
	if r.prev != nil {
		k.PreviousSecretExpiresAt = timeOf(r.prev.ends, true)
	}
	return k
}
