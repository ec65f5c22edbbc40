package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
)

const (
	// chromium is Debian's browser, which CI installs.
	chromium = "/usr/bin/chromium"
	// adminToken opens the admin API and the console.
	adminToken = "console-test-admin-token-5f2c9e7a41d8"
	// upstreamKey is the gateway's own credential with the fake upstream.
	upstreamKey = "upstream-secret"
	// sessionCookie is the console's session cookie (the contract's name).
	sessionCookie = "ratestore_session"

	// stepTimeout bounds each browser step: a selector the page lacks
	// fails the test after it rather than at the test binary's deadline.
	stepTimeout = 15 * time.Second
)

// usageOf is the usage the fake upstream reports for a model, prompt and
// completion tokens: large enough that a handful of requests fill a visible
// part of a window and cost whole cents at the built-in prices.
var usageOf = map[string][2]int64{
	"gpt-4o":      {120_000, 40_000},
	"gpt-4o-mini": {200_000, 100_000},
	"نموذج-3":     {1_000, 500}, // a model no price table has, named right to left (TestConsoleBidi)
}

// tokensOf is the total usage of requests to models.
func tokensOf(models ...string) int64 {
	var n int64
	for _, m := range models {
		n += usageOf[m][0] + usageOf[m][1]
	}
	return n
}

// env is a gateway with the console on loopback, in front of a fake
// upstream, and a headless Chromium tab to drive it.
type env struct {
	t     *testing.T
	path  string            // the database's file
	opts  ratestore.Options // the options it is opened with
	upURL *url.URL          // the fake upstream
	db    *ratestore.DB
	audit *audit.Log                      // the audit log the admin API records changes in
	gw    atomic.Pointer[gateway.Gateway] // the gateway behind front, or the last one
	front atomic.Value                    // the http.Handler srv serves: the console
	srv   *httptest.Server
	logs  *logbuf.Buffer // the gateway's log
	tab   context.Context
	// shows is what the admin API shows of the gateway in place of the
	// gateway itself (a fake's upstreams, see showGateway); nil: the
	// gateway.
	shows admin.Gateway

	mu       sync.Mutex
	problems []string // what the fake upstream found wrong
	console  []chromedp.ConsoleMessage
}

// viewport is the browser window's size; mobile emulates a phone (the
// page's meta viewport is honoured, touch is on).
type viewport struct {
	width, height int
	mobile        bool
}

var desktop = viewport{width: 1280, height: 860}

// newEnv starts the fake upstream, the gateway and the browser. The test is
// skipped when the browser is missing, unless CI is set.
func newEnv(t *testing.T, vp viewport) *env {
	t.Helper()
	return newEnvAt(t, vp, nil)
}

// newEnvAt is newEnv on a database whose clock is clock (nil: the system
// clock): the ledger's days and the windows follow it.
func newEnvAt(t *testing.T, vp viewport, clock *fakeclock.Clock) *env {
	t.Helper()
	browser := browserPath(t)
	e := &env{t: t, logs: &logbuf.Buffer{}}
	up := httptest.NewServer(http.HandlerFunc(e.upstream))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)

	e.path, e.upURL = filepath.Join(t.TempDir(), "gateway.db"), upURL
	if clock != nil {
		e.opts.Now, e.opts.After = clock.Now, clock.After
	}
	e.serve()
	t.Cleanup(func() { e.closeGateway() })
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.front.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	t.Cleanup(e.checkAfter)
	e.startBrowser(browser, vp)
	return e
}

