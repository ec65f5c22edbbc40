package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/storage/dbcopy"
	"github.com/ratestore/ratestore/internal/text"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/migrate"
	"github.com/ratestore/ratestore/strategies"
)

func importCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	dryRun := fs.Bool("dry-run", false, "only check the file and report; write nothing (not even a new database)")
	redisURL := fs.String("redis", "", "import into the key store in the Redis at `URL` (redis://host:port/db), which gateways started with --redis share, rather than the database")
	return func(args []string) error {
		file := args[0]
		have, err := exists(c.db)
		if err != nil {
			return err
		}
		var rep migrate.Report
		var created []string // what a failed import removes
		if !have {
			created = missing(dbFiles(c.db)...)
		}
		if *dryRun || !have {
			// Checked first when there is no database yet, so that a
			// refused file does not leave an empty one behind.
			rep, err = migrate.CheckLegacyFile(file)
		}
		refused := rep.Refused() || errors.Is(err, migrate.ErrRefused)
		if err == nil && !refused && !*dryRun {
			rep, err = c.importFile(file, *redisURL)
			refused = rep.Refused() || errors.Is(err, migrate.ErrRefused)
			if err != nil {
				removeAll(created)
			}
		}
		if err != nil && !refused {
			return err
		}
		return c.importDone(file, *dryRun, refused, rep)
	}
}

// importFile imports file into the key store of withKeyStore: in the
// Redis at redisURL if it is not "", else in the database, created if
// there is none.
func (c *cli) importFile(file, redisURL string) (migrate.Report, error) {
	f, err := os.Open(file)
	if err != nil {
		return migrate.Report{}, fmt.Errorf("migrate: open legacy file: %w", err)
	}
	defer f.Close()
	var rep migrate.Report
	err = c.withKeyStore(redisURL, true, func(ks *keystore.Store) error {
		rep, err = migrate.ImportLegacyInto(c.ctx, ks, f)
		return err
	})
	return rep, err
}

// importDone prints what an import did, and fails when the file was
// refused.
func (c *cli) importDone(file string, dryRun, refused bool, rep migrate.Report) error {
	out := importOut{file, dryRun, refused, rep}
	if err := c.emit(out, func(w io.Writer) {
		if dryRun {
			fmt.Fprintln(w, "dry run: the file was checked and nothing was written; the check found:")
		}
		fmt.Fprint(w, rep.Summary())
	}); err != nil {
		return err
	}
	if refused {
		return fmt.Errorf("%s refused, nothing imported: %d problem%s", file, len(rep.Refusals), plural(len(rep.Refusals)))
	}
	return nil
}

func migrateCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	dryRun := fs.Bool("dry-run", false, "only print how many keys have legacy usage pending; write nothing")
	redisURL := fs.String("redis", "", "migrate the keys of the key store in the Redis at `URL` (redis://host:port/db), which gateways started with --redis share, rather than the database's")
	return func([]string) error {
		return c.withKeyStore(*redisURL, false, func(ks *keystore.Store) error { return c.migrate(ks, *dryRun) })
	}
}

// migrate migrates the legacy usage pending in ks, or with dryRun only
// counts it, and prints what it did.
func (c *cli) migrate(ks *keystore.Store, dryRun bool) error {
	pending, err := ks.PendingLegacy(c.ctx)
	if err != nil {
		return err
	}
	out := migrateOut{DryRun: dryRun, Pending: pending}
	if !dryRun && pending > 0 {
		bar := c.progress("migrating legacy usage")
		err := migrate.MigrateAllIn(c.ctx, ks, bar.of)
		bar.finish()
		if err != nil {
			return err
		}
		left, err := ks.PendingLegacy(c.ctx)
		if err != nil {
			return err
		}
		out.Migrated = pending - left
	}
	return c.emit(out, func(w io.Writer) {
		if dryRun {
			fmt.Fprintf(w, "%d key%s with legacy usage pending (dry run: nothing migrated)\n", pending, plural(pending))
			return
		}
		fmt.Fprintf(w, "migrated the legacy usage of %d key%s\n", out.Migrated, plural(out.Migrated))
	})
}

func copyCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	to := fs.String("to", "", "the `path` of the new database (required)")
	toBackend := fs.String("to-backend", ratestore.Bolt.String(), "its `backend`: bolt or badger")
	return func([]string) error {
		const cmd = "copy"
		if *to == "" {
			return usagef(cmd, "copy: --to is required")
		}
		backend, ok := backendNamed(*toBackend)
		if !ok {
			return usagef(cmd, "copy: --to-backend %q: want %s or %s", *toBackend, ratestore.Bolt, badger.Backend)
		}
		if err := refuseNonEmpty(dbFiles(*to)...); err != nil {
			return err
		}
		created := missing(dbFiles(*to)...) // what a failed copy removes
		return c.withDB(false, func(src *ratestore.DB) error {
			rep, err := c.copyTo(src, *to, backend)
			if err != nil {
				removeAll(created)
				return err
			}
			out := copyOut{c.db, c.backend, *to, *toBackend, rep.Records, rep.Bytes}
			return c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "copied %d record%s (%d bytes) from %s (%s) to %s (%s)\n",
					rep.Records, plural(rep.Records), rep.Bytes, c.db, c.backend, *to, *toBackend)
			})
		})
	}
}

// dbFiles are the paths a database at path consists of: a bbolt database
// is its file and the file's log (see package boltstore), a badger one its
// directory.
func dbFiles(path string) []string { return []string{path, path + "-wal"} }

// missing returns those of paths that do not exist.
func missing(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			out = append(out, p)
		}
	}
	return out
}

// removeAll removes paths, which a failed command created.
func removeAll(paths []string) {
	for _, p := range paths {
		os.RemoveAll(p)
	}
}

// refuseNonEmpty fails if one of paths exists and is not empty.
func refuseNonEmpty(paths ...string) error {
	for _, p := range paths {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		empty := fi.Size() == 0
		if fi.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			empty = len(entries) == 0
		}
		if !empty {
			return fmt.Errorf("copy: %s exists and is not empty: copy only to a new path", p)
		}
	}
	return nil
}

// copyTo copies src into a new database at path.
func (c *cli) copyTo(src *ratestore.DB, path string, backend ratestore.Backend) (dbcopy.Report, error) {
	dst, err := c.open(path, backend, true)
	if err != nil {
		return dbcopy.Report{}, err
	}
	bar := c.progress("copying")
	rep, err := dbcopy.Copy(c.ctx, dst, src, bar.count)
	bar.finish()
	return rep, errors.Join(err, dst.Close())
}

// errStop ends an Export early.
var errStop = errors.New("stop")

func inspectCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		const cmd = "inspect"
		name, key := args[0], args[1]
		if !text.Name(name, ratestore.MaxNameLen) {
			return usagef(cmd, "inspect: limiter name %q: want 1 to %d of [A-Za-z0-9_.:@+-]", name, ratestore.MaxNameLen)
		}
		if key == "" || len(key) > ratestore.MaxKeyLen {
			return usagef(cmd, "inspect: key of %d bytes: want 1 to %d", len(key), ratestore.MaxKeyLen)
		}
		// The storage key of a limiter state (see package ratestore).
		want := []byte("s/" + name + "\x00" + key)
		var raw []byte
		err := c.withDB(false, func(db *ratestore.DB) error {
			err := db.Export(c.ctx, func(r ratestore.Entry) error {
				switch bytes.Compare(r.Key, want) {
				case 0:
					raw = bytes.Clone(r.Value)
					return errStop
				case 1:
					return errStop // in key order: it is not there
				}
				return nil
			})
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		return c.emitState(name, key, raw)
	}
}

