package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
)

// withDB opens the database of the global flags, calls fn with it and
// closes it, which writes every change to disk. Unless create is set, a
// database that does not exist is an error rather than created.
func (c *cli) withDB(create bool, fn func(db *ratestore.DB) error) error {
	backend, _ := backendNamed(c.backend) // checked by main
	db, err := c.open(c.db, backend, create)
	if err != nil {
		return err
	}
	err = fn(db)
	if cerr := db.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// open opens the database at path, with the command line's clock.
func (c *cli) open(path string, backend ratestore.Backend, create bool) (*ratestore.DB, error) {
	return c.openAs(path, backend, create, false)
}

// openAs is open, read-only with readOnly: the database's files are then
// not written at all (ratestore.Options.ReadOnly).
func (c *cli) openAs(path string, backend ratestore.Backend, create, readOnly bool) (*ratestore.DB, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return nil, fmt.Errorf("no database at %s: import a key file or create a key first, or name one with --db", path)
	case err == nil && fi.IsDir() && backend == ratestore.Bolt:
		return nil, fmt.Errorf("%s is a directory, not a bbolt file: for a badger database, add --backend badger", path)
	case err == nil && !fi.IsDir() && backend == badger.Backend:
		return nil, fmt.Errorf("%s is a file, not a badger directory: for a bbolt database, leave out --backend badger", path)
	}
	// Async: a command's writes reach the disk in one go when it closes the
	// database, which it does before reporting success (exit 0), rather than
	// one fsync per change, which a command that writes many keys would wait
	// on one after another. A command that dies before Close has reported
	// nothing.
	db, err := ratestore.Open(path, ratestore.Options{Backend: backend, Durability: ratestore.Async, Now: c.now, Recover: c.recover, ReadOnly: readOnly})
	if err != nil {
		return nil, c.openError(path, err)
	}
	c.reportRecovery(db)
	return db, nil
}

// openError explains an error of ratestore.Open at path.
func (c *cli) openError(path string, err error) error {
	switch {
	case errors.Is(err, ratestore.ErrLocked):
		return fmt.Errorf("%s: %w: only one process may open a database at a time; stop the other one, then retry", path, ratestore.ErrLocked)
	case errors.Is(err, ratestore.ErrCorrupt) && !c.recover && inLog(err.Error(), path):
		return fmt.Errorf("%w (--recover opens it, keeping every valid record of the log and printing what it drops; 'ratestore check' lists every problem)", err)
	}
	return err
}

// inLog reports whether msg, an error of opening the database at path,
// names one of its write-ahead logs: bolt's, or badger's memtable and value
// logs, which --recover can open.
func inLog(msg, path string) bool {
	return strings.Contains(msg, path+"-wal") || strings.Contains(msg, path+"/") && (strings.Contains(msg, ".mem:") || strings.Contains(msg, ".vlog:"))
}

// reportRecovery prints on stderr what Open dropped from db's write-ahead
// log, if anything.
func (c *cli) reportRecovery(db *ratestore.DB) {
	r := db.Recovery()
	if r == nil {
		return
	}
	var what []string
	if r.Records > 0 {
		what = append(what, fmt.Sprintf("dropped %d damaged record%s", r.Records, plural(int(r.Records))))
	}
	if r.Truncated {
		what = append(what, "the file was cut short: the records after its end are gone, how many is not known")
	}
	if r.Tail {
		what = append(what, "dropped an unreadable last record (a write a crash cut short, or damage)")
	}
	fmt.Fprintf(c.stderr, "ratestore: warning: %s: %s (%d bytes from offset %d)\n", r.File, strings.Join(what, "; "), r.Bytes, r.Offset)
}

// backendNamed returns the backend a --backend flag names.
func backendNamed(name string) (ratestore.Backend, bool) {
	for _, b := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		if name == b.String() {
			return b, true
		}
	}
	return nil, false
}

// exists reports whether path exists.
func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
