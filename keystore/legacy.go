package keystore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratestore/ratestore/legacy"
	"github.com/ratestore/ratestore/strategies"
)

// Imported is one key of a legacy key file, for Import: its secret, kept
// working and stored only as its hash, its TokenLimit (> 0), its dates
// and lifetime total (kept as it is) and its usage windows.
type Imported = legacy.Key

// LegacyWindow is one legacy usage window of an Imported key: Tokens used
// in the fixed window that starts at Start. A window of 0 tokens is not
// stored.
type LegacyWindow = legacy.Window

// ImportResult says what Import did. It names keys by their index in the
// slice given and their name, never by secret.
type ImportResult struct {
	// IDs[i] is the id of the key that holds the secret of keys[i] after
	// the import: a new key, or the one that already had it (see Skipped).
	IDs      []string
	Imported int // keys created
	Windows  int // legacy usage windows stored, for later migration
	Skipped  []ImportSkip
}

// ImportSkip is a key Import left out because its secret already has a
// key.
type ImportSkip struct {
	Index  int    // in the slice given to Import
	Name   string // of the entry skipped
	ID     string // the key that has the secret
	Reason string
}

// Import creates the keys of a legacy key file, all in one commit: all of
// them or, on any error, none. A key whose secret already has a key (from
// an earlier import, or an earlier entry of keys) is skipped and listed in
// the result, so importing the same keys twice changes nothing. Every
// field is checked first; an invalid one gives an error matching
// ErrInvalid that names the entry by index and name. Each key gets one
// window of Options.UsageWindow with its TokenLimit. The usage windows
// are stored as they are, and merged into the key's token windows the
// first time the key is touched (see the package doc).
func (s *Store) Import(ctx context.Context, keys []Imported) (ImportResult, error) {
	if err := ctx.Err(); err != nil {
		return ImportResult{}, err
	}
	recs := make([]record, len(keys))
	windows := make([][]legacy.Window, len(keys))
	for i := range keys {
		var err error
		if recs[i], windows[i], err = s.checkImported(i, &keys[i]); err != nil {
			return ImportResult{}, err
		}
	}
	s.importMu.Lock()
	defer s.importMu.Unlock()
	res := ImportResult{IDs: make([]string, len(keys))}
	seen := make(map[[sha256.Size]byte]int, len(keys)) // hash -> first index
	var fresh []int
	var dups [][2]int // [index in Skipped, index of the first entry with the secret]
	s.mu.RLock()
	for i := range keys {
		h := recs[i].hash
		if j, ok := seen[h]; ok {
			dups = append(dups, [2]int{len(res.Skipped), j})
			res.Skipped = append(res.Skipped, ImportSkip{Index: i, Name: keys[i].Name,
				Reason: fmt.Sprintf("the same secret as keys[%d]", j)})
			continue
		}
		seen[h] = i
		if e := s.byHash[h]; e != nil {
			res.IDs[i] = e.id
			res.Skipped = append(res.Skipped, ImportSkip{Index: i, Name: keys[i].Name, ID: e.id,
				Reason: "a key with this secret exists already"})
			continue
		}
		fresh = append(fresh, i)
	}
	s.mu.RUnlock()
	if err := s.importFresh(ctx, fresh, recs, windows, &res); err != nil {
		return ImportResult{}, fmt.Errorf("keystore: import: %w", err)
	}
	for _, d := range dups {
		sk := &res.Skipped[d[0]]
		sk.ID, res.IDs[sk.Index] = res.IDs[d[1]], res.IDs[d[1]]
	}
	return res, nil
}