// emitState prints a stored state, nil if there is none.
func (c *cli) emitState(name, key string, raw []byte) error {
	out := stateOut{Limiter: name, Key: key, Found: raw != nil, Raw: string(raw), RawHex: hex.EncodeToString(raw)}
	var derr error
	if raw != nil {
		d, err := strategies.Describe(raw)
		if err != nil {
			derr = fmt.Errorf("limiter %q key %q: the stored state cannot be decoded: %w", name, key, err)
			out.Error = err.Error()
		} else {
			out.State = &d
		}
	}
	err := c.emit(out, func(w io.Writer) {
		fmt.Fprintf(w, "limiter: %s\nkey:     %s\n", name, strconv.Quote(key))
		if raw == nil {
			fmt.Fprintln(w, "no stored state: the key is fresh, or back at its initial state")
			return
		}
		fmt.Fprintf(w, "raw:     %s\n", strconv.Quote(out.Raw))
		if out.State != nil {
			writeState(w, "", *out.State)
		}
	})
	return errors.Join(err, derr)
}

// writeState writes a decoded state as indented "field: value" lines.
func writeState(w io.Writer, pad string, d strategies.Description) {
	legacy := ""
	if d.Legacy {
		legacy = ", legacy: rewritten by the next write"
	}
	fmt.Fprintf(w, "%sstate:   %s (header %s%s)\n", pad, d.Kind, d.Header, legacy)
	names := make([]string, 0, len(d.Fields))
	for name := range d.Fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch v := d.Fields[name].(type) {
		case strategies.Description:
			fmt.Fprintf(w, "%s  %s:\n", pad, name)
			writeState(w, pad+"    ", v)
		case []map[string]any:
			fmt.Fprintf(w, "%s  %s: %d\n", pad, name, len(v))
			for _, m := range v {
				fmt.Fprintf(w, "%s    %s\n", pad, fieldList(m))
			}
		default:
			fmt.Fprintf(w, "%s  %s: %s\n", pad, name, value(v))
		}
	}
}

// fieldList formats the fields of m as "name=value ..." in name order.
func fieldList(m map[string]any) string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + "=" + value(m[name])
	}
	return strings.Join(parts, " ")
}

// value formats one decoded field.
func value(v any) string {
	switch v := v.(type) {
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return strconv.Quote(v)
	}
	return fmt.Sprint(v)
}

func versionCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func([]string) error {
		version := "(unknown)"
		if bi, ok := debug.ReadBuildInfo(); ok {
			version = bi.Main.Version
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					version += " " + s.Value
				}
			}
		}
		out := versionOut{version, runtime.Version()}
		return c.emit(out, func(w io.Writer) { fmt.Fprintf(w, "ratestore %s %s\n", version, runtime.Version()) })
	}
}

// progress draws progress on the standard error when it is a terminal,
// at most every progressEvery.
type progress struct {
	w     io.Writer
	label string
	on    bool
	drawn time.Time // zero: nothing drawn yet
}

const progressEvery = 100 * time.Millisecond

func (c *cli) progress(label string) *progress {
	return &progress{w: c.stderr, label: label, on: c.terminal}
}

// due reports whether to draw now.
func (p *progress) due(last bool) bool {
	if !p.on || !last && !p.drawn.IsZero() && time.Since(p.drawn) < progressEvery {
		return false
	}
	p.drawn = time.Now()
	return true
}

// of draws done out of total as a bar.
func (p *progress) of(done, total int) {
	if total <= 0 || !p.due(done >= total) {
		return
	}
	const width = 30
	filled := min(width, done*width/total)
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.label, strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total)
}

// count draws a count of records.
func (p *progress) count(n int) {
	if p.due(false) {
		fmt.Fprintf(p.w, "\r%s: %d records", p.label, n)
	}
}

// finish ends the line of what was drawn.
func (p *progress) finish() {
	if !p.drawn.IsZero() {
		fmt.Fprintln(p.w)
	}
}
