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
//
// # Damaged files
//
// badger trusts its files more than a store that promises never to crash
// should: a truncated or damaged table panics while it is opened (in one
// of Open's own goroutines, where no recover of ours can reach it), and by
// default no block checksum is ever checked. So:
//
//   - Open first reads the MANIFEST and every table it names, in the
//     caller's goroutine, from a copy in memory (no memory map to fault
//     on), with every block's checksum verified (see verifyTables). A
//     damaged MANIFEST, a missing table or a damaged one fails Open with
//     an error matching errs.ErrCorrupt that names the file, before
//     badger is given the chance to panic on it.
//   - Open then reads every memtable and value log (.mem, .vlog), which
//     badger replays by stopping at the first entry that fails its
//     checksum and cutting the file there: an acknowledged commit after a
//     damaged one would be dropped without a word. A damaged entry with
//     entries of later commits after it fails Open with ErrCorrupt naming
//     the file and the offset (OpenRecover lets badger cut it, and reports
//     what was dropped); a torn last entry, what a crash leaves, is
//     dropped by badger and reported (Recovery.Tail). See scanLogs.
//   - badger then runs with ChecksumVerificationMode OnBlockRead (every
//     block read later, by Get, Scan and compactions, is verified) and
//     VerifyValueChecksum (so is every value read from the value log).
//   - Every call into badger (Open, Get, Scan, Commit) runs under
//     debug.SetPanicOnFault(true), and a panic is recovered into an error
//     matching errs.ErrCorrupt (see guard). That covers the value
//     log and memtable (.vlog, .mem) replay, which badger runs in Open's
//     goroutine.
//
// What this cannot catch: a panic in badger's background goroutines
// (memtable flushes and compactions, which read tables that Open
// verified, with block checksums on), and a table damaged after Open,
// while the process runs. A panic recovered in Open leaves badger's
// directory lock held until the process exits (badger offers no way to
// release it from a half-opened DB): a retry in the same process fails
// with ErrLocked.
//
// # Read-only
//
// OpenWith with ReadOnly opens badger read-only, which reads a database
// closed cleanly and writes nothing to it; a database left by a crash,
// which badger would change, is refused (see OpenWith).
//
// # Full disk
//
// badger writes its memtable log (.mem) and new tables through memory maps
// of sparse files: on a full disk the first store to a page with no block
// behind it kills the process with SIGBUS, a signal no recover catches.
// Commit therefore refuses a write, with an error wrapping
// syscall.ENOSPC, while the file system has less free space than badger
// may still touch without another check (see diskReserve): the unwritten
// part of its memtable logs plus room for a memtable flush and a
// compaction. Nothing is written by a refused Commit, and once space is
// freed the next Commit succeeds: there is no state to reset.
package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/ratestore/ratestore/internal/errs"
	"github.com/ratestore/ratestore/internal/storage"
)

// errCorrupt is what every error about a damaged file matches.
var errCorrupt = errs.ErrCorrupt

// Store is a badger database.
type Store struct {
	db   *badger.DB
	path string
	// memTableSize is the badger option, which bounds how much of a
	// memtable log a Commit may still write to (see diskReserve).
	memTableSize int64
	recovery     *storage.Recovery // see Recovery
	readOnly     bool              // opened read-only: see OpenWith
	closed       atomic.Bool
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
		WithCompression(options.None).
		WithVerifyValueChecksum(true).
		// Open verifies every table in full first (verifyTables); from
		// then on each block is verified as it is read.
		WithChecksumVerificationMode(options.OnBlockRead)
}

// Open opens or creates the badger directory at path. A memtable or value
// log damaged before entries of later commits is refused (see scanLogs).
func Open(path string, logger *slog.Logger) (*Store, error) {
	return OpenWith(path, storage.Options{Logger: logger})
}

