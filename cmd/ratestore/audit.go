package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
)

// The audit command reads the audit log (package audit) that every change
// made through the admin API, the console or the command line is recorded
// in, as GET /admin/audit answers it, through withAdmin: a running
// gateway's API, or one served in this process on a database or Redis it
// opens, whose changes it records as the command line's ("cli").

// auditHelp is the help of the audit command.
const auditHelp = `Every change made to keys and teams through a gateway's admin API, its console
or the command line (keys create, set-limit, set-expiry, disable, enable,
rotate, delete; teams create, set, delete), and every reload of the prices
through POST /admin/prices/reload and of the configuration file through POST
/admin/config/reload, is recorded as one event: when, who ("admin-token" for
the admin token, "session:<8 hex digits>" for a console session, "cli" for
the command line on a database or Redis it opens), what (key.create,
key.update, key.disable, key.enable, key.rotate, key.delete, team.create,
team.update, team.delete, prices.reload, config.reload), to which key or team
(the target; "prices" for the price table, "config" for the configuration
file), and each field that changed, from
and to, as a request to the admin API gives it: never a secret. A change is
recorded before it is acknowledged; one that changes nothing is not. The
gateway keeps events for its --audit-retention (400 days by default).

This prints a page of events, newest first (--limit, 100 by default, at
most 1000); the next one is --cursor with the cursor a page ends with.
--target keeps the events of one key or team, --from and --to bound their
times, [--from, --to), each an RFC 3339 instant (2026-11-26T14:00:00Z) or a
date (2026-11-26, midnight UTC). It reads a closed database (--db), the Redis
of gateways started with --redis (--redis URL), or a running gateway's admin
API (--admin URL), which holds its database.`

// auditJSON is the shape of the audit command's JSON output.
const auditJSON = `{"events": [{"time" (RFC 3339, UTC), "actor", "action", "target", "changes":
{FIELD: {"from", "to"}, ...} (values as a request gives them; null: none),
"address" (where the change came from; left out when not known)}, ...],
"next_cursor" (left out on the last page)}: newest first, as GET
/admin/audit answers.`

// auditCmd is audit: GET /admin/audit, from the flags.
func auditCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	v := url.Values{}
	paramFlag(fs, v, "target", "target", "only the changes of the key or team of this `ID` (prices: the reloads of the price table; config: of the configuration file)")
	paramFlag(fs, v, "from", "from", "the start of the range, `WHEN`: an RFC 3339 instant (2026-11-26T14:00:00Z) or a date (2026-11-26: midnight UTC); default the log's retention, 400 days")
	paramFlag(fs, v, "to", "to", "the end of the range, `WHEN`, excluded; default now")
	paramFlag(fs, v, "limit", "limit", "print `N` events at most, 1 to "+strconv.Itoa(audit.MaxLimit)+" (default 100)")
	paramFlag(fs, v, "cursor", "cursor", "print the page after the one that gave this `CURSOR` (its next_cursor)")
	af := readFlags(fs, "the audit log")
	return func([]string) error {
		const cmd = "audit"
		return c.withAdmin(af, false, false, func(ac *admin.Client) error {
			p, err := ac.Audit(c.ctx, v)
			if err != nil {
				return paramError(cmd, err)
			}
			return c.emit(p, func(w io.Writer) { writeAudit(w, p) })
		})
	}
}

// writeAudit writes p as a table, newest first, a line per event with
// its changes, and how to get the next page.
func writeAudit(w io.Writer, p admin.AuditPage) {
	writeTable(w, "no changes", "TIME\tACTOR\tADDRESS\tACTION\tTARGET\tCHANGES", len(p.Events), func(tw io.Writer, i int) {
		e := p.Events[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339Nano), printable(e.Actor),
			orDash(printable(e.Address)), printable(e.Action), orDash(printable(e.Target)), orDash(changesText(e.Changes)))
	}, p.NextCursor)
}

// changesText is changes as text, by field name: name "k1" -> "k2", ...
func changesText(changes map[string]audit.Change) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(changes)) {
		c := changes[name]
		parts = append(parts, fmt.Sprintf("%s %s -> %s", name, c.From, c.To))
	}
	return printable(strings.Join(parts, "; "))
}

// auditRetentionFlag registers --audit-retention on fs, which sets d.
func auditRetentionFlag(fs *flag.FlagSet, d *time.Duration) {
	*d = audit.DefaultRetention
	fs.Func("audit-retention", "how long the audit log keeps each change made through the admin API, the console or the command line: a Go `duration` (9600h) or days (400d); older ones are dropped every hour (default 400d)", func(v string) (err error) {
		*d, err = parseRetention(v)
		return err
	})
}

// closeAudit stops the sweep of l, if any, before its store closes.
func closeAudit(l *audit.Log) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	l.Close(ctx)
}
