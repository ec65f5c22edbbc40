package ratestore

import (
	"context"
	"fmt"

	"github.com/ratestore/ratestore/internal/storage"
)

// Entry is one stored key and value: a limiter state, an API key, an index
// entry or a legacy usage record, in the storage format of this version.
// Export hands them out and Restore takes them back, to copy a database to
// another backend or file (the copy command of cmd/ratestore) or to back
// one up.
type Entry struct {
	Key, Value []byte
}

// Export calls fn with every entry of the database, in key order, after
// writing every pending change. The slices passed to fn are valid only
// during the call. Changes made while Export runs may or may not be seen;
// for an exact copy, make none.
func (db *DB) Export(ctx context.Context, fn func(Entry) error) error {
	if err := db.Flush(ctx); err != nil {
		return err
	}
	return db.store.Scan(nil, nil, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(Entry{Key: k, Value: v})
	})
}

// Restore writes entries that Export gave into db, as one atomic commit,
// made durable before it returns in either mode. It is for loading a copy
// into a database that nothing else uses yet: db must hold no limiter state
// in memory (no Limiter may have been used on it), or Restore fails with
// an error matching ErrInvalid, since a state in memory would shadow the
// restored one. Entries are not validated: they are read, as any stored
// entry, when used.
func (db *DB) Restore(ctx context.Context, entries []Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.closed.Load() {
		return ErrClosed
	}
	if db.readOnly {
		return fmt.Errorf("ratestore: restore: %w", ErrReadOnly)
	}
	if n := db.CachedKeys(); n > 0 {
		return fmt.Errorf("ratestore: restore: %d limiter states are in memory: restore only into a database not in use: %w", n, ErrInvalid)
	}
	ops := make([]storage.Op, len(entries))
	for i, r := range entries {
		if len(r.Key) == 0 || r.Value == nil {
			return fmt.Errorf("ratestore: restore: entry %d: empty key or nil value: %w", i, ErrInvalid)
		}
		ops[i] = storage.Op{Key: r.Key, Value: r.Value}
	}
	if err := db.store.Commit(ops); err != nil {
		return fmt.Errorf("ratestore: restore: %w", err)
	}
	if err := db.store.Sync(); err != nil {
		return fmt.Errorf("ratestore: restore: %w", err)
	}
	for _, r := range entries {
		if h, ok := db.stateHash(r.Key); ok {
			db.noteNew(h)
		}
	}
	return nil
}
