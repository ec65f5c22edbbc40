// Package boltstore implements storage.Store on go.etcd.io/bbolt: one file,
// a single bucket, every Commit one fsynced read-write transaction.
//
// bbolt writes data pages, fsyncs, then writes the meta page and fsyncs
// again, so a crash mid-commit leaves the previous transaction readable.
// That ordering is why this backend never runs with bbolt's NoSync: a Commit
// is already durable when it returns and Sync has nothing left to do.
package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ratestore/ratestore/internal/storage"
)

// bucket holds every key; callers namespace with prefixes.
var bucket = []byte("ratestore")

// LockTimeout is how long Open waits for another holder of the file lock
// before it gives up with storage.ErrLocked.
const LockTimeout = 200 * time.Millisecond

// Store is a bbolt database.
type Store struct {
	db *bolt.DB
}

var _ storage.Store = (*Store)(nil)

// Open opens or creates the bbolt file at path with mode 0600.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      LockTimeout,
		FreelistType: bolt.FreelistMapType,
	})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("bolt %s: %w", path, storage.ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("bolt %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("bolt %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Get implements storage.Store.
func (s *Store) Get(key []byte) (value []byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucket).Get(key); v != nil {
			value = bytes.Clone(v)
		}
		return nil
	})
	return value, err
}

// Commit implements storage.Store: one fsynced transaction.
func (s *Store) Commit(ops []storage.Op) error {
	if len(ops) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, op := range ops {
			var err error
			if op.Value == nil {
				err = b.Delete(op.Key)
			} else {
				err = b.Put(op.Key, op.Value)
			}
			if err != nil {
				return fmt.Errorf("key %q: %w", op.Key, err)
			}
		}
		return nil
	})
}

// Scan implements storage.Store.
func (s *Store) Scan(prefix, start []byte, fn func(k, v []byte) error) error {
	if bytes.Compare(start, prefix) < 0 {
		start = prefix
	}
	return storage.ScanPages(start, fn, func(start []byte, page *storage.Page) error {
		return s.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucket).Cursor()
			for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix) && !page.Full(); k, v = c.Next() {
				page.Add(k, v)
			}
			return nil
		})
	})
}

// Sync implements storage.Store. Every Commit is already fsynced.
func (s *Store) Sync() error { return nil }

// Close implements storage.Store.
func (s *Store) Close() error { return s.db.Close() }

// Compact rewrites the database into a new file at dst, dropping free pages.
// bbolt never shrinks its file on its own.
func (s *Store) Compact(dst string) error {
	out, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: LockTimeout})
	if err != nil {
		return err
	}
	if err := bolt.Compact(out, s.db, 64<<20); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
