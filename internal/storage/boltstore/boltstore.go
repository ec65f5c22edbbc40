// Package boltstore implements storage.Store on go.etcd.io/bbolt, with a
// write-ahead log in front of it.
//
// # Files
//
// A database at path is two files, both mode 0600, that belong together
// (copy or move them as a pair, and only while the database is closed):
//
//   - path, the bbolt file: bucket "ratestore-v2" holds every key, its
//     value followed by a checksum (see ValueBucket); bucket
//     "ratestore-meta" holds "wal-seq", the sequence number of the last log
//     record applied to it (big-endian uint64), and "db-id", the database's
//     identity (16 random bytes, made with the database). Files from before
//     checksums held the values in bucket "ratestore" (LegacyBucket), which
//     Open migrates.
//   - path+"-wal", the log (format: package wal), opened only once bbolt's
//     file lock is held, so that lock guards both. Its header names the
//     database's id, and every record's CRC covers it, so a log of another
//     database is refused (Open fails with an error matching
//     errs.ErrCorrupt that names both files) and none of its records
//     is ever taken for one of this database. After a clean Close it holds
//     just its header and an end marker.
//
// The id is stored in bbolt before any log names it: a new database writes
// it with its buckets, then creates the log; a database from before ids
// (a version 1 log, which names none) gets one once its log has replayed,
// and its log is rewritten in the current version right after.
//
// # Writes
//
// A bbolt transaction writes tens of scattered B+tree pages and fsyncs
// twice, so one per group commit would bound the engine's decisions by
// what those page writes and fsyncs allow. Instead, Commit appends one checksummed record
// to the log (one write, no fsync) and applies the ops to an in-memory
// overlay (key -> newest value, nil for a delete); Sync is one fdatasync of
// the log. Get reads the overlay first, then bbolt; Scan merges the two.
//
// A checkpoint writes the overlay into bbolt in one ordinary (fsynced)
// transaction that also stores the sequence number of the last record it
// covers, then drops those records from the log. It runs in the
// background, started by a Sync once the log's fdatasync made the callers'
// changes durable, so commits and Syncs go on while bbolt writes: the
// checkpoint writes the overlay's frozen generation while a new one takes
// the commits, Get and Scan read both before bbolt (so they never see an
// older value), and once bbolt holds it the frozen generation goes, and so
// do the log's records before the checkpoint's (wal.Log.DropBefore); the
// records appended meanwhile are kept, with the new generation, for the
// next checkpoint.
//
// A checkpoint starts when the overlay holds the key threshold or the log
// checkpointLogBytes bytes, and none is running. The key threshold grows
// with the file (checkpointPerPage keys a page, from checkpointKeys up to
// checkpointMaxKeys): random keys cost a page copy each until they
// outnumber the file's pages, so checkpoints sized to the file keep the
// cost per key from growing with it, up to the ceiling that bounds the
// overlay's memory (see checkpointPerPage). At hardLimitFactor times
// either threshold, when background checkpoints fall behind, one runs in
// the foreground, from Sync or Commit, after the background one: that
// bounds the overlay's memory and the replay at Open, and holds writers
// back. So do Close, Compact, and the Sync after a log write or a
// background checkpoint failed. bbolt keeps its own fsyncs (no
// NoSync): a checkpoint is crash safe on its own.
//
// # Crash safety
//
// The last acknowledged state (every Commit before a Sync that returned
// nil) is readable after a crash at any point:
//
//   - During an append, or between an append and its fdatasync: the record
//     may be missing, torn or whole. It was not acknowledged; a torn one
//     fails its CRC, and replay stops there. Every acknowledged record is
//     before it and was synced by an earlier Sync (the log file itself was
//     created by a synced rename, its directory synced).
//   - During a checkpoint: bbolt's transaction is all or nothing; if it did
//     not commit, bbolt holds the previous checkpoint and the log, untouched,
//     holds every acknowledged record since, which replay applies.
//   - Between a checkpoint and the log's reset: bbolt holds everything
//     up to the new sequence number; replay skips the log's records up to
//     it as already applied, so an old log never rolls state back.
//   - During or after the reset: the log's first record header is zero
//     (nothing to replay) or still the old records (skipped as above); a
//     new record is written only after the reset was synced. A log that
//     keeps the records appended during a background checkpoint is a new
//     file, synced, renamed over the old one and its directory synced: a
//     crash leaves the old log or the new one, whole.
//
// Open replays records above bbolt's sequence number into the overlay, stops
// at a torn last record (never acknowledged), checkpoints them in one
// transaction and resets the log. A log that is not ours, or of an unknown
// version, is refused. Damage that a crash cannot cause (a bad record with a
// record of this database after it, missing sequence numbers) fails Open
// with an error matching errs.ErrCorrupt naming the log and the
// offset, unless Options.Recover asks to keep every valid record, drop the
// damaged ones and report them (Store.Recovery).
//
// # Read-only
//
// OpenWith with ReadOnly writes nothing to either file: bbolt's file is
// opened read-only under a shared lock, the log read-only, and what Open
// would replay and checkpoint stays in the overlay until Close (see
// OpenWith for what it refuses instead).
//
// # Damaged bbolt files
//
// bbolt trusts its pages: a damaged one makes it panic (an index out of
// range, an assertion) or fault on its memory map. Every call into bbolt
// (Open, Get, Scan, the checkpoint, Compact) runs under
// debug.SetPanicOnFault(true), restored after, and a panic is recovered
// into an error matching errs.ErrCorrupt that names the file (and the
// key, when one is known). bbolt starts no goroutines of its own on these
// paths (Batch, which does, is not used), so no panic escapes. What this
// cannot catch: a runtime fatal error (a page cycle deep enough to overflow
// the stack, an allocation too large for memory) still ends the process.
// After such an error the DB should be closed and checked (bbolt's
// Tx.Check) or restored; writes may keep failing. A panic inside
// bolt.Open itself leaves the file open (and locked) until the process
// exits, as bbolt returns no handle to close.
package boltstore

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ratestore/ratestore/internal/errs"
	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/wal"
)

