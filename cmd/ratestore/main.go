package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/storage/check"
)

func main() {
	if path := os.Getenv(check.PagesEnv); path != "" {
		os.Exit(check.PagesChild(path)) // a child of the check command
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, config{})
	stop()
	os.Exit(code)
}

// config is what run takes from its caller besides the arguments and the
// standard streams. The zero value is what main passes.
type config struct {
	// Now is the clock of the database and of the command line's own
	// instants (--expires 720h, the expired status); nil means the system
	// clock.
	Now func() time.Time
	// Terminal reports whether w is a terminal (nil: whether it is a
	// character device). Progress is drawn on the standard error when both
	// it and the standard output are terminals: someone is watching, and
	// the output is not going to a script.
	Terminal func(w io.Writer) bool
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed at run time
	exitUsage = 2 // the command line is wrong
)

// Global flags, before or after the command.
const (
	defaultDB      = "./ratestore.db"
	defaultBackend = string(ratestore.Bolt)
)

// cli is one run of the command line.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	now            func() time.Time // nil: the system clock
	terminal       bool             // show progress on stderr: see config.Terminal

	db      string
	backend string
	json    bool
	recover bool // ratestore.Options.Recover
}

// run runs the command line args (without the program name) and returns
// the exit code. stdin is not read by any command yet.
func run(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer, cfg config) int {
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, now: cfg.Now, db: defaultDB, backend: defaultBackend}
	isTerminal := cfg.Terminal
	if isTerminal == nil {
		isTerminal = terminal
	}
	c.terminal = isTerminal(stdout) && isTerminal(stderr)
	return c.exit(c.main(args))
}

// terminal reports whether w is a terminal.
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// usageError is an error in the command line: exit code 2, and a pointer to
// the help of cmd ("" for the main help).
type usageError struct {
	cmd string
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// errUsageShown is a wrong command line whose explanation has been printed
// already.
var errUsageShown = errors.New("usage shown")

// exit prints err, if any, and returns the exit code it calls for.
func (c *cli) exit(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "ratestore: %s\n", ue.msg)
		help := "ratestore help"
		if ue.cmd != "" {
			help += " " + ue.cmd
		}
		fmt.Fprintf(c.stderr, "Run '%s' for usage.\n", help)
		return exitUsage
	case errors.Is(err, errUsageShown):
		return exitUsage
	}
	fmt.Fprintf(c.stderr, "ratestore: %s\n", strings.TrimPrefix(err.Error(), "ratestore: "))
	if errors.Is(err, ratestore.ErrInvalid) {
		return exitUsage // an argument the store refuses
	}
	return exitError
}

// main parses the global flags and runs the command.
func (c *cli) main(args []string) error {
	fs := c.flagSet("ratestore")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c.help(nil)
		}
		return usagef("", "%v", err)
	}
	args = fs.Args()
	if len(args) == 0 {
		fmt.Fprint(c.stderr, mainUsage())
		return errUsageShown
	}
	if args[0] == "help" {
		return c.help(args[1:])
	}
	if len(args) == 2 && slices.Contains(groups, args[0]) && slices.Contains([]string{"-h", "-help", "--help"}, args[1]) {
		return c.help(args[:1])
	}
	cmd, rest, err := lookup(args)
	if err != nil {
		return err
	}
	fs = c.flagSet("ratestore " + cmd.name)
	runCmd := cmd.setup(c, fs)
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.stdout, cmd.usage())
			return nil
		}
		return usagef(cmd.name, "%s: %v", cmd.name, err)
	}
	if _, ok := backendNamed(c.backend); !ok {
		return usagef("", "--backend %q: want %s or %s", c.backend, ratestore.Bolt, badger.Backend)
	}
	if c.db == "" {
		return usagef("", "--db: empty path")
	}
	if len(pos) < cmd.minArgs || cmd.maxArgs >= 0 && len(pos) > cmd.maxArgs {
		return usagef(cmd.name, "%s: want %s, got %d argument%s", cmd.name, cmd.argText(), len(pos), plural(len(pos)))
	}
	return runCmd(pos)
}

// flagSet returns a flag set for name with the global flags, which keep
// the values already parsed.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, help is printed by help
	fs.StringVar(&c.db, "db", c.db, "the database: a bbolt file or a badger directory")
	fs.StringVar(&c.backend, "backend", c.backend, "the database's backend: bolt or badger")
	fs.BoolVar(&c.json, "json", c.json, "print JSON on stdout")
	fs.BoolVar(&c.recover, "recover", c.recover, "open a database whose write-ahead log is damaged or cut short, keeping what it can (what is dropped is printed)")
	return fs
}

// parseInterspersed parses flags anywhere among the positional arguments,
// which it returns; everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// emit prints v as JSON with --json, and otherwise calls text.
func (c *cli) emit(v any, text func(w io.Writer)) error {
	if !c.json {
		text(c.stdout)
		return nil
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// clock returns the current instant.
func (c *cli) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
