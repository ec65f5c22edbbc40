package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// command is one command of the command line.
type command struct {
	name    string // as typed: "import", "keys create"
	args    string // the synopsis after the name: "FILE [--dry-run]"
	summary string // one line, for the command list
	help    string // more, for help on the command; may be ""
	json    string // the shape of its --json output
	// minArgs and maxArgs bound the positional arguments; maxArgs -1: any.
	minArgs, maxArgs int
	// setup defines the command's flags on fs and returns what runs it on
	// the positional arguments, once the flags are parsed.
	setup func(c *cli, fs *flag.FlagSet) func(args []string) error
}

// keyJSON is the shape of a key in JSON output (admin.Key, as the
// gateway's admin API answers it), named in the commands' json texts.
const keyJSON = `KEY is {"id", "name", "model", "models" ([]: any), "windows": [{"limit",
"window", "bucket" (Go durations: "5h0m0s"), "used", "remaining", "reset_after_seconds"
(until nothing is in use, rounded up), "window_end" (when used next goes down;
null: nothing in use)}, ...], "binding" (the index in windows of the binding
window: the one most over its limit, else the one with the least remaining),
"requests_per_minute" (0: no limit), "max_concurrent" (0: no limit),
"expires_at" (null: never), "disabled", "lifetime_tokens", "last_used" (null:
never), "created_at" (null: unknown), "in_flight" (requests admitted and not
finished), "reserved_tokens" (what the gateway's requests in flight reserve,
part of each window's used; 0 on a closed database), "budgets": [{"limit_usd", "window" or "period" ("day", "week",
"month") and "timezone", "spent_usd", "remaining_usd", "resets_at"}, ...],
"lifetime_usd", "previous_secret_expires_at" (when the secret keys rotate
replaced stops working; null: none), "team" (its team's id; left out for
none), "model_limits": [{"models", "windows": [{"limit", "window", "bucket"}],
"budgets": [{"limit_usd", "window" or "period", "timezone"}],
"requests_per_minute", "max_concurrent"}, ...] (left out for none),
"end_users" ({"windows", "budgets", "requests_per_minute", "max_concurrent",
"required"}, the limits of each end user; left out for none), "model_usage"
([{"models", "windows", "binding", "budgets", "in_flight"}, ...]: each model
limit's usage, for one key, not in lists)}: the key as the gateway's admin API answers it. Money is USD as a decimal number, exact to 1e-9. "used" includes
the tokens reserved by requests in flight and may exceed "limit"; "spent_usd"
the cost they reserved.`

// teamJSON is the shape of a team in JSON output (admin.Team, as
// the gateway's admin API answers it), named in the teams commands' json
// texts.
const teamJSON = `TEAM is {"id", "name", "models", "windows", "binding", "budgets",
"requests_per_minute", "max_concurrent", "model_limits", "end_users",
"in_flight", "created_at", "key_count" (how many keys belong to it: keys list --team ID lists them)}: its policy as a
KEY's, with the usage of all its keys together, as the gateway's admin API
answers it.`

// policyHelp is the help of the policy flags, for keys create and keys
// set-limit.
const policyHelp = `A key has one or more token windows: at most LIMIT tokens in any DURATION,
counted in buckets of BUCKET (default DURATION/60, rounded to a divisor:
5h counts in 5m buckets, 168h in 2h48m ones); every window must allow a
request. DURATION and BUCKET are Go durations (90m, 5h, 168h for a week).
--rpm caps the requests per minute, --max-concurrent those in flight at once,
and --models the models a request may name (globs: "claude-*"). The gateway
command enforces all of them on every request (keystore's Store.Admit).

--model-limit GLOBS:DURATION=LIMIT[/BUCKET] is a token window that counts the
requests for those models only (gpt-4o*:24h=100000), besides the others;
--model-limit gpt-4o:5h=1000 --model-limit gpt-4o:168h=5000 gives one limit
two windows. --end-user-window, --end-user-budget, --end-user-rpm and
--end-user-max-concurrent limit each end user (the key's own customers, whom a
request names by the header X-Ratestore-End-User, OpenAI's "user" or
Anthropic's metadata.user_id) separately; --end-user-required true refuses a
request that names none. --policy FILE reads the policy as JSON, in the admin
API's shape ({"windows": [...], "model_limits": [{"models": ["gpt-4o*"],
"windows": [...]}], "end_users": {"windows": [...], "required": true}}), and
the other flags then change it.`