var (
	// bucket holds every key, its value checksummed (see ValueBucket);
	// callers namespace keys with prefixes.
	bucket = []byte(ValueBucket)
	// metaBucket holds seqKey, the last log record in bucket.
	metaBucket = []byte("ratestore-meta")
	seqKey     = []byte("wal-seq")
	// idKey holds the database's id, which its log's header also names.
	idKey = []byte("db-id")
)

// errCorrupt is what every error about a damaged file matches: the
// module's one sentinel for bytes that cannot be trusted.
var errCorrupt = errs.ErrCorrupt

// LockTimeout is how long Open waits for another holder of the file lock
// before it gives up with storage.ErrLocked.
const LockTimeout = 200 * time.Millisecond

// errClosed is returned by writes after Close.
var errClosed = fmt.Errorf("boltstore: %w", berrors.ErrDatabaseNotOpen)

// Store is a bbolt database with a write-ahead log.
//
// Locks: wmu serializes everything that changes the log or the overlay,
// starts or settles a checkpoint (Commit, Sync, Close, Compact), and Scan's
// page reads, which need the overlay to hold still. A background
// checkpoint's goroutine writes bbolt without it, from the overlay's frozen
// generation, and changes no field of the Store. mu guards the overlay's
// maps between their writers (who also hold wmu) and Get, so a Get never
// waits for an fdatasync or a checkpoint.
type Store struct {
	db       *bolt.DB
	log      *wal.Log
	path     string            // the bbolt file
	recovery *storage.Recovery // what Open dropped, or nil

	wmu      sync.Mutex
	mu       sync.RWMutex
	ov       overlay
	ckptSeq  uint64 // the sequence number stored in bbolt
	logBad   bool   // a log write or sync failed: Sync must checkpoint
	closed   bool
	readOnly bool // opened read-only: see OpenWith
	pages    int  // bbolt's size in pages, as of the last checkpoint
	// bg is the checkpoint running in the background, or nil; bgErr the
	// error of the last one, which the next Sync retries in the foreground.
	bg    *background
	bgErr error

	// Thresholds and a hook, fields so tests can change them.
	ckptKeys    int
	ckptPerPage int
	ckptBytes   int64
	afterBolt   func() // called by a background checkpoint once bbolt holds it
}

var _ storage.Store = (*Store)(nil)

// Options configures OpenWith. The zero value is Open's behaviour. Logger
// is unused: bbolt logs nothing this package does not return.
//
// Recover opens a log with damaged records instead of refusing it: every
// valid record is replayed, the damaged ones are dropped, and Recovery
// reports what was dropped.
type Options = storage.Options

