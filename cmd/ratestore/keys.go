package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/redisstore"
)

// adminFlags are --admin and --admin-token-file, flags of every command
// that reads or changes keys: with --admin, the command works through the
// admin API of the gateway at that URL instead of opening the database,
// which a running gateway holds (one process at a time may open it). With
// --redis it works on the key store in that Redis, which any number of
// processes share. They
// are flags of those commands rather than global ones because no other
// command can use them: import, migrate, copy or inspect given --admin
// would have to ignore it, and the database they then opened is not the
// gateway's (or is locked by it).
type adminFlags struct {
	url, tokenFile string
	redis          string // --redis: the keys of a key store in Redis
}

func keyFlags(fs *flag.FlagSet) *adminFlags {
	af := &adminFlags{}
	fs.StringVar(&af.redis, "redis", "", redisKeysUsage)
	fs.StringVar(&af.url, "admin", "", "work through the admin API of the gateway at `URL` (http://"+defaultListen+") rather than opening the database; the token is $"+adminTokenEnv+" or --admin-token-file's")
	fs.StringVar(&af.tokenFile, "admin-token-file", "", "read the admin token from `PATH` rather than $"+adminTokenEnv)
	return af
}

// lockedError is the error of a key command that finds the database
// held by another process: most likely the gateway, whose admin API does
// what the command would.
type lockedError struct{ path string }

func (e *lockedError) Error() string {
	return fmt.Sprintf("%s: the database is held by another process (a running gateway?); use --admin http://%s with $%s", e.path, defaultListen, adminTokenEnv)
}

func (e *lockedError) Unwrap() error { return ratestore.ErrLocked }

// withAdmin calls fn with the admin API: the gateway's with --admin,
// else one this process serves on the key store of --redis or of the
// database (created, with create), opened for fn and closed after it, and
// its spend ledger, read only, with ledger. Every command that reads or
// changes keys, teams or spend goes through it, so that each prints what
// the admin API answers, and changes the same way, wherever the keys are.
func (c *cli) withAdmin(af *adminFlags, create, withLedger bool, fn func(*admin.Client) error) error {
	switch {
	case af.url != "" && af.redis != "":
		return usagef("", "--admin and --redis both say where the keys are: give one")
	case af.url != "":
		ac, err := adminClient(af.url, af.tokenFile, c.stderr)
		if err != nil {
			return err
		}
		return fn(ac)
	case af.tokenFile != "":
		return usagef("", "--admin-token-file without --admin: the token is for a gateway's admin API")
	case af.redis != "":
		rdb, err := redisstore.Open(c.ctx, af.redis, redisstore.Options{Now: c.now, Timeout: admin.ClientTimeout})
		if err != nil {
			return err
		}
		defer rdb.Close()
		return serveAdmin(c, rdb, withLedger, fn)
	}
	err := c.withDB(create, func(db *ratestore.DB) error { return serveAdmin(c, db, withLedger, fn) })
	if errors.Is(err, ratestore.ErrLocked) {
		return &lockedError{c.db} // a running gateway holds it: point at --admin
	}
	return err
}

// serveAdmin calls fn with a client of an admin API on the key store of
// db (opened with the default options, as every other user of a store
// opens it: a key's record holds its policy, so only keys created with
// --limit and legacy keys depend on them) and, with withLedger, its
// ledger opened read only: it writes nothing, not even the retention's
// drops, and its retention is the default, where GET /admin/requests
// starts when not given a from. Its changes are recorded in the audit log
// of db as the command line's, which the command does not sweep (the
// gateway does) and reads with the default retention.
func serveAdmin(c *cli, db backend.Store, withLedger bool, fn func(*admin.Client) error) error {
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		return err
	}
	alog, err := audit.Open(db, audit.Options{SweepInterval: -1})
	if err != nil {
		return err
	}
	defer closeAudit(alog)
	opts := admin.Options{Keys: ks, Audit: alog, Now: c.now}
	if withLedger {
		l, err := ledger.Open(db, ledger.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer l.Close(c.ctx)
		opts.Ledger = l
	}
	api, err := admin.New(opts)
	if err != nil {
		return err
	}
	return fn(admin.NewLocalClient(api, admin.ActorCLI))
}

