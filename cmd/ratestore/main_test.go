package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/internal/storage/check"
	"github.com/ratestore/ratestore/migrate"
	"github.com/ratestore/ratestore/strategies"
	"github.com/stretchr/testify/require"
)

// now is the clock of the tests: noon on the day of the legacy fixtures'
// usage windows, so that some of them still count.
var now = time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)

const (
	validFile     = "../../testdata/legacy/apikeys.valid.json"
	malformedFile = "../../testdata/legacy/apikeys.malformed.json"
)

// env is a temporary directory with a database path in it, and the
// command line run against it.
type env struct {
	t        *testing.T
	dir      string
	db       string // --db
	backend  string // --backend, "" for the default
	terminal bool   // stderr counts as a terminal
}

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	return &env{t: t, dir: dir, db: filepath.Join(dir, "test.db")}
}

// result is what one run of the command line did.
type result struct {
	code           int
	stdout, stderr string
}

// run runs the command line with --db (and --backend) first.
func (e *env) run(args ...string) result {
	e.t.Helper()
	global := []string{"--db", e.db}
	if e.backend != "" {
		global = append(global, "--backend", e.backend)
	}
	return runArgs(e.terminal, append(global, args...)...)
}

// runArgs runs the command line as given, at the tests' clock.
func runArgs(term bool, args ...string) result {
	var stdout, stderr bytes.Buffer
	cfg := config{
		Now:      func() time.Time { return now },
		Terminal: func(io.Writer) bool { return term },
	}
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, cfg)
	return result{code, stdout.String(), stderr.String()}
}

// ok runs the command line and requires it to succeed.
func (e *env) ok(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	require.Equal(e.t, exitOK, r.code, "%v: stderr: %s", args, r.stderr)
	return r
}

// json runs the command line with --json, requires it to succeed, and
// decodes its output into a new T.
func jsonOf[T any](e *env, args ...string) T {
	e.t.Helper()
	r := e.ok(append(args, "--json")...)
	var v T
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(e.t, dec.Decode(&v), r.stdout)
	return v
}

// records returns every record of the database, for comparisons.
func (e *env) records() []ratestore.Entry {
	e.t.Helper()
	db, err := ratestore.Open(e.db, ratestore.Options{Backend: backendOf(e.backend), Now: func() time.Time { return now }})
	require.NoError(e.t, err)
	defer db.Close()
	var recs []ratestore.Entry
	require.NoError(e.t, db.Export(context.Background(), func(r ratestore.Entry) error {
		recs = append(recs, ratestore.Entry{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
		return nil
	}))
	return recs
}

// requireNoDB requires that nothing exists at the database's path.
func (e *env) requireNoDB() {
	e.t.Helper()
	entries, err := os.ReadDir(e.dir)
	require.NoError(e.t, err)
	require.Empty(e.t, entries, "the command left files behind")
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		r := runArgs(false, args...)
		require.Equal(t, exitOK, r.code, args)
		require.Empty(t, r.stderr)
		for _, cmd := range commands {
			require.Contains(t, r.stdout, "  "+cmd.name, "%v lists %s", args, cmd.name)
		}
		for _, flag := range []string{"--db", "--backend", "--json", "help json"} {
			require.Contains(t, r.stdout, flag)
		}
	}
	// Each command's help names all its flags and its JSON output, from
	// "help CMD" and from "CMD -h".
	for _, cmd := range commands {
		fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		cmd.setup(&cli{}, fs)
		for _, args := range [][]string{
			append([]string{"help"}, strings.Fields(cmd.name)...),
			append(strings.Fields(cmd.name), "-h"),
		} {
			r := runArgs(false, args...)
			require.Equal(t, exitOK, r.code, args)
			require.Contains(t, r.stdout, "Usage: ratestore "+cmd.name)
			require.Contains(t, r.stdout, "JSON output")
			fs.VisitAll(func(f *flag.Flag) { require.Contains(t, r.stdout, "--"+f.Name, args) })
		}
	}
	for _, args := range [][]string{{"help", "keys"}, {"keys", "-h"}, {"keys", "--help"}} {
		r := runArgs(false, args...)
		require.Equal(t, exitOK, r.code, args)
		require.Contains(t, r.stdout, "keys set-expiry ID WHEN", args)
	}
	r := runArgs(false, "help", "json")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, `"window"`)
	require.Contains(t, r.stdout, `"binding"`)
	require.NotContains(t, r.stdout, "USAGE")
}