// Recovery reports what Open dropped from its log (see package wal: a
// torn record and a damaged last one look alike), or nil if it dropped
// nothing.
func (s *Store) Recovery() *storage.Recovery { return s.recovery }

// Open opens or creates the database at path (see the package doc for its
// two files) and replays its log.
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
//
// ReadOnly opens an existing database with bbolt's ReadOnly option: its
// file read-only, under a shared lock, which other read-only opens may
// hold at the same time and a writer's exclusive lock excludes (each way,
// after LockTimeout, with storage.ErrLocked). Its log, if any, is opened
// read-only (wal.OpenReadOnly) and replayed into the overlay, where the
// records stay until Close: no checkpoint, no reset, no id made for a
// database from before ids. Commit fails with storage.ErrReadOnly and
// Compact too, and Sync has nothing to sync. A file from before
// checksums, which Open migrates, is refused with storage.ErrReadOnly,
// and so is an empty file, which Open would make a database; a database
// never checkpointed (no buckets) reads as empty.
func OpenWith(path string, opts Options) (*Store, error) {
	if opts.ReadOnly {
		if err := existing(path); err != nil {
			return nil, err
		}
	}
	var db *bolt.DB
	err := guard(path, "open", nil, func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{
			Timeout:      LockTimeout,
			FreelistType: bolt.FreelistMapType,
			ReadOnly:     opts.ReadOnly,
		})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("bolt %s: %w", path, storage.ErrLocked)
	}
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
		return nil, fmt.Errorf("bolt %s: %w: %w", path, err, errCorrupt)
	}
	if err != nil {
		if errors.Is(err, errCorrupt) {
			return nil, err // guard named the file
		}
		return nil, fmt.Errorf("bolt %s: %w", path, err)
	}
	s := &Store{
		db:          db,
		path:        path,
		ckptKeys:    checkpointKeys,
		ckptPerPage: checkpointPerPage,
		ckptBytes:   checkpointLogBytes,
		readOnly:    opts.ReadOnly,
	}
	if err := s.open(path+"-wal", opts.Recover); err != nil {
		if s.log != nil {
			s.log.Close()
		}
		db.Close()
		return nil, fmt.Errorf("bolt %s: %w", path, err)
	}
	return s, nil
}

// existing checks that a read-only open has a database to read at path:
// bbolt would try to write the first pages of an empty file.
func existing(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("bolt %s: %w", path, err)
	case fi.Size() == 0:
		return fmt.Errorf("bolt %s: an empty file, which only a writable open makes a database: %w", path, storage.ErrReadOnly)
	}
	return nil
}

// guard runs fn, which calls into bbolt, so that a damaged page cannot
// crash the process: faults on bbolt's memory map panic instead of killing
// the process (debug.SetPanicOnFault, restored after), and a panic becomes
// an error matching errCorrupt naming path, op and, if not nil, *key (fn
// may update it as it goes). bbolt's Update and View roll their
// transaction back as the panic unwinds them.
func guard(path, op string, key *[]byte, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			what := op
			if key != nil && *key != nil {
				what = fmt.Sprintf("%s at key %q", op, *key)
			}
			err = fmt.Errorf("bolt %s: %s: damaged page (%v): %w", path, what, r, errCorrupt)
		}
	}()
	return fn()
}

// view and update are bolt's View and Update under guard.
func (s *Store) view(op string, key *[]byte, fn func(*bolt.Tx) error) error {
	return guard(s.path, op, key, func() error { return s.db.View(fn) })
}

func (s *Store) update(op string, key *[]byte, fn func(*bolt.Tx) error) error {
	return guard(s.path, op, key, func() error { return s.db.Update(fn) })
}