// withKeyStore calls fn with the key store in the Redis at redisURL, if it
// is not "", else in the database of the global flags (created, with
// create), opened for fn and closed after it. It is where the key
// commands' flags choose the backend; keystore.Open is written once for
// both.
func (c *cli) withKeyStore(redisURL string, create bool, fn func(*keystore.Store) error) error {
	if redisURL != "" {
		rdb, err := redisstore.Open(c.ctx, redisURL, redisstore.Options{Now: c.now, Timeout: adminTimeout})
		if err != nil {
			return err
		}
		defer rdb.Close()
		return withStoreKeys(rdb, fn)
	}
	return c.withDB(create, func(db *ratestore.DB) error { return withStoreKeys(db, fn) })
}

// withStoreKeys calls fn with the key store of db, opened with the
// default options, as every other user of a store opens it (migrate, the
// gateway): a key's record holds its policy, so only keys created with
// --limit and legacy keys depend on them (one window of 5 hours).
func withStoreKeys(db backend.Store, fn func(*keystore.Store) error) error {
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		return err
	}
	return fn(ks)
}

// redisKeysUsage is the help of the --redis flag of the key commands.
const redisKeysUsage = "work on the keys of the key store in the Redis at `URL` (redis://host:port/db), which gateways started with --redis share, rather than the database"

// unlimited reports whether key a has no limit of its own: no token
// window, budget, request rate or concurrency cap.
func unlimited(a admin.Key) bool {
	return len(a.Windows) == 0 && len(a.Budgets) == 0 && a.RequestsPerMinute == 0 && a.MaxConcurrent == 0 &&
		len(a.ModelLimits) == 0 && a.EndUsers == nil
}

// keyStatus is what the text output says of key a at now: "disabled",
// "expired" or "active".
func keyStatus(a admin.Key, now time.Time) string {
	switch {
	case a.Disabled:
		return "disabled"
	case a.ExpiresAt != nil && !now.Before(*a.ExpiresAt):
		return "expired"
	}
	return "active"
}

// timePtr is t in UTC, or nil when t is zero (not set).
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// show formats an instant for text output; unset is what a zero one says.
func show(t *time.Time, unset string) string {
	if t == nil {
		return unset
	}
	return t.Format(time.RFC3339Nano)
}

// short formats a duration for text output without its zero tails: 5h
// rather than 5h0m0s, 2h48m rather than 2h48m0s. time.ParseDuration reads
// it back, so what keys show prints can be given to --window.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// length is a window's or bucket's length as JSON gives it, a Go
// duration; 0 for one that is not.
func length(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

// writeKey writes key a as "field: value" lines, then the table of its
// windows.
func writeKey(w io.Writer, a admin.Key, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "id:\t%s\n", a.ID)
	fmt.Fprintf(tw, "name:\t%s\n", a.Name)
	if a.Team != "" {
		fmt.Fprintf(tw, "team:\t%s\n", a.Team)
	}
	fmt.Fprintf(tw, "model:\t%s\n", a.Model)
	fmt.Fprintf(tw, "lifetime tokens:\t%d\n", a.LifetimeTokens)
	fmt.Fprintf(tw, "created:\t%s\n", show(a.CreatedAt, "unknown"))
	fmt.Fprintf(tw, "last used:\t%s\n", show(a.LastUsed, "never"))
	fmt.Fprintf(tw, "expires:\t%s\n", show(a.ExpiresAt, "never"))
	if a.PreviousSecretExpiresAt != nil {
		fmt.Fprintf(tw, "previous secret:\t%s\n", previousText(a.PreviousSecretExpiresAt, now))
	}
	fmt.Fprintf(tw, "status:\t%s\n", keyStatus(a, now))
	writePolicy(tw, a.RequestsPerMinute, a.MaxConcurrent, a.Models)
	writeSubs(tw, a.ModelLimits, a.ModelUsage, a.EndUsers)
	tw.Flush()
	writeWindows(w, a.Windows, now)
}

