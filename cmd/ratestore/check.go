package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/storage/check"
)

// checkHelp is the help of the check command.
const checkHelp = `Reads the whole database and reports every problem it finds; it changes
nothing a database open in Sync mode would not (opening a bbolt database
replays its write-ahead log into the file, as any open does).

bolt:   every page of the bbolt file (bbolt's own consistency check, after a
        walk of every key that turns a damaged page into a report rather than
        a crash), the write-ahead log (it must replay: a damaged record fails),
        and every stored value decoded.
badger: the MANIFEST and every table, each block's checksum verified, the
        logs replayed, and every stored value decoded.

Values are decoded by what their key says they are: limiter states by the
strategy their header names (as inspect does), the key store's records,
legacy usage and secret hashes by the key store (a hash must name a key
that has a record). Other keys (records of your own, written with
DB.Update) are counted, not decoded.

Exits 0 when nothing is wrong, 1 naming each problem (file, key, what).
Run it only while nothing else uses the database (it is locked anyway).`

func checkCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func([]string) error {
		fi, err := os.Stat(c.db)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("check: no database at %s", c.db)
		case err != nil:
			return fmt.Errorf("check: %w", err)
		case fi.IsDir() && c.backend == ratestore.Bolt.String():
			return fmt.Errorf("check: %s is a directory, not a bbolt file: for a badger database, add --backend badger", c.db)
		case !fi.IsDir() && c.backend == badger.Backend.String():
			return fmt.Errorf("check: %s is a file, not a badger directory", c.db)
		}
		backend, _ := backendNamed(c.backend) // checked by main
		out, err := check.Run(c.ctx, c.db, backend)
		if err != nil {
			return err // the check itself could not run (locked, unreadable)
		}
		if err := c.emit(out, func(w io.Writer) { writeCheck(w, out) }); err != nil {
			return err
		}
		if !out.OK {
			return fmt.Errorf("check: %s: %d problem%s found", c.db, len(out.Problems), plural(len(out.Problems)))
		}
		return nil
	}
}

// writeCheck prints the result of check as text.
func writeCheck(w io.Writer, out check.Result) {
	for _, p := range out.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	status := "ok"
	if !out.OK {
		status = fmt.Sprintf("%d problem%s", len(out.Problems), plural(len(out.Problems)))
	}
	fmt.Fprintf(w, "%s: %s (%s): %d key%s (%d limiter state%s, %d key-store entr%s, %d other), %d bytes\n",
		status, out.DB, out.Backend, out.Keys, plural(out.Keys), out.States, plural(out.States),
		out.Records, map[bool]string{true: "y", false: "ies"}[out.Records == 1], out.Other, out.Bytes)
	if len(out.Checked) > 0 {
		fmt.Fprintf(w, "checked: %s\n", strings.Join(out.Checked, "; "))
	}
}