// open opens the log, prepares the buckets and replays the log. Nothing is
// written to either file before the log's header and records have been
// found good (bbolt's lock is already held), except a new database's id;
// and nothing at all when the Store is read-only: the replayed records
// stay in the overlay.
func (s *Store) open(logPath string, salvage bool) error {
	// Values first: the log's replay is checkpointed into bucket.
	if err := s.migrate(); err != nil {
		return err
	}
	m, err := s.readMeta()
	if err != nil {
		return err
	}
	if !m.hasID && !s.readOnly {
		if err := s.newID(logPath, &m); err != nil {
			return err
		}
	}
	if err := s.openLog(logPath, m); err != nil || s.log == nil {
		return err // or read-only without a log: nothing to replay
	}
	replayed, err := s.replayLog(logPath, salvage)
	if err != nil {
		return err
	}
	if m.missing && replayed > 0 {
		// A bbolt file that was never checkpointed (new, or replaced) next
		// to a version 1 log with records: the log belongs to another
		// database file. Replaying it would bring that database's state
		// back into this one.
		return fmt.Errorf("log %s holds %d records, but the database next to it has never been checkpointed: the log belongs to another database file (remove it only if that database is gone): %w", logPath, replayed, errCorrupt)
	}
	if s.readOnly {
		return nil
	}
	if m.missing || !m.hasID {
		if err := s.initMeta(m.id); err != nil {
			return err
		}
	}
	// Apply what was replayed, and reset the log even if it was all
	// skipped, so that new records do not follow old ones.
	if err := s.checkpoint(); err != nil {
		return err
	}
	if s.log.Version() < wal.Version {
		return s.log.Reset() // an older log: write the current version from now on
	}
	return nil
}

// openMeta is what Open found in bbolt's meta bucket.
type openMeta struct {
	missing bool   // a bucket is missing: the file was never checkpointed
	id      wal.ID // the database's id, or the one it is about to get
	hasID   bool   // whether id is stored in bbolt
}

// readMeta reads the checkpointed sequence number (into s.ckptSeq), the
// database's id and whether its buckets exist.
func (s *Store) readMeta() (m openMeta, err error) {
	err = s.view("read meta", nil, func(tx *bolt.Tx) error {
		m.missing = tx.Bucket(bucket) == nil || tx.Bucket(metaBucket) == nil
		s.pages = filePages(tx)
		if err := s.readSeq(tx); err != nil {
			return err
		}
		var err error
		m.id, m.hasID, err = readID(tx)
		return err
	})
	return m, err
}

// newID makes an id for a database that has none. A new database (no log
// either) stores it in bbolt now, before a log names it; a database from
// before ids stores it once its log has replayed (see open).
func (s *Store) newID(logPath string, m *openMeta) error {
	if _, err := rand.Read(m.id[:]); err != nil {
		return err
	}
	_, err := os.Stat(logPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err != nil {
		// A new database: its id goes into bbolt before a log names it.
		if err := s.initMeta(m.id); err != nil {
			return err
		}
		m.hasID, m.missing = true, false
	}
	return nil
}

// openLog opens the log (creating it, naming m.id, if there is none) and
// refuses one that belongs to another database: one that names another
// id, or names one while bbolt holds none, or is a version 1 log whose
// header holds this database's id (a later header with a damaged version).
// A read-only Store opens the log read-only, and leaves s.log nil if there
// is none.
func (s *Store) openLog(logPath string, m openMeta) error {
	var err error
	if s.readOnly {
		s.log, err = wal.OpenReadOnly(logPath)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	} else {
		s.log, err = wal.Open(logPath, m.id)
	}
	if err != nil {
		if errors.Is(err, wal.ErrNotLog) {
			err = fmt.Errorf("%w: %w", err, errCorrupt)
		}
		return err
	}
	if fileID, ok := s.log.FileID(); ok && (!m.hasID || fileID != m.id) {
		theirs := "has no id (it is new, or was replaced)"
		if m.hasID {
			theirs = fmt.Sprintf("is database %x", m.id[:])
		}
		return fmt.Errorf("log %s belongs to another database (%x), but %s %s: %w (remove the log only if that database is gone)",
			logPath, fileID[:], s.path, theirs, errCorrupt)
	}
	if _, ok := s.log.FileID(); !ok && m.hasID {
		// A version 1 log next to a database with an id: left by a crash
		// between storing the id and rewriting the log's header (all its
		// records are checkpointed), or a later log whose version
		// field was damaged, which names the id right after.
		if err := notOurID(logPath, s.path, m.id); err != nil {
			return err
		}
	}
	return nil
}

// replayLog applies the log's records above the checkpoint to the overlay
// (with Recover's salvage if asked), records any damage in s.recovery, and
// returns how many records it applied.
func (s *Store) replayLog(logPath string, salvage bool) (replayed int, err error) {
	apply := func(_ uint64, ops []storage.Op) error {
		s.apply(ops)
		replayed++
		return nil
	}
	var dmg wal.Damage
	if salvage {
		dmg, err = s.log.Recover(s.ckptSeq, apply)
	} else {
		dmg, err = s.log.Replay(s.ckptSeq, apply)
	}
	if dmg != (wal.Damage{}) {
		s.recovery = &storage.Recovery{File: logPath, Offset: dmg.Offset, Records: dmg.Records, Bytes: dmg.Bytes,
			Tail: dmg.Tail, Truncated: dmg.Truncated}
	}
	if errors.Is(err, wal.ErrCorrupt) {
		err = fmt.Errorf("%w: %w", err, errCorrupt)
	}
	return replayed, err
}

// notOurID refuses a version 1 log whose bytes 16 to 32 are id: a version
// 2 header with a damaged version.
func notOurID(logPath, dbPath string, id wal.ID) error {
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [wal.HeaderSize]byte
	if n, _ := f.ReadAt(b[:], 0); n == len(b) && wal.ID(b[16:]) == id {
		return fmt.Errorf("log %s: %w: its header says version 1 but holds the id of %s (%x), as a later header does", logPath, errCorrupt, dbPath, id[:])
	}
	return nil
}

// initMeta creates the buckets and stores id if there is none.
func (s *Store) initMeta(id wal.ID) error {
	return s.update("init", nil, func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucket, metaBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if tx.Bucket(metaBucket).Get(idKey) != nil {
			return nil
		}
		return tx.Bucket(metaBucket).Put(idKey, id[:])
	})
}