// OpenWith is Open with options. Recover opens a database whose logs are
// damaged instead of refusing it: badger drops everything from the damage
// on, and Recovery reports what.
//
// ReadOnly opens an existing database with badger's ReadOnly option: its
// files read-only, its directory under a shared lock, which other
// read-only opens may hold at the same time and a writer's exclusive lock
// excludes (each way, at once, with storage.ErrLocked); no memtable,
// compaction, flush or value log garbage collection. badger reads only a
// database that was closed cleanly, and would change the files of another
// even when read-only (see memtableLogs and verifyTables), so another is
// refused, before badger opens it, with an error matching
// storage.ErrReadOnly; a path with no database, with one matching
// fs.ErrNotExist. Commit fails with storage.ErrReadOnly. Recover then only lets Open go
// on past a damaged value log: what badger would cut stays in the file,
// and a value read from the damage fails its checksum.
func OpenWith(path string, opts storage.Options) (*Store, error) {
	bopts := Options(path, opts.Logger).WithReadOnly(opts.ReadOnly)
	if opts.ReadOnly {
		release, err := lockShared(path)
		if err != nil {
			return nil, err
		}
		defer release() // badger holds its own once open
	}
	torn, err := verifyTables(path, bopts)
	if err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		if err := memtableLogs(path); err != nil {
			return nil, err
		}
	}
	recovery, err := scanLogs(path, opts.Recover, 2*bopts.MemTableSize) // badger's memtable log size
	if err != nil {
		return nil, err
	}
	if recovery == nil {
		recovery = torn
	}
	var db *badger.DB
	err = guard(path, "open", nil, func() (err error) {
		db, err = badger.Open(bopts)
		return err
	})
	if err != nil {
		// badger reports a held directory lock only in its message.
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("badger %s: %w", path, storage.ErrLocked)
		}
		return nil, classify(path, "open", err)
	}
	return &Store{db: db, path: path, memTableSize: bopts.MemTableSize, recovery: recovery, readOnly: opts.ReadOnly}, nil
}

// memtableLogs refuses, for a read-only open, a directory that holds a
// memtable log (*.mem): commits not yet in its tables, which badger
// replays by truncating the file, or deleting it if it holds nothing. Read
// only, badger refuses the one and still does the other. A clean Close
// leaves no memtable log; a crash, or a copy of a database in use, does.
func memtableLogs(path string) error {
	mems, err := filepath.Glob(filepath.Join(path, "*.mem"))
	if err != nil || len(mems) == 0 {
		return err
	}
	return notClean(path, fmt.Sprintf("its memtable log %s holds commits not yet in its tables, which badger replays by cutting the file", filepath.Base(mems[0])))
}

// notClean is the error of a read-only open of a database that was not
// closed cleanly: why says what badger would change.
func notClean(path, why string) error {
	return fmt.Errorf("badger %s: not closed cleanly: %s: %w (open it writable once, or a copy of it)", path, why, storage.ErrReadOnly)
}

// Recovery reports what Open dropped from the logs, or nil if nothing.
func (s *Store) Recovery() *storage.Recovery { return s.recovery }

// classify wraps an error of badger's. badger's errors about damaged files
// are plain strings; an error that is not a system call's (a full disk, a
// permission) or a closed database is taken for damage, which errs on the
// side of making the caller look at the files.
func classify(path, op string, err error) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, errCorrupt):
		return err // guard named the file
	case errors.Is(err, y.ErrChecksumMismatch):
		return fmt.Errorf("badger %s: %s: %w: %w", path, op, err, errCorrupt)
	case errors.As(err, &errno), errors.Is(err, badger.ErrDBClosed), errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("badger %s: %s: %w", path, op, err)
	case op == "open", strings.Contains(strings.ToLower(err.Error()), "checksum"):
		return fmt.Errorf("badger %s: %s: %w: %w", path, op, err, errCorrupt)
	}
	return fmt.Errorf("badger %s: %s: %w", path, op, err)
}

// guard runs fn, which calls into badger, so that a damaged file cannot
// crash the process: faults on badger's memory maps panic instead
// (debug.SetPanicOnFault, restored after), and a panic becomes an error
// matching errCorrupt naming path, op and, if not nil, key.
func guard(path, op string, key []byte, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			what := op
			if key != nil {
				what = fmt.Sprintf("%s at key %q", op, key)
			}
			err = fmt.Errorf("badger %s: %s: damaged file (%v): %w", path, what, firstLine(r), errCorrupt)
		}
	}()
	return fn()
}

