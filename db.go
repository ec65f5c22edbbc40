// Package ratestore is an embedded, persistent rate-limit store for
// single-node programs: per-key limiter states that survive restarts, kept in
// a bbolt file (the default) or a badger directory (package
// github.com/ratestore/ratestore/badger), with no server to run.
//
// # Design
//
// The slow part of a persistent limiter is not the decision, which is a few
// floating-point operations, but making it durable: an fsync costs far
// more than an in-memory decision. So a DB keeps the decoded state
// of every key it has touched in a bounded, sharded in-memory table, which is
// the source of truth while the DB is open, and decides each call under its
// key's shard lock. A state that a call changed is marked dirty; a single
// committer goroutine writes all dirty states in one transaction:
//
//   - Sync (the default): the committer starts a commit as soon as the
//     previous one ends, and a call that changed a state returns only once the
//     commit holding its change is on disk. Concurrent callers share one
//     commit (group commit) without any fixed delay: an idle store commits at
//     once, a busy one amortizes each fsync over everything that arrived
//     during the previous one.
//   - Async: calls return at once; the committer writes every FlushInterval.
//     A crash loses at most the last interval. Close and Flush write at once.
//
// Calls that change nothing (Peek, a denied AllowN, AllowN with n = 0) never
// wait for a commit. A state back at its initial value (a full bucket, an
// expired window) is deleted rather than stored, so idle keys cost nothing on
// disk. Keys not in memory are loaded on first touch; clean keys are evicted
// when the table is over its bound.
//
// Only one process may open a database: both backends hold a file lock, and
// Open fails with an error matching ErrLocked when it is taken. The
// exception is a database opened read-only (Options.ReadOnly), to look at
// it without changing a byte of it (a backup, a copy, a database no
// process holds): such opens share the lock with one another, and exclude
// a writer as a writer excludes them. Every call that would change such a
// DB fails with an error matching ErrReadOnly.
package ratestore

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/attach"
	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
)

// A Backend is the embedded store a DB keeps its data in: Bolt, the
// default, or badger.Backend from package github.com/ratestore/ratestore/badger.
// Each lives in the package that links it, so that a program that keeps its
// states in bbolt never links badger: this package links bbolt only.
//
// Backends are this module's packages: OpenStore returns a type of an
// internal package, which other modules cannot implement.
type Backend interface {
	// String names the backend: "bolt", "badger".
	String() string
	// OpenStore opens or creates the store at path for Open, with what
	// opts takes of Options: Logger, Recover and ReadOnly.
	OpenStore(path string, opts storage.Options) (storage.Store, error)
}

// Bolt is the default Backend: go.etcd.io/bbolt, one file at path and its
// write-ahead log next to it (path+"-wal").
const Bolt = boltBackend("bolt")

type boltBackend string

func (b boltBackend) String() string { return string(b) }

// OpenStore implements Backend.
func (boltBackend) OpenStore(path string, opts storage.Options) (storage.Store, error) {
	return boltstore.OpenWith(path, opts)
}

// Durability says when a call that changed a state returns.
type Durability int

const (
	// Sync is the default: a call that changes state returns only after that
	// change is on disk (fsynced); concurrent calls share one commit.
	Sync Durability = iota
	// Async: a call returns at once; changes reach disk in one transaction
	// every FlushInterval. A crash loses at most the last interval. Close
	// flushes.
	Async
)

