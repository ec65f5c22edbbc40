package keystore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratestore/ratestore/internal/storage"
)

// Imported is one key of a legacy key file, for Import.
type Imported struct {
	Secret         string // the legacy secret, kept working; stored only as its hash
	Name           string
	Model          string
	TokenLimit     int64     // token_limit_per_5h; > 0
	ExpiresAt      time.Time // zero: never; may be past
	CreatedAt      time.Time // zero: unknown
	LastUsed       time.Time // zero: never
	LifetimeTokens int64     // total_lifetime_tokens, >= 0, kept as it is
	Windows        []LegacyWindow
}

// LegacyWindow is one legacy usage window: Tokens used in the fixed window
// that starts at Start.
type LegacyWindow struct {
	Start  time.Time
	Tokens int64 // >= 0; a window of 0 tokens is not stored
}

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

// Import creates the keys of a legacy key file, all in one Commit: all of
// them or, on any error, none. A key whose secret already has a key (from
// an earlier import, or an earlier entry of keys) is skipped and listed in
// the result, so importing the same keys twice changes nothing. Every
// field is checked first; an invalid one gives an error matching
// ErrInvalid that names the entry by index and name. The usage windows are
// stored as they are, and merged into the key's usage window the first time
// the key is touched (see the package doc).
//
// One Commit holds about three writes a key, so its size is bounded by what
// the backend takes in one transaction: badger, with the memtables
// badgerstore configures, refuses (ErrTxnTooBig, and nothing is written)
// somewhere between 3,000 and 10,000 keys; bbolt has no such bound.
func (s *Store) Import(ctx context.Context, keys []Imported) (ImportResult, error) {
	if err := ctx.Err(); err != nil {
		return ImportResult{}, err
	}
	windows := make([][]legacyWindow, len(keys))
	for i := range keys {
		ws, err := checkImported(i, &keys[i])
		if err != nil {
			return ImportResult{}, err
		}
		windows[i] = ws
	}
	s.importMu.Lock()
	res, wrote, err := s.importLocked(keys, windows)
	s.importMu.Unlock()
	if err != nil {
		return ImportResult{}, err
	}
	if wrote {
		if err := s.wait(ctx); err != nil {
			return ImportResult{}, err
		}
	}
	return res, nil
}

func (s *Store) importLocked(keys []Imported, windows [][]legacyWindow) (ImportResult, bool, error) {
	now := s.now()
	res := ImportResult{IDs: make([]string, len(keys))}
	seen := make(map[[sha256.Size]byte]int, len(keys)) // hash -> first index
	issued := make(map[string]bool, len(keys))
	var ops []storage.Op
	for i := range keys {
		k := &keys[i]
		h := hashSecret(k.Secret)
		if j, ok := seen[h]; ok {
			res.IDs[i] = res.IDs[j]
			res.Skipped = append(res.Skipped, ImportSkip{Index: i, Name: k.Name, ID: res.IDs[j],
				Reason: fmt.Sprintf("the same secret as keys[%d]", j)})
			continue
		}
		seen[h] = i
		v, err := s.store.Get(hashKey(h))
		if err != nil {
			return ImportResult{}, false, fmt.Errorf("keystore: import: %w", err)
		}
		if v != nil {
			res.IDs[i] = string(v)
			res.Skipped = append(res.Skipped, ImportSkip{Index: i, Name: k.Name, ID: string(v),
				Reason: "a key with this secret exists already"})
			continue
		}
		id, err := s.freeID(issued)
		if err != nil {
			return ImportResult{}, false, err
		}
		r := &record{
			hash:       h,
			name:       k.Name,
			model:      k.Model,
			tokenLimit: k.TokenLimit,
			lifetime:   k.LifetimeTokens,
			legacy:     len(windows[i]) > 0,
		}
		r.expiresAt, r.hasExpiry = nanos(k.ExpiresAt)
		r.createdAt, r.hasCreated = nanos(k.CreatedAt)
		r.lastUsed, r.hasUsed = nanos(k.LastUsed)
		r.st = s.strategy(r.tokenLimit).NewState()
		ops = append(ops, s.put(id, r, now), storage.Op{Key: hashKey(h), Value: []byte(id)})
		if r.legacy {
			ops = append(ops, storage.Op{Key: legacyKey(id), Value: appendLegacy(nil, windows[i])})
			res.Windows += len(windows[i])
		}
		issued[id] = true
		res.IDs[i] = id
		res.Imported++
	}
	if len(ops) == 0 {
		return res, false, nil
	}
	if err := s.store.Commit(ops); err != nil {
		return ImportResult{}, false, fmt.Errorf("keystore: import: %w", err)
	}
	return res, true, nil
}

