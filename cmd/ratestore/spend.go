package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// The spend and requests commands read the spend ledger the gateway keeps
// (package ledger) and print what GET /admin/spend and /admin/requests
// answer. Their flags are the routes' query parameters, which they build
// and send to the admin API (withAdmin): a running gateway's, or one
// served in this process on a database or Redis they open, so that the
// output is the same either way.

// readFlags registers --redis, --admin and --admin-token-file, as
// keyFlags does for the key commands, for commands that read what, a
// record the gateway keeps ("the ledger").
func readFlags(fs *flag.FlagSet, what string) *adminFlags {
	af := &adminFlags{}
	fs.StringVar(&af.redis, "redis", "", "read "+what+" in the Redis at `URL` (redis://host:port/db), which gateways started with --redis share, rather than the database")
	fs.StringVar(&af.url, "admin", "", "read it through the admin API of the gateway at `URL` (http://"+defaultListen+"), which holds the database; the token is $"+adminTokenEnv+" or --admin-token-file's")
	fs.StringVar(&af.tokenFile, "admin-token-file", "", "read the admin token from `PATH` rather than $"+adminTokenEnv)
	return af
}

// paramFlag registers flag name, which sets the query parameter param of
// v (the last one given wins, as for any flag).
func paramFlag(fs *flag.FlagSet, v url.Values, name, param, usage string) {
	fs.Func(name, usage, func(s string) error {
		v.Set(param, s)
		return nil
	})
}

// rangeFlags registers --from and --to, and the filters --key, --team,
// --model and --end-user, the flags both commands have.
func rangeFlags(fs *flag.FlagSet, v url.Values, defaultFrom string) {
	paramFlag(fs, v, "from", "from", "the start of the range, `WHEN`: an RFC 3339 instant (2026-11-26T14:00:00Z) or a date (2026-11-26: midnight UTC); default "+defaultFrom)
	paramFlag(fs, v, "to", "to", "the end of the range, `WHEN`, excluded; default now")
	paramFlag(fs, v, "key", "key", "only the requests of the key of this `ID`")
	paramFlag(fs, v, "team", "team", "only the requests of the keys of the team of this `ID`")
	paramFlag(fs, v, "model", "model", "only the requests for this `MODEL`")
	paramFlag(fs, v, "end-user", "end_user", "only the requests that named this end user, `NAME` (a key's own customer)")
}

// paramError is err, an error of a query of command cmd, with the
// parameter it names as the command's flag (group_by: --group-by).
func paramError(cmd string, err error) error {
	var ae *admin.Error
	if errors.As(err, &ae) && ae.Param != "" && ae.Status == http.StatusBadRequest {
		msg := strings.TrimPrefix(ae.Msg, ae.Param+": ")
		return usagef(cmd, "%s: --%s: %s", cmd, strings.ReplaceAll(ae.Param, "_", "-"), msg)
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

// spendCmd is spend: GET /admin/spend, from the flags.
func spendCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	v := url.Values{}
	rangeFlags(fs, v, "30 days before --to")
	fs.Func("group-by", "split the total by `DIMS`: key, team, model, end_user, day or hour (UTC; at most 24 hours), comma-separated; repeatable", func(s string) error {
		v.Add("group_by", s)
		return nil
	})
	asCSV := fs.Bool("csv", false, "print CSV: a header, then a line per row, as GET /admin/spend answers Accept: text/csv")
	af := readFlags(fs, "the ledger")
	return func([]string) error {
		const cmd = "spend"
		if *asCSV && c.json {
			return usagef(cmd, "%s: --csv and --json: give one", cmd)
		}
		return c.withAdmin(af, false, true, func(ac *admin.Client) error {
			s, err := ac.Spend(c.ctx, v)
			switch {
			case err != nil:
				return paramError(cmd, err)
			case *asCSV:
				return s.WriteCSV(c.stdout)
			}
			return c.emit(s, func(w io.Writer) { writeSpend(w, s) })
		})
	}
}

// requestsCmd is requests: GET /admin/requests, from the flags.
func requestsCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	v := url.Values{}
	rangeFlags(fs, v, "the ledger's retention, 90 days")
	paramFlag(fs, v, "status", "status", "only the requests answered with this HTTP `STATUS`")
	paramFlag(fs, v, "limit", "limit", "print `N` requests at most, 1 to "+strconv.Itoa(ledger.MaxLimit)+" (default 100)")
	paramFlag(fs, v, "cursor", "cursor", "print the page after the one that gave this `CURSOR` (its next_cursor)")
	asCSV := fs.Bool("csv", false, "print CSV: a header of the JSON's fields, then a line per request, as GET /admin/requests answers Accept: text/csv")
	af := readFlags(fs, "the ledger")
	return func([]string) error {
		const cmd = "requests"
		if *asCSV && c.json {
			return usagef(cmd, "%s: --csv and --json: give one", cmd)
		}
		return c.withAdmin(af, false, true, func(ac *admin.Client) error {
			p, err := ac.Requests(c.ctx, v)
			switch {
			case err != nil:
				return paramError(cmd, err)
			case *asCSV:
				if p.NextCursor != "" {
					fmt.Fprintf(c.stderr, "ratestore: more requests: add --cursor %s\n", p.NextCursor)
				}
				return p.WriteCSV(c.stdout)
			}
			return c.emit(p, func(w io.Writer) { writeRequests(w, p) })
		})
	}
}

