package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/ratestore/ratestore/admin"
)

// endUsersHelp is the help of end-users.
const endUsersHelp = `Prints a page of the end users of key ID (100 by default, at most 1000),
by name, as the ledger has seen them: each with its usage now of the key's
end-user limits (or its team's) and its totals over all time. --q keeps
those whose name starts with TEXT (as written: case counts). With NAME,
prints that one end user. It reads a closed database (--db), the Redis of
gateways started with --redis, or a running gateway's admin API (--admin
URL), which holds its database.`

// endUsersCmd is end-users: a page of a key's end users, or one.
func endUsersCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	v := url.Values{}
	paramFlag(fs, v, "limit", "limit", "print `N` end users at most, 1 to 1000 (default 100)")
	paramFlag(fs, v, "cursor", "cursor", "print the page after the one that gave this `CURSOR` (its next_cursor)")
	paramFlag(fs, v, "q", "q", "only the end users whose name starts with `TEXT`")
	all := fs.Bool("all", false, "print every page, not just one (with --json: an END USER a line)")
	af := keyFlags(fs)
	return func(args []string) error {
		return c.withAdmin(af, false, true, func(ac *admin.Client) error {
			if len(args) == 2 {
				u, err := ac.EndUser(c.ctx, args[0], args[1])
				if err != nil {
					return err
				}
				return c.emit(u, func(w io.Writer) { writeEndUsers(w, []admin.EndUser{u}, true, "") })
			}
			for first := true; ; first = false {
				page, err := ac.EndUsers(c.ctx, args[0], v)
				if err != nil {
					return paramError("end-users", err)
				}
				if err := c.emitEndUsers(page, *all, first); err != nil || !*all || page.NextCursor == "" {
					return err
				}
				v.Set("cursor", page.NextCursor)
			}
		})
	}
}

// emitEndUsers prints a page of end-users, as emitKeys prints one of keys.
func (c *cli) emitEndUsers(page admin.EndUserPage, all, first bool) error {
	if all && c.json {
		enc := json.NewEncoder(c.stdout)
		for _, u := range page.EndUsers {
			if err := enc.Encode(u); err != nil {
				return err
			}
		}
		return nil
	}
	return c.emit(page, func(w io.Writer) {
		next := page.NextCursor
		if all {
			next = ""
		}
		writeEndUsers(w, page.EndUsers, first, next)
	})
}

// writeEndUsers writes end users as a table, its header when header is
// set.
func writeEndUsers(w io.Writer, us []admin.EndUser, header bool, next string) {
	empty, head := "no end users", "END USER\tUSED/LIMIT\tREQUESTS\tTOKENS\tCOST USD\tREFUSED\tLAST USED"
	if !header {
		empty, head = "", ""
	}
	writeTable(w, empty, head, len(us), func(tw io.Writer, i int) {
		u := us[i]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\t%s\n", printable(u.ID), orDash(windowsUsed(u.Windows)), u.Requests, u.Tokens,
			u.CostUSD, u.Refused, show(u.LastUsed, "never"))
	}, next)
}

// windowsUsed is the use of token windows: "642/20000 per 24h", one
// after another.
func windowsUsed(ws []admin.Window) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%d/%d per %s", w.Used, w.Limit, short(length(w.Window)))
	}
	return strings.Join(parts, ", ")
}
