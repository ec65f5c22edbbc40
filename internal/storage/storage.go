// Package storage is the small interface ratestore needs from an embedded
// key-value store, so that the engine, the key store and the migration tools
// are written once for both backends (bbolt and badger).
//
// The keyspace is flat; callers namespace it with prefixes. Values are opaque
// bytes.
package storage

import (
	"errors"
	"log/slog"
	"sync"

	"github.com/ratestore/ratestore/internal/errs"
)

// ErrLocked is returned by a backend's Open when another process (or another
// handle in this process) holds the database.
var ErrLocked = errors.New("database is in use by another process")

// ErrTooBig is returned by Commit when a batch is larger than the backend
// can apply atomically (badger bounds a transaction by its memtable size).
// Nothing of the batch was applied.
var ErrTooBig = errors.New("batch too large for one atomic transaction")

// ErrReadOnly is matched by every write to a store opened read-only, and
// by Open when the database cannot be read without a change (a migration,
// a repair) that a read-only open may not make. Nothing was changed.
var ErrReadOnly = errs.ErrReadOnly

// Options are what a backend's Open takes of ratestore.Options.
type Options struct {
	// Logger receives the backend's warnings (badger's); nil discards
	// them.
	Logger *slog.Logger
	// Recover opens a database whose logs are damaged, dropping the
	// damage and reporting it, instead of refusing it.
	Recover bool
	// ReadOnly opens an existing database for reads only: no file is
	// created, written, truncated or removed, several read-only opens may
	// hold the database at once, and a writer excludes them all (and they
	// it). What Open would repair or replay into its files is applied in
	// memory only. Commit fails with ErrReadOnly.
	ReadOnly bool
}

// Op is one write of a batch: a put, or a delete when Value is nil.
type Op struct {
	Key   []byte
	Value []byte
}

// Store is an open embedded database.
//
// Implementations are safe for concurrent use. Byte slices passed in are not
// retained; byte slices handed out are owned by the caller (Get) or valid only
// for the duration of the callback (Scan).
type Store interface {
	// Get returns a copy of the value stored at key, or nil if there is none.
	Get(key []byte) ([]byte, error)

	// Commit applies ops atomically: after a crash, either all of them or
	// none are visible. Whether they are durable when Commit returns is the
	// backend's choice; Sync makes them so.
	Commit(ops []Op) error

	// Scan calls fn for every key that starts with prefix, in key order,
	// beginning at the first key >= start (nil: the first key with prefix).
	// It reads in pages, holding no transaction while fn runs, so fn may
	// write to the store; it sees a consistent snapshot only within a page.
	// A non-nil error from fn stops the scan and is returned.
	Scan(prefix, start []byte, fn func(key, value []byte) error) error

	// Sync makes every returned Commit durable.
	Sync() error

	// Close releases the database. Committed changes are made durable first.
	Close() error
}

// Sizer is a Store that knows how many bytes its files take on disk.
type Sizer interface {
	Size() (int64, error)
}

// PageSize is how many entries a Scan reads under one transaction.
const PageSize = 256

// Page is a buffer of copied entries, shared by the backends' Scan loops.
type Page struct {
	keys, values [][]byte
	arena        []byte
}

// Add copies one entry into the page.
func (p *Page) Add(k, v []byte) {
	start := len(p.arena)
	p.arena = append(p.arena, k...)
	p.arena = append(p.arena, v...)
	mid := start + len(k)
	p.keys = append(p.keys, p.arena[start:mid:mid])
	p.values = append(p.values, p.arena[mid:len(p.arena):len(p.arena)])
}

// Len is the number of entries in the page.
func (p *Page) Len() int { return len(p.keys) }

// Full reports whether the page holds PageSize entries.
func (p *Page) Full() bool { return len(p.keys) >= PageSize }

// Drain calls fn for each entry, resets the page for reuse, and returns the
// key to resume after (a copy of the last key followed by a zero byte: the
// smallest key greater than it), or nil if the page was empty.
func (p *Page) Drain(fn func(k, v []byte) error) (next []byte, err error) {
	if len(p.keys) > 0 {
		last := p.keys[len(p.keys)-1]
		next = append(append(make([]byte, 0, len(last)+1), last...), 0)
	}
	for i := range p.keys {
		if err := fn(p.keys[i], p.values[i]); err != nil {
			return nil, err
		}
	}
	p.keys, p.values, p.arena = p.keys[:0], p.values[:0], p.arena[:0]
	return next, nil
}

// pages are the Pages of finished scans, whose arenas the next reuse: a
// scan of large values (a ledger's blocks) would otherwise allocate, and
// the runtime zero, its arena again each time.
var pages = sync.Pool{New: func() any { return new(Page) }}

// maxPooledArena bounds the arena a pooled Page keeps.
const maxPooledArena = 16 << 20

// ScanPages drives a paged scan: readPage fills page with entries >= start
// (at most PageSize of them, all with the prefix), under one read
// transaction; ScanPages then calls fn outside of it and moves on.
func ScanPages(start []byte, fn func(k, v []byte) error, readPage func(start []byte, page *Page) error) error {
	page := pages.Get().(*Page)
	defer func() {
		if cap(page.arena) <= maxPooledArena {
			page.keys, page.values, page.arena = page.keys[:0], page.values[:0], page.arena[:0]
			pages.Put(page)
		}
	}()
	for {
		if err := readPage(start, page); err != nil {
			return err
		}
		full := page.Full()
		next, err := page.Drain(fn)
		if err != nil || !full {
			return err
		}
		start = next
	}
}