// importFresh stores the keys recs[i], i in fresh, and their legacy usage
// windows, in two commits: the windows first, then the keys that point to
// them. A commit too large for one transaction is split (see
// ratestore.DB.Update), and a crash in the middle of one must not leave a
// key whose pending flag names windows that were never written: its
// import would then be skipped as done when run again. Windows without
// their key are never read.
func (s *Store) importFresh(ctx context.Context, fresh []int, recs []record, windows [][]legacy.Window, res *ImportResult) error {
	ids := make(map[int]string, len(fresh))
	taken := make(map[string]bool, len(fresh))
	s.mu.RLock()
	for _, i := range fresh {
		ids[i] = s.freeID(taken)
		taken[ids[i]] = true
	}
	s.mu.RUnlock()
	err := s.update(ctx, nil, func(b batch) error {
		for _, i := range fresh {
			if len(windows[i]) > 0 {
				if err := b.Put(legacyKey(ids[i]), legacy.AppendRecord(nil, windows[i])); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		err = s.db.Flush(ctx)
	}
	if err != nil {
		return err
	}
	locks := make([]string, 0, len(fresh))
	for _, i := range fresh {
		locks = append(locks, hashLock(recs[i].hash))
	}
	return s.update(ctx, locks, func(b batch) error {
		for _, i := range fresh {
			e, err := s.add(b, ids[i], recs[i], len(windows[i]) > 0)
			if err != nil {
				return err
			}
			res.IDs[i] = e.id
			res.Imported++
			res.Windows += len(windows[i])
		}
		return nil
	})
}

// checkImported validates keys[i] and returns its record and its windows
// as stored: those with tokens, in order of start.
func (s *Store) checkImported(i int, k *Imported) (record, []legacy.Window, error) {
	op := fmt.Sprintf("import: keys[%d] (name %.64q)", i, k.Name)
	if k.Secret == "" {
		return record{}, nil, invalid("%s: empty secret", op)
	}
	if k.TokenLimit <= 0 {
		return record{}, nil, invalid("%s: TokenLimit must be positive, got %d", op, k.TokenLimit)
	}
	rec, err := s.fromSpec(op, Spec{Name: k.Name, Model: k.Model, TokenLimit: k.TokenLimit, ExpiresAt: k.ExpiresAt})
	if err != nil {
		return record{}, nil, err
	}
	for _, t := range [...]struct {
		field string
		t     time.Time
	}{{"CreatedAt", k.CreatedAt}, {"LastUsed", k.LastUsed}} {
		if why := checkTime(t.t); why != "" {
			return record{}, nil, invalid("%s: %s %s", op, t.field, why)
		}
	}
	if k.LifetimeTokens < 0 {
		return record{}, nil, invalid("%s: negative LifetimeTokens %d", op, k.LifetimeTokens)
	}
	if len(k.Windows) > MaxLegacyWindows {
		return record{}, nil, invalid("%s: %d usage windows, more than %d", op, len(k.Windows), MaxLegacyWindows)
	}
	var ws []legacy.Window
	var sum int64
	for j, w := range k.Windows {
		switch why := checkTime(w.Start); {
		case w.Start.IsZero():
			return record{}, nil, invalid("%s: Windows[%d]: no Start", op, j)
		case why != "":
			return record{}, nil, invalid("%s: Windows[%d]: Start %s", op, j, why)
		case w.Tokens < 0:
			return record{}, nil, invalid("%s: Windows[%d]: negative Tokens %d", op, j, w.Tokens)
		case w.Tokens > math.MaxInt64-sum:
			return record{}, nil, invalid("%s: the Tokens of Windows add up past 2^63-1", op)
		case w.Tokens > 0:
			sum += w.Tokens
			ws = append(ws, w)
		}
	}
	slices.SortStableFunc(ws, func(a, b legacy.Window) int { return cmp.Compare(a.Start.UnixNano(), b.Start.UnixNano()) })
	rec.hash = hashSecret(k.Secret)
	rec.lifetime = k.LifetimeTokens
	rec.createdAt, rec.hasCreated = nanos(k.CreatedAt)
	rec.lastUsed, rec.hasUsed = nanos(k.LastUsed)
	return rec, ws, nil
}

// settle merges e's pending legacy usage, if any, in a commit of its own.
// A read-only Store merges nothing, and shows the merge in its reads
// instead (see unwritten): it only reads the legacy record, so that a
// key whose record is damaged fails here as a merge would.
func (s *Store) settle(ctx context.Context, e *entry) error {
	e.mu.Lock()
	pending := e.rec.legacy
	e.mu.Unlock()
	if !pending {
		return nil
	}
	if s.readOnly {
		e.mu.Lock()
		defer e.mu.Unlock()
		_, err := s.unwritten(ctx, e, &direct{ctx})
		return err
	}
	return s.update(ctx, []string{e.id}, func(b batch) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		if err := s.refresh(b, e); err != nil {
			return err
		}
		if e.rec.gone {
			return nil // deleted meanwhile
		}
		return s.mergePending(ctx, b, e)
	})
}

// mergePending merges e's legacy usage windows in b if any are pending
// (see mergeLegacy). The caller holds e.mu, inside b's Update.
func (s *Store) mergePending(ctx context.Context, b batch, e *entry) error {
	if !e.rec.legacy {
		return nil
	}
	return s.mergeLegacy(ctx, b, e)
}

// mergeLegacy merges the legacy usage windows of e into every token window
// of its policy, and in the same commit deletes the legacy record and
// writes the record without its pending flag, so that a window is merged
// exactly once. The caller holds e.mu, inside b's Update.
func (s *Store) mergeLegacy(ctx context.Context, b batch, e *entry) error {
	ws, err := legacyUsage(e.id, b.Get)
	if err != nil {
		return err
	}
	pol := e.rec.pol
	for i, l := range pol.windows {
		rw := pol.pub.Windows[i].strategy()
		_, err := b.Modify(l, e.id, func(st strategies.State, now int64) (strategies.State, error) {
			return st, mergeInto(rw, st, now, ws)
		})
		if err != nil {
			return fmt.Errorf("keystore: key %s: merging legacy usage: %w", e.id, err)
		}
	}
	e.rec.legacy = false
	if err := b.Delete(legacyKey(e.id)); err != nil {
		return err
	}
	return b.Put(recordKey(e.id), e.rec.encode())
}

// legacyUsage reads, with get, and decodes the legacy usage windows of key
// id, which its record says are pending.
func legacyUsage(id string, get func(key []byte) ([]byte, error)) ([]legacy.Window, error) {
	v, err := get(legacyKey(id))
	if err != nil {
		return nil, fmt.Errorf("keystore: key %s: %w", id, err)
	}
	if v == nil {
		return nil, corrupt(id, "record: legacy usage is pending, but there is no legacy record")
	}
	return decodeLegacy(id, v)
}

// decodeLegacy decodes the legacy record of key id (legacy.DecodeRecord):
// an error matches ErrCorrupt and names the key.
func decodeLegacy(id string, b []byte) ([]legacy.Window, error) {
	ws, err := legacy.DecodeRecord(b)
	if err != nil {
		return nil, corruptWrap(id, "legacy record", err)
	}
	return ws, nil
}

// mergeInto merges the legacy usage windows ws into st, a state of the
// token window rw, at now: each window's tokens in the bucket of its start
// (strategies.RollingWindow.Merge).
func mergeInto(rw strategies.RollingWindow, st strategies.State, now int64, ws []legacy.Window) error {
	for _, w := range ws {
		if err := rw.Merge(st, now, w.Start.UnixNano(), w.Tokens); err != nil {
			return err
		}
	}
	return nil
}

// unwritten reads a key's states as a writable Store would have left
// them, for a read-only Store, which writes nothing: a version 1 record's
// usage window is the state of the first token window (see upgrade), and
// pending legacy usage is merged into every token window (see
// mergeLegacy), by the same functions, on copies of the states read
// through the reader it wraps. The other limiters are read as they are.
type unwritten struct {
	reader
	pol    *policy
	v1     []byte          // the usage window of the key's version 1 record; nil: none
	legacy []legacy.Window // the key's pending legacy usage; nil: none
}

// unwritten returns r, or, for a key of a read-only Store with changes a
// writable one would have written, r wrapped in an unwritten that shows
// them. It reads the key's stored records for them, which nothing changes
// while the Store is read-only. The caller holds e.mu.
func (s *Store) unwritten(ctx context.Context, e *entry, r reader) (reader, error) {
	if !s.readOnly || !e.rec.v1 && !e.rec.legacy {
		return r, nil
	}
	get := func(key []byte) ([]byte, error) { return s.db.Get(ctx, key) }
	u := unwritten{reader: r, pol: e.rec.pol}
	if e.rec.v1 {
		v, err := get(recordKey(e.id))
		if err != nil {
			return nil, fmt.Errorf("keystore: key %s: %w", e.id, err)
		}
		st, err := decodeRecord(e.id, v, nil)
		if err != nil {
			return nil, err
		}
		u.v1 = st.v1Window
	}
	if e.rec.legacy {
		var err error
		if u.legacy, err = legacyUsage(e.id, get); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// Inspect calls fn with the state of a token window as a write would have
// left it.
func (u unwritten) Inspect(l limiter, key string, fn func(st strategies.State, now int64) error) error {
	i := slices.Index(u.pol.windows, l)
	if i < 0 {
		return u.reader.Inspect(l, key, fn)
	}
	return u.reader.Inspect(l, key, func(st strategies.State, now int64) error {
		st, err := u.state(i, st, now)
		if err != nil {
			return err
		}
		return fn(st, now)
	})
}

// PeekN decides, changing nothing, on the state of a token window as a
// write would have left it.
func (u unwritten) PeekN(l limiter, key string, n int64) (r strategies.Result, err error) {
	i := slices.Index(u.pol.windows, l)
	if i < 0 {
		return u.reader.PeekN(l, key, n)
	}
	err = u.Inspect(l, key, func(st strategies.State, now int64) (err error) {
		r, err = u.pol.pub.Windows[i].strategy().Prepare().Decide(st, strategies.Call{Now: now, N: n, DryRun: true})
		return err
	})
	return r, err
}

// state returns a copy of st, the state of token window i at now, changed
// as upgrade and mergeLegacy would have changed it. st is the engine's,
// which must not change.
func (u unwritten) state(i int, st strategies.State, now int64) (strategies.State, error) {
	rw := u.pol.pub.Windows[i].strategy()
	var err error
	if i == 0 && u.v1 != nil {
		st, err = u.pol.v1State(u.v1)
	} else {
		st, err = rw.Prepare().Decode(st.AppendEncode(nil))
	}
	if err != nil {
		return nil, err
	}
	return st, mergeInto(rw, st, now, u.legacy)
}

// PendingLegacy counts the keys whose legacy usage is not merged yet.
func (s *Store) PendingLegacy(ctx context.Context) (int, error) {
	n := 0
	err := s.LegacyIDs(ctx, func(string) error {
		n++
		return nil
	})
	return n, err
}

// LegacyIDs calls fn with the id of every key whose legacy usage is not
// merged yet, in id order, until fn returns an error, which it returns. fn
// may call the Store, MigrateLegacy included.
func (s *Store) LegacyIDs(ctx context.Context, fn func(id string) error) error {
	for _, id := range s.sortedIDs() {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := s.find(ctx, id)
		if err != nil {
			continue // corrupt, or deleted since sortedIDs
		}
		e.mu.Lock()
		pending := e.rec.legacy && !e.rec.gone
		e.mu.Unlock()
		if pending {
			if err := fn(id); err != nil {
				return err
			}
		}
	}
	return nil
}

// MigrateLegacy merges the legacy usage of key id now, and reports whether
// it had any pending. On a read-only database, a key with usage pending
// fails with ErrReadOnly.
func (s *Store) MigrateLegacy(ctx context.Context, id string) (bool, error) {
	e, err := s.find(ctx, id)
	if err != nil {
		return false, err
	}
	e.mu.Lock()
	pending := e.rec.legacy
	e.mu.Unlock()
	if pending && s.readOnly {
		return true, errReadOnly
	}
	return pending, s.settle(ctx, e)
}
