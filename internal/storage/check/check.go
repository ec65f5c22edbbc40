// Package check reads a whole database, bolt or badger, while no process
// has it open, and reports every problem it finds rather than stopping at
// the first: the backend's own files (bbolt's pages and the write-ahead
// log; badger's MANIFEST, tables and logs) and every stored value, decoded
// by what its key says it is. It reads beneath the engine, through the
// storage backends, so that damage the engine would refuse at Open or at
// a key's first read is found, and named, before a program meets it.
package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// Problem is one thing the check found wrong.
type Problem struct {
	File string `json:"file,omitempty"` // the file, when one is known
	Key  string `json:"key,omitempty"`  // the stored key, quoted as Go does
	What string `json:"what"`
}

func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		fmt.Fprintf(&b, "file %s: ", p.File)
	}
	if p.Key != "" {
		fmt.Fprintf(&b, "key %s: ", p.Key)
	}
	b.WriteString(p.What)
	return b.String()
}

// Result is what the check found, in the shape ratestore check --json
// prints.
type Result struct {
	DB       string    `json:"db"`
	Backend  string    `json:"backend"`
	OK       bool      `json:"ok"`
	Keys     int       `json:"keys"`     // stored entries read
	States   int       `json:"states"`   // limiter states decoded
	Records  int       `json:"records"`  // key-store entries decoded
	Other    int       `json:"other"`    // entries of other kinds, not decoded
	Bytes    int64     `json:"bytes"`    // of keys and values
	Checked  []string  `json:"checked"`  // what was verified
	Problems []Problem `json:"problems"` // empty when OK
}

// checker accumulates what the check finds.
type checker struct {
	ctx     context.Context
	out     Result
	ids     map[string]bool   // key ids with a record
	hashes  map[string]string // key id named by a secret hash -> the hash's key
	decoded bool              // values were decoded (the store opened)
}

// Run checks the database at path, which backend (ratestore.Bolt or
// badger.Backend) stores, and returns what it found: Result.OK when
// nothing is wrong, else Result.Problems names each problem (file, key,
// what). Its error says that the check itself could not run (the database
// is locked by another process, or a file cannot be read); a damaged file
// is a problem, not an error. It changes nothing a database open in Sync
// mode would not: opening a bbolt database replays its write-ahead log
// into the file, as any open does.
//
// A program that calls Run must call PagesChild at the start of main when
// the environment variable PagesEnv is set (see PagesEnv).
func Run(ctx context.Context, path string, backend ratestore.Backend) (Result, error) {
	ck := &checker{
		ctx: ctx,
		out: Result{DB: path, Backend: backend.String(), Checked: []string{}, Problems: []Problem{}},
		ids: map[string]bool{}, hashes: map[string]string{},
	}
	var err error
	if backend.String() == badger.Backend.String() {
		err = ck.badger(path)
	} else {
		err = ck.bolt(path)
	}
	if err != nil {
		return Result{}, err
	}
	ck.finish()
	return ck.out, nil
}

func (ck *checker) problem(file, key, format string, args ...any) {
	p := Problem{File: file, What: fmt.Sprintf(format, args...)}
	if key != "" {
		p.Key = strconv.Quote(key)
	}
	ck.out.Problems = append(ck.out.Problems, p)
}

// finish checks what needs every entry seen: each secret hash names a key
// with a record.
func (ck *checker) finish() {
	if ck.decoded {
		ids := make([]string, 0, len(ck.hashes))
		for id := range ck.hashes {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			if !ck.ids[id] {
				ck.problem("", ck.hashes[id], "secret hash names key id %q, which has no record: %v", id, strategies.ErrCorrupt)
			}
		}
	}
	ck.out.OK = len(ck.out.Problems) == 0
}