// readID reads the database's id, if it has one.
func readID(tx *bolt.Tx) (id wal.ID, ok bool, err error) {
	meta := tx.Bucket(metaBucket)
	if meta == nil {
		return id, false, nil
	}
	v := meta.Get(idKey)
	if v == nil {
		return id, false, nil
	}
	if len(v) != len(id) {
		return id, false, fmt.Errorf("%s/%s is %d bytes, want %d: %w", metaBucket, idKey, len(v), len(id), errCorrupt)
	}
	return wal.ID(v), true, nil
}

// readSeq reads the checkpointed sequence number, if there is one.
func (s *Store) readSeq(tx *bolt.Tx) error {
	meta := tx.Bucket(metaBucket)
	if meta == nil {
		return nil
	}
	if v := meta.Get(seqKey); v != nil {
		if len(v) != 8 {
			return fmt.Errorf("%s/%s is %d bytes, want 8: %w", metaBucket, seqKey, len(v), errCorrupt)
		}
		s.ckptSeq = binary.BigEndian.Uint64(v)
	}
	return nil
}

// Get implements storage.Store.
func (s *Store) Get(key []byte) (value []byte, err error) {
	s.mu.RLock()
	v, ok := s.ov.get(string(key))
	if ok {
		value = bytes.Clone(v) // nil (a tombstone) stays nil
	}
	s.mu.RUnlock()
	if ok {
		return value, nil
	}
	// Reading bbolt without the lock is fine: a checkpoint that ran since
	// moved the overlay's values there, so this still returns a value the
	// key held while Get ran.
	err = s.view("get", &key, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil // never checkpointed: read-only (see OpenWith)
		}
		stored := b.Get(key)
		if stored == nil {
			return nil
		}
		v, err := DecodeValue(key, stored)
		if err != nil {
			return fmt.Errorf("bolt %s: key %q: %w", s.path, key, err)
		}
		value = bytes.Clone(v)
		return nil
	})
	return value, err
}