// ledgerHelp is the end of the help of spend and requests.
const ledgerHelp = `Each reads a closed database (--db), the Redis of gateways started with
--redis (--redis URL), or a running gateway's admin API (--admin URL), which
holds its database. The text output rounds costs to 6 decimals; --json and
--csv print exact amounts, as the admin API answers them. In --csv output, a
text cell starting with =, +, -, @ (model names are the callers') gets a
leading ' so that spreadsheets do not run it as a formula.`

// spendRowJSON is the shape of the rows and counters of spend's JSON
// output (admin.Spend).
const spendRowJSON = `a ROW is the dimensions grouped by, "key", "team" ("" for the keys
in no team), "model", "day" ("2026-11-26") or "hour" ("2026-11-26T14:00:00Z"),
and the COUNTERS: {"requests", "input_tokens", "output_tokens", "cache_read_tokens",
"cache_write_tokens", "reasoning_tokens", "cost_usd" (USD, a decimal number
exact to 1e-9), "refused", "refused_by" ({"window": 3, ...}; left out when
none)}. As GET /admin/spend answers.`

// commands lists every command, in the order help shows them.
var commands = []*command{
	{
		name: "import", args: "FILE [--dry-run] [--redis URL]", minArgs: 1, maxArgs: 1,
		summary: "import a legacy API-key file ({\"keys\": [...]})",
		help: `All or nothing: a file with any problem that refuses it imports nothing, and
the command exits 1 with every problem listed. Importing a file again changes
nothing. Legacy secrets keep working; only their hashes are stored. Usage
windows are kept and migrated lazily (see migrate).`,
		json: `{"file", "dry_run", "refused", "entries", "keys", "windows", "ignored_caches",
"refusals", "skips", "notes"}; refusals, skips and notes are lists of
{"index", "name", "field", "reason"}, left out when empty.`,
		setup: importCmd,
	},
	{
		name: "migrate", args: "[--dry-run] [--redis URL]", maxArgs: 0,
		summary: "migrate all pending legacy usage now",
		help: `Imported usage windows are migrated lazily, the first time a key is touched;
this migrates those of every key now. Progress is shown on a terminal. With
--redis it migrates the keys of the key store in that Redis, one batch a key,
while gateways started with --redis go on serving.`,
		json:  `{"dry_run", "pending" (keys with legacy usage before), "migrated" (keys migrated)}`,
		setup: migrateCmd,
	},
	{
		name: "keys create", args: "--name NAME (--limit TOKENS | --window DURATION=LIMIT[/BUCKET]...) [--rpm N] [--max-concurrent N] [--models GLOBS] [--model-limit GLOBS:DURATION=LIMIT]... [--end-user-window DURATION=LIMIT]... [--end-user-budget USD=SPAN]... [--end-user-rpm N] [--end-user-max-concurrent N] [--end-user-required BOOL] [--policy FILE] [--model MODEL] [--expires WHEN] [--team ID]", maxArgs: 0,
		summary: "create an API key; prints its secret, once",
		help: `--limit TOKENS is the one-window shorthand: --window 5h=TOKENS. Give --window
once per window, as --window 5h=100000 --window 168h=1000000.

` + policyHelp + `

WHEN is an RFC 3339 instant (2027-01-01T00:00:00Z), a duration from now (720h)
or "never" (the default). --team puts the key in a team (teams create): a
request must then fit the team's limits as well as the key's. The secret is
printed only here: the store keeps only its hash.`,
		json:  `{"key": KEY, "secret"}.`,
		setup: keysCreate,
	},
	{
		name: "keys list", args: "[--q TEXT] [--team ID] [--status active|disabled|expired] [--sort BY] [--limit N] [--cursor CURSOR] [--all]", maxArgs: 0,
		summary: "list the API keys, a page at a time",
		help: `Prints a page of keys (100 by default, at most 1000), searched and sorted by
the key store: --q matches the start of a key's name or id, or of its team's
name, in any case; --sort is name (the default), last_used or spend, with a
leading - for descending. The page ends with the --cursor of the next one;
--all prints every page.`,
		json:  `{"keys": [KEY, ...], "next_cursor" (left out on the last page)}; with --all, a KEY a line.`,
		setup: keysList,
	},
	{
		name: "keys show", args: "ID", minArgs: 1, maxArgs: 1,
		summary: "show an API key, its limits and the usage of each token window",
		json:    `KEY.`,
		setup:   keysShow,
	},
	{
		name: "keys disable", args: "ID", minArgs: 1, maxArgs: 1,
		summary: "disable an API key until enabled again",
		json:    `KEY, as changed.`,
		setup:   keysSet(setDisabled(true)),
	},
	{
		name: "keys enable", args: "ID", minArgs: 1, maxArgs: 1,
		summary: "enable a disabled API key",
		json:    `KEY, as changed.`,
		setup:   keysSet(setDisabled(false)),
	},
	{
		name: "keys delete", args: "ID", minArgs: 1, maxArgs: 1,
		summary: "delete an API key; its secret stops working",
		json:    `{"id", "deleted": true}`,
		setup:   keysDelete,
	},
	{
		name: "keys set-limit", args: "ID [TOKENS] [--window DURATION=LIMIT[/BUCKET]]... [--drop-window DURATION]... [--rpm N] [--max-concurrent N] [--models GLOBS] [--team ID]", minArgs: 1, maxArgs: 2,
		summary: "change the limits of an API key",
		help: `Changes what its arguments and flags name, and nothing else. TOKENS sets the
limit of the key's first window (a legacy key's only one). --window sets the
limit of the key's window of that DURATION, and its bucket if /BUCKET is given,
or adds a window; --drop-window removes one. --rpm 0 and --max-concurrent 0
lift those limits; --models "" allows any model. --team ID moves the key to
that team, --team "" takes it out of its team. Usage already counted stays
counted: a window keeps its usage while its length stays, and a new window
starts empty.

` + policyHelp,
		json:  `KEY, as changed.`,
		setup: keysSetLimit,
	},
	{
		name: "keys set-expiry", args: "ID WHEN", minArgs: 2, maxArgs: 2,
		summary: "set when an API key expires",
		help: `WHEN is an RFC 3339 instant, a duration from now (720h) or "never". An instant
in the past expires the key at once.`,
		json:  `KEY, as changed.`,
		setup: keysSet(setExpiry),
	},
	{
		name: "keys rotate", args: "ID [--grace DURATION]", minArgs: 1, maxArgs: 1,
		summary: "give an API key a new secret; prints it, once",
		help: `The key keeps its id, limits, usage and history: only its secret changes. The
old secret keeps working for --grace (a Go duration, as 24h), then is refused
as unknown; without --grace it stops at once. A key has one old secret at
most: rotating it again during a grace stops the oldest at once. A disabled or
expired key can be rotated, and stays so. The new secret is printed only here:
the store keeps only its hash.`,
		json:  `{"key": KEY, "secret"}.`,
		setup: keysRotate,
	},
	{
		name: "teams create", args: "--name NAME --window DURATION=LIMIT[/BUCKET]... [--budget USD=SPAN]... [--rpm N] [--max-concurrent N] [--models GLOBS]", maxArgs: 0,
		summary: "create a team, whose limits its keys share",
		help: `A team has a policy as a key has, counted over the requests of all its keys
together: a request of a key in a team must fit both the key's limits and
the team's. Put keys in it with keys create --team or keys set-limit --team.

` + policyHelp,
		json:  `TEAM.`,
		setup: teamsCreate,
	},
	{
		name: "teams list", args: "[--q TEXT] [--sort name|-name] [--limit N] [--cursor CURSOR]", maxArgs: 0,
		summary: "list the teams, a page at a time",
		json:    `{"teams": [TEAM, ...], "next_cursor" (left out on the last page)}.`,
		setup:   teamsList,
	},
	{
		name: "teams show", args: "ID", minArgs: 1, maxArgs: 1,
		summary: "show a team, its limits, their usage by all its keys, and its keys",
		json:    `TEAM.`,
		setup:   teamsShow,
	},
	{
		name: "teams set", args: "ID [--name NAME] [--window DURATION=LIMIT[/BUCKET]]... [--drop-window DURATION]... [--budget USD=SPAN]... [--drop-budget SPAN]... [--rpm N] [--max-concurrent N] [--models GLOBS]", minArgs: 1, maxArgs: 1,
		summary: "change the name or limits of a team",
		help: `Changes what its flags name, and nothing else, as keys set-limit does for a
key: --window sets the limit of the team's window of that DURATION or adds
one, --drop-window removes one; --budget and --drop-budget do the same for
budgets. Usage already counted stays counted.`,
		json:  `TEAM, as changed.`,
		setup: teamsSet,
	},
	{
		name: "teams delete", args: "ID", minArgs: 1, maxArgs: 1,
		summary: "delete a team that has no keys",
		help: `Refused while keys belong to the team: move them out first (keys set-limit
ID --team "").`,
		json:  `{"id", "deleted": true}`,
		setup: teamsDelete,
	},
	{
		name: "usage", args: "ID", minArgs: 1, maxArgs: 1,
		summary: "show the token usage of an API key in each of its windows",
		help: `Prints the binding window (the one with the least left), then every window:
used, limit, remaining, when the oldest usage still counted stops counting
(window end) and when nothing is in use any more (fully reset); and the key's
request rate, max concurrent and models. Used may exceed the limit (usage
recorded after the fact).`,
		json:  `KEY, as keys show prints it: the binding window is windows[binding].`,
		setup: usageCmd,
	},
	{
		name: "spend", args: "[--from WHEN] [--to WHEN] [--group-by key,team,model,end_user,day,hour]... [--key ID] [--team ID] [--model MODEL] [--end-user NAME] [--csv]", maxArgs: 0,
		summary: "add up what the requests served used and cost, and those refused",
		help: `Reads the spend ledger the gateway keeps in its database: a rollup per key,
team, model and UTC day, and an entry per finished request. Prints the
requests served, their tokens by type (disjoint: input without the cached
prompt, output without the reasoning), their cost, and the requests refused,
in all and by reason (window, budget, rate, ...). --group-by splits the total
by key, team, model, day or hour, comma-separated or repeated; by hour reads
the entries, which the gateway keeps for its --ledger-retention (90 days by
default), and counts no refusals. WHEN is an RFC 3339 instant
(2026-11-26T14:00:00Z) or a date (2026-11-26, midnight UTC); the range,
[--from, --to), is rounded out to whole days (hours with --group-by hour).

` + ledgerHelp,
		json: `{"from", "to" (the range as rounded), "group_by": [...], "rows": [ROW, ...],
"total": COUNTERS}: ` + spendRowJSON,
		setup: spendCmd,
	},
	{
		name: "requests", args: "[--key ID] [--team ID] [--model MODEL] [--end-user NAME] [--status STATUS] [--from WHEN] [--to WHEN] [--limit N] [--cursor CURSOR] [--csv]", maxArgs: 0,
		summary: "list the requests the gateway served, newest first, a page at a time",
		help: `Reads the entries of the spend ledger the gateway keeps in its database, one
per finished request (kept for the gateway's --ledger-retention, 90 days by
default; refused requests are counted by spend, not entered). A page holds
--limit of them; the next one is --cursor with the cursor a page ends with.
WHEN is as for spend; the range is [--from, --to).

` + ledgerHelp,
		json: `{"requests": [{"time" (RFC 3339 with milliseconds), "request_id", "key", "team" (left out
for none), "model", "route", "upstream" (the upstream that answered; left out
for none), "status", "latency_ms", "input_tokens", "output_tokens",
"cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd",
"estimated" (no usage was reported: the tokens are the gateway's estimate)},
...], "next_cursor" (left out on the last page)}: newest first, as GET
/admin/requests answers.`,
		setup: requestsCmd,
	},
	{
		name: "audit", args: "[--target ID] [--from WHEN] [--to WHEN] [--limit N] [--cursor CURSOR]", maxArgs: 0,
		summary: "list the changes made to keys, teams, prices and config, who made them and when, newest first",
		help:    auditHelp,
		json:    auditJSON,
		setup:   auditCmd,
	},
	{
		name: "copy", args: "--to PATH [--to-backend bolt|badger]", maxArgs: 0,
		summary: "copy the whole database to a new file or backend",
		help: `The destination must not exist or be empty. Progress is shown on a terminal.
Copy only while nothing else uses the database (it is locked anyway).`,
		json:  `{"from", "from_backend", "to", "to_backend", "records", "bytes"}`,
		setup: copyCmd,
	},
	{
		name: "inspect", args: "LIMITER KEY", minArgs: 2, maxArgs: 2,
		summary: "show the stored state of one key of one limiter",
		help: `The state is decoded by its header, without the limiter's configuration; v1
and v2 states (legacy) are shown raw. A key with no stored state is fresh or
idle. A state that cannot be decoded is shown raw, and the command exits 1.`,
		json: `{"limiter", "key", "found", "raw", "raw_hex", "state", "error"}; state is
{"kind", "header", "legacy", "fields"} (fields by name as in
strategies/DATA_FORMAT.md: instants RFC 3339, durations in ns; a composite's
fields "primary" and "secondary" are states), null when not found or corrupt;
error, the decoding error, is left out when there is none.`,
		setup: inspectCmd,
	},
	{
		name: "check", maxArgs: 0,
		summary: "verify the whole database offline: files, log and every stored value",
		help:    checkHelp,
		json: `{"db", "backend", "ok", "keys", "states", "records", "other", "bytes",
"checked" (what was verified), "problems": [{"file", "key", "what"}, ...]};
file and key are left out when not known; key is quoted as Go does.`,
		setup: checkCmd,
	},
	{
		name: "gateway", args: "--upstream [PREFIX=]URL... [--listen ADDR] [--rps R --burst B] [--shadow] [--tls-cert FILE --tls-key FILE]", maxArgs: 0,
		summary: "serve a reverse proxy that meters tokens per API key",
		help:    gatewayHelp,
		json: `{"listen", "upstream" (the default route; "" for none), "routes": [{"prefix",
"upstream", "key_env"}], "upstreams": [{"name", "api", "url", "models"}] (--config's), "stats_path", "rps", "burst", "durability", "shadow",
"admin" (whether the admin API and console are open), "prices" (--prices), "unpriced",
"tls" (served over TLS)}, once it listens.`,
		setup: gatewayCmd,
	},
	{
		name: "end-users", args: "KEY-ID [NAME] [--q TEXT] [--limit N] [--cursor CURSOR] [--all]", minArgs: 1, maxArgs: 2,
		summary: "list the end users of a key, a page at a time, with their usage and totals",
		help:    endUsersHelp,
		json: `{"end_users": [END USER, ...], "next_cursor" (left out on the last page)}; with NAME, one END USER:
{"id" (its name), "windows", "binding", "budgets" (as a KEY's, of the end users' limits), "in_flight",
"requests", "tokens", "cost_usd", "refused", "last_used"}. As GET /admin/keys/{id}/end-users answers.`,
		setup: endUsersCmd,
	},
	{
		name: "upstreams", args: "--admin URL", maxArgs: 0,
		summary: "show a running gateway's upstreams: the use of their quotas, cooldowns and errors",
		help:    upstreamsHelp,
		json:    upstreamsJSON,
		setup:   upstreamsCmd,
	},
	{
		name: "config reload", args: "--admin URL", maxArgs: 0,
		summary: "have a running gateway read its --config file again and apply its upstreams and prices",
		help:    configReloadHelp,
		json:    `{"upstreams" (how many the configuration has), "models" (how many its prices price)}`,
		setup:   configReloadCmd,
	},
	{
		name: "console", args: "[--listen ADDR] [--admin-token-file FILE] [--redis URL] [--tls-cert FILE --tls-key FILE]", maxArgs: 0,
		summary: "serve the operator's web console, read-only, on a closed database",
		help:    consoleHelp,
		json: `{"listen", "url" (the console's page), "tls", "read_only" (true), "redis" (with
--redis, redacted)}, once it listens.`,
		setup: consoleCmd,
	},
	{
		name: "serve", args: "[--http ADDR] [--resp ADDR] [--token-file FILE]", maxArgs: 0,
		summary: "serve limiters over HTTP and RESP (redis-cell's CL.THROTTLE) to other programs",
		help:    serveHelp,
		json:    `{"http", "resp" (the addresses listened on; "" for a side off), "durability", "token" (whether one is required)}, once it listens.`,
		setup:   serveCmd,
	},
	{
		name: "version", maxArgs: 0,
		summary: "print the version",
		json:    `{"version", "go"}`,
		setup:   versionCmd,
	},
}