// writeUsage writes the usage of key a: its binding window's figures,
// the limits of its policy, then the table of its windows.
func writeUsage(w io.Writer, a admin.Key, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "key:\t%s\n", a.ID)
	if len(a.Windows) == 0 {
		fmt.Fprintf(tw, "used:\t%d tokens in all (no token window)\n", a.LifetimeTokens)
	} else {
		writeBinding(tw, a.Windows, a.Binding, now)
	}
	writePolicy(tw, a.RequestsPerMinute, a.MaxConcurrent, a.Models)
	writeSubs(tw, a.ModelLimits, a.ModelUsage, a.EndUsers)
	tw.Flush()
	writeWindows(w, a.Windows, now)
}

// writeBinding writes the figures of the binding window of ws.
func writeBinding(tw io.Writer, ws []admin.Window, binding int, now time.Time) {
	b := ws[binding]
	fmt.Fprintf(tw, "used:\t%d of %d tokens in its %s window", b.Used, b.Limit, short(length(b.Window)))
	if len(ws) > 1 {
		fmt.Fprintf(tw, " (of its %d windows, the one with the least left)", len(ws))
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "remaining:\t%d\n", b.Remaining)
	if b.WindowEnd == nil {
		fmt.Fprintf(tw, "window end:\t- (nothing in use)\n")
	} else {
		fmt.Fprintf(tw, "window end:\t%s (in %v)\n", show(b.WindowEnd, ""), b.WindowEnd.Sub(now).Round(time.Second))
		fmt.Fprintf(tw, "fully reset in:\t%v\n", time.Duration(b.ResetAfterSeconds)*time.Second)
	}
}

// writePolicy writes the limits of a key's or team's policy besides its
// windows as "field: value" lines.
func writePolicy(tw io.Writer, rpm int64, maxConcurrent int, models []string) {
	fmt.Fprintf(tw, "request rate:\t%s\n", limitText(rpm, " per minute"))
	fmt.Fprintf(tw, "max concurrent:\t%s\n", limitText(int64(maxConcurrent), " requests"))
	if len(models) == 0 {
		fmt.Fprintf(tw, "models:\tany\n")
	} else {
		fmt.Fprintf(tw, "models:\t%s\n", strings.Join(models, ", "))
	}
}

func limitText(n int64, unit string) string {
	if n == 0 {
		return "no limit"
	}
	return strconv.FormatInt(n, 10) + unit
}

// writeWindows writes the token windows of a key, with their usage at now,
// as a table.
func writeWindows(w io.Writer, ws []admin.Window, now time.Time) {
	fmt.Fprintf(w, "\ntoken windows:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  WINDOW\tBUCKET\tUSED\tLIMIT\tREMAINING\tWINDOW END\tFULLY RESET IN")
	for _, u := range ws {
		end, reset := "-", "-"
		if u.WindowEnd != nil {
			end = fmt.Sprintf("%s (in %v)", show(u.WindowEnd, ""), u.WindowEnd.Sub(now).Round(time.Second))
		}
		if u.ResetAfterSeconds > 0 {
			reset = (time.Duration(u.ResetAfterSeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%s\t%s\n", short(length(u.Window)), short(length(u.Bucket)),
			u.Used, u.Limit, u.Remaining, end, reset)
	}
	tw.Flush()
}

// windowsText is the windows ws on one line, for keys list and teams
// list: "100000/5h, 1000000/168h".
func windowsText(ws []admin.Window) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%d/%s", w.Limit, short(length(w.Window)))
	}
	return strings.Join(parts, ", ")
}

// parseWhen reads an expiry: an RFC 3339 instant, a positive duration from
// now, or "never" (the zero Time).
func parseWhen(cmd, s string, now time.Time) (time.Time, error) {
	if s == "never" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d).UTC(), nil
	}
	return time.Time{}, usagef(cmd, "%s: expiry %q: want an RFC 3339 instant (2027-01-01T00:00:00Z), a duration from now (720h) or never", cmd, s)
}

// parseTokens reads a token limit: a positive integer.
func parseTokens(cmd, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, usagef(cmd, "%s: token limit %q: want a positive integer", cmd, s)
	}
	return n, nil
}