// freeID returns a new id that no key has and that is not taken.
func (s *Store) freeID(taken map[string]bool) (string, error) {
	for {
		id := newID()
		if taken[id] {
			continue
		}
		v, err := s.store.Get(recordKey(id))
		if err != nil {
			return "", fmt.Errorf("keystore: import: %w", err)
		}
		if v == nil {
			return id, nil
		}
	}
}

// checkImported validates keys[i] and returns its windows as stored:
// those with tokens, in order of start.
func checkImported(i int, k *Imported) ([]legacyWindow, error) {
	op := fmt.Sprintf("import: keys[%d] (name %.64q)", i, k.Name)
	if k.Secret == "" {
		return nil, invalid("%s: empty secret", op)
	}
	if err := checkSpec(op, k.Name, k.Model, k.TokenLimit, k.ExpiresAt); err != nil {
		return nil, err
	}
	for _, t := range [...]struct {
		field string
		t     time.Time
	}{{"CreatedAt", k.CreatedAt}, {"LastUsed", k.LastUsed}} {
		if why := checkTime(t.t); why != "" {
			return nil, invalid("%s: %s %s", op, t.field, why)
		}
	}
	if k.LifetimeTokens < 0 {
		return nil, invalid("%s: negative LifetimeTokens %d", op, k.LifetimeTokens)
	}
	if len(k.Windows) > MaxLegacyWindows {
		return nil, invalid("%s: %d usage windows, more than %d", op, len(k.Windows), MaxLegacyWindows)
	}
	var ws []legacyWindow
	var sum int64
	for j, w := range k.Windows {
		switch why := checkTime(w.Start); {
		case w.Start.IsZero():
			return nil, invalid("%s: Windows[%d]: no Start", op, j)
		case why != "":
			return nil, invalid("%s: Windows[%d]: Start %s", op, j, why)
		case w.Tokens < 0:
			return nil, invalid("%s: Windows[%d]: negative Tokens %d", op, j, w.Tokens)
		case w.Tokens > math.MaxInt64-sum:
			return nil, invalid("%s: the Tokens of Windows add up past 2^63-1", op)
		case w.Tokens > 0:
			sum += w.Tokens
			ws = append(ws, legacyWindow{start: w.Start.UnixNano(), tokens: w.Tokens})
		}
	}
	slices.SortStableFunc(ws, func(a, b legacyWindow) int { return cmp.Compare(a.start, b.start) })
	return ws, nil
}

// mergeLegacy merges the legacy usage windows of key id into r's usage
// window as of now, and marks r merged. The caller holds the key's lock
// and deletes the legacy record in the Commit that stores r.
func (s *Store) mergeLegacy(id string, r *record, now int64) error {
	b, err := s.store.Get(legacyKey(id))
	if err != nil {
		return fmt.Errorf("keystore: key %s: %w", id, err)
	}
	if b == nil {
		return corrupt(id, "record: legacy usage is pending, but there is no legacy record")
	}
	ws, err := decodeLegacy(id, b)
	if err != nil {
		return err
	}
	rw := s.strategy(r.tokenLimit)
	for _, w := range ws {
		if err := rw.Merge(r.st, now, w.start, w.tokens); err != nil {
			return fmt.Errorf("keystore: key %s: merging legacy usage: %w", id, err)
		}
	}
	r.legacy, r.merged = false, true
	return nil
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
	return s.scan(ctx, legacyPrefix, func(id string, _ []byte) error { return fn(id) })
}

// MigrateLegacy merges the legacy usage of key id now, and reports whether
// it had any pending.
func (s *Store) MigrateLegacy(ctx context.Context, id string) (bool, error) {
	var merged bool
	err := s.change(ctx, id, func(r *record, _ int64) (bool, error) {
		merged = r.merged
		return false, nil
	})
	return merged, err
}