// TestJSONDocumented: every field of every command's JSON output is named
// in its help.
func TestJSONDocumented(t *testing.T) {
	issue := []migrate.Issue{{Index: 1, Name: "n", Field: "f", Reason: "r"}}
	outputs := map[string]any{
		"import":          importOut{Report: migrate.Report{Refusals: issue, Skips: issue, Notes: issue}},
		"migrate":         migrateOut{},
		"keys create":     admin.Created{},
		"keys list":       admin.Keys{},
		"keys show":       admin.Key{},
		"keys disable":    admin.Key{},
		"keys enable":     admin.Key{},
		"keys delete":     deleteOut{},
		"keys set-limit":  admin.Key{},
		"keys set-expiry": admin.Key{},
		"keys rotate":     admin.Created{},
		"usage":           admin.Key{},
		"spend":           admin.Spend{},
		"requests":        admin.Requests{},
		"audit":           admin.AuditPage{NextCursor: "c"},
		"console":         consoleOut{Redis: "r"},
		"teams create":    admin.Team{},
		"teams list":      admin.Teams{},
		"teams show":      admin.Team{},
		"teams set":       admin.Team{},
		"teams delete":    deleteOut{},
		"copy":            copyOut{},
		"inspect":         stateOut{Error: "e", State: &strategies.Description{Legacy: true}},
		"check":           check.Result{},
		"version":         versionOut{},
		"gateway":         gatewayOut{},
		"serve":           serveOut{},
		"upstreams":       admin.Upstreams{},
		"config reload":   admin.Reloaded{},
		"end-users":       admin.EndUserPage{EndUsers: []admin.EndUser{{}}, NextCursor: "c"},
	}
	require.Len(t, outputs, len(commands))
	documented := func(text string, v any) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(b, &fields))
		for name := range fields {
			require.Contains(t, text, `"`+name+`"`, text)
		}
	}
	for _, cmd := range commands {
		text := cmd.json
		if strings.Contains(text, "KEY") {
			text += keyJSON
		}
		if strings.Contains(text, "TEAM") {
			text += teamJSON
		}
		documented(text, outputs[cmd.name])
	}
	documented(keyJSON, admin.Key{Team: "t"})
	documented(teamJSON, admin.Team{})
	documented(keyJSON, admin.Window{})
	documented(auditJSON, audit.Event{Address: "a"})
	documented(upstreamsJSON, admin.Upstream{Prefix: "/p"})
	documented(upstreamsJSON, admin.UpstreamLimits{RequestsPerMinute: 1, TokensPerMinute: 1, MaxConcurrent: 1})
	documented(upstreamsJSON, admin.UpstreamUsed{})
}

