package keystore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/strategies"
)

// Create makes a key from spec and returns it with its secret. The secret
// is shown only here: the store keeps its hash. A TokenLimit <= 0, a bad
// Name or Model, or an ExpiresAt that is not after now gives an error
// matching ErrInvalid.
func (s *Store) Create(ctx context.Context, spec Spec) (Key, string, error) {
	if err := ctx.Err(); err != nil {
		return Key{}, "", err
	}
	if err := checkSpec("create", spec.Name, spec.Model, spec.TokenLimit, spec.ExpiresAt); err != nil {
		return Key{}, "", err
	}
	secret := newSecret()
	r := &record{
		hash:       hashSecret(secret),
		name:       spec.Name,
		model:      spec.Model,
		tokenLimit: spec.TokenLimit,
		hasCreated: true,
	}
	r.expiresAt, r.hasExpiry = nanos(spec.ExpiresAt)
	r.st = s.strategy(r.tokenLimit).NewState()
	for {
		id := newID()
		created, err := s.create(id, r)
		if err != nil {
			return Key{}, "", err
		}
		if !created {
			continue // 64 random bits met an existing id: draw again
		}
		if err := s.wait(ctx); err != nil {
			return Key{}, "", err
		}
		return r.key(id), secret, nil
	}
}

// create stores r as the new key id and its hash index entry, unless id is
// taken.
func (s *Store) create(id string, r *record) (bool, error) {
	mu := s.stripe(id)
	mu.Lock()
	defer mu.Unlock()
	old, err := s.store.Get(recordKey(id))
	if err != nil {
		return false, fmt.Errorf("keystore: create: %w", err)
	}
	if old != nil {
		return false, nil
	}
	now := s.now()
	if r.hasExpiry && r.expiresAt <= now {
		return false, invalid("create: ExpiresAt %v is not after now, %v", timeOf(r.expiresAt, true), timeOf(now, true))
	}
	r.createdAt = now
	err = s.store.Commit([]storage.Op{s.put(id, r, now), {Key: hashKey(r.hash), Value: []byte(id)}})
	if err != nil {
		return false, fmt.Errorf("keystore: create: %w", err)
	}
	return true, nil
}

// Get returns the key id. It merges the key's pending legacy usage, if any.
func (s *Store) Get(ctx context.Context, id string) (Key, error) {
	var k Key
	err := s.view(ctx, id, func(r *record, _ int64) error {
		k = r.key(id)
		return nil
	})
	return k, err
}

// Authenticate returns the key whose secret is secret. An unknown secret
// gives ErrNotFound; a disabled key ErrDisabled, else an expired one
// ErrExpired, both with the Key. It never writes.
func (s *Store) Authenticate(ctx context.Context, secret string) (Key, error) {
	if err := ctx.Err(); err != nil {
		return Key{}, err
	}
	h := hashSecret(secret)
	id, err := s.lookup(h)
	if err != nil {
		return Key{}, err
	}
	r, err := s.load(id)
	if err != nil {
		return Key{}, err
	}
	if r == nil || !r.owns(h) {
		return Key{}, errUnknownSecret
	}
	k := r.key(id)
	return k, r.refusal(id, s.now())
}