// firstLine is the first line of a recovered panic's value: badger's
// table panics carry a page of debugging dump.
func firstLine(r any) string {
	s := strings.TrimSpace(fmt.Sprint(r))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// verifyTables reads the MANIFEST of the badger directory at path, if it
// has one, and every table it names, verifying each block's checksum, so
// that badger.Open never meets a damaged table: it would panic on one in a
// goroutine of its own (a truncated table's index is read past its end),
// or, for a table whose checksum does not match, leave the table out and
// carry on without its keys. Each table is read into memory, not mapped,
// so a truncated file cannot fault. An error names the file and matches
// errCorrupt.
//
// A MANIFEST whose last change set is cut short is what a crash during its
// append leaves, and what a MANIFEST cut short by something else leaves
// too: badger drops that change set. And badger deletes, at Debug level,
// every table file the MANIFEST does not name: a table a crash left
// between writing it and recording it (its data is still in a memtable
// log, or in the tables it was compacted from), or one whose record a
// MANIFEST cut short lost (its data is gone). verifyTables reports either
// (Tail), naming the MANIFEST or the first such table.
//
// Read-only (opts.ReadOnly), a directory without a MANIFEST is refused
// with an error matching fs.ErrNotExist (badger creates or refuses it),
// and one with a table the MANIFEST does not name with an error matching
// storage.ErrReadOnly: badger deletes it, read-only too.
func verifyTables(path string, opts badger.Options) (*storage.Recovery, error) {
	mf, torn, err := readManifest(path, opts)
	if err == nil && mf == nil && opts.ReadOnly {
		err = fmt.Errorf("badger %s: no database to read (no %s): %w", path, badger.ManifestFilename, fs.ErrNotExist)
	}
	if err != nil || mf == nil {
		return nil, err
	}
	orphan, err := orphanTables(path, *mf)
	switch {
	case err != nil:
		return nil, err
	case orphan != nil && opts.ReadOnly:
		return nil, notClean(path, fmt.Sprintf("table %s is not in its %s, and badger deletes it", filepath.Base(orphan.File), badger.ManifestFilename))
	case torn == nil:
		torn = orphan
	}
	for id, tm := range mf.Tables {
		if err := verifyTable(path, id, tm, opts); err != nil {
			return nil, err
		}
	}
	return torn, nil
}

// readManifest reads the MANIFEST of the badger directory at path, and
// returns nil if there is none. torn reports a last change set cut short,
// which badger drops. A MANIFEST badger cannot read is refused with an
// error naming it and matching errCorrupt.
func readManifest(path string, opts badger.Options) (mf *badger.Manifest, torn *storage.Recovery, err error) {
	mfPath := filepath.Join(path, badger.ManifestFilename)
	f, err := os.Open(mfPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil // a new database, or not one at all: badger.Open decides
	}
	if err != nil {
		return nil, nil, fmt.Errorf("badger %s: %w", path, err)
	}
	defer f.Close()
	var (
		m   badger.Manifest
		end int64 // where the last whole change set ends
	)
	err = guard(mfPath, "read", nil, func() (err error) {
		m, end, err = badger.ReplayManifestFile(f, opts.ExternalMagicVersion, opts)
		return err
	})
	if err != nil {
		if errors.Is(err, errCorrupt) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("badger %s: %w: %w", mfPath, err, errCorrupt)
	}
	if fi, err := f.Stat(); err == nil && end < fi.Size() {
		torn = &storage.Recovery{File: mfPath, Offset: end, Bytes: fi.Size() - end, Tail: true}
	}
	return &m, torn, nil
}

// verifyTable reads the table id of the badger directory at path into
// memory and verifies each block's checksum. A table that is missing,
// or that does not open or verify, is refused with an error naming it and
// matching errCorrupt.
func verifyTable(path string, id uint64, tm badger.TableManifest, opts badger.Options) error {
	name := table.NewFilename(id, path)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("badger %s: named by %s but missing: %w", name, badger.ManifestFilename, errCorrupt)
	}
	if err != nil {
		return fmt.Errorf("badger %s: %w", name, err)
	}
	topt := table.Options{
		ChkMode:     options.OnTableRead,
		Compression: tm.Compression,
		BlockSize:   opts.BlockSize,
	}
	err = guard(name, "verify", nil, func() error {
		t, err := table.OpenInMemoryTable(data, id, &topt)
		if err != nil {
			return err
		}
		return t.VerifyChecksum()
	})
	if err != nil {
		if errors.Is(err, errCorrupt) {
			return err
		}
		return fmt.Errorf("badger %s: %w: %w", name, err, errCorrupt)
	}
	return nil
}

