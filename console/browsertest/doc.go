// Package browsertest drives the operator's console in a real headless
// Chromium, as an operator would use it: a gateway on loopback
// (gateway.New on a database in a temporary folder, with an admin token and
// an audit log) in front of a fake OpenAI-style upstream, and Debian's
// chromium (/usr/bin/chromium) run through the DevTools protocol by
// chromedp.
//
// The tests sign in with the admin token, create a key and read its secret,
// send chat completions with it through the official openai client for
// Node.js (the copy gateway/sdktest installs: npm ci --prefix
// gateway/sdktest), watch the key's window bar and the spend chart change,
// rotate and disable the key, and sign out (TestConsoleKeyLifecycle). The
// others check every page against the admin API on a week of a small
// fleet's traffic (TestConsoleSpendHistory), the pages at 390 pixels wide
// (TestConsoleNarrow) and with the keyboard alone (TestConsoleKeyboard),
// the spend chart and times in zones either side of UTC
// (TestConsoleTimeZones), the read-only console of `ratestore console`
// (TestConsoleReadOnly), a session kept across a restart of the gateway,
// its database closed and opened again (TestConsoleRestart), and log what the first load of /admin/ costs:
// bytes transferred and time to the sign-in form (TestConsoleFirstLoad).
//
// TestConsoleLargeFleet imports 100,000 keys into the gateway's key store
// (keystore.Store.Import) and uses the console on them: it logs how long
// after sign-in the first page of keys shows (a figure, not asserted),
// checks that the page holds that page and no more, and that its search,
// sort, status and team filters, page size and pages show what the admin
// API answers; that a poll of a page that did not change gets 304 and
// draws nothing (the page counts its renders in data-renders and the polls
// that found nothing changed in data-unchanged), that a hidden tab polls
// nothing and a page not shown is not polled; that the teams page counts
// each team's keys, a key's page polls as the list does, and the spend
// chart stacked by key shows the top eight keys and one "other", looking up
// only the names it shows. It is skipped with -short. The environment
// variable RATESTORE_BROWSER_KEYS sets how many keys it imports (at least
// 10000); run alone, under the shared machine's lock, for a million:
//
//	RATESTORE_BROWSER_KEYS=1000000 flock /tmp/ratestore-bench.lock go test -count=1 ./console/browsertest -run TestConsoleLargeFleet -v
//
// TestConsoleUpstreams shows the upstreams page on a gateway the admin
// API shows with three upstreams (TestConsoleNarrow too, at 390 pixels):
// each limit's bar as full as its use, beside its figures; "no limits";
// the one cooling down, and until when; a name that would be markup, as
// text; a poll that finds nothing changed draws nothing, one that does
// redraws only what changed. TestConsoleUpstreamsReadOnly: the read-only
// console, with no gateway, says it has no upstreams.
//
// TestConsoleEndUsers sends a key's requests naming about thirty end
// users (a name that is markup, one written right to left; one with a
// right-to-left override is refused by the gateway) and checks the key's
// page: its model limit's bars are its model_usage, its end users are the
// admin API's pages (25 a page, Next, Previous), searched by the start of
// the name, the one over its window drawn full; a name links to its
// requests; the spend page stacked by the key's end users and its top end
// users are the ledger's; a team's page shows its limits as set; the
// read-only console shows the same and sends nothing but GETs; and at 390
// pixels nothing sticks out.
//
// TestConsoleAudit reads the changes made with the console in the audit
// log, from a key's and a team's pages. TestConsoleShellQuote has sh read
// back hostile names quoted by the page's own shellQuote, and
// TestConsoleCopyCommand runs the secret dialog's command line, for a key
// whose model is such a name, with curl replaced by a script that records
// its arguments: nothing of the name runs. TestConsoleBidi shows names
// written right to left, each isolated in a <bdi>, and checks in the audit
// log that a renaming reads from -> to in that order, where the same text
// without isolation reads backwards.
//
// The package has no code of its own outside its tests: it exists so that
// chromedp is a dependency of these tests only, never of the gateway.
// Without a browser the tests skip, unless the environment variable CI is
// set: then a missing browser fails them (.ci/run installs it).
//
// Each test takes screenshots (chromedp.FullScreenshot) into its temporary
// folder; with RATESTORE_SCREENSHOTS=DIR they are also saved there under
// stable names, which is how docs/console-keys.png and
// docs/console-spend.png are made:
//
//	RATESTORE_SCREENSHOTS=/tmp/shots go test ./console/browsertest -run TestConsole -v
package browsertest
