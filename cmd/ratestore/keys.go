package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/keystore"
)

func (c *cli) keyOut(k keystore.Key) keyOut {
	expired := !k.ExpiresAt.IsZero() && !c.clock().Before(k.ExpiresAt)
	status := "active"
	switch {
	case k.Disabled:
		status = "disabled"
	case expired:
		status = "expired"
	}
	return keyOut{
		ID: k.ID, Name: k.Name, Model: k.Model, TokenLimit: k.TokenLimit,
		ExpiresAt: timePtr(k.ExpiresAt), CreatedAt: timePtr(k.CreatedAt), LastUsed: timePtr(k.LastUsed),
		LifetimeTokens: k.LifetimeTokens, Disabled: k.Disabled, Expired: expired, Status: status,
	}
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

// writeKey writes k as "field: value" lines.
func writeKey(w io.Writer, k keyOut) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "id:\t%s\n", k.ID)
	fmt.Fprintf(tw, "name:\t%s\n", k.Name)
	fmt.Fprintf(tw, "model:\t%s\n", k.Model)
	fmt.Fprintf(tw, "token limit:\t%d per usage window\n", k.TokenLimit)
	fmt.Fprintf(tw, "lifetime tokens:\t%d\n", k.LifetimeTokens)
	fmt.Fprintf(tw, "created:\t%s\n", show(k.CreatedAt, "unknown"))
	fmt.Fprintf(tw, "last used:\t%s\n", show(k.LastUsed, "never"))
	fmt.Fprintf(tw, "expires:\t%s\n", show(k.ExpiresAt, "never"))
	fmt.Fprintf(tw, "status:\t%s\n", k.Status)
	tw.Flush()
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
	limit := fs.String("limit", "", "the `tokens` it may use per usage window (required)")
	model := fs.String("model", "", "the `model` it is for")
	expires := fs.String("expires", "never", "`when` it expires: RFC 3339, a duration from now (720h) or never")
	return func([]string) error {
		const cmd = "keys create"
		if *name == "" || *limit == "" {
			return usagef(cmd, "%s: --name and --limit are required", cmd)
		}
		tokens, err := parseTokens(cmd, *limit)
		if err != nil {
			return err
		}
		at, err := parseWhen(cmd, *expires, c.clock())
		if err != nil {
			return err
		}
		return c.withDB(true, func(db *ratestore.DB) error {
			k, secret, err := db.Keys().Create(c.ctx, keystore.Spec{Name: *name, Model: *model, TokenLimit: tokens, ExpiresAt: at})
			if err != nil {
				return err
			}
			out := createOut{c.keyOut(k), secret}
			err = c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "id:     %s\nsecret: %s\n", k.ID, secret)
			})
			fmt.Fprintf(c.stderr, "ratestore: the secret of %s is shown only this once: store it now (ratestore keeps only its hash)\n", k.ID)
			return err
		})
	}
}

func keysList(c *cli, _ *flag.FlagSet) func([]string) error {
	return func([]string) error {
		return c.withDB(false, func(db *ratestore.DB) error {
			keys := []keyOut{}
			err := db.Keys().List(c.ctx, func(k keystore.Key) error {
				keys = append(keys, c.keyOut(k))
				return nil
			})
			if err != nil {
				return err
			}
			out := keysOut{keys}
			return c.emit(out, func(w io.Writer) {
				if len(keys) == 0 {
					fmt.Fprintln(w, "no keys")
					return
				}
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tMODEL\tLIMIT\tLIFETIME\tLAST USED\tEXPIRES\tSTATUS")
				for _, k := range keys {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", k.ID, orDash(k.Name), orDash(k.Model),
						k.TokenLimit, k.LifetimeTokens, show(k.LastUsed, "never"), show(k.ExpiresAt, "never"), k.Status)
				}
				tw.Flush()
			})
		})
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func keysShow(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		return c.withDB(false, func(db *ratestore.DB) error {
			return c.emitKey(db, args[0], "")
		})
	}
}

