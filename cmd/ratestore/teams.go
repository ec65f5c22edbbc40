package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/keystore"
)

// emitTeam prints team a, after a line that says what was done to it ("" for
// none).
func (c *cli) emitTeam(a admin.Team, done string) error {
	return c.emit(a, func(w io.Writer) {
		if done != "" {
			fmt.Fprintln(w, done)
		}
		writeTeam(w, a, c.clock())
	})
}

// teamsCreate is teams create: a team of the policy flags, which need a
// token window at least, as a key's do.
func teamsCreate(c *cli, fs *flag.FlagSet) func([]string) error {
	name := fs.String("name", "", "the team's `name` (required)")
	pf := policyFlags(fs, false)
	af := keyFlags(fs)
	return func([]string) error {
		const cmd = "teams create"
		if *name == "" {
			return usagef(cmd, "%s: --name is required", cmd)
		}
		p, err := pf.parse(cmd)
		if err != nil {
			return err
		}
		spec := keystore.TeamSpec{Name: *name}
		if _, err := p.apply(cmd, "the new team", &spec.Policy, nil); err != nil {
			return err
		}
		return c.withAdmin(af, true, false, func(ac *admin.Client) error {
			t, err := ac.CreateTeam(c.ctx, admin.NewTeamRequest(keystore.TeamSpec{}, spec))
			if err != nil {
				return err
			}
			return c.emitTeam(t, "created team "+t.ID)
		})
	}
}

func teamsList(c *cli, fs *flag.FlagSet) func([]string) error {
	v := url.Values{}
	paramFlag(fs, v, "limit", "limit", "print `N` teams at most, 1 to 1000 (default 100)")
	paramFlag(fs, v, "cursor", "cursor", "print the page after the one that gave this `CURSOR` (its next_cursor)")
	paramFlag(fs, v, "q", "q", "only the teams whose name or id starts with `TEXT`, in any case")
	paramFlag(fs, v, "sort", "sort", "the order, `BY`: name or -name; default name")
	af := keyFlags(fs)
	return func([]string) error {
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			page, err := ac.Teams(c.ctx, v)
			if err != nil {
				return paramError("teams list", err)
			}
			return c.emit(page, func(w io.Writer) {
				writeTable(w, "no teams", "ID\tNAME\tTOKENS/WINDOW\tBUDGETS\tKEYS", len(page.Teams), func(tw io.Writer, i int) {
					t := page.Teams[i]
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", t.ID, orDash(printable(t.Name)), orDash(windowsText(t.Windows)), orDash(budgetsText(t.Budgets)), t.KeyCount)
				}, page.NextCursor)
			})
		})
	}
}

func teamsShow(c *cli, fs *flag.FlagSet) func([]string) error {
	af := keyFlags(fs)
	return func(args []string) error {
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			t, err := ac.Team(c.ctx, args[0])
			if err != nil {
				return err
			}
			return c.emitTeam(t, "")
		})
	}
}

// teamsSet is teams set: it changes what its flags name, and nothing
// else, in one UpdateTeam, as keys set-limit does for a key.
func teamsSet(c *cli, fs *flag.FlagSet) func([]string) error {
	pf := policyFlags(fs, true)
	var name optional
	fs.Var(&name, "name", "rename the team to `NAME`")
	af := keyFlags(fs)
	return func(args []string) error {
		const cmd = "teams set"
		p, err := pf.parse(cmd)
		if err != nil {
			return err
		}
		if p.empty() && !name.set {
			return usagef(cmd, "%s: nothing to set: give --window, --drop-window, --budget, --drop-budget, --rpm, --max-concurrent, --models or --name", cmd)
		}
		id := args[0]
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			t, err := ac.Team(c.ctx, id)
			if err != nil {
				return err
			}
			old, err := t.Spec()
			if err != nil {
				return err
			}
			spec := old
			spec.Policy.Windows = slices.Clone(old.Policy.Windows)
			var done []string
			if name.set {
				spec.Name = name.value
				done = append(done, fmt.Sprintf("renamed it %q", name.value))
			}
			if done, err = p.apply(cmd, "team "+id, &spec.Policy, done); err != nil {
				return err
			}
			if t, err = ac.PatchTeam(c.ctx, id, admin.NewTeamRequest(old, spec)); err != nil {
				return err
			}
			return c.emitTeam(t, fmt.Sprintf("changed %s: %s", id, strings.Join(done, "; ")))
		})
	}
}

func teamsDelete(c *cli, fs *flag.FlagSet) func([]string) error {
	af := keyFlags(fs)
	return func(args []string) error {
		id := args[0]
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			if err := ac.DeleteTeam(c.ctx, id); err != nil {
				return fmt.Errorf("teams delete: %w", err)
			}
			return c.emit(deleteOut{id, true}, func(w io.Writer) { fmt.Fprintf(w, "deleted %s\n", id) })
		})
	}
}

// writeTeam writes team a as "field: value" lines, then the tables of its
// windows and budgets, with the usage of all its keys.
func writeTeam(w io.Writer, a admin.Team, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "id:\t%s\n", a.ID)
	fmt.Fprintf(tw, "name:\t%s\n", a.Name)
	fmt.Fprintf(tw, "created:\t%s\n", show(a.CreatedAt, "unknown"))
	fmt.Fprintf(tw, "keys:\t%d (ratestore keys list --team %s)\n", a.KeyCount, a.ID)
	fmt.Fprintf(tw, "in flight:\t%d\n", a.InFlight)
	writePolicy(tw, a.RequestsPerMinute, a.MaxConcurrent, a.Models)
	writeSubs(tw, a.ModelLimits, nil, a.EndUsers)
	tw.Flush()
	writeWindows(w, a.Windows, now)
	if len(a.Budgets) > 0 {
		writeBudgets(w, a.Budgets)
	}
}

// writeBudgets writes budgets and their spend as a table.
func writeBudgets(w io.Writer, bs []admin.Budget) {
	fmt.Fprintf(w, "\nbudgets:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SPAN\tSPENT\tLIMIT\tREMAINING\tRESETS AT")
	for _, b := range bs {
		fmt.Fprintf(tw, "  %s\t$%s\t$%s\t$%s\t%s\n", adminSpan(b), b.SpentUSD, b.LimitUSD, b.RemainingUSD, show(b.ResetsAt, "-"))
	}
	tw.Flush()
}

// budgetsText is the budgets bs on one line, for teams list: "$5/24h,
// $500/month@Europe/Paris".
func budgetsText(bs []admin.Budget) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("$%s/%s", b.LimitUSD, adminSpan(b))
	}
	return strings.Join(parts, ", ")
}

// adminSpan is a budget's window or period, as --budget takes it: "24h",
// "month@Europe/Paris".
func adminSpan(b admin.Budget) string {
	if b.Period == "" {
		return short(length(b.Window))
	}
	return b.Period + "@" + b.Timezone
}