// groups are the commands that have subcommands: keys create, teams list,
// config reload.
var groups = []string{"keys", "teams", "config"}

// lookup finds the command that args start with and returns the rest.
func lookup(args []string) (*command, []string, error) {
	group := ""
	if slices.Contains(groups, args[0]) {
		group = args[0]
		if len(args) == 1 || strings.HasPrefix(args[1], "-") {
			return nil, nil, usagef(group, "%s: want a subcommand: %s", group, strings.Join(subcommands(group), ", "))
		}
		args = append([]string{group + " " + args[1]}, args[2:]...)
	}
	for _, cmd := range commands {
		if cmd.name == args[0] {
			return cmd, args[1:], nil
		}
	}
	return nil, nil, usagef(group, "unknown command %q", args[0])
}

// subcommands are the names of the subcommands of group.
func subcommands(group string) []string {
	var names []string
	for _, cmd := range commands {
		if name, ok := strings.CutPrefix(cmd.name, group+" "); ok {
			names = append(names, name)
		}
	}
	return names
}

// help prints the help asked for by "help [COMMAND]" on stdout.
func (c *cli) help(args []string) error {
	switch name := strings.Join(args, " "); name {
	case "":
		fmt.Fprint(c.stdout, mainUsage())
	case "keys", "teams", "config":
		var b strings.Builder
		fmt.Fprintf(&b, "Usage: ratestore %s SUBCOMMAND [flags] [args]\n\n", name)
		listCommands(&b, func(cmd *command) bool { return strings.HasPrefix(cmd.name, name+" ") })
		fmt.Fprint(c.stdout, b.String())
	case "json":
		var b strings.Builder
		b.WriteString("With --json, every command prints one JSON object on stdout:\n\n")
		for _, cmd := range commands {
			fmt.Fprintf(&b, "%s:\n%s\n\n", cmd.name, indent(cmd.json))
		}
		b.WriteString(keyJSON + "\n\n" + teamJSON + "\n\n")
		b.WriteString(`Instants are RFC 3339 strings, in UTC (null when unset); lengths and waits
are seconds, in fields whose names end in _seconds. Errors still go to stderr
as text.` + "\n")
		fmt.Fprint(c.stdout, b.String())
	default:
		i := slices.IndexFunc(commands, func(cmd *command) bool { return cmd.name == name })
		if i < 0 {
			return usagef("", "help: unknown command %q", name)
		}
		fmt.Fprint(c.stdout, commands[i].usage())
	}
	return nil
}