func (d Durability) String() string {
	switch d {
	case Sync:
		return "sync"
	case Async:
		return "async"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// Defaults of Options.
const (
	DefaultFlushInterval = 100 * time.Millisecond
	DefaultMaxCachedKeys = 1 << 18
)

// Options configures Open. The zero value is a bbolt file in Sync mode.
type Options struct {
	Backend       Backend          // nil means Bolt
	Durability    Durability       // zero value means Sync
	FlushInterval time.Duration    // Async only; 0 means DefaultFlushInterval
	Now           func() time.Time // the clock; nil means the system clock (see backend.SystemClock). Tests and simulations inject a fake one.

	// After is the timer Limiter.Wait sleeps on, on the clock of Now: a
	// channel that receives once d has passed. nil means time.After; a
	// test that injects Now injects the matching timer.
	After func(d time.Duration) <-chan time.Time

	// MaxCachedKeys bounds how many key states are kept in memory; 0 means
	// DefaultMaxCachedKeys. It holds in both modes: each of the table's 128
	// shards keeps MaxCachedKeys/128 (at least 1). States changed but not
	// yet committed are never evicted, so a shard full of them starts the
	// next commit at once (in Async mode too, before FlushInterval) and a
	// call on a key not in memory waits for it, bounded by its ctx and a
	// few commits. The slack: calls within DB.Update, which cannot wait
	// for a commit, and calls still without room after those commits,
	// insert over the bound until the next commit lets the table shrink.

	MaxCachedKeys int

	// Logger receives commit failures and the backend's warnings; nil
	// discards them.
	Logger *slog.Logger

	// Recover opens a database whose write-ahead log is damaged (a bad
	// record followed by good ones: a flipped bit, a bad sector, not a
	// crash) or truncated (the file ends inside the log) instead of
	// failing with ErrCorrupt; what was dropped is logged at Error and
	// reported by DB.Recovery. Bolt keeps every valid record and drops the
	// damaged ones. Badger's memtable and value logs cannot skip damage:
	// badger keeps what comes before it and drops the rest of that file.
	// An unreadable last record, what a crash leaves, is dropped with or
	// without Recover, and reported (at Warn). With ReadOnly, what is
	// dropped is dropped in memory only: the files stay as they are.
	Recover bool

	// ReadOnly opens an existing database to read it and change nothing:
	// not a byte of its files, not their modification times. The backend
	// opens it read-only (bbolt's and badger's ReadOnly options) under a
	// shared lock: several read-only opens, in this process or others, may
	// hold it at once, and Open fails with ErrLocked while a writer holds
	// it, as a writer's Open does while a read-only open holds it.
	//
	// What a writable Open writes is done in memory only, or refused:
	// Bolt replays its write-ahead log into memory, where the records stay
	// until Close (no checkpoint, no reset of the log); a Bolt file from
	// before checksums, whose values Open would migrate, fails Open with
	// an error matching ErrReadOnly, as does a badger directory that was
	// not closed cleanly (a crash, or a copy of a database in use), which
	// badger cannot read without cutting its logs: open such a database
	// writable once, or a copy of it. A path with no database fails with an
	// error matching fs.ErrNotExist: nothing is created.
	//
	// Every call that would change a state or a record fails with an error
	// matching ErrReadOnly and changes nothing: Limiter's Allow, AllowN,
	// Record, Reset, Reserve and Wait, Concurrency's Acquire, the writes of
	// a Batch (AllowN, Record, Reset, Modify, Put, Delete) and Restore.
	// AllowN is refused with n = 0 too, so that whether a call may write
	// does not depend on its arguments: PeekN asks. Peek, PeekN, Inspect,
	// Get, Scan, ScanFrom, Export and Flush work, and so does Update, whose
	// Batch reads. A state that time alone brought back to its initial
	// value, or that a clock gone back clamps, is changed in memory as a
	// writable DB changes it, and never written. Durability and
	// FlushInterval have no effect: nothing is committed.
	ReadOnly bool
}

// Recovery reports what Open dropped from a database's write-ahead log
// (Bolt's, or one of Badger's memtable and value logs): the states those
// records held are lost, and their keys read back their previous states.
type Recovery struct {
	File    string // the log file
	Offset  int64  // where the first damaged or dropped bytes start
	Records uint64 // how many records (group commits) were dropped
	Bytes   int64  // how many bytes of the log were skipped
	// Tail: the log's last record could not be read and was dropped. A
	// crash that cut its write short leaves this (that record was never
	// acknowledged), and so does damage to the last acknowledged record:
	// the two cannot be told apart. Not counted in Records. With Badger,
	// File may also be its MANIFEST, whose last change set was cut short,
	// or a table file the MANIFEST does not name, which badger deletes: a
	// crash between writing a table and recording it leaves both (nothing
	// is lost), and so does a MANIFEST cut short (the table's keys are).
	Tail bool
	// Truncated: the log's file ends inside the log, cut short after it was
	// written (Options.Recover only): records after the end are gone, and
	// how many is not known.
	Truncated bool
}

var (
	// ErrInvalid is matched by every error about a bad argument or
	// configuration: key, limiter name, n, strategy.
	ErrInvalid = backend.ErrInvalid
	// ErrClosed is returned by any call after Close.
	ErrClosed = backend.ErrClosed
	// ErrCorrupt is matched by errors about a stored state or record that
	// cannot be decoded; the message names the key.
	ErrCorrupt = backend.ErrCorrupt
	// ErrLocked is matched when Open finds the database held by another
	// process (or another open DB in this process): by a writer, or, for a
	// writable Open, by a read-only one.
	ErrLocked = storage.ErrLocked
	// ErrReadOnly is matched by every call that would change a DB opened
	// with Options.ReadOnly, and by a read-only Open of a database that
	// cannot be read without a change (see Options.ReadOnly); nothing was
	// changed. It does not match ErrInvalid: the call and its arguments
	// are good, the database is not open to take it.
	ErrReadOnly = storage.ErrReadOnly
	// ErrConflict is matched by an Update of a shared store that stored
	// nothing because a value its batch read was changed by another writer
	// (see backend.Store.UpdateCached). A DB, which this process alone
	// changes, never returns it.
	ErrConflict = backend.ErrConflict
	// ErrGap is matched by backend.Store.Changes when messages were
	// dropped before they were read. A DB never returns it.
	ErrGap = backend.ErrGap
)

// DB is an open rate-limit store. It is safe for concurrent use.
type DB struct {
	store    storage.Store
	backend  Backend
	path     string
	now      func() int64 // Unix nanoseconds: the engine never needs a time.Time
	after    func(time.Duration) <-chan time.Time
	async    bool
	readOnly bool // Options.ReadOnly
	log      *slog.Logger

	clockWarned atomic.Bool   // a clock jump was logged (see DB.clockJumped)
	roomMisses  atomic.Int64  // keys inserted over the cache bound (see DB.makeRoom)
	loads       atomic.Uint64 // store reads of keys not in memory (see Stats)
	evictions   atomic.Uint64 // entries evicted (see Stats)

	seed     maphash.Seed
	shards   [numShards]shard
	shardCap int // entries per shard before eviction

	recovery *Recovery // see Recovery

	attached attach.Set // see Attach

	committer
	closed  atomic.Bool
	filter  stored         // the keys that may have a stored state
	filling sync.WaitGroup // the filter's builders (fillFilter, rebuildFilter)
	fillMu  sync.Mutex     // orders filling.Add before Close's Wait

	closeOnce sync.Once
	closeErr  error
}

// Open opens the database at path, creating it if needed: a file for Bolt, a
// directory for Badger.
func Open(path string, opts Options) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("ratestore: open: empty path: %w", ErrInvalid)
	}
	if opts.Durability != Sync && opts.Durability != Async {
		return nil, fmt.Errorf("ratestore: open: unknown durability %d: %w", opts.Durability, ErrInvalid)
	}
	if opts.FlushInterval < 0 {
		return nil, fmt.Errorf("ratestore: open: negative flush interval %v: %w", opts.FlushInterval, ErrInvalid)
	}
	if opts.MaxCachedKeys < 0 {
		return nil, fmt.Errorf("ratestore: open: negative MaxCachedKeys %d: %w", opts.MaxCachedKeys, ErrInvalid)
	}
	kind := opts.Backend
	if kind == nil {
		kind = Bolt
	}
	store, err := kind.OpenStore(path, storage.Options{Logger: opts.Logger, Recover: opts.Recover, ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("ratestore: open: %w", err)
	}

	db := newDB(store, kind, path, opts)
	if rs, ok := store.(interface{ Recovery() *storage.Recovery }); ok && rs.Recovery() != nil {
		r := (*Recovery)(rs.Recovery())
		db.recovery = r
		if r.Records > 0 || r.Truncated {
			db.log.Error("ratestore: open: dropped damaged write-ahead log records (Options.Recover)",
				"file", r.File, "offset", r.Offset, "records", r.Records, "bytes", r.Bytes, "tail", r.Tail, "truncated", r.Truncated)
		} else {
			db.log.Warn("ratestore: open: dropped what a crash may have left half written, or damage (see DB.Recovery)",
				"file", r.File, "offset", r.Offset, "bytes", r.Bytes)
		}
	}
	return db, nil
}

// Recovery reports what Open dropped from the write-ahead log, or nil if it
// dropped nothing.
func (db *DB) Recovery() *Recovery { return db.recovery }

// newDB starts the engine over an open store; opts is already validated.
func newDB(store storage.Store, kind Backend, path string, opts Options) *DB {
	db := &DB{
		store:    store,
		backend:  kind,
		path:     path,
		async:    opts.Durability == Async && !opts.ReadOnly, // read-only: no interval to commit at
		readOnly: opts.ReadOnly,
		log:      opts.Logger,
		seed:     maphash.MakeSeed(),
	}
	db.after = opts.After
	if db.after == nil {
		db.after = time.After
	}
	if opts.Now == nil {
		db.now = backend.SystemNanos()
	} else {
		db.now = func() int64 { return opts.Now().UnixNano() }
	}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	maxKeys := opts.MaxCachedKeys
	if maxKeys == 0 {
		maxKeys = DefaultMaxCachedKeys
	}
	db.shardCap = max(1, maxKeys/numShards)
	interval := opts.FlushInterval
	if interval == 0 {
		interval = DefaultFlushInterval
	}
	db.filter.cur.Store(newBloom(filterStart))
	if next, done := db.fillFilter(nil, fillAtOpen); !done {
		db.background(func() { db.fillFilter(next, -1) })
	}
	db.startCommitter(interval)
	return db
}

// fillAtOpen is how many stored states Open adds to the filter before it
// returns (a few milliseconds); a larger store is read on in the
// background.
const fillAtOpen = 1 << 16

// stateHash is the hash (DB.locate's) of the state at the store key k,
// and whether k is a state's.
func (db *DB) stateHash(k []byte) (uint64, bool) {
	if !isState(k) {
		return 0, false
	}
	name, key, _ := bytes.Cut(k[len(statePrefix):], []byte{0})
	return maphash.Bytes(db.seed, key) ^ maphash.Bytes(db.seed, name), true
}

// noteNew adds the key whose hash is h to the filter, as its entry is made
// (under its shard's lock), and rebuilds the filter larger when it is full.
func (db *DB) noteNew(h uint64) {
	if db.filter.add(h) {
		db.growFilter()
	}
}

// growFilter starts the rebuild of the full filter for twice its keys
// (rebuildFilter), unless one runs or the filter is still being filled.
func (db *DB) growFilter() {
	if db.filter.ready.Load() && db.filter.rebuilding.CompareAndSwap(false, true) {
		db.background(db.rebuildFilter)
	}
}

// errClosing stops the scans of the filter's builders when the DB closes.
var errClosing = errors.New("closing")

// background runs fn in a goroutine that Close waits for, unless the DB
// is closing.
func (db *DB) background(fn func()) {
	db.fillMu.Lock()
	defer db.fillMu.Unlock()
	if db.closed.Load() {
		return
	}
	db.filling.Add(1)
	go func() {
		defer db.filling.Done()
		fn()
	}()
}

// errEnough stops fillFilter's first scan, in Open, after fillAtOpen keys.
var errEnough = errors.New("enough")

// scanStates adds the states in the store from the key start on (nil:
// the first) to b, reading the store as Scan does, in pages, so that calls
// go on meanwhile, until Close, or until it has added limit (-1: no limit).
// It returns the key to go on from when it stopped at the limit.
func (db *DB) scanStates(b *bloom, start []byte, limit int) (next []byte, err error) {
	err = db.store.Scan([]byte(statePrefix), start, func(k, _ []byte) error {
		switch {
		case db.closed.Load():
			return errClosing
		case limit == 0:
			next = bytes.Clone(k)
			return errEnough
		}
		limit--
		if h, ok := db.stateHash(k); ok {
			b.add(h)
		}
		return nil
	})
	return next, err
}

// fillFilter fills the filter (see stored) from the store, from the key
// start on, adding at most limit keys (-1: all), and reports whether it is
// filled: from then on it answers. Otherwise it returns the key to go on
// from.
func (db *DB) fillFilter(start []byte, limit int) (next []byte, done bool) {
	next, err := db.scanStates(db.filter.cur.Load(), start, limit)
	switch {
	case errors.Is(err, errEnough):
		return next, false
	case err != nil:
		if !errors.Is(err, errClosing) {
			db.log.Warn("ratestore: reading the stored keys failed: every key not in memory is read from the store", "err", err)
		}
		return nil, true
	}
	db.filter.ready.Store(true)
	if c := db.filter.cur.Load(); c.keys.Load() > c.room {
		db.growFilter()
	}
	return nil, true
}

// rebuildFilter replaces the filter by one made for twice its keys, from
// the entries in memory (stored, or to be stored by a coming commit) and
// the store, while the keys added meanwhile go to both (see stored).
func (db *DB) rebuildFilter() {
	defer db.filter.rebuilding.Store(false)
	next := newBloom(int(2 * db.filter.cur.Load().keys.Load()))
	db.filter.next.Store(next)
	var sks []string
	for i := range db.shards {
		// The keys are hashed with the shard unlocked: hashing a shard of
		// 8k keys takes about half a millisecond, for which every call on
		// the shard would wait; copying their names, a few microseconds.
		// A key added meanwhile goes to next itself (see stored).
		sks = db.shards[i].liveKeys(sks[:0])
		for _, sk := range sks {
			next.add(db.hashKey(sk))
		}
	}
	clear(sks)
	if _, err := db.scanStates(next, nil, -1); err != nil {
		db.filter.next.Store(nil)
		if !errors.Is(err, errClosing) {
			db.log.Warn("ratestore: rebuilding the filter of stored keys failed: keeping the old one", "err", err)
		}
		return
	}
	db.filter.cur.Store(next)
	db.filter.next.Store(nil)
}

// Now reads the DB's clock: Options.Now, or the system clock (see
// backend.SystemClock). Packages built on a DB use it so that an injected clock
// rules them too.
func (db *DB) Now() time.Time { return time.Unix(0, db.now()) }

// Backend reports which backend the DB was opened with.
func (db *DB) Backend() Backend { return db.backend }

// Path reports the path the DB was opened at.
func (db *DB) Path() string { return db.path }

// ReadOnly reports whether the DB was opened with Options.ReadOnly.
// Packages built on a DB (the key store, the ledger) ask it, so that they
// write nothing either.
func (db *DB) ReadOnly() bool { return db.readOnly }

// Close writes every pending change, waits for it to be on disk, and releases
// the database. Calls made after Close returns ErrClosed. Close is
// idempotent: later calls return what the first one did.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.closed.Store(true)
		// Every Update under way ends before the final commit: its Batch
		// may still be making changes.
		db.batchMu.Lock()
		//lint:ignore SA2001 an empty critical section: a barrier
		db.batchMu.Unlock()
		// A barrier: once every shard lock has been taken after closed was
		// set, every call has either seen closed or finished changing its
		// state, so the final commit holds every change ever made.
		// Idle states are deleted on the way.
		now, g := db.now(), db.gen.Load().seq
		for i := range db.shards {
			sh := &db.shards[i]
			sh.mu.Lock()
			for j := range sh.slots {
				if sh.slots[j].ctl == slotLive {
					sh.dropIfIdle(j, now, g)
				}
			}
			sh.mu.Unlock()
		}
		db.fillMu.Lock() // no filter builder starts after this
		//lint:ignore SA2001 an empty critical section: a barrier
		db.fillMu.Unlock()
		db.filling.Wait() // they see closed, and stop
		err := db.stopCommitter()
		db.closeErr = errors.Join(err, db.store.Close())
		if db.closeErr != nil {
			db.closeErr = fmt.Errorf("ratestore: close: %w", db.closeErr)
		}
	})
	return db.closeErr
}