// Commit implements storage.Store: one log record, durable at the next
// Sync. Keys bbolt would refuse are refused here, before anything is logged,
// since a checkpoint could not apply them. Those errors, a closed store and a
// failed append wrap storage.ErrNotApplied: nothing of ops was applied.
func (s *Store) Commit(ops []storage.Op) error {
	if len(ops) == 0 {
		return nil
	}
	if s.readOnly {
		return fmt.Errorf("bolt %s: commit: %w: %w", s.path, storage.ErrReadOnly, storage.ErrNotApplied)
	}
	for _, op := range ops {
		var err error
		switch {
		case len(op.Key) == 0:
			err = berrors.ErrKeyRequired
		case len(op.Key) > bolt.MaxKeySize:
			err = berrors.ErrKeyTooLarge
		case int64(len(op.Value)) > bolt.MaxValueSize:
			err = berrors.ErrValueTooLarge
		}
		if err != nil {
			return fmt.Errorf("key %q: %w: %w", op.Key, err, storage.ErrNotApplied)
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: %w", errClosed, storage.ErrNotApplied)
	}
	if err := s.log.Append(ops); err != nil {
		// Not applied (see wal.Log.Append): the overlay does not have
		// the ops, and no replay will take the record.
		s.logBad = true
		return err
	}
	s.apply(ops)
	if s.overLimit(hardLimitFactor) {
		// The ops are committed whatever happens here; a checkpoint that
		// fails is retried, and its error returned, by Sync.
		_ = s.checkpoint()
	}
	return nil
}

// apply writes ops into the overlay. The caller holds wmu.
func (s *Store) apply(ops []storage.Op) {
	s.mu.Lock()
	for _, op := range ops {
		s.ov.set(op.Key, op.Value)
	}
	s.mu.Unlock()
}

// Scan implements storage.Store. Each page merges bbolt with the overlay
// (whose entries win, tombstones hiding keys), read afresh, so the scan sees
// every write committed before the page was read, including fn's own.
func (s *Store) Scan(prefix, start []byte, fn func(k, v []byte) error) error {
	if bytes.Compare(start, prefix) < 0 {
		start = prefix
	}
	return storage.ScanPages(start, fn, func(start []byte, page *storage.Page) error {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		walk := s.ov.from(string(start), s.frozenKeys())
		pfx := string(prefix)
		return s.view("scan", &start, func(tx *bolt.Tx) error {
			var k, v []byte
			var c *bolt.Cursor // nil, as k, in a read-only file never checkpointed
			if b := tx.Bucket(bucket); b != nil {
				c = b.Cursor()
				k, v = c.Seek(start)
			}
			for !page.Full() {
				inBolt := k != nil && bytes.HasPrefix(k, prefix)
				ovKey, more := walk.peek()
				inOverlay := more && strings.HasPrefix(ovKey, pfx)
				switch {
				case !inBolt && !inOverlay:
					return nil
				case inOverlay && (!inBolt || ovKey <= string(k)):
					if inBolt && ovKey == string(k) {
						k, v = c.Next() // shadowed by the overlay
					}
					if ov, _ := s.ov.get(ovKey); ov != nil {
						page.Add([]byte(ovKey), ov)
					}
					walk.next(ovKey)
				default:
					value, err := DecodeValue(k, v)
					if err != nil {
						return fmt.Errorf("bolt %s: key %q: %w", s.path, k, err)
					}
					page.Add(k, value)
					k, v = c.Next()
				}
			}
			return nil
		})
	})
}

// Close implements storage.Store: it syncs the log, checkpoints, and leaves
// the log holding just its header. A read-only Store only closes its files.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.readOnly {
		var err error
		if s.log != nil {
			err = s.log.Close()
		}
		return errors.Join(err, s.db.Close())
	}
	var err error
	if !s.logBad {
		// Durable in the log first, in case the checkpoint fails.
		err = s.log.Sync()
	}
	if cerr := s.checkpoint(); cerr != nil {
		err = errors.Join(err, cerr)
	} else {
		// Every change is in bbolt: the sync error, if any, lost nothing.
		err = s.log.Truncate()
	}
	return errors.Join(err, s.log.Close(), s.db.Close())
}

// Compact checkpoints, then rewrites the bbolt file into a new file at dst,
// dropping free pages (bbolt never shrinks its file on its own). dst is a
// complete database with an empty log.
func (s *Store) Compact(dst string) error {
	s.wmu.Lock()
	err := errClosed
	switch {
	case s.readOnly && !s.closed:
		// The copy would miss what the overlay holds of the log.
		err = fmt.Errorf("bolt %s: compact: %w", s.path, storage.ErrReadOnly)
	case !s.closed:
		err = s.checkpoint()
	}
	s.wmu.Unlock()
	if err != nil {
		return err
	}
	out, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: LockTimeout})
	if err != nil {
		return err
	}
	err = guard(s.path, "compact", nil, func() error { return bolt.Compact(out, s.db, 64<<20) })
	return errors.Join(err, out.Close())
}

// Size implements storage.Sizer: the bbolt file and its write-ahead log.
func (s *Store) Size() (int64, error) {
	var n int64
	for _, p := range []string{s.path, s.path + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		if err == nil {
			n += fi.Size()
		}
	}
	return n, nil
}
