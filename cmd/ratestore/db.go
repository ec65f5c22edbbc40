package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/ratestore/ratestore"
)

// withDB opens the database of the global flags, calls fn with it and
// closes it, which writes every change to disk. Unless create is set, a
// database that does not exist is an error rather than created.
func (c *cli) withDB(create bool, fn func(db *ratestore.DB) error) error {
	db, err := c.open(c.db, ratestore.Backend(c.backend), create)
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
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return nil, fmt.Errorf("no database at %s: import a key file or create a key first, or name one with --db", path)
	case err == nil && fi.IsDir() && backend == ratestore.Bolt:
		return nil, fmt.Errorf("%s is a directory, not a bbolt file: for a badger database, add --backend badger", path)
	case err == nil && !fi.IsDir() && backend == ratestore.Badger:
		return nil, fmt.Errorf("%s is a file, not a badger directory: for a bbolt database, leave out --backend badger", path)
	}
	// Async: a command's writes reach the disk in one go when it closes the
	// database, which it does before reporting success (exit 0), rather than
	// one fsync per change (a migrate of 10k keys took seconds in Sync mode).
	// A command that dies before Close has reported nothing.
	db, err := ratestore.Open(path, ratestore.Options{Backend: backend, Durability: ratestore.Async, Now: c.now})
	if errors.Is(err, ratestore.ErrLocked) {
		return nil, fmt.Errorf("%s: %w: only one process may open a database at a time; stop the other one, then retry", path, ratestore.ErrLocked)
	}
	return db, err
}

// exists reports whether path exists.
func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
