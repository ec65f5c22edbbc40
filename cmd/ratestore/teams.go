package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/keystore"
)

// teamService is what the team commands do with teams: the methods of
// *keystore.Store they call, which adminClient implements over the
// admin API of a running gateway.
type teamService interface {
	CreateTeam(ctx context.Context, spec keystore.TeamSpec) (keystore.Team, error)
	GetTeam(ctx context.Context, id string) (keystore.Team, error)
	ListTeams(ctx context.Context, fn func(keystore.Team) error) error
	UpdateTeam(ctx context.Context, id string, fn func(*keystore.TeamSpec) error) (keystore.Team, error)
	DeleteTeam(ctx context.Context, id string) error
	TeamUsage(ctx context.Context, id string) (keystore.Usage, error)
	TeamKeys(ctx context.Context, id string) ([]string, error)
}

// teamViewer is a teamService that reads a team with its usage and keys
// in one call (the admin API), as the team commands print it.
type teamViewer interface {
	viewTeam(ctx context.Context, id string) (gateway.AdminTeam, error)
	viewTeams(ctx context.Context) ([]gateway.AdminTeam, error)
}

var _ teamViewer = (*adminClient)(nil)

// viewTeam returns team id with its usage and keys, built by
// gateway.NewAdminTeam as the admin API builds it.
func (c *cli) viewTeam(ts teamService, id string) (gateway.AdminTeam, error) {
	if tv, ok := ts.(teamViewer); ok {
		return tv.viewTeam(c.ctx, id)
	}
	t, err := ts.GetTeam(c.ctx, id)
	if err != nil {
		return gateway.AdminTeam{}, err
	}
	return c.teamWith(ts, t)
}

// teamWith returns team t with its usage and keys read now.
func (c *cli) teamWith(ts teamService, t keystore.Team) (gateway.AdminTeam, error) {
	u, err := ts.TeamUsage(c.ctx, t.ID)
	if err != nil {
		return gateway.AdminTeam{}, err
	}
	keys, err := ts.TeamKeys(c.ctx, t.ID)
	if err != nil {
		return gateway.AdminTeam{}, err
	}
	return gateway.NewAdminTeam(t, u, keys), nil
}

// viewTeams returns every team with its usage and keys, in id order; a
// team deleted while they are read is left out, as the admin API does.
func (c *cli) viewTeams(ts teamService) ([]gateway.AdminTeam, error) {
	if tv, ok := ts.(teamViewer); ok {
		return tv.viewTeams(c.ctx)
	}
	teams := []gateway.AdminTeam{}
	err := ts.ListTeams(c.ctx, func(t keystore.Team) error {
		a, err := c.teamWith(ts, t)
		switch {
		case errors.Is(err, keystore.ErrNotFound):
			return nil // deleted meanwhile
		case err != nil:
			return err
		}
		teams = append(teams, a)
		return nil
	})
	return teams, err
}

// emitTeam prints team id with its usage and keys, after a line that
// says what was done to it ("" for none).
func (c *cli) emitTeam(ts teamService, id, done string) error {
	a, err := c.viewTeam(ts, id)
	if err != nil {
		return err
	}
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
		if *name == "" || len(pf.windows) == 0 {
			return usagef(cmd, "%s: --name and a token window (--window) are required", cmd)
		}
		p, err := pf.parse(cmd)
		if err != nil {
			return err
		}
		spec := keystore.TeamSpec{Name: *name}
		for _, w := range p.windows {
			spec.Policy.Windows = append(spec.Policy.Windows, w.win)
		}
		spec.Policy.RequestsPerMinute, spec.Policy.MaxConcurrent, spec.Policy.Models = p.rpm, p.maxConcurrent, p.models
		spec.Policy.Budgets = p.budgets
		return c.withTeams(af, true, func(ts teamService) error {
			t, err := ts.CreateTeam(c.ctx, spec)
			if err != nil {
				return err
			}
			return c.emitTeam(ts, t.ID, "created team "+t.ID)
		})
	}
}

func teamsList(c *cli, fs *flag.FlagSet) func([]string) error {
	af := keyFlags(fs)
	return func([]string) error {
		return c.withTeams(af, false, func(ts teamService) error {
			teams, err := c.viewTeams(ts)
			if err != nil {
				return err
			}
			return c.emit(gateway.AdminTeams{Teams: teams}, func(w io.Writer) {
				if len(teams) == 0 {
					fmt.Fprintln(w, "no teams")
					return
				}
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tTOKENS/WINDOW\tBUDGETS\tKEYS")
				for _, t := range teams {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", t.ID, orDash(t.Name), windowsText(t.Windows), orDash(budgetsText(t.Budgets)), len(t.Keys))
				}
				tw.Flush()
			})
		})
	}
}

func teamsShow(c *cli, fs *flag.FlagSet) func([]string) error {
	af := keyFlags(fs)
	return func(args []string) error {
		return c.withTeams(af, false, func(ts teamService) error { return c.emitTeam(ts, args[0], "") })
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
		return c.withTeams(af, false, func(ts teamService) error {
			var done []string
			_, err := ts.UpdateTeam(c.ctx, id, func(s *keystore.TeamSpec) error {
				if name.set {
					s.Name = name.value
					done = append(done, fmt.Sprintf("renamed it %q", name.value))
				}
				var err error
				done, err = p.apply(cmd, "team "+id, &s.Policy, done)
				return err
			})
			if err != nil {
				return err
			}
			return c.emitTeam(ts, id, fmt.Sprintf("changed %s: %s", id, strings.Join(done, "; ")))
		})
	}
}

func teamsDelete(c *cli, fs *flag.FlagSet) func([]string) error {
	af := keyFlags(fs)
	return func(args []string) error {
		id := args[0]
		return c.withTeams(af, false, func(ts teamService) error {
			if err := ts.DeleteTeam(c.ctx, id); err != nil {
				return fmt.Errorf("teams delete: %w", err)
			}
			return c.emit(deleteOut{id, true}, func(w io.Writer) { fmt.Fprintf(w, "deleted %s\n", id) })
		})
	}
}

// writeTeam writes team a as "field: value" lines, then the tables of its
// windows and budgets, with the usage of all its keys.
func writeTeam(w io.Writer, a gateway.AdminTeam, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "id:\t%s\n", a.ID)
	fmt.Fprintf(tw, "name:\t%s\n", a.Name)
	fmt.Fprintf(tw, "created:\t%s\n", show(a.CreatedAt, "unknown"))
	fmt.Fprintf(tw, "keys:\t%s\n", orNone(strings.Join(a.Keys, ", ")))
	fmt.Fprintf(tw, "in flight:\t%d\n", a.InFlight)
	writePolicy(tw, a.RequestsPerMinute, a.MaxConcurrent, a.Models)
	tw.Flush()
	writeWindows(w, a.Windows, now)
	if len(a.Budgets) > 0 {
		writeBudgets(w, a.Budgets)
	}
}

// writeBudgets writes budgets and their spend as a table.
func writeBudgets(w io.Writer, bs []gateway.AdminBudget) {
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
func budgetsText(bs []gateway.AdminBudget) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("$%s/%s", b.LimitUSD, adminSpan(b))
	}
	return strings.Join(parts, ", ")
}

// adminSpan is a budget's window or period, as --budget takes it: "24h",
// "month@Europe/Paris".
func adminSpan(b gateway.AdminBudget) string {
	if b.Period == "" {
		return short(length(b.Window))
	}
	return b.Period + "@" + b.Timezone
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
