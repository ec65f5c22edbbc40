// Command ratestore manages a ratestore database from the command line:
// it imports legacy API-key files and migrates their usage, creates and
// manages API keys, reports their token usage, copies a database to another
// file or backend, and shows the stored state of a limiter's key.
//
// Usage:
//
//	ratestore [global flags] COMMAND [flags] [arguments]
//
//	import FILE [--dry-run]       import a legacy API-key file, all or nothing
//	migrate [--dry-run]           migrate all pending legacy usage now
//	keys create --name NAME --limit TOKENS [--model MODEL] [--expires WHEN]
//	keys list
//	keys show ID
//	keys disable ID
//	keys enable ID
//	keys delete ID
//	keys set-limit ID TOKENS
//	keys set-expiry ID WHEN       WHEN: RFC 3339, a duration from now (720h) or never
//	usage ID                      used, limit, remaining and window end of a key
//	copy --to PATH [--to-backend bolt|badger]
//	inspect LIMITER KEY           one stored limiter state, decoded and raw
//	gateway --upstream URL [--listen 127.0.0.1:8080] [--rps R --burst B]
//	                              a metering reverse proxy in front of a model API
//	version
//	help [COMMAND]                "help json" lists the JSON output of every command
//
// Global flags, accepted before or after the command: --db PATH (default
// ./ratestore.db), --backend bolt|badger (default bolt) and --json. Flags may
// come before or after the positional arguments; "--" ends them.
//
// For example, to bring a legacy key file into a new database and look at
// its keys (a second import changes nothing):
//
//	ratestore import testdata/legacy/apikeys.valid.json
//	ratestore keys list
//
// The database is opened in Sync mode and closed before the command exits:
// every change is on disk by then. Only one process may open a database; a
// command run while another process holds it fails with a message that says
// so. Commands other than import and keys create refuse a database that does
// not exist rather than create an empty one; import --dry-run and a refused
// import create nothing.
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
// json" lists them, and "ratestore help COMMAND" shows the command's. Instants
// are RFC 3339 strings in UTC (null when unset), durations integer
// nanoseconds. Errors go to stderr as text, prefixed "ratestore: ", in both
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
