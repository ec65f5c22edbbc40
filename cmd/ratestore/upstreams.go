package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ratestore/ratestore/admin"
)

// The upstreams and config reload commands ask a running gateway, through
// its admin API (--admin), what only it knows: the upstreams it sends
// requests to, with their use of the provider's quotas now, which it
// counts in memory, and the configuration file it was started with. There
// is no database or Redis to read them from instead.

// upstreamsHelp is the help of the upstreams command.
const upstreamsHelp = `Prints every upstream of a running gateway (--admin URL), as GET
/admin/upstreams answers: its name, what api it speaks ("route /PREFIX" for
an --upstream route, a pool of one by path prefix), its URL (without a
password), the models it serves (globs; "all": every model of its api), and
for each of the provider's limits on it, requests per minute (RPM), tokens
per minute (TPM) and requests at once (IN-FLIGHT), what is in use now of the
limit, as USED/LIMIT (the last minute's, reservations of the requests in
flight included; USED/- for no limit). Then its weight (its share of traffic
among the upstreams with room), until when it cools down after a 429, a 5xx
or a failed connection (an RFC 3339 instant; - when it does not), and the
requests sent to it since the gateway started and, of those, the errors
(429s, 5xx and failed connections).`

// upstreamsJSON is the shape of the upstreams command's JSON output.
const upstreamsJSON = `{"upstreams": [{"name", "api" (openai, azure-openai, anthropic, gemini; "" for an
--upstream route), "url", "prefix" (an --upstream route's; left out for
none), "models" ([]: every model of its api), "limits": {"requests_per_minute",
"tokens_per_minute", "max_concurrent"} (each left out for no limit), "weight",
"used": {"requests_per_minute", "tokens_per_minute", "in_flight"},
"cooling_down_until" (RFC 3339; null when not cooling down), "requests",
"errors"}, ...]}: as GET /admin/upstreams answers.`

// configReloadHelp is the help of the config reload command.
const configReloadHelp = `Has a running gateway (--admin URL) read the configuration file it was
started with (--config) again, as SIGHUP does, and apply its upstreams and
prices: POST /admin/config/reload. A file with any problem is refused whole,
and the command exits 1 naming the line; the gateway keeps its running
configuration. A gateway started without --config has no file to reload.
The reload is recorded in the audit log (config.reload).`

// runningFlags registers --admin, which these commands require, and
// --admin-token-file.
func runningFlags(fs *flag.FlagSet) *adminFlags {
	af := &adminFlags{}
	fs.StringVar(&af.url, "admin", "", "the admin API of the running gateway at `URL` (http://"+defaultListen+"), required; the token is $"+adminTokenEnv+" or --admin-token-file's")
	fs.StringVar(&af.tokenFile, "admin-token-file", "", "read the admin token from `PATH` rather than $"+adminTokenEnv)
	return af
}

// onGateway is the command cmd of --admin, which it requires: it runs fn
// with the client of that admin API.
func onGateway(c *cli, cmd string, fs *flag.FlagSet, fn func(*admin.Client) error) func([]string) error {
	af := runningFlags(fs)
	return func([]string) error {
		if af.url == "" {
			return usagef(cmd, "%s: --admin URL is required: only the running gateway knows this (its admin API, as http://%s)", cmd, defaultListen)
		}
		ac, err := adminClient(af.url, af.tokenFile, c.stderr)
		if err != nil {
			return err
		}
		return fn(ac)
	}
}

// upstreamsCmd is upstreams: GET /admin/upstreams.
func upstreamsCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	return onGateway(c, "upstreams", fs, func(ac *admin.Client) error {
		list, err := ac.Upstreams(c.ctx)
		if err != nil {
			return fmt.Errorf("upstreams: %w", err)
		}
		return c.emit(admin.Upstreams{Upstreams: list}, func(w io.Writer) { writeUpstreams(w, list) })
	})
}

// writeUpstreams writes list as a table, an upstream a line.
func writeUpstreams(w io.Writer, list []admin.Upstream) {
	header := "NAME\tAPI\tURL\tMODELS\tRPM\tTPM\tIN-FLIGHT\tWEIGHT\tCOOLING-DOWN\tREQUESTS\tERRORS"
	writeTable(w, "no upstreams", header, len(list), func(tw io.Writer, i int) {
		u := list[i]
		models := "all"
		if len(u.Models) > 0 {
			models = printable(strings.Join(u.Models, ","))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\n", printable(u.Name), apiText(u), printable(u.URL), models,
			usedOf(u.Used.RequestsPerMinute, u.Limits.RequestsPerMinute), usedOf(u.Used.TokensPerMinute, u.Limits.TokensPerMinute),
			inFlightOf(u), u.Weight, show(u.CoolingDownUntil, "-"), u.Requests, u.Errors)
	}, "")
}

// apiText is what upstream u speaks: its api, or "route PREFIX" for an
// --upstream route ("route /" for the one without a prefix).
func apiText(u admin.Upstream) string {
	if u.API != "" {
		return printable(u.API)
	}
	return "route " + printable(cmp.Or(u.Prefix, "/"))
}

// usedOf is the use of a limit as USED/LIMIT; "-" for none, whose use is
// not counted.
func usedOf(used, limit int64) string {
	if limit <= 0 {
		return "-"
	}
	return strconv.FormatInt(used, 10) + "/" + strconv.FormatInt(limit, 10)
}

// inFlightOf is u's requests in flight as USED/LIMIT; USED/- when it has
// limits but no cap on them (they are counted all the same), "-" when it
// has none.
func inFlightOf(u admin.Upstream) string {
	switch {
	case u.Limits.MaxConcurrent > 0:
		return usedOf(int64(u.Used.InFlight), int64(u.Limits.MaxConcurrent))
	case u.Limits != (admin.UpstreamLimits{}):
		return strconv.Itoa(u.Used.InFlight) + "/-"
	}
	return "-"
}

// configReloadCmd is config reload: POST /admin/config/reload.
func configReloadCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	return onGateway(c, "config reload", fs, func(ac *admin.Client) error {
		got, err := ac.ReloadConfig(c.ctx)
		var ae *admin.Error
		if errors.As(err, &ae) && ae.Code == "invalid_config" {
			// Not wrapped: a file refused is the command failing (exit
			// 1), not a wrong command line, as an admin.Error of a 400
			// would say (it matches ErrInvalid).
			return fmt.Errorf("config reload: the gateway refused its configuration file and keeps the one it runs: %s", ae.Msg)
		}
		if err != nil {
			return fmt.Errorf("config reload: %w", err)
		}
		return c.emit(got, func(w io.Writer) {
			fmt.Fprintf(w, "reloaded the configuration: %d upstream%s, %d model%s priced\n", got.Upstreams, plural(got.Upstreams), got.Models, plural(got.Models))
		})
	})
}
