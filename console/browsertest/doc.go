// Package browsertest drives the operator's console (issue 31) in a real
// headless Chromium, as an operator would use it: a gateway on loopback
// (gateway.New on a database in a temporary folder, with an admin token) in
// front of a fake OpenAI-style upstream, and Debian's chromium
// (/usr/bin/chromium) run through the DevTools protocol by chromedp.
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
// (TestConsoleReadOnly), and log what the first load of /admin/ costs:
// bytes transferred and time to the sign-in form (TestConsoleFirstLoad).
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