// entry decodes one stored entry. It never stops the scan: every problem is
// reported.
func (ck *checker) entry(file string, k, v []byte) error {
	ck.out.Keys++
	ck.out.Bytes += int64(len(k) + len(v))
	err := recovered(func() error {
		if name, key, ok := bytes.Cut(bytes.TrimPrefix(k, []byte("s/")), []byte{0}); bytes.HasPrefix(k, []byte("s/")) {
			ck.out.States++
			if !ok || len(name) == 0 || len(key) == 0 {
				return fmt.Errorf("a limiter state's key has no limiter name and key: %w", strategies.ErrCorrupt)
			}
			if _, err := strategies.Describe(v); err != nil {
				return fmt.Errorf("limiter %q key %q: the stored state cannot be decoded: %w", name, key, err)
			}
			return nil
		}
		ours, id, err := keystore.CheckRecord(k, v)
		switch {
		case !ours:
			ck.out.Other++
		case id != "":
			ck.hashes[id] = string(k)
		case bytes.HasPrefix(k, keystore.RecordKey("")):
			ck.ids[string(bytes.TrimPrefix(k, keystore.RecordKey("")))] = true
		}
		if ours {
			ck.out.Records++
		}
		return err
	})
	if err != nil {
		ck.problem(file, string(k), "%v", err)
	}
	return nil
}

// recovered runs fn and turns a panic into an error: a decoder that trusts
// bytes it should not must not end the check.
func recovered(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while reading (%v): %w", r, strategies.ErrCorrupt)
		}
	}()
	return fn()
}

// bolt checks a bbolt database: its pages (read-only), then its log,
// replayed and checkpointed by opening it as a store, then every value in
// the file: its checksum, and its decoding.
func (ck *checker) bolt(path string) error {
	pagesOK, err := ck.boltPages(path)
	if err != nil {
		return err
	}
	s, err := boltstore.Open(path)
	if errors.Is(err, storage.ErrLocked) {
		return fmt.Errorf("check: %s: %w: stop the process that has it open, then retry", path, err)
	}
	what := "every value's checksum verified, every value decoded"
	if err != nil {
		file := path
		if strings.Contains(err.Error(), path+"-wal") {
			file = path + "-wal"
		}
		ck.problem(file, "", "%v", err)
		if !pagesOK {
			return nil
		}
		// The log is what failed: still check what the file holds.
		what = "every value in the bbolt file checked and decoded (the log could not be read)"
	} else {
		ck.out.Checked = append(ck.out.Checked, "write-ahead log replayed")
		if err := s.Close(); err != nil { // a checkpoint: the file then holds every value
			ck.problem(path, "", "close: %v", err)
			return nil
		}
	}
	return ck.boltValues(path, what)
}

// openReadOnly opens the bbolt file at path read-only, reporting a failure
// as a problem (nil, nil) unless another process holds it.
func (ck *checker) openReadOnly(path string) (*bolt.DB, error) {
	var db *bolt.DB
	err := recovered(func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: boltstore.LockTimeout})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("check: %s: %w: stop the process that has it open, then retry", path, ratestore.ErrLocked)
	}
	if err != nil {
		ck.problem(path, "", "open: %v", err)
	}
	return db, nil
}

// walk calls fn for every key of every bucket of the bbolt file at path,
// read-only. A damaged page is reported as a problem, not a crash (the
// walk runs under recovered); walk reports whether it read every page.
func (ck *checker) walk(path string, fn func(bucket, k, v []byte) error) (ok bool, err error) {
	db, err := ck.openReadOnly(path)
	if db == nil {
		return false, err
	}
	var at []byte
	werr := recovered(func() error {
		return db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				return b.ForEach(func(k, v []byte) error {
					at = append(at[:0], k...) // a copy, read under recovered: the file is closed before it is reported
					return fn(name, k, v)
				})
			})
		})
	})
	db.Close()
	if werr != nil {
		ck.problem(path, string(at), "reading pages: %v", werr)
		return false, nil
	}
	return true, nil
}

// boltPages walks every page of the bbolt file at path and runs bbolt's
// consistency check (txCheck) on it, in a child process: a damaged page
// that faults bbolt's own goroutine ends the child, not this one.
func (ck *checker) boltPages(path string) (ok bool, err error) {
	before := len(ck.out.Problems)
	if ok, err := ck.walk(path, func(_, _, _ []byte) error { return nil }); !ok {
		return false, err
	}
	problems, err := txCheck(ck.ctx, path)
	if err != nil {
		return false, err
	}
	for _, p := range problems {
		ck.problem(path, "", "bbolt check: %s", p)
	}
	ck.out.Checked = append(ck.out.Checked, "bbolt pages (Tx.Check)")
	return len(ck.out.Problems) == before, nil
}