// orphanTables reports the table files of the directory at path that mf
// does not name, which badger.Open will delete: the first one, and the
// bytes of them all.
func orphanTables(path string, mf badger.Manifest) (*storage.Recovery, error) {
	names, err := filepath.Glob(filepath.Join(path, "*.sst"))
	if err != nil {
		return nil, err
	}
	var r *storage.Recovery
	for _, name := range names {
		id, ok := table.ParseFileID(name)
		if _, named := mf.Tables[id]; !ok || named {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			return nil, fmt.Errorf("badger %s: %w", name, err)
		}
		if r == nil {
			r = &storage.Recovery{File: name, Tail: true}
		}
		r.Bytes += fi.Size()
	}
	return r, nil
}

// Get implements storage.Store.
func (s *Store) Get(key []byte) (value []byte, err error) {
	err = guard(s.path, "get", key, func() error { return s.get(key, &value) })
	if err != nil {
		return nil, classify(s.path, fmt.Sprintf("get %q", key), err)
	}
	return value, nil
}

func (s *Store) get(key []byte, value *[]byte) error {
	return s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		*value, err = item.ValueCopy(nil)
		return err
	})
}

// Commit implements storage.Store: one transaction, not synced. It is
// refused while the disk is too full to take it safely (see the package
// doc). Its errors from before badger's own commit (a refusal, an op
// badger refuses, a closed store) wrap storage.ErrNotApplied, and so does
// badger's refusal to take writes (ErrBlockedWrites, once it is closing):
// nothing of ops was written.
func (s *Store) Commit(ops []storage.Op) error {
	if len(ops) == 0 {
		return nil
	}
	if s.closed.Load() {
		return fmt.Errorf("badger %s: commit: %w: %w", s.path, badger.ErrDBClosed, storage.ErrNotApplied)
	}
	if s.readOnly {
		return fmt.Errorf("badger %s: commit: %w: %w", s.path, storage.ErrReadOnly, storage.ErrNotApplied)
	}
	if err := s.checkSpace(ops); err != nil {
		return fmt.Errorf("%w: %w", err, storage.ErrNotApplied)
	}
	err := guard(s.path, "commit", nil, func() error { return s.commit(ops) })
	switch {
	case err == nil, errors.Is(err, storage.ErrTooBig):
		return err
	case errors.Is(err, storage.ErrNotApplied), errors.Is(err, badger.ErrBlockedWrites):
		return fmt.Errorf("badger %s: commit: %w: %w", s.path, err, storage.ErrNotApplied)
	}
	return classify(s.path, "commit", err)
}

func (s *Store) commit(ops []storage.Op) error {
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
			return fmt.Errorf("key %q: %w: %w", op.Key, err, storage.ErrNotApplied)
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
		err := guard(s.path, "scan", start, func() error { return s.scanPage(prefix, start, page) })
		if err != nil {
			return classify(s.path, fmt.Sprintf("scan from %q", start), err)
		}
		return nil
	})
}

// scanPage reads one page of Scan from start.
func (s *Store) scanPage(prefix, start []byte, page *storage.Page) error {
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
}

// Sync implements storage.Store: one fsync covers every earlier Commit. A
// read-only Store has none.
func (s *Store) Sync() error {
	if s.readOnly {
		return nil
	}
	return s.db.Sync()
}

// Close implements storage.Store. badger syncs its log on Close.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.db.Close()
}

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

// Verify reads every table of the database and checks the checksum of each
// of its blocks (badger's DB.VerifyChecksum), for an offline check: Open
// verified the tables it found, but a check wants to say so of the
// database as it is now. Its errors match errs.ErrCorrupt.
func (s *Store) Verify() error {
	if err := guard(s.path, "verify", nil, s.db.VerifyChecksum); err != nil {
		if errors.Is(err, errCorrupt) {
			return err
		}
		return fmt.Errorf("badger %s: verify: %w: %w", s.path, err, errCorrupt)
	}
	return nil
}

// Size implements storage.Sizer: the files of the directory (tables,
// value logs, manifest). badger's own count (DB.Size) is refreshed only
// once a minute.
func (s *Store) Size() (int64, error) {
	entries, err := os.ReadDir(s.path)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n, nil
}