// emitKey prints key id, after a line that says what was done to it.
func (c *cli) emitKey(db *ratestore.DB, id, done string) error {
	k, err := db.Keys().Get(c.ctx, id)
	if err != nil {
		return err
	}
	out := keyResultOut{c.keyOut(k)}
	return c.emit(out, func(w io.Writer) {
		if done != "" {
			fmt.Fprintln(w, done)
		}
		writeKey(w, out.Key)
	})
}

// keyChange changes key id and says what it did.
type keyChange func(ctx context.Context, keys *keystore.Store, id string) (string, error)

// keysSet is the setup of a command that changes a key: parse reads the
// arguments after the key's id into the change.
func keysSet(parse func(c *cli, args []string) (keyChange, error)) func(*cli, *flag.FlagSet) func([]string) error {
	return func(c *cli, _ *flag.FlagSet) func([]string) error {
		return func(args []string) error {
			change, err := parse(c, args[1:])
			if err != nil {
				return err
			}
			return c.withDB(false, func(db *ratestore.DB) error {
				done, err := change(c.ctx, db.Keys(), args[0])
				if err != nil {
					return err
				}
				return c.emitKey(db, args[0], done)
			})
		}
	}
}

func setDisabled(disabled bool) func(*cli, []string) (keyChange, error) {
	return func(*cli, []string) (keyChange, error) {
		return func(ctx context.Context, keys *keystore.Store, id string) (string, error) {
			if disabled {
				return "disabled " + id, keys.Disable(ctx, id)
			}
			return "enabled " + id, keys.Enable(ctx, id)
		}, nil
	}
}

func setLimit(_ *cli, args []string) (keyChange, error) {
	tokens, err := parseTokens("keys set-limit", args[0])
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, keys *keystore.Store, id string) (string, error) {
		return fmt.Sprintf("set the token limit of %s to %d", id, tokens), keys.SetTokenLimit(ctx, id, tokens)
	}, nil
}

func setExpiry(c *cli, args []string) (keyChange, error) {
	at, err := parseWhen("keys set-expiry", args[0], c.clock())
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, keys *keystore.Store, id string) (string, error) {
		return fmt.Sprintf("set the expiry of %s to %s", id, show(timePtr(at), "never")), keys.SetExpiry(ctx, id, at)
	}, nil
}

func keysDelete(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		id := args[0]
		return c.withDB(false, func(db *ratestore.DB) error {
			if err := db.Keys().Delete(c.ctx, id); err != nil {
				return err
			}
			out := deleteOut{id, true}
			return c.emit(out, func(w io.Writer) { fmt.Fprintf(w, "deleted %s\n", id) })
		})
	}
}

func usageCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		id := args[0]
		return c.withDB(false, func(db *ratestore.DB) error {
			u, err := db.Keys().Usage(c.ctx, id)
			if err != nil {
				return err
			}
			out := usageOut{id, u.Used, u.Limit, u.Remaining, int64(u.ResetAfter), timePtr(u.WindowEnd)}
			return c.emit(out, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
				fmt.Fprintf(tw, "key:\t%s\n", id)
				fmt.Fprintf(tw, "used:\t%d of %d tokens\n", u.Used, u.Limit)
				fmt.Fprintf(tw, "remaining:\t%d\n", u.Remaining)
				if out.WindowEnd == nil {
					fmt.Fprintf(tw, "window end:\t- (nothing in use)\n")
				} else {
					fmt.Fprintf(tw, "window end:\t%s (in %v)\n", show(out.WindowEnd, ""), out.WindowEnd.Sub(c.clock()).Round(time.Second))
					fmt.Fprintf(tw, "fully reset in:\t%v\n", u.ResetAfter.Round(time.Second))
				}
				tw.Flush()
			})
		})
	}
}