func keysCreate(c *cli, fs *flag.FlagSet) func([]string) error {
	name := fs.String("name", "", "the key's `name` (required)")
	limit := fs.String("limit", "", "the `tokens` it may use per 5 hours: one token window, as --window 5h=TOKENS")
	pf := policyFlags(fs, false)
	model := fs.String("model", "", "the `model` it is for (informational; --models restricts)")
	team := fs.String("team", "", "the `ID` of the team it belongs to (teams create), whose limits it shares")
	expires := fs.String("expires", "never", "`when` it expires: RFC 3339, a duration from now (720h) or never")
	af := keyFlags(fs)
	return func([]string) error {
		const cmd = "keys create"
		if *name == "" {
			return usagef(cmd, "%s: --name is required", cmd)
		}
		if *limit != "" && len(pf.windows) > 0 {
			return usagef(cmd, "%s: --limit and --window: give one or the other (--limit TOKENS is --window 5h=TOKENS)", cmd)
		}
		p, err := pf.parse(cmd)
		if err != nil {
			return err
		}
		spec := keystore.Spec{Name: *name, Model: *model, Team: *team}
		if *limit != "" {
			if spec.TokenLimit, err = parseTokens(cmd, *limit); err != nil {
				return err
			}
		}
		if _, err := p.apply(cmd, "the new key", &spec.Policy, nil); err != nil {
			return err
		}
		if spec.ExpiresAt, err = parseWhen(cmd, *expires, c.clock()); err != nil {
			return err
		}
		return c.withAdmin(af, true, false, func(ac *admin.Client) error {
			out, err := ac.CreateKey(c.ctx, admin.NewKeyRequest(keystore.Spec{}, spec))
			if err != nil {
				return err
			}
			err = c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "id:     %s\nsecret: %s\n", out.Key.ID, out.Secret)
			})
			fmt.Fprintf(c.stderr, "ratestore: the secret of %s is shown only this once: store it now (ratestore keeps only its hash)\n", out.Key.ID)
			if unlimited(out.Key) && out.Key.Team == "" {
				fmt.Fprintf(c.stderr, "ratestore: %s has no limit: it is metered only (keys set-limit adds one)\n", out.Key.ID)
			}
			return err
		})
	}
}

// keysRotate is keys rotate: a new secret for the key, printed once as
// keys create prints one; the old secret works for --grace.
func keysRotate(c *cli, fs *flag.FlagSet) func([]string) error {
	grace := fs.Duration("grace", 0, "how long the old secret keeps working: a Go `duration` (24h, 90m), at most "+short(keystore.MaxGrace)+"; 0 stops it at once")
	af := keyFlags(fs)
	return func(args []string) error {
		const cmd = "keys rotate"
		if *grace < 0 || *grace > keystore.MaxGrace {
			return usagef(cmd, "%s: --grace %v: want 0 (the old secret stops at once) up to %s", cmd, *grace, short(keystore.MaxGrace))
		}
		id := args[0]
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			out, err := ac.RotateKey(c.ctx, id, *grace)
			if err != nil {
				return err
			}
			defer fmt.Fprintf(c.stderr, "ratestore: the new secret of %s is shown only this once: store it now (ratestore keeps only its hash)\n", out.Key.ID)
			return c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "id:     %s\nsecret: %s\nold:    %s\n", out.Key.ID, out.Secret, previousText(out.Key.PreviousSecretExpiresAt, c.clock()))
			})
		})
	}
}

// previousText says of a key's previous secret, which stops working at
// end (nil: none), whether it still works at now.
func previousText(end *time.Time, now time.Time) string {
	if end == nil || !now.Before(*end) {
		return "stopped working"
	}
	return "works until " + show(end, "")
}

func keysList(c *cli, fs *flag.FlagSet) func([]string) error {
	v := url.Values{}
	paramFlag(fs, v, "limit", "limit", "print `N` keys at most, 1 to 1000 (default 100)")
	paramFlag(fs, v, "cursor", "cursor", "print the page after the one that gave this `CURSOR` (its next_cursor)")
	paramFlag(fs, v, "q", "q", "only the keys whose name or id, or whose team's name, starts with `TEXT`, in any case")
	paramFlag(fs, v, "team", "team", "only the keys of the team of this `ID`")
	paramFlag(fs, v, "status", "status", "only the keys that are `STATUS`: active, disabled or expired")
	paramFlag(fs, v, "sort", "sort", "the order, `BY`: name, last_used or spend, with - for descending (-last_used); default name")
	all := fs.Bool("all", false, "print every page, not just one (with --json: a KEY a line)")
	af := keyFlags(fs)
	return func([]string) error {
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			now := c.clock()
			for first := true; ; first = false {
				page, err := ac.Keys(c.ctx, v)
				if err != nil {
					return paramError("keys list", err)
				}
				if err := c.emitKeys(page, *all, first, now); err != nil || !*all || page.NextCursor == "" {
					return err
				}
				v.Set("cursor", page.NextCursor)
			}
		})
	}
}