// Check authenticates secret as Authenticate does, then reports the key's
// usage window without changing it: Allowed iff the tokens used in the
// window are at most TokenLimit (a key at exactly its limit is allowed),
// with Limit = TokenLimit, Remaining, ResetAfter, and when denied the
// RetryAfter until it is allowed again. It writes only to merge the key's
// pending legacy usage.
func (s *Store) Check(ctx context.Context, secret string) (Key, strategies.Result, error) {
	if err := ctx.Err(); err != nil {
		return Key{}, strategies.Result{}, err
	}
	h := hashSecret(secret)
	id, err := s.lookup(h)
	if err != nil {
		return Key{}, strategies.Result{}, err
	}
	var (
		k       Key
		res     strategies.Result
		refused error
	)
	err = s.view(ctx, id, func(r *record, now int64) error {
		if !r.owns(h) {
			return errUnknownSecret
		}
		k = r.key(id)
		if refused = r.refusal(id, now); refused != nil {
			return nil
		}
		return s.decide(id, r, strategies.Call{Now: now}, &res)
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return Key{}, strategies.Result{}, errUnknownSecret // deleted since the lookup
	case err != nil:
		return Key{}, strategies.Result{}, err
	case refused != nil:
		return k, strategies.Result{}, refused
	}
	return k, res, nil
}

// RecordUsage adds tokens to the usage window of key id, to its
// LifetimeTokens (saturating) and sets its LastUsed, in one transaction. It
// records past the limit, and on disabled or expired keys: the tokens were
// spent. The Result says whether the key is still within its limit, as
// Check would right after. tokens < 0 gives an error matching ErrInvalid.
func (s *Store) RecordUsage(ctx context.Context, id string, tokens int64) (strategies.Result, error) {
	if tokens < 0 {
		return strategies.Result{}, invalid("record usage: key %s: negative tokens %d", id, tokens)
	}
	var res strategies.Result
	err := s.change(ctx, id, func(r *record, now int64) (bool, error) {
		if err := s.decide(id, r, strategies.Call{Now: now, N: tokens, Record: true}, &res); err != nil {
			return false, err
		}
		r.lifetime = satAdd(r.lifetime, tokens)
		if !r.hasUsed || now > r.lastUsed { // a clock gone backwards keeps the latest
			r.lastUsed, r.hasUsed = now, true
		}
		return true, nil
	})
	if err != nil {
		return strategies.Result{}, err
	}
	return res, nil
}

// Usage reports the usage window of key id now. It merges the key's
// pending legacy usage, if any.
func (s *Store) Usage(ctx context.Context, id string) (Usage, error) {
	var u Usage
	err := s.view(ctx, id, func(r *record, now int64) error {
		rw := s.strategy(r.tokenLimit)
		used, err := rw.Used(r.st, now)
		if err != nil {
			return fmt.Errorf("keystore: key %s: usage window: %w", id, err)
		}
		var res strategies.Result
		if err := s.decide(id, r, strategies.Call{Now: now}, &res); err != nil {
			return err
		}
		u = Usage{Used: used, Limit: r.tokenLimit, Remaining: res.Remaining, ResetAfter: res.ResetAfter}
		if used > 0 {
			// With the limit at used, one more token fits once the oldest
			// usage has expired, and not before.
			probe := &record{tokenLimit: used, st: r.st}
			if err := s.decide(id, probe, strategies.Call{Now: now, N: 1, DryRun: true}, &res); err != nil {
				return err
			}
			if res.RetryAfter > 0 {
				u.WindowEnd = timeOf(satAdd(now, int64(res.RetryAfter)), true)
			}
		}
		return nil
	})
	return u, err
}

// Disable disables key id: Authenticate and Check refuse it with
// ErrDisabled until Enable.
func (s *Store) Disable(ctx context.Context, id string) error {
	return s.set(ctx, id, func(r *record) bool { return setTo(&r.disabled, true) })
}

// Enable lifts Disable.
func (s *Store) Enable(ctx context.Context, id string) error {
	return s.set(ctx, id, func(r *record) bool { return setTo(&r.disabled, false) })
}

// SetTokenLimit sets the TokenLimit of key id; limit <= 0 gives an error
// matching ErrInvalid. Usage already in the window stays.
func (s *Store) SetTokenLimit(ctx context.Context, id string, limit int64) error {
	if limit <= 0 {
		return invalid("set token limit: key %s: TokenLimit must be positive, got %d", id, limit)
	}
	return s.set(ctx, id, func(r *record) bool { return setTo(&r.tokenLimit, limit) })
}

// SetExpiry sets the ExpiresAt of key id; the zero Time means never. An
// instant in the past is allowed: it expires the key at once.
func (s *Store) SetExpiry(ctx context.Context, id string, t time.Time) error {
	if why := checkTime(t); why != "" {
		return invalid("set expiry: key %s: ExpiresAt %s", id, why)
	}
	ns, has := nanos(t)
	return s.set(ctx, id, func(r *record) bool {
		changed := setTo(&r.hasExpiry, has)
		return setTo(&r.expiresAt, ns) || changed
	})
}

// set changes fields of key id with fn, which reports whether it changed
// anything.
func (s *Store) set(ctx context.Context, id string, fn func(r *record) bool) error {
	return s.change(ctx, id, func(r *record, _ int64) (bool, error) { return fn(r), nil })
}

// setTo sets *p to v and reports whether that changed it.
func setTo[T comparable](p *T, v T) bool {
	if *p == v {
		return false
	}
	*p = v
	return true
}

// Delete removes key id: its record, its hash index entry and its legacy
// usage, in one transaction. Its secret no longer authenticates. A key
// whose record is corrupt can be deleted too: its index entry is then
// found by a scan of the index.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.locked(ctx, id, func() (bool, error) { return true, s.delete(id) })
}