// mainUsage is the help of the command line as a whole.
func mainUsage() string {
	var b strings.Builder
	b.WriteString(`ratestore manages a ratestore database: API keys and their token usage,
legacy key files, and limiter states.

Usage: ratestore [global flags] COMMAND [flags] [arguments]

Commands:
`)
	listCommands(&b, func(*command) bool { return true },
		"help [COMMAND]\tshow this help, or a command's (\"help json\": the JSON output of each)")
	b.WriteString(`
Global flags, before or after the command:
  --db PATH          the database: a bbolt file or a badger directory (default ` + defaultDB + `)
  --backend NAME     its backend: bolt or badger (default ` + defaultBackend + `)
  --json             print one JSON object on stdout (see "ratestore help json")
  --recover          open a database whose write-ahead log is damaged or cut short,
                     keeping what it can, and print what is dropped

Every change is on disk when the command exits. Only one process may open a
database at a time.

Exit status: 0 on success, 1 when the command fails, 2 for a wrong command line.
`)
	return b.String()
}

// listCommands writes a line for each command that keep accepts, then
// the extra lines, tab-separated.
func listCommands(w io.Writer, keep func(*command) bool, extra ...string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, cmd := range commands {
		if keep(cmd) {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(cmd.name+" "+positional(cmd.args)), cmd.summary)
		}
	}
	for _, line := range extra {
		fmt.Fprintf(tw, "  %s\n", line)
	}
	tw.Flush()
}