// emitKeys prints a page of keys list: its table (its header only on the
// first page of --all) and how to get the next page; with all and --json,
// a KEY a line.
func (c *cli) emitKeys(page admin.Keys, all, first bool, now time.Time) error {
	if all && c.json {
		enc := json.NewEncoder(c.stdout)
		for _, k := range page.Keys {
			if err := enc.Encode(k); err != nil {
				return err
			}
		}
		return nil
	}
	return c.emit(page, func(w io.Writer) {
		empty, header, next := "no keys", "ID\tNAME\tMODEL\tTOKENS/WINDOW\tLIFETIME\tLAST USED\tEXPIRES\tSTATUS", page.NextCursor
		if !first { // --all: the next page of one table
			empty, header = "", ""
		}
		if all {
			next = ""
		}
		writeTable(w, empty, header, len(page.Keys), func(tw io.Writer, i int) {
			k := page.Keys[i]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", k.ID, orDash(printable(k.Name)), orDash(printable(k.Model)),
				orDash(windowsText(k.Windows)), k.LifetimeTokens, show(k.LastUsed, "never"), show(k.ExpiresAt, "never"), keyStatus(k, now))
		}, next)
	})
}

// writeTable writes a page of a list as a table: empty when it has no
// rows (unless empty is ""), else header (unless "") and its n rows, then,
// when there is a next page, the cursor that gets it.
func writeTable(w io.Writer, empty, header string, n int, row func(tw io.Writer, i int), next string) {
	if n == 0 && empty != "" {
		fmt.Fprintln(w, empty)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if header != "" {
		fmt.Fprintln(tw, header)
	}
	for i := range n {
		row(tw, i)
	}
	tw.Flush()
	if next != "" {
		fmt.Fprintf(w, "more: add --cursor %s\n", next)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func keysShow(c *cli, fs *flag.FlagSet) func([]string) error {
	af := keyFlags(fs)
	return func(args []string) error {
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			a, err := ac.Key(c.ctx, args[0])
			if err != nil {
				return err
			}
			return c.emitKey(a, "")
		})
	}
}

// emitKey prints key a, after a line that says what was done to it.
func (c *cli) emitKey(a admin.Key, done string) error {
	return c.emit(a, func(w io.Writer) {
		if done != "" {
			fmt.Fprintln(w, done)
		}
		writeKey(w, a, c.clock())
	})
}

// keyChange changes the Spec of key id and says what it did; a disable
// or enable sets *disabled instead.
type keyChange func(id string, spec *keystore.Spec, disabled **bool) (string, error)

// runChange reads key id, makes change to it, sends what changed (PATCH
// /admin/keys/{id}) and prints the key as changed.
func (c *cli) runChange(af *adminFlags, id string, change keyChange) error {
	return c.withAdmin(af, false, false, func(ac *admin.Client) error {
		a, err := ac.Key(c.ctx, id)
		if err != nil {
			return err
		}
		old, err := a.Spec()
		if err != nil {
			return err
		}
		spec := old
		spec.Policy.Windows = slices.Clone(old.Policy.Windows)
		spec.Policy.Models = slices.Clone(old.Policy.Models)
		var disabled *bool
		done, err := change(id, &spec, &disabled)
		if err != nil {
			return err
		}
		req := admin.NewKeyRequest(old, spec)
		req.Disabled = disabled
		if a, err = ac.PatchKey(c.ctx, id, req); err != nil {
			return err
		}
		return c.emitKey(a, done)
	})
}

// keysSet is the setup of a command that changes a key and has no flags
// of its own: parse reads the arguments after the key's id into the
// change.
func keysSet(parse func(c *cli, args []string) (keyChange, error)) func(*cli, *flag.FlagSet) func([]string) error {
	return func(c *cli, fs *flag.FlagSet) func([]string) error {
		af := keyFlags(fs)
		return func(args []string) error {
			change, err := parse(c, args[1:])
			if err != nil {
				return err
			}
			return c.runChange(af, args[0], change)
		}
	}
}

func setDisabled(disabled bool) func(*cli, []string) (keyChange, error) {
	return func(*cli, []string) (keyChange, error) {
		return func(id string, _ *keystore.Spec, d **bool) (string, error) {
			*d = &disabled
			if disabled {
				return "disabled " + id, nil
			}
			return "enabled " + id, nil
		}, nil
	}
}

// keysSetLimit is keys set-limit: it changes what its arguments and flags
// name, and nothing else. TOKENS sets the limit of the key's first window
// (the one legacy keys have); --window sets the limit, and with /BUCKET
// the bucket, of the window of its length, or adds one; --drop-window
// removes one. A window's usage stays counted while its length stays (see
// keystore.Store.Update).
func keysSetLimit(c *cli, fs *flag.FlagSet) func([]string) error {
	pf := policyFlags(fs, true)
	var team optional
	fs.Var(&team, "team", "move it to the team of this `ID`; \"\": take it out of its team")
	af := keyFlags(fs)
	return func(args []string) error {
		const cmd = "keys set-limit"
		p, err := pf.parse(cmd)
		if err != nil {
			return err
		}
		var tokens int64
		if len(args) > 1 {
			if tokens, err = parseTokens(cmd, args[1]); err != nil {
				return err
			}
			if len(p.windows) > 0 || len(p.drop) > 0 {
				return usagef(cmd, "%s: TOKENS and --window or --drop-window: give one or the other (TOKENS sets the limit of the first window)", cmd)
			}
		} else if p.empty() && !team.set {
			return usagef(cmd, "%s: nothing to set: give TOKENS, --window, --drop-window, --rpm, --max-concurrent, --models or --team", cmd)
		}
		return c.runChange(af, args[0], func(id string, s *keystore.Spec, _ **bool) (string, error) {
			var done []string
			if tokens > 0 {
				if len(s.Policy.Windows) == 0 {
					return "", usagef(cmd, "%s: TOKENS: key %s has no token window: add one with --window DURATION=LIMIT", cmd, id)
				}
				s.TokenLimit = tokens
				done = append(done, fmt.Sprintf("set the limit of its %s window to %d tokens", short(s.Policy.Windows[0].Window), tokens))
			}
			if team.set {
				s.Team = team.value
				done = append(done, teamDone(team.value))
			}
			done, err := p.apply(cmd, "key "+id, &s.Policy, done)
			return fmt.Sprintf("changed %s: %s", id, strings.Join(done, "; ")), err
		})
	}
}

// teamDone says what keys set-limit --team did.
func teamDone(team string) string {
	if team == "" {
		return "took it out of its team"
	}
	return "moved it to team " + team
}

func setExpiry(c *cli, args []string) (keyChange, error) {
	at, err := parseWhen("keys set-expiry", args[0], c.clock())
	if err != nil {
		return nil, err
	}
	return func(id string, s *keystore.Spec, _ **bool) (string, error) {
		s.ExpiresAt = at
		return fmt.Sprintf("set the expiry of %s to %s", id, show(timePtr(at), "never")), nil
	}, nil
}

func keysDelete(c *cli, fs *flag.FlagSet) func([]string) error {
	af := keyFlags(fs)
	return func(args []string) error {
		id := args[0]
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			if err := ac.DeleteKey(c.ctx, id); err != nil {
				return err
			}
			out := deleteOut{id, true}
			return c.emit(out, func(w io.Writer) { fmt.Fprintf(w, "deleted %s\n", id) })
		})
	}
}

func usageCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	af := keyFlags(fs)
	return func(args []string) error {
		id := args[0]
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			a, err := ac.Key(c.ctx, id)
			if err != nil {
				return err
			}
			return c.emit(a, func(w io.Writer) { writeUsage(w, a, c.clock()) })
		})
	}
}
