// Command ratestore manages a ratestore database from the command line:
// it imports legacy API-key files and migrates their usage, creates and
// manages API keys, reports their token usage, copies a database to another
// file or backend, shows the stored state of a limiter's key, and verifies a
// whole database (check).
//
// Usage:
//
//	ratestore [global flags] COMMAND [flags] [arguments]
//
//	import FILE [--dry-run] [--redis URL]
//	                              import a legacy API-key file, all or nothing
//	migrate [--dry-run] [--redis URL]
//	                              migrate all pending legacy usage now
//	keys create --name NAME (--limit TOKENS | --window DURATION=LIMIT[/BUCKET]...)
//	            [--rpm N] [--max-concurrent N] [--models GLOBS] [--model MODEL] [--expires WHEN]
//	keys list
//	keys show ID                  the key, its limits and the usage of each window
//	keys disable ID
//	keys enable ID
//	keys delete ID
//	keys set-limit ID [TOKENS] [--window DURATION=LIMIT[/BUCKET]]... [--drop-window DURATION]...
//	            [--rpm N] [--max-concurrent N] [--models GLOBS]
//	keys set-expiry ID WHEN       WHEN: RFC 3339, a duration from now (720h) or never
//	usage ID                      used, limit, remaining and window end of each window
//	copy --to PATH [--to-backend bolt|badger]
//	inspect LIMITER KEY           one stored limiter state, decoded and raw
//	check                         verify the whole database offline; exits 1 naming each problem
//	gateway --upstream [PREFIX=]URL... [--listen 127.0.0.1:8080] [--rps R --burst B] [--shadow] [--redis URL]
//	        [--tls-cert FILE --tls-key FILE] [--ledger-retention 90d] [--ledger-export FILE] [--alert-webhook URL]
//	                              a metering reverse proxy in front of a model API, its console at /admin/
//	upstreams --admin URL         a running gateway's upstreams: the use of their quotas, cooldowns, errors
//	config reload --admin URL     have a running gateway read its --config file again
//	console [--listen 127.0.0.1:8090] [--redis URL] [--tls-cert FILE --tls-key FILE]
//	                              the operator's console, read-only, on a database no gateway holds
//	spend [--from --to --group-by key,team,model,day,hour --key --team --model] [--csv]
//	                              what was spent, from the ledger's rollups
//	requests [--key --team --model --status --from --to --limit --cursor] [--csv]
//	                              the ledger's entries, newest first
//	serve [--http 127.0.0.1:8081] [--resp 127.0.0.1:6380] [--token-file FILE]
//	                              limiters over HTTP and RESP (redis-cell's CL.THROTTLE)
//	version
//	help [COMMAND]                "help json" lists the JSON output of every command
//
// Global flags, accepted before or after the command: --db PATH (default
// ./ratestore.db), --backend bolt|badger (default bolt), --json and
// --recover (open a database whose write-ahead log is damaged or cut short,
// keeping what it can and printing what is dropped). Flags
// may come before or after the positional arguments; "--" ends them.
//
// For example, to bring a legacy key file into a new database and look at
// its keys (a second import changes nothing):
//
//	ratestore import testdata/legacy/apikeys.valid.json
//	ratestore keys list
//
// The database is opened in Async mode and closed before the command
// reports success: every change is on disk by then, written in one go
// rather than one fsync per change. Only one process may open a database; a
// command run while another process holds it fails with a message that says
// so. Commands other than import and keys create refuse a database that does
// not exist rather than create an empty one; import --dry-run and a refused
// import create nothing.
//
// A running gateway holds its database, so the keys commands and usage take
// --admin URL: they then work through the gateway's admin API (see package
// gateway) instead of opening the database, with the admin token of
// $RATESTORE_ADMIN_TOKEN or --admin-token-file, and print the same output:
//
//	RATESTORE_ADMIN_TOKEN=... ratestore keys create --name ci --limit 100000 --admin http://127.0.0.1:8080
//
// A keys command that finds the database held by another process says to
// do so.
//
// Gateways started with --redis keep their keys in Redis (package
// redisstore), shared by all of them; import, the keys commands and usage
// given --redis URL work on that key store, which needs no gateway to be
// running:
//
//	ratestore import apikeys.json --redis redis://127.0.0.1:6379/0
//	ratestore keys list --redis redis://127.0.0.1:6379/0
//
// # Key policies
//
// A key's policy (keystore.Policy) is one or more token windows, a request
// rate, a concurrency cap and the models it may ask for. keys create takes
// them as flags:
//
//	ratestore keys create --name team-a --window 5h=100000 --window 168h=1000000 \
//	    --rpm 60 --max-concurrent 4 --models 'gpt-4o,claude-*'
//
// --window DURATION=LIMIT allows LIMIT tokens in any DURATION (a Go
// duration: 90m, 5h, 168h for a week), counted in buckets of DURATION/60
// rounded to a divisor, or of BUCKET with DURATION=LIMIT/BUCKET; give it
// once per window. --limit TOKENS is the one-window shorthand, --window
// 5h=TOKENS, which legacy keys have. --rpm and --max-concurrent 0 mean no
// limit; --models takes comma-separated names or path.Match globs, "" for
// any model.
//
// keys set-limit changes what its arguments and flags name and nothing else,
// in one keystore.Store.Update: TOKENS the limit of the first window,
// --window the window of its length (its limit, and its bucket when given)
// or a new window, --drop-window removes one, and --rpm, --max-concurrent
// and --models (--models "" allows any) as for create. The usage already
// counted stays counted: a window keeps its usage while its length stays.
// keys set-expiry changes the expiry alone, the same way.
//
// A malformed value (a bad duration, a limit that is not a positive
// integer, the same window length twice, a bad glob) is a usage error that
// names the flag and the value; so is a value the key store refuses as
// invalid. The gateway command enforces the whole policy
// (keystore.Store.Admit).
//
// # Secrets
//
// keys create prints the new key's secret on stdout, once, and says on
// stderr that it will not be shown again: the database keeps only its hash.
// No other output, error included, ever holds a secret.
//
// # Output
//
// Text output is for people. With --json every command prints one JSON
// object on stdout instead, with field names in snake_case: "ratestore help
// json" lists them, and "ratestore help COMMAND" shows the command's. The
// key, team and spend commands call the admin API (package admin): a
// running gateway's with --admin, else one served in this process on the
// database or Redis they open, so that they print what it answers (a key
// as admin.Key, its usage included) and change keys as it does. Instants are RFC 3339
// strings in UTC (null when unset); lengths and waits are seconds, in
// fields whose names end in _seconds. Errors go to stderr as text, prefixed "ratestore: ", in both
// modes. Progress (migrate, copy) is drawn on stderr only when both it and
// stdout are terminals.
//
// # Exit status
//
//	0  success
//	1  the command failed: an I/O or database error, a key not found, a
//	   database locked by another process, a refused import (its problems
//	   are listed), a stored state that cannot be decoded
//	2  a wrong command line: an unknown command or flag, a missing or
//	   malformed argument, or a value the store refuses as invalid
package main
