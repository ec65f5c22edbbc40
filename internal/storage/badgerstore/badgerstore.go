// Package badgerstore implements storage.Store on github.com/dgraph-io/badger/v4:
// a directory, writes committed without fsync and made durable by Sync.
//
// badger's write-ahead log is append-only and checksummed, so a crash loses
// at most a suffix of unsynced commits and never tears one: that is what lets
// the engine commit many transactions and pay for one fsync per group.
//
// The options are tuned for an embedded store rather than a database server:
// badger's defaults preallocate a 64 MiB memtable (of five), a 256 MiB block
// cache and 1 GiB value-log files, which costs an empty database about
// 100 MB of RSS. Rate-limit states are tens of bytes, so small memtables, a
// small cache and values kept inline in the LSM tree fit far better.
package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/ratestore/ratestore/internal/storage"
)

// Store is a badger database.
type Store struct {
	db *badger.DB
}

var _ storage.Store = (*Store)(nil)

// Options returns the badger options this package opens path with. logger
// receives badger's errors and warnings; nil discards them.
func Options(path string, logger *slog.Logger) badger.Options {
	return badger.DefaultOptions(path).
		WithLogger(quietLogger{logger}).
		WithSyncWrites(false).
		WithMetricsEnabled(false).
		WithDetectConflicts(false). // the engine is the only writer of a key at a time
		WithNumGoroutines(2).
		WithNumCompactors(2).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBaseTableSize(2 << 20).
		WithBaseLevelSize(8 << 20).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20).
		WithValueLogFileSize(64 << 20).
		WithValueThreshold(1 << 10).
		WithCompression(options.None)
}

// Open opens or creates the badger directory at path.
func Open(path string, logger *slog.Logger) (*Store, error) {
	db, err := badger.Open(Options(path, logger))
	if err != nil {
		// badger reports a held directory lock only in its message.
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("badger %s: %w", path, storage.ErrLocked)
		}
		return nil, fmt.Errorf("badger %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Get implements storage.Store.
func (s *Store) Get(key []byte) (value []byte, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		value, err = item.ValueCopy(nil)
		return err
	})
	return value, err
}

// Commit implements storage.Store: one transaction, not synced.
func (s *Store) Commit(ops []storage.Op) error {
	if len(ops) == 0 {
		return nil
	}
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	for _, op := range ops {
		var err error
		if op.Value == nil {
			err = txn.Delete(bytes.Clone(op.Key))
		} else {
			err = txn.Set(bytes.Clone(op.Key), bytes.Clone(op.Value))
		}
		if errors.Is(err, badger.ErrTxnTooBig) {
			return fmt.Errorf("badger: %d ops: %w (%w)", len(ops), storage.ErrTooBig, err)
		}
		if err != nil {
			return fmt.Errorf("key %q: %w", op.Key, err)
		}
	}
	return txn.Commit()
}

// Scan implements storage.Store.
func (s *Store) Scan(prefix, start []byte, fn func(k, v []byte) error) error {
	if bytes.Compare(start, prefix) < 0 {
		start = prefix
	}
	return storage.ScanPages(start, fn, func(start []byte, page *storage.Page) error {
		return s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
			defer it.Close()
			for it.Seek(start); it.Valid() && !page.Full(); it.Next() {
				item := it.Item()
				err := item.Value(func(v []byte) error {
					page.Add(item.Key(), v)
					return nil
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// Sync implements storage.Store: one fsync covers every earlier Commit.
func (s *Store) Sync() error { return s.db.Sync() }

// Close implements storage.Store. badger syncs its log on Close.
func (s *Store) Close() error { return s.db.Close() }

// quietLogger forwards badger's errors and warnings to slog and drops its
// chatty info and debug lines.
type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Errorf(f string, v ...any) {
	if q.l != nil {
		q.l.Error("badger: " + strings.TrimSpace(fmt.Sprintf(f, v...)))
	}
}

func (q quietLogger) Warningf(f string, v ...any) {
	if q.l != nil {
		q.l.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, v...)))
	}
}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Debugf(string, ...any) {}