// spendColumns are the headings of the counters in spend's table.
const spendColumns = "REQUESTS\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tREASONING\tCOST USD\tREFUSED"

// writeSpend writes s as a table: a line per row and one for the total,
// which is all there is without --group-by; then the refusals by reason.
// Costs are rounded to 6 decimals.
func writeSpend(w io.Writer, s admin.Spend) {
	fmt.Fprintf(w, "spend from %s to %s\n", s.From.Format(time.RFC3339), s.To.Format(time.RFC3339))
	if s.Total.Requests == 0 && s.Total.Refused == 0 {
		fmt.Fprintln(w, "no requests")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var head []string
	for _, by := range s.GroupBy {
		head = append(head, strings.ToUpper(by))
	}
	fmt.Fprintln(tw, strings.Join(append(head, spendColumns), "\t"))
	if len(s.GroupBy) > 0 {
		for _, r := range s.Rows {
			var dims []string
			for _, by := range s.GroupBy {
				v, _ := r.Dimension(by)
				dims = append(dims, orDash(printable(v)))
			}
			fmt.Fprintln(tw, strings.Join(append(dims, countersText(r.Counters)), "\t"))
		}
	}
	total := make([]string, len(s.GroupBy))
	if len(total) > 0 {
		total[0] = "total"
	}
	fmt.Fprintln(tw, strings.Join(append(total, countersText(s.Total)), "\t"))
	tw.Flush()
	if len(s.Total.RefusedBy) > 0 {
		var by []string
		for _, reason := range slices.Sorted(maps.Keys(s.Total.RefusedBy)) {
			by = append(by, fmt.Sprintf("%s %d", printable(reason), s.Total.RefusedBy[reason]))
		}
		fmt.Fprintf(w, "refused by: %s\n", strings.Join(by, ", "))
	}
}

// countersText is c as the cells of spend's table.
func countersText(c admin.Counters) string {
	return fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d", c.Requests, c.InputTokens, c.OutputTokens,
		c.CacheReadTokens, c.CacheWriteTokens, c.ReasoningTokens, usd6(c.CostUSD), c.Refused)
}

// usd6 is u with 6 decimals, for the text output.
func usd6(u pricing.USD) string { return strconv.FormatFloat(u.Float64(), 'f', 6, 64) }

// writeRequests writes p as a table, newest first, and how to get the
// next page. An estimated request (no usage reported) has a ~ before its
// input tokens.
func writeRequests(w io.Writer, p admin.Requests) {
	header := "TIME\tREQUEST ID\tKEY\tTEAM\tMODEL\tROUTE\tSTATUS\tMS\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tREASONING\tCOST USD"
	writeTable(w, "no requests", header, len(p.Requests), func(tw io.Writer, i int) {
		e := p.Requests[i]
		in := strconv.FormatInt(e.Tokens.Input, 10)
		if e.Estimated {
			in = "~" + in
		}
		t := e.Tokens
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%s\n", e.Time.UTC().Format(ledger.TimeFormat),
			printable(e.RequestID), printable(e.Key), orDash(printable(e.Team)), printable(e.Model), printable(e.Route),
			e.Status, e.Latency.Milliseconds(), in, t.Output, t.CacheRead, t.CacheWrite, t.Reasoning, usd6(e.Cost))
	}, p.NextCursor)
}

// printable is s for a terminal: quoted as Go does when it holds a
// character that is not printable (an escape sequence in a model name,
// which key holders choose), else as it is.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