// serve opens the database at e.path and serves a gateway on it, with
// its admin API and console, as `ratestore gateway` does: the sessions
// kept in the store.
func (e *env) serve() {
	e.t.Helper()
	db, err := ratestore.Open(e.path, e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	e.db = db
	e.audit = e.openAudit(audit.Options{SweepInterval: -1})
	gw, err := gateway.New(db, gateway.Options{
		Upstream: e.upURL, UpstreamKey: upstreamKey, Logger: e.logger(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.gw.Store(gw)
	e.front.Store(e.operator(gw.Keys(), gw.Ledger(), gw))
}

// restart stops the gateway and closes its database, as a process
// ending would, and serves a new one on the same file at the same
// address: whatever the first kept only in memory is gone.
func (e *env) restart() {
	e.t.Helper()
	e.settle()
	e.closeGateway()
	if err := e.audit.Close(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.serve()
}

// operator returns the console in front of gw (nil: none, read only, as
// the console command serves it), guarding the admin API on keys and l.
func (e *env) operator(keys *keystore.Store, l *ledger.Ledger, gw *gateway.Gateway) http.Handler {
	aopts := admin.Options{Keys: keys, Ledger: l, Audit: e.audit, Log: e.logger()}
	copts := console.Options{Token: adminToken, Log: e.logger(), ReadOnly: gw == nil}
	if gw != nil {
		aopts.Gateway = gw
		if e.shows != nil {
			aopts.Gateway = e.shows
		}
		copts.Metrics, copts.Next = gw.Metrics(), gw
		copts.Sessions = console.StoreSessions(e.db)
	}
	api, err := admin.New(aopts)
	if err != nil {
		e.t.Fatal(err)
	}
	copts.API = api
	c, err := console.New(copts)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// showGateway has the admin API show g in place of the served gateway,
// which still serves the proxy and the metrics: the console is served
// again, on the same database.
func (e *env) showGateway(g admin.Gateway) {
	e.shows = g
	gw := e.gw.Load()
	e.front.Store(e.operator(gw.Keys(), gw.Ledger(), gw))
}

func (e *env) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// closeGateway ends the served gateway's background work.
func (e *env) closeGateway() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.gw.Load().Close(ctx); err != nil {
		e.t.Errorf("closing the gateway: %v", err)
	}
}

// readOnly replaces the served gateway with the read-only console that
// `ratestore console --db` serves on the same database: the admin API and
// the console alone, every change refused.
func (e *env) readOnly() {
	e.t.Helper()
	e.settle()
	e.closeGateway()
	keys, err := keystore.Open(e.db, keystore.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := ledger.Open(e.db, ledger.Options{ReadOnly: true})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { l.Close(context.Background()) })
	e.audit = e.openAudit(audit.Options{ReadOnly: true})
	e.front.Store(e.operator(keys, l, nil))
}

// openAudit opens the audit log of the test's database, closed with the
// test.
func (e *env) openAudit(opts audit.Options) *audit.Log {
	e.t.Helper()
	opts.Log = e.logger()
	l, err := audit.Open(e.db, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// browserPath is Debian's chromium; the test is skipped without it, or
// fails when CI is set, so that CI cannot pass by skipping.
func browserPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (%v) and CI is set: .ci/run installs Debian's chromium (apt-get install chromium)", chromium, err)
		}
		t.Skipf("%s is missing: apt-get install chromium to run the console's browser tests", chromium)
	}
	return chromium
}

// startBrowser starts a headless Chromium with a fresh profile and opens
// its tab; the browser ends with the test.
func (e *env) startBrowser(path string, vp viewport) {
	t := e.t
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(vp.width, vp.height),
		chromedp.DisableGPU,
		chromedp.Flag("hide-scrollbars", true),
		// en-US, whatever the machine's locale: the tests read dates as
		// the page formats them.
		chromedp.Flag("lang", "en-US"),
		chromedp.Env("LANG=en_US.UTF-8"),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	// A bound on the whole browser session, not a wait: a hung browser fails
	// the test rather than the test binary.
	root, cancelRoot := context.WithTimeout(context.Background(), 3*time.Minute)
	alloc, cancelAlloc := chromedp.NewExecAllocator(root, opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	messages := chromedp.Console(tab)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			e.mu.Lock()
			e.console = append(e.console, m)
			e.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelRoot()
		<-done
	})
	e.tab = tab
	if vp.mobile {
		e.do("emulate a phone", chromedp.EmulateViewport(int64(vp.width), int64(vp.height),
			chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait))
	} else {
		e.do("start the browser", chromedp.EmulateViewport(int64(vp.width), int64(vp.height)))
	}
}

// checkAfter fails the test on what the browser or the fake upstream saw
// wrong: an uncaught exception in the page, a Content-Security-Policy
// violation (the console's pages must run under the contract's policy), a
// request the gateway forwarded with the caller's secret, and the admin
// token in the gateway's log.
func (e *env) checkAfter() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.console {
		switch {
		case m.IsException():
			e.t.Errorf("the page threw: %s (%s:%d)", m.Text, m.URL, m.Line+1)
		case strings.Contains(m.Text, "Content Security Policy"):
			e.t.Errorf("CSP violation: %s (%s:%d)", m.Text, m.URL, m.Line+1)
		case strings.HasSuffix(m.URL, "/admin/session") && strings.Contains(m.Text, "401"):
			// The page asks whether it is signed in; before signing in
			// and after signing out, it is not.
		case m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning:
			e.t.Logf("browser console %s: %s (%s)", m.Type, m.Text, m.URL)
		}
	}
	for _, p := range e.problems {
		e.t.Errorf("fake upstream: %s", p)
	}
	if strings.Contains(e.logs.String(), adminToken) {
		e.t.Error("the admin token is in the gateway's log")
	}
}

// upstream is a fake OpenAI-style API: chat completions answered with the
// usage of usageOf for their model.
func (e *env) upstream(w http.ResponseWriter, r *http.Request) {
	if got := r.Header.Get("Authorization"); got != "Bearer "+upstreamKey {
		e.problem("%s %s: Authorization %q, want the gateway's upstream key", r.Method, r.URL.Path, got)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		e.problem("unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u, ok := usageOf[req.Model]
	if !ok {
		e.problem("unexpected model %q", req.Model)
		u = [2]int64{1, 1}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": "hi there"}}},
		"usage": map[string]any{"prompt_tokens": u[0], "completion_tokens": u[1], "total_tokens": u[0] + u[1]},
	})
}

func (e *env) problem(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.problems = append(e.problems, fmt.Sprintf(format, args...))
}

// do runs browser steps, each bounded by stepTimeout; on failure it saves a
// screenshot of the page as it was and fails the test.
func (e *env) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.tab, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		e.failShot(what)
		e.t.Fatalf("%s: %v", what, err)
	}
}

// run runs one browser action for its value, as do does.
func run[T any](e *env, what string, action chromedp.Action[T]) T {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.tab, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		e.failShot(what)
		e.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](e *env, what, expr string) T {
	e.t.Helper()
	return run(e, what, chromedp.Evaluate[T](expr))
}

// waitFor polls a JavaScript expression, once a frame, until it is truthy,
// and returns its value; what says what is awaited, for the failure.
func waitFor[T any](e *env, what, expr string) T {
	e.t.Helper()
	return run(e, "waiting for "+what, chromedp.Poll[T](expr, chromedp.WithPollingTimeout(stepTimeout-time.Second)))
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// click clicks the element that a CSS selector finds.
func (e *env) click(sel string) {
	e.t.Helper()
	e.do("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// visible waits until the element that a CSS selector finds is visible.
func (e *env) visible(sel string) {
	e.t.Helper()
	e.do("wait for "+sel+" to be visible", chromedp.WaitVisible(chromedp.CSS(sel)))
}

// typeInto replaces the value of an input with text, typed key by key.
func (e *env) typeInto(sel, text string) {
	e.t.Helper()
	e.setValue(sel, "")
	e.do("type into "+sel, chromedp.SendKeys(chromedp.CSS(sel), text))
}

// setValue sets the value of an input, and tells the page as typing or a
// picker would (input and change events).
func (e *env) setValue(sel, value string) {
	e.t.Helper()
	e.visible(sel)
	e.do("set "+sel, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const i = document.querySelector(%s);
		i.value = %s;
		i.dispatchEvent(new Event('input', {bubbles: true}));
		i.dispatchEvent(new Event('change', {bubbles: true}));
	})()`, js(sel), js(value))))
}

// shot saves a full-page PNG screenshot as name.png in the test's
// temporary folder, and in $RATESTORE_SCREENSHOTS when that is set.
func (e *env) shot(name string) string {
	e.t.Helper()
	png := run(e, "screenshot "+name, chromedp.FullScreenshot(100)) // 100: PNG, not JPEG
	path := filepath.Join(e.t.TempDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		e.t.Fatal(err)
	}
	if dir := os.Getenv("RATESTORE_SCREENSHOTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			e.t.Fatal(err)
		}
		path = filepath.Join(dir, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Logf("screenshot %s: %s (%d bytes)", name, path, len(png))
	return path
}

// failShot saves a screenshot of a failed step, if the browser still
// answers.
func (e *env) failShot(what string) {
	ctx, cancel := context.WithTimeout(e.tab, 5*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return
	}
	name := "failed-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(what))
	if len(name) > 60 {
		name = name[:60]
	}
	dir := os.Getenv("RATESTORE_SCREENSHOTS")
	if dir == "" {
		dir = e.t.TempDir()
	}
	path := filepath.Join(dir, name+".png")
	if os.WriteFile(path, png, 0o644) == nil {
		e.t.Logf("screenshot of the failure: %s", path)
	}
}

// open loads the console's page.
func (e *env) open() {
	e.t.Helper()
	e.do("open /admin/", chromedp.Navigate(e.srv.URL+"/admin/"))
}

// signIn signs in on the sign-in form, which must be showing, and waits
// for the keys page.
func (e *env) signIn() {
	e.t.Helper()
	e.visible("#signin-form #token")
	e.typeInto("#token", adminToken)
	e.click("#signin")
	e.visible("#signout")
	e.page("keys")
}

// page goes to a page of the console by its navigation link, and waits
// until it shows.
func (e *env) page(name string) {
	e.t.Helper()
	e.click(fmt.Sprintf(`a[data-page=%q]`, name))
	e.visible("#page-" + name)
}

// reload reloads the page (the session cookie keeps the operator signed
// in) and goes back to a page of the console.
func (e *env) reload(page string) {
	e.t.Helper()
	e.do("reload", chromedp.Reload())
	e.visible("#signout")
	e.page(page)
}

// sessionCookie returns the browser's console session cookie, nil when it
// has none.
func (e *env) sessionCookie() *network.Cookie {
	e.t.Helper()
	cookies := run(e, "read the cookies", func(ctx context.Context, t *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: []string{e.srv.URL + "/admin/"}})
		return res.Cookies, err
	})
	for _, c := range cookies {
		if c.Name == sessionCookie {
			return c
		}
	}
	return nil
}

// api calls the admin API with the admin token and decodes its JSON answer
// into out (unless nil); it fails the test unless the status is want.
func (e *env) api(method, path string, body, out any, want int) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	status, b := e.send(req)
	if status != want {
		e.t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// send sends a request to the gateway and returns its status and body.
func (e *env) send(req *http.Request) (int, []byte) {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// chatResult is a line of testdata/chat.mjs.
type chatResult struct {
	Model  string         `json:"model"`
	OK     bool           `json:"ok"`
	Status int            `json:"status"`
	Error  string         `json:"error"`
	Text   string         `json:"text"`
	Usage  map[string]any `json:"usage"`
	Node   string         `json:"node"`
	OpenAI string         `json:"openai"`
}

// chat sends a chat completion per model with the official openai client
// for Node.js (testdata/chat.mjs, with the client gateway/sdktest
// installs), the secret as its API key, and waits until the gateway has
// recorded their usage. It returns a result per model.
func (e *env) chat(secret string, models ...string) []chatResult {
	t := e.t
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: install Node.js >= 20, then run `npm ci --prefix gateway/sdktest`")
	}
	if _, err := os.Stat("../../gateway/sdktest/node_modules/openai/package.json"); err != nil {
		t.Fatal("gateway/sdktest/node_modules/openai is missing: run `npm ci --prefix gateway/sdktest` from the repository root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/chat.mjs")
	cmd.Env = append(os.Environ(), "BASE_URL="+e.srv.URL, "API_KEY="+secret, "MODELS="+strings.Join(models, ","))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node testdata/chat.mjs: %v\n%s", err, stderr.String())
	}
	var results []chatResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r chatResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("chat.mjs line %q: %v", sc.Text(), err)
		}
		t.Logf("openai client: %s", sc.Bytes())
		if r.Model != "" {
			results = append(results, r)
		}
	}
	// Every request was answered; the gateway records a request's usage
	// once its caller has the last byte.
	if err := e.gw.Load().Wait(ctx); err != nil {
		t.Fatalf("the gateway is still serving: %v", err)
	}
	return results
}

// chatOK is chat, failing the test unless every request succeeded.
func (e *env) chatOK(secret string, models ...string) {
	e.t.Helper()
	results := e.chat(secret, models...)
	if len(results) != len(models) {
		e.t.Fatalf("%d results for %d requests", len(results), len(models))
	}
	for _, r := range results {
		if !r.OK || r.Usage == nil {
			e.t.Fatalf("%s: status %d: %s (usage %v)", r.Model, r.Status, r.Error, r.Usage)
		}
	}
}

// complete sends a chat completion to the gateway with net/http, as the
// openai client sends it (POST /v1/chat/completions, the secret as a bearer
// token), and returns its status: for the traffic the tests set up before
// the browser looks, where chat runs the real client.
func (e *env) complete(secret, model string) int {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": "hello"}}})
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	status, _ := e.send(req)
	return status
}

// settle waits until the gateway has recorded the usage of every request
// it answered.
func (e *env) settle() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := e.gw.Load().Wait(ctx); err != nil {
		e.t.Fatalf("the gateway is still serving: %v", err)
	}
}