// positional is the part of a synopsis before its first flag.
func positional(args string) string {
	if i := strings.Index(args, "-"); i >= 0 {
		args = args[:i]
		args = strings.TrimSuffix(strings.TrimSpace(args), "[")
	}
	return strings.TrimSpace(args)
}

// argText says which positional arguments cmd takes, for errors.
func (cmd *command) argText() string {
	if p := positional(cmd.args); p != "" {
		return p
	}
	return "no arguments"
}

// usage is the help of cmd: synopsis, text, flags and JSON output.
func (cmd *command) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: ratestore %s\n\n%s%s.\n", strings.TrimSpace(cmd.name+" "+cmd.args),
		strings.ToUpper(cmd.summary[:1]), cmd.summary[1:])
	if cmd.help != "" {
		fmt.Fprintf(&b, "\n%s\n", cmd.help)
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	cmd.setup(&cli{}, fs)
	var flags strings.Builder
	tw := tabwriter.NewWriter(&flags, 0, 0, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		fmt.Fprintf(tw, "  --%s\t%s\n", strings.TrimSpace(f.Name+" "+name), text)
	})
	tw.Flush()
	if flags.Len() > 0 {
		fmt.Fprintf(&b, "\nFlags:\n%s", flags.String())
	}
	fmt.Fprintf(&b, "\nGlobal flags: --db PATH, --backend bolt|badger, --json, --recover (see 'ratestore help').\n")
	fmt.Fprintf(&b, "\nJSON output (--json):\n%s\n", indent(cmd.json))
	if strings.Contains(cmd.json, "KEY") {
		fmt.Fprintf(&b, "%s\n", indent(keyJSON))
	}
	if strings.Contains(cmd.json, "TEAM") {
		fmt.Fprintf(&b, "%s\n", indent(teamJSON+"\n\n"+keyJSON))
	}
	return b.String()
}

// indent indents every line of s by two spaces.
func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