func TestUsageErrors(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "Usage: ratestore"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"help", "frob"}, `unknown command "frob"`},
		{[]string{"keys"}, "want a subcommand"},
		{[]string{"keys", "frob"}, `unknown command "keys frob"`},
		{[]string{"--bogus", "keys", "list"}, "flag provided but not defined: -bogus"},
		{[]string{"keys", "list", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"keys", "list", "extra"}, "want no arguments, got 1 argument"},
		{[]string{"keys", "show"}, "want ID, got 0 arguments"},
		{[]string{"keys", "set-limit"}, "want ID [TOKENS], got 0 arguments"},
		{[]string{"keys", "set-limit", "key_0000000000000000"}, "keys set-limit: nothing to set"},
		{[]string{"import"}, "want FILE"},
		{[]string{"inspect", "rps"}, "want LIMITER KEY"},
		{[]string{"usage", "a", "b"}, "want ID, got 2 arguments"},
		{[]string{"--backend", "sqlite", "keys", "list"}, `--backend "sqlite"`},
		{[]string{"--db", "", "keys", "list"}, "--db: empty path"},
		{[]string{"copy"}, "--to is required"},
		{[]string{"copy", "--to", "x", "--to-backend", "sqlite"}, `--to-backend "sqlite"`},
		{[]string{"inspect", "bad name", "k"}, `limiter name "bad name"`},
		{[]string{"inspect", "rps", strings.Repeat("k", ratestore.MaxKeyLen+1)}, "key of 1025 bytes"},
	} {
		r := runArgs(false, append([]string{"--db", e.db}, c.args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
		require.Empty(t, r.stdout, c.args)
		if c.args != nil {
			require.True(t, strings.HasPrefix(r.stderr, "ratestore: "), r.stderr)
			require.Contains(t, r.stderr, "Run 'ratestore help")
		}
	}
	e.requireNoDB()
}

// TestFlagsAnywhere: global flags go before or after the command, and
// flags before or after the arguments.
func TestFlagsAnywhere(t *testing.T) {
	e := newEnv(t)
	e.ok("import", validFile)
	want := e.ok("--json", "keys", "list").stdout
	for _, args := range [][]string{
		{"--db", e.db, "keys", "list", "--json"},
		{"keys", "list", "--json", "--db", e.db},
		{"keys", "list", "--db=" + e.db, "-json"},
	} {
		r := runArgs(false, args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		require.Equal(t, want, r.stdout, args)
	}
	// Flags after the arguments, and "--" ending the flags.
	id := jsonOf[admin.Keys](e, "keys", "list").Keys[0].ID
	r := e.ok("usage", id, "--json")
	require.Contains(t, r.stdout, `"used"`)
	r = e.run("usage", "--", "--json")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, `no key has the id --json`)
}

func TestVersion(t *testing.T) {
	e := newEnv(t)
	r := e.ok("version")
	require.True(t, strings.HasPrefix(r.stdout, "ratestore "), r.stdout)
	v := jsonOf[versionOut](e, "version")
	require.NotEmpty(t, v.Version)
	require.True(t, strings.HasPrefix(v.Go, "go"))
	e.requireNoDB()
}

func TestMissingDatabase(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"keys", "list"}, {"keys", "show", "key_0000000000000000"}, {"usage", "key_0000000000000000"},
		{"migrate"}, {"migrate", "--dry-run"}, {"inspect", "rps", "k"}, {"copy", "--to", filepath.Join(e.dir, "copy.db")},
		{"keys", "disable", "key_0000000000000000"},
	} {
		r := e.run(args...)
		require.Equal(t, exitError, r.code, args)
		require.Contains(t, r.stderr, "ratestore: no database at "+e.db, args)
	}
	e.requireNoDB()
}

// TestBackendMismatch: a bolt file opened as badger, and the reverse, say
// which flag to use.
func TestBackendMismatch(t *testing.T) {
	e := newEnv(t)
	e.ok("import", validFile)
	e.backend = "badger"
	r := e.run("keys", "list")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "is a file, not a badger directory")

	b := newEnv(t)
	b.backend = "badger"
	b.ok("import", validFile)
	b.backend = "bolt"
	r = b.run("keys", "list")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "--backend badger")
}

// TestLocked: a database another DB holds gives a clear message and exit
// code 1, on both backends.
func TestLocked(t *testing.T) {
	for _, backend := range []string{"bolt", "badger"} {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t)
			e.backend = backend
			e.ok("import", validFile)
			db, err := ratestore.Open(e.db, ratestore.Options{Backend: backendOf(backend)})
			require.NoError(t, err)
			defer db.Close()
			for _, args := range [][]string{{"keys", "list"}, {"keys", "create", "--name", "x", "--limit", "5"}, {"import", validFile}, {"migrate", "--dry-run"}} {
				r := e.run(args...)
				require.Equal(t, exitError, r.code, args)
				require.Empty(t, r.stdout)
				if args[0] == "keys" {
					// Most likely the gateway: its admin API does it.
					require.Contains(t, r.stderr, "ratestore: "+e.db+": the database is held by another process (a running gateway?); use --admin http://127.0.0.1:8080 with $RATESTORE_ADMIN_TOKEN")
					continue
				}
				require.Contains(t, r.stderr, "ratestore: "+e.db+": database is in use by another process")
				require.Contains(t, r.stderr, "only one process may open a database at a time")
			}
		})
	}
}

// backendOf is the backend a --backend value names; nil (Bolt) for "".
func backendOf(name string) ratestore.Backend {
	b, _ := backendNamed(name)
	return b
}