// boltValues checks the checksum of every value of the bbolt file at path
// and decodes it (a file from before checksums has none to check), and
// records what as checked if it read them all.
func (ck *checker) boltValues(path, what string) error {
	ok, err := ck.walk(path, func(bucket, k, v []byte) error {
		switch string(bucket) {
		case boltstore.ValueBucket:
			value, err := boltstore.DecodeValue(k, v)
			if err != nil {
				ck.problem(path, string(k), "%v", err)
				return nil
			}
			return ck.entry(path, k, value)
		case boltstore.LegacyBucket:
			return ck.entry(path, k, v)
		}
		return nil
	})
	if ok {
		ck.decoded = true
		ck.out.Checked = append(ck.out.Checked, what)
	}
	return err
}

// badger checks a badger database: Open verifies the MANIFEST and the
// tables and replays the logs; Verify reads every block; then every value
// is decoded.
func (ck *checker) badger(path string) error {
	s, err := badgerstore.Open(path, nil)
	if errors.Is(err, storage.ErrLocked) {
		return fmt.Errorf("check: %s: %w: stop the process that has it open, then retry", path, err)
	}
	if err != nil {
		ck.problem(badgerFile(path, err), "", "%v", err)
		return nil
	}
	ck.out.Checked = append(ck.out.Checked, "MANIFEST and tables opened, logs replayed")
	if err := s.Verify(); err != nil {
		ck.problem(badgerFile(path, err), "", "%v", err)
	} else {
		ck.out.Checked = append(ck.out.Checked, "every table block's checksum (VerifyChecksum)")
	}
	ck.scan(path, s)
	if err := s.Close(); err != nil {
		ck.problem(path, "", "close: %v", err)
	}
	return nil
}

// badgerFile is the file of the badger directory at path that err names,
// or path.
func badgerFile(path string, err error) string {
	m := badgerFileRE.FindString(err.Error())
	switch {
	case m == "":
		return path
	case filepath.IsAbs(m) || strings.HasPrefix(m, path):
		return m
	}
	return filepath.Join(path, filepath.Base(m))
}

// badgerFileRE finds a file of a badger directory in an error message.
var badgerFileRE = regexp.MustCompile(`[^\s:"]*(\.sst|\.vlog|\.mem|MANIFEST|KEYREGISTRY)`)

// scan decodes every entry of an open store.
func (ck *checker) scan(path string, s storage.Store) {
	err := s.Scan(nil, nil, func(k, v []byte) error { return ck.entry(path, k, v) })
	if err != nil {
		ck.problem(path, "", "reading entries: %v", err)
		return
	}
	ck.decoded = true
	ck.out.Checked = append(ck.out.Checked, "every value decoded")
}

// PagesEnv names the bbolt file that a program, started with it set,
// runs bbolt's Tx.Check on and nothing else: Run checks a bbolt file's
// pages in a child process of the running program (see txCheck), which
// its main hands to PagesChild:
//
//	if path := os.Getenv(check.PagesEnv); path != "" {
//		os.Exit(check.PagesChild(path))
//	}
const PagesEnv = "RATESTORE_CHECK_PAGES"

// txCheck runs bbolt's Tx.Check on the file at path in a child process of
// this program and returns the problems it found. bbolt runs its check in
// a goroutine of its own, where a damaged page that points outside the
// file faults, and a fault in a goroutine that did not ask for a panic
// (debug.SetPanicOnFault) ends the process: in a child, it ends the child,
// which is reported as one more problem.
func txCheck(ctx context.Context, path string) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("check: %s: bbolt check: %w", path, err)
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), PagesEnv+"="+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var problems []string
	for line := range strings.Lines(stdout.String()) {
		if line = strings.TrimSpace(line); line != "" {
			problems = append(problems, line)
		}
	}
	if runErr != nil {
		first, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		problems = append(problems, fmt.Sprintf("the check crashed on a damaged page (%v: %s)", runErr, first))
	}
	return problems, nil
}

// PagesChild is the child process of txCheck: it prints what Tx.Check
// finds in the bbolt file at path, a problem a line, and returns the exit
// code, 0 when it could check.
func PagesChild(path string) int {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: boltstore.LockTimeout})
	if err != nil {
		fmt.Println("open:", err)
		return 0
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			fmt.Println(strings.ReplaceAll(err.Error(), "\n", " "))
		}
		return nil
	})
	return 0
}