func (s *Store) delete(id string) error {
	b, err := s.store.Get(recordKey(id))
	if err != nil {
		return fmt.Errorf("keystore: delete key %s: %w", id, err)
	}
	if b == nil {
		return notFound(id)
	}
	ops := []storage.Op{{Key: recordKey(id)}, {Key: legacyKey(id)}}
	if r, err := decodeRecord(id, b); err == nil {
		ops = append(ops, storage.Op{Key: hashKey(r.hash)})
	} else {
		err = s.store.Scan([]byte(hashPrefix), nil, func(k, v []byte) error {
			if string(v) == id {
				ops = append(ops, storage.Op{Key: bytes.Clone(k)})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("keystore: delete key %s: %w", id, err)
		}
	}
	if err := s.store.Commit(ops); err != nil {
		return fmt.Errorf("keystore: delete key %s: %w", id, err)
	}
	return nil
}

// List calls fn for every key, in id order, until fn returns an error,
// which List returns. fn may call the Store. It does not merge legacy
// usage.
func (s *Store) List(ctx context.Context, fn func(Key) error) error {
	return s.scan(ctx, recordPrefix, func(id string, v []byte) error {
		r, err := s.decode(id, v)
		if err != nil {
			return err
		}
		return fn(r.key(id))
	})
}

// scan calls fn with the id and value of every entry under prefix, whose
// rest must be a key id.
func (s *Store) scan(ctx context.Context, prefix string, fn func(id string, v []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.store.Scan([]byte(prefix), nil, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := string(k[len(prefix):])
		if !validID(id) {
			return fmt.Errorf("keystore: stored key %.60q does not end in a key id: %w", k, ErrCorrupt)
		}
		return fn(id, v)
	})
}

// lookup returns the id that the hash index gives for h.
func (s *Store) lookup(h [sha256.Size]byte) (string, error) {
	v, err := s.store.Get(hashKey(h))
	if err != nil {
		return "", fmt.Errorf("keystore: authenticate: %w", err)
	}
	if v == nil {
		return "", errUnknownSecret
	}
	id := string(v)
	if !validID(id) {
		return "", fmt.Errorf("keystore: hash index entry holds %.40q, not a key id: %w", v, ErrCorrupt)
	}
	return id, nil
}

// load reads and decodes the record of id, or returns nil if it has none.
func (s *Store) load(id string) (*record, error) {
	b, err := s.store.Get(recordKey(id))
	if err != nil {
		return nil, fmt.Errorf("keystore: key %s: %w", id, err)
	}
	if b == nil {
		return nil, nil
	}
	return s.decode(id, b)
}

// decode decodes the record of id and its usage window.
func (s *Store) decode(id string, b []byte) (*record, error) {
	r, err := decodeRecord(id, b)
	if err != nil {
		return nil, err
	}
	rw := s.strategy(r.tokenLimit)
	if len(r.window) == 0 {
		r.st = rw.NewState()
		return r, nil
	}
	if r.st, err = rw.Decode(r.window); err != nil {
		return nil, corruptWrap(id, "usage window", err)
	}
	return r, nil
}

// put returns the op that stores r as the record of id, with its window
// as of now: empty when nothing is in use.
func (s *Store) put(id string, r *record, now int64) storage.Op {
	r.window = nil
	if used, err := s.strategy(r.tokenLimit).Used(r.st, now); err != nil || used > 0 {
		r.window = r.st.AppendEncode(nil)
	}
	return storage.Op{Key: recordKey(id), Value: r.appendEncode(make([]byte, 0, 64+len(r.name)+len(r.model)+len(r.window)))}
}

// decide applies call c to the usage window of r, key id.
func (s *Store) decide(id string, r *record, c strategies.Call, res *strategies.Result) error {
	var err error
	if *res, err = s.strategy(r.tokenLimit).Apply(r.st, c); err != nil { // not through the interface: no boxing
		return fmt.Errorf("keystore: key %s: usage window: %w", id, err)
	}
	return nil
}

// view calls fn with the record of id as of now. It reads without a lock,
// unless the key has legacy usage pending: then it goes through change,
// which merges it.
func (s *Store) view(ctx context.Context, id string, fn func(r *record, now int64) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validID(id) {
		return notFound(id)
	}
	r, err := s.load(id)
	switch {
	case err != nil:
		return err
	case r == nil:
		return notFound(id)
	case r.legacy:
		return s.change(ctx, id, func(r *record, now int64) (bool, error) { return false, fn(r, now) })
	}
	return fn(r, s.now())
}

// change runs fn on the record of id under the key's stripe lock, after
// merging its pending legacy usage, and commits the record if fn changed
// it (fn reports so) or legacy usage was merged. Then it waits for
// Durable, outside the lock. An error from fn commits nothing.
func (s *Store) change(ctx context.Context, id string, fn func(r *record, now int64) (bool, error)) error {
	return s.locked(ctx, id, func() (bool, error) { return s.changeLocked(id, fn) })
}

// locked runs write, which reports whether it committed anything, under
// the stripe lock of key id, then waits for Durable if it did.
func (s *Store) locked(ctx context.Context, id string, write func() (bool, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validID(id) {
		return notFound(id)
	}
	mu := s.stripe(id)
	mu.Lock()
	wrote, err := write()
	mu.Unlock()
	if err != nil || !wrote {
		return err
	}
	return s.wait(ctx)
}

func (s *Store) changeLocked(id string, fn func(r *record, now int64) (bool, error)) (bool, error) {
	r, err := s.load(id)
	if err != nil {
		return false, err
	}
	if r == nil {
		return false, notFound(id)
	}
	now := s.now()
	ops := make([]storage.Op, 1, 2)
	if r.legacy {
		if err := s.mergeLegacy(id, r, now); err != nil {
			return false, err
		}
		ops = append(ops, storage.Op{Key: legacyKey(id)})
	}
	changed, err := fn(r, now)
	if err != nil || !changed && !r.merged {
		return false, err
	}
	ops[0] = s.put(id, r, now)
	if err := s.store.Commit(ops); err != nil {
		return false, fmt.Errorf("keystore: key %s: %w", id, err)
	}
	return true, nil
}

// owns reports whether r is the record of the secret whose hash is h.
func (r *record) owns(h [sha256.Size]byte) bool {
	return subtle.ConstantTimeCompare(r.hash[:], h[:]) == 1
}

// refusal returns why Authenticate and Check refuse r, key id, at now:
// disabled first, then expired; or nil.
func (r *record) refusal(id string, now int64) error {
	switch {
	case r.disabled:
		return fmt.Errorf("keystore: key %s: %w", id, ErrDisabled)
	case r.hasExpiry && now >= r.expiresAt:
		return fmt.Errorf("keystore: key %s: %w at %v", id, ErrExpired, timeOf(r.expiresAt, true))
	}
	return nil
}

// key returns r as the Key id.
func (r *record) key(id string) Key {
	return Key{
		ID:             id,
		Name:           r.name,
		Model:          r.model,
		TokenLimit:     r.tokenLimit,
		ExpiresAt:      timeOf(r.expiresAt, r.hasExpiry),
		CreatedAt:      timeOf(r.createdAt, r.hasCreated),
		LastUsed:       timeOf(r.lastUsed, r.hasUsed),
		LifetimeTokens: r.lifetime,
		Disabled:       r.disabled,
	}
}
