package browsertest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/ratestore/ratestore/internal/fakeclock"

	_ "time/tzdata" // the zones TestConsoleTimeZones puts the browser in, wherever the test runs
)

// TestConsoleFirstLoad loads /admin/ in a browser with an empty cache and
// logs what the console's targets measure (not asserted: loopback timings
// vary with the machine): the bytes transferred, the sum of every
// response's encoded length as the network events report them, and the
// time from navigation start to the sign-in form being visible, with the
// page's own navigation timing. Then a wrong token shows #signin-error and
// the right one signs in.
func TestConsoleFirstLoad(t *testing.T) {
	e := newEnv(t, desktop)
	nw := e.watchNetwork()
	// Notes, from the first frame on, when #token is first visible: the
	// page's clock starts at navigation start. Injected by DevTools, so the
	// page's Content-Security-Policy does not apply to it.
	e.do("install the visibility probe", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: visibleProbe})
		return err
	}))
	start := time.Now()
	e.open()
	e.visible("#signin-form #token")
	wall := time.Since(start)
	waitFor[bool](e, "the page to load", `document.readyState === 'complete'`)
	nw.quiet(e)

	total, lines := nw.report(e.srv.URL)
	t.Logf("first load of /admin/: %d bytes transferred in %d responses (target: under 200 KB)\n%s", total, len(lines), strings.Join(lines, "\n"))
	timing := eval[navTiming](e, "navigation timing", navTimingJS)
	tti := math.Max(timing.Visible, timing.DOMContentLoaded)
	t.Logf("first load of /admin/: sign-in form visible at %.1f ms, DOMContentLoaded done at %.1f ms, so interactive at %.1f ms "+
		"(target: under 300 ms); response end %.1f ms, load event end %.1f ms; %v as the test saw it (navigation and DevTools round trips included)",
		timing.Visible, timing.DOMContentLoaded, tti, timing.ResponseEnd, timing.Load, wall.Round(time.Millisecond))
	if timing.Visible < 0 {
		t.Error("the probe never saw #token visible")
	}
	e.shot("first-load-signin")

	e.typeInto("#token", "not-the-admin-token")
	e.click("#signin")
	msg := waitFor[string](e, "#signin-error", `(() => { const m = document.querySelector('#signin-error'); `+
		`return m && m.getClientRects().length > 0 && m.textContent.trim() })()`)
	t.Logf("a wrong token: #signin-error says %q", msg)
	if eval[bool](e, "signed in?", `!!document.querySelector('#signout') && document.querySelector('#signout').getClientRects().length > 0`) {
		t.Error("a wrong token signed in")
	}
	e.shot("signin-error")
	e.signIn()
	if eval[bool](e, "the token in the page", containsText(adminToken)) {
		t.Error("once signed in, the page holds the admin token")
	}
}

// visibleProbe records in window.__consoleVisibleAt the page time (ms since
// navigation start) of the first frame in which #token is visible.
const visibleProbe = `(() => {
	const tick = () => {
		const f = document.getElementById('token');
		if (f && f.getClientRects().length > 0 && getComputedStyle(f).visibility !== 'hidden') {
			window.__consoleVisibleAt = performance.now();
			return;
		}
		requestAnimationFrame(tick);
	};
	requestAnimationFrame(tick);
})()`

// navTiming is the page's navigation timing, in ms since navigation start.
type navTiming struct {
	ResponseEnd      float64 `json:"responseEnd"`
	DOMContentLoaded float64 `json:"dcl"`
	Load             float64 `json:"load"`
	Visible          float64 `json:"visible"`
}

const navTimingJS = `(() => {
	const n = performance.getEntriesByType('navigation')[0];
	return {responseEnd: n.responseEnd, dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, visible: window.__consoleVisibleAt ?? -1};
})()`

// netWatch tallies the tab's responses from the network events.
type netWatch struct {
	mu      sync.Mutex
	url     map[network.RequestID]string
	size    map[network.RequestID]float64 // encoded bytes received, headers included
	open    map[network.RequestID]bool
	changed chan struct{}
}

// watchNetwork starts tallying the tab's responses.
func (e *env) watchNetwork() *netWatch {
	w := &netWatch{url: map[network.RequestID]string{}, size: map[network.RequestID]float64{},
		open: map[network.RequestID]bool{}, changed: make(chan struct{}, 1)}
	err := chromedp.Listen(e.tab, func(ev any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			w.url[ev.RequestID], w.open[ev.RequestID] = ev.Request.URL, true
		case *network.EventResponseReceived:
			// A fetch whose body the page never reads never finishes
			// loading: its response, headers and all, is what it cost.
			if _, ok := w.size[ev.RequestID]; !ok {
				w.size[ev.RequestID] = ev.Response.EncodedDataLength
			}
			delete(w.open, ev.RequestID)
		case *network.EventLoadingFinished:
			w.size[ev.RequestID] = ev.EncodedDataLength
			delete(w.open, ev.RequestID)
		case *network.EventLoadingFailed:
			delete(w.open, ev.RequestID)
		default:
			return
		}
		select {
		case w.changed <- struct{}{}:
		default:
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// quiet waits until every request of the tab has its response.
func (w *netWatch) quiet(e *env) {
	e.t.Helper()
	bound := time.NewTimer(stepTimeout) // a failure bound, not a wait
	defer bound.Stop()
	for {
		w.mu.Lock()
		var open []string
		for id := range w.open {
			open = append(open, w.url[id])
		}
		w.mu.Unlock()
		if len(open) == 0 {
			return
		}
		select {
		case <-w.changed:
		case <-bound.C:
			e.t.Fatalf("still in flight after %v: %s", stepTimeout, strings.Join(open, ", "))
		}
	}
}

// report returns the bytes received, and a line per response.
func (w *netWatch) report(base string) (int64, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var total float64
	var lines []string
	for id, n := range w.size {
		total += n
		lines = append(lines, fmt.Sprintf("  %7.0f  %s", n, strings.TrimPrefix(w.url[id], base)))
	}
	slices.Sort(lines)
	return int64(total), lines
}

// TestConsoleKeyboard signs in and opens the key dialog with the keyboard
// alone: Tab reaches #token, Enter submits; Tab reaches #new-key, Enter
// opens #key-dialog with the focus inside it, and Escape closes it with the
// focus back on #new-key.
func TestConsoleKeyboard(t *testing.T) {
	e := newEnv(t, desktop)
	e.open()
	e.visible("#signin-form #token")
	e.tabTo("token", 10)
	e.do("type the token", chromedp.KeyEvent(adminToken), chromedp.KeyEvent(kb.Enter))
	e.visible("#signout")
	e.visible("#page-keys")

	tabs := e.tabTo("new-key", 40)
	t.Logf("Tab reached #new-key after %d presses", tabs)
	if !eval[bool](e, "a focus ring", `(() => { const s = getComputedStyle(document.activeElement); `+
		`return s.outlineStyle !== 'none' && s.outlineWidth !== '0px' || s.boxShadow !== 'none' })()`) {
		t.Error("#new-key shows no focus ring (outline or box-shadow) when Tab focuses it")
	}
	e.shot("keyboard-new-key-focused")
	e.do("press Enter", chromedp.KeyEvent(kb.Enter))
	waitFor[bool](e, "#key-dialog to open", dialogOpen("key-dialog"))
	if !eval[bool](e, "the focus in the dialog", `document.getElementById('key-dialog').contains(document.activeElement)`) {
		t.Error("#key-dialog opened without the focus inside it")
	}
	e.shot("keyboard-key-dialog")
	e.do("press Escape", chromedp.KeyEvent(kb.Escape))
	waitFor[bool](e, "#key-dialog to close", "!("+dialogOpen("key-dialog")+")")
	if id := eval[string](e, "the focus", `document.activeElement?.id ?? ''`); id != "new-key" {
		t.Errorf("after Escape the focus is on %q, want #new-key", id)
	}
}

// tabTo presses Tab until the element of an id has the focus, at most limit
// times, and returns how many it took.
func (e *env) tabTo(id string, limit int) int {
	e.t.Helper()
	focused := fmt.Sprintf(`document.activeElement?.id === %s`, js(id))
	if eval[bool](e, "the focus", focused) {
		return 0
	}
	var path []string
	for n := 1; n <= limit; n++ {
		e.do("press Tab", chromedp.KeyEvent(kb.Tab))
		got := eval[string](e, "the focus", `(() => { const a = document.activeElement; `+
			`return a ? a.tagName.toLowerCase() + (a.id ? '#' + a.id : '') + (a.dataset.page ? '[data-page=' + a.dataset.page + ']' : '') : '' })()`)
		if strings.HasSuffix(got, "#"+id) {
			return n
		}
		path = append(path, got)
	}
	e.failShot("tab to " + id)
	e.t.Fatalf("%d Tabs never reached #%s; the focus went: %s", limit, id, strings.Join(path, " > "))
	return 0
}

// TestConsoleNarrow uses the console as a phone would, 390 pixels wide:
// no page of it is wider than the screen (a wide table scrolls inside its
// own box), the key dialog fits, and the upstreams' bars are drawn beside
// their figures.
func TestConsoleNarrow(t *testing.T) {
	const width = 390
	clock := fakeclock.New(time.Now().Add(-6 * 24 * time.Hour))
	e := newEnvAt(t, viewport{width: width, height: 844, mobile: true}, clock)
	fleet := e.seedFleet(clock)
	e.showUpstreams()
	e.setZone("UTC")
	e.open()
	e.visible("#signin-form #token")
	e.checkWidth("the sign-in page", width)
	e.shot("narrow-signin")
	e.signIn()
	waitFor[bool](e, "the keys' rows", fmt.Sprintf(`document.querySelectorAll('#keys-table tr[data-key-id]').length >= %d`, len(fleet.keys)))
	e.checkWidth("the keys page", width)
	e.shot("narrow-keys")

	e.click("#new-key")
	waitFor[bool](e, "#key-dialog to open", dialogOpen("key-dialog"))
	if r := eval[float64](e, "the dialog's right edge", `document.getElementById('key-dialog').getBoundingClientRect().right`); r > width+1 {
		t.Errorf("#key-dialog's right edge at %.0f px, beyond the %d px screen", r, width)
	}
	e.checkWidth("the keys page with the key dialog open", width)
	e.shot("narrow-key-form")
	e.do("scroll to #key-submit", chromedp.ScrollIntoView(chromedp.CSS("#key-submit")))
	if !eval[bool](e, "#key-submit on screen", `(() => { const r = document.getElementById('key-submit').getBoundingClientRect(); `+
		`return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth })()`) {
		t.Error("at 390 px, #key-submit cannot be brought on screen")
	}
	e.do("press Escape", chromedp.KeyEvent(kb.Escape))
	waitFor[bool](e, "#key-dialog to close", "!("+dialogOpen("key-dialog")+")")

	for _, p := range []string{"teams", "spend", "requests", "live", "upstreams", "audit"} {
		e.page(p)
		switch p {
		case "spend":
			waitFor[float64](e, "the spend chart", chartSum)
		case "upstreams":
			e.checkUpstreams(width)
		}
		e.checkWidth("the "+p+" page", width)
		e.shot("narrow-" + p)
	}
}

// checkWidth fails the test when the page is wider than width, naming the
// elements that stick out.
func (e *env) checkWidth(what string, width int) {
	e.t.Helper()
	sw := eval[float64](e, "scrollWidth", `document.documentElement.scrollWidth`)
	if sw <= float64(width)+2 {
		return
	}
	wide := eval[[]string](e, "what sticks out", `[...document.querySelectorAll('body *')]
		.filter(el => el.getBoundingClientRect().right > window.innerWidth + 1 && el.getClientRects().length > 0)
		.slice(0, 8).map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
			(typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\s+/).join('.') : '') +
			' (right ' + Math.round(el.getBoundingClientRect().right) + ')')`)
	e.t.Errorf("%s at %d px: document scrollWidth %.0f (innerWidth %.0f); sticking out: %s", what, width, sw,
		eval[float64](e, "innerWidth", `window.innerWidth`), strings.Join(wide, ", "))
}

// TestConsoleSpendHistory looks at a week of a small fleet's traffic (the
// database's clock moved a day at a time): every key's bars show what the
// admin API says, search narrows the table, the teams page lists the team,
// the spend chart's segments are the ledger's per day and model, stacking
// by key shows the keys, the top tables and refusals fill, and the
// requests and live pages show. Its screenshots of the keys and spend
// pages are the README's (docs/console-keys.png, docs/console-spend.png).
func TestConsoleSpendHistory(t *testing.T) {
	now := time.Now().UTC()
	clock := fakeclock.New(now.Add(-6 * 24 * time.Hour))
	e := newEnvAt(t, desktop, clock)
	fleet := e.seedFleet(clock)
	e.setZone("UTC")
	e.open()
	e.signIn()

	e.checkBars()
	e.checkTablesFit("the keys page")
	e.shot("console-keys")
	e.typeInto("#key-search", "batch")
	waitFor[bool](e, "the search to narrow the table", `[...document.querySelectorAll('#keys-table tr[data-key-id]')]`+
		`.filter(r => r.getClientRects().length > 0).map(r => r.textContent).join('|').includes('batch-summarizer') && `+
		`[...document.querySelectorAll('#keys-table tr[data-key-id]')].filter(r => r.getClientRects().length > 0).length === 1`)
	e.setValue("#key-search", "")

	e.page("teams")
	waitFor[bool](e, "the team's row", fmt.Sprintf(`!!document.querySelector('#teams-table tr[data-team-id=%q] .bar[data-window]')`, fleet.team))
	e.checkTablesFit("the teams page")
	e.shot("teams")

	e.page("spend")
	e.setRange(now.AddDate(0, 0, -6).Format(time.DateOnly), now.Format(time.DateOnly))
	e.checkChart()
	e.checkSpendTables()
	e.checkTablesFit("the spend page")
	e.shot("console-spend")

	e.setValue("#spend-stack", "key")
	series := waitFor[[]string](e, "the chart stacked by key", fmt.Sprintf(`(() => { const s = %s; `+
		`return s.some(x => x === %q || x === 'docs-assistant') ? s : null })()`, chartSeries, fleet.keys["docs-assistant"]))
	for _, name := range []string{"docs-assistant", "batch-summarizer", "support-bot"} {
		if !slices.Contains(series, name) && !slices.Contains(series, fleet.keys[name]) {
			t.Errorf("stacked by key, the series %q lack %s (%s)", series, name, fleet.keys[name])
		}
	}
	e.shot("spend-by-key")

	e.page("requests")
	n := waitFor[int](e, "the requests' rows", `document.querySelectorAll('#requests-table tr[data-request-id]').length`)
	t.Logf("the requests page shows %d entries", n)
	if via := eval[string](e, "the upstream of a request", `document.querySelector('#requests-table bdi.upstream')?.textContent ?? ''`); via == "" {
		t.Error("the requests page names no upstream")
	}
	if !eval[bool](e, "#req-next", `!!document.getElementById('req-next')`) {
		t.Error("the requests page has no #req-next")
	}
	e.checkTablesFit("the requests page")
	e.shot("requests")

	e.page("live")
	for _, id := range []string{"live-rps", "live-tps", "live-inflight", "live-chart"} {
		waitFor[bool](e, "#"+id, fmt.Sprintf(`!!document.getElementById(%q)`, id))
	}
	// The page refreshes itself every 2 s: the chart is drawn again, with
	// a second sample, and the document is the same one.
	e.do("mark the document", chromedp.Evaluate[chromedp.Void](
		`window.__sameDocument = true; window.__liveChart = document.getElementById('live-chart').innerHTML`))
	waitFor[bool](e, "#live-chart to be redrawn", `document.getElementById('live-chart').innerHTML !== window.__liveChart`)
	if !eval[bool](e, "the same document", `window.__sameDocument === true`) {
		t.Error("the live page reloaded to refresh")
	}
	e.shot("live")
}

// checkBars waits until every window bar of every key shows the usage the
// admin API gives.
func (e *env) checkBars() {
	e.t.Helper()
	var list struct {
		Keys []struct {
			ID      string `json:"id"`
			Windows []struct {
				Window string `json:"window"`
				Used   int64  `json:"used"`
				Limit  int64  `json:"limit"`
			} `json:"windows"`
		} `json:"keys"`
	}
	e.api("GET", "/admin/keys", nil, &list, http.StatusOK)
	for _, k := range list.Keys {
		for _, w := range k.Windows {
			bar := fmt.Sprintf(`#keys-table tr[data-key-id=%q] .bar[data-window=%q]`, k.ID, w.Window)
			got := waitFor[string](e, "the bar "+bar, fmt.Sprintf(`(() => { const b = document.querySelector(%s); `+
				`return b ? b.dataset.used + '/' + b.dataset.limit : '' })()`, js(bar)))
			if want := fmt.Sprintf("%d/%d", w.Used, w.Limit); got != want {
				e.t.Errorf("key %s, window %s: the bar says used/limit %s, the admin API %s", k.ID, w.Window, got, want)
			}
		}
	}
}

// checkTablesFit fails the test when a table the page shows is wider than
// its box, which then scrolls sideways: at 1280 pixels every column should
// be in sight (at 390 a wide table may scroll, see TestConsoleNarrow).
func (e *env) checkTablesFit(what string) {
	e.t.Helper()
	clipped := eval[[]string](e, "tables wider than their box", `[...document.querySelectorAll('table')]
		.filter(t => t.getClientRects().length > 0)
		.map(t => {
			let box = t.parentElement;
			while (box && box !== document.body && getComputedStyle(box).overflowX === 'visible') box = box.parentElement;
			return box && box !== document.body && box.scrollWidth > box.clientWidth + 1 ?
				'#' + (t.id || '?') + ' is ' + box.scrollWidth + ' px wide in a ' + box.clientWidth + ' px box' : '';
		})
		.filter(Boolean)`)
	if len(clipped) > 0 {
		e.t.Errorf("%s at %d px: %s", what, desktop.width, strings.Join(clipped, "; "))
	}
}

// setRange sets the spend page's date inputs, as a date picker would.
func (e *env) setRange(from, to string) {
	e.t.Helper()
	e.setValue("#spend-from", from)
	e.setValue("#spend-to", to)
}

// checkChart waits for the spend chart and compares its segments, day by
// day and model by model, with the admin API's.
func (e *env) checkChart() {
	t := e.t
	t.Helper()
	var spend struct {
		Rows []struct {
			Day     string  `json:"day"`
			Model   string  `json:"model"`
			CostUSD float64 `json:"cost_usd"`
		} `json:"rows"`
	}
	e.api("GET", "/admin/spend?group_by=day&group_by=model", nil, &spend, http.StatusOK)
	want := map[string]float64{}
	var total float64
	for _, r := range spend.Rows {
		want[r.Day+" "+r.Model] += r.CostUSD
		total += r.CostUSD
	}
	waitFor[bool](e, "the chart to show the week", fmt.Sprintf(`Math.abs((%s) - %v) < 1e-6`, chartSum, total))
	got := eval[map[string]float64](e, "the chart's segments", `[...document.querySelectorAll('#spend-chart rect[data-cost]')]`+
		`.reduce((m, r) => { const k = r.dataset.day + ' ' + r.dataset.series; m[k] = (m[k] || 0) + Number(r.dataset.cost); return m }, {})`)
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-6 {
			t.Errorf("chart segment %s: $%v, the ledger $%v", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && got[k] != 0 {
			t.Errorf("chart segment %s: $%v, not in the ledger", k, got[k])
		}
	}
	t.Logf("the chart has %d segments, $%.2f in all", len(got), total)
}

// checkSpendTables checks that the top keys, top models and refusals
// tables name what the seeded traffic did.
func (e *env) checkSpendTables() {
	e.t.Helper()
	for sel, want := range map[string]string{"#top-keys": "batch-summarizer", "#top-models": "gpt-4o-mini", "#refusals": "model"} {
		text := waitFor[string](e, sel, fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ''`, sel))
		if !strings.Contains(text, want) {
			e.t.Errorf("%s: %q, want it to name %q", sel, strings.Join(strings.Fields(text), " "), want)
		}
	}
}

// TestConsoleTimeZones shows the spend of the last minutes in browsers far
// either side of UTC, where the browser's date is not the UTC date for
// hours of each day: the spend chart's default range holds it in each.
func TestConsoleTimeZones(t *testing.T) {
	e := newEnv(t, desktop)
	_, secret := e.createKeyAPI(map[string]any{"name": "tz", "windows": []any{map[string]any{"limit": 10_000_000, "window": "5h"}}})
	for _, m := range []string{"gpt-4o", "gpt-4o-mini"} {
		if status := e.complete(secret, m); status != http.StatusOK {
			t.Fatalf("%s: %d", m, status)
		}
	}
	e.settle()
	total := e.spendTotal("")
	for i, zone := range []string{"Pacific/Kiritimati", "Pacific/Pago_Pago", "UTC"} {
		e.setZone(zone)
		if i == 0 {
			e.open()
			e.signIn()
		} else {
			e.reload("keys")
		}
		if got := eval[string](e, "the browser's zone", `Intl.DateTimeFormat().resolvedOptions().timeZone`); got != zone {
			t.Fatalf("the browser's zone is %q, want %q", got, zone)
		}
		local := eval[string](e, "the local date", `new Date().toLocaleDateString('en-CA')`)
		e.page("spend")
		got := waitFor[float64](e, "the spend chart in "+zone, chartSum)
		if math.Abs(got-total) > 1e-6 {
			t.Errorf("%s (local date %s, UTC %s): the chart adds up to $%v, want $%v", zone, local, time.Now().UTC().Format(time.DateOnly), got, total)
		}
		from := eval[string](e, "#spend-from", `document.getElementById('spend-from').value`)
		to := eval[string](e, "#spend-to", `document.getElementById('spend-to').value`)
		t.Logf("%s: local date %s, UTC date %s; range %s to %s; chart $%v", zone, local, time.Now().UTC().Format(time.DateOnly), from, to, got)
		e.shot("spend-" + strings.ReplaceAll(strings.ToLower(zone), "/", "-"))
		e.checkRequestTime(zone)
	}
}

// checkRequestTime checks that the requests page shows the newest entry's
// time in the browser's zone (the browser runs in en-US).
func (e *env) checkRequestTime(zone string) {
	e.t.Helper()
	var list struct {
		Requests []struct {
			ID   string    `json:"request_id"`
			Time time.Time `json:"time"`
		} `json:"requests"`
	}
	e.api("GET", "/admin/requests?limit=1", nil, &list, http.StatusOK)
	if len(list.Requests) == 0 {
		e.t.Fatal("GET /admin/requests: no entries")
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		e.t.Fatal(err)
	}
	r := list.Requests[0]
	want := r.Time.In(loc).Format("Jan 02, 2006, 03:04:05 PM")
	e.page("requests")
	row := fmt.Sprintf(`#requests-table tr[data-request-id=%q]`, r.ID)
	text := waitFor[string](e, "the newest request's row", fmt.Sprintf(
		`(document.querySelector(%s)?.textContent ?? '').replace(/[\u202f\u00a0]/g, ' ')`, js(row)))
	if !strings.Contains(text, want) {
		e.t.Errorf("%s: the request's row says %q, want the time in the browser's zone, %s", zone, strings.Join(strings.Fields(text), " "), want)
	}
}

// setZone makes the browser's JavaScript clock read in an IANA time zone.
func (e *env) setZone(zone string) {
	e.t.Helper()
	e.do("time zone "+zone, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone})
		return err
	}))
}

// fleet is what seedFleet made.
type fleet struct {
	team string            // the team's id
	keys map[string]string // key name -> id
}

// createKeyAPI creates a key with the admin API, and returns its id and
// secret.
func (e *env) createKeyAPI(body map[string]any) (id, secret string) {
	e.t.Helper()
	var created struct {
		Key struct {
			ID string `json:"id"`
		} `json:"key"`
		Secret string `json:"secret"`
	}
	e.api("POST", "/admin/keys", body, &created, http.StatusCreated)
	return created.Key.ID, created.Secret
}

// seedFleet makes, with the admin API, a team and four keys (one of them
// disabled) and sends a week of their traffic with net/http, a day apart
// on clock (the database's), a few requests refused each day; clock then
// reads the time it is.
func (e *env) seedFleet(clock *fakeclock.Clock) fleet {
	t := e.t
	t.Helper()
	win := func(limit int64, window string) map[string]any {
		return map[string]any{"limit": limit, "window": window}
	}
	var team struct {
		ID string `json:"id"`
	}
	e.api("POST", "/admin/teams", map[string]any{"name": "research", "windows": []any{win(40_000_000, "24h")},
		"budgets": []any{map[string]any{"limit_usd": 100, "period": "month", "timezone": "UTC"}}}, &team, http.StatusCreated)
	f := fleet{team: team.ID, keys: map[string]string{}}
	secrets := map[string]string{}
	for _, k := range []map[string]any{
		{"name": "docs-assistant", "team": team.ID, "models": []string{"gpt-4o"}, "windows": []any{win(2_000_000, "5h")},
			"budgets": []any{map[string]any{"limit_usd": 25, "window": "24h"}}},
		{"name": "batch-summarizer", "team": team.ID, "models": []string{"gpt-4o-mini"}, "windows": []any{win(10_000_000, "24h")}},
		{"name": "support-bot", "windows": []any{win(1_000_000, "5h"), win(6_000_000, "168h")},
			"budgets": []any{map[string]any{"limit_usd": 5, "window": "24h"}}},
		{"name": "ci-smoke-tests", "windows": []any{win(100_000, "1h")}},
	} {
		name := k["name"].(string)
		f.keys[name], secrets[name] = e.createKeyAPI(k)
	}
	e.api("PATCH", "/admin/keys/"+f.keys["ci-smoke-tests"], map[string]any{"disabled": true}, nil, http.StatusOK)

	// Requests a day, oldest first: {key, model, how many, the status}.
	perDay := [7][3]int{{2, 6, 1}, {3, 4, 2}, {1, 8, 2}, {4, 5, 1}, {3, 7, 3}, {5, 3, 2}, {4, 10, 2}}
	for day, n := range perDay {
		clock.Set(time.Now().Add(time.Duration(day-6) * 24 * time.Hour))
		send := func(name, model string, count, want int) {
			for range count {
				if status := e.complete(secrets[name], model); status != want {
					t.Fatalf("day %d, %s, %s: %d, want %d", day, name, model, status, want)
				}
			}
		}
		send("docs-assistant", "gpt-4o", n[0], http.StatusOK)
		send("batch-summarizer", "gpt-4o-mini", n[1], http.StatusOK)
		send("support-bot", "gpt-4o-mini", n[2], http.StatusOK)
		send("docs-assistant", "gpt-4o-mini", day%2, http.StatusForbidden) // not among its models
		send("ci-smoke-tests", "gpt-4o-mini", 1, http.StatusForbidden)     // disabled
		e.settle()
	}
	clock.Set(time.Now())
	return f
}

// TestConsoleReadOnly opens the read-only console of `ratestore console
// --db` (the gateway's admin API and console alone, on a database no
// gateway serves): the banner says so, the keys and the spend show, and no
// button to change anything does.
func TestConsoleReadOnly(t *testing.T) {
	clock := fakeclock.New(time.Now().Add(-6 * 24 * time.Hour))
	e := newEnvAt(t, desktop, clock)
	e.seedFleet(clock)
	e.readOnly()
	e.open()
	e.signIn()
	e.visible("#readonly-banner")
	if !run(e, "the session", chromedp.Evaluate[bool](`fetch('/admin/session').then(r => r.json()).then(s => s.read_only === true)`,
		chromedp.EvalAwaitPromise)) {
		t.Error("GET /admin/session does not say read_only")
	}
	e.checkBars()
	changes := `[...document.querySelectorAll('#new-key, button[data-action], #new-team')]` +
		`.filter(b => b.getClientRects().length > 0).map(b => b.id || b.dataset.action)`
	if shown := eval[[]string](e, "change buttons", changes); len(shown) > 0 {
		t.Errorf("the read-only keys page shows buttons to change: %q", shown)
	}
	e.shot("readonly-keys")
	e.page("teams")
	if shown := eval[[]string](e, "change buttons", changes); len(shown) > 0 {
		t.Errorf("the read-only teams page shows buttons to change: %q", shown)
	}
	e.page("spend")
	if got := waitFor[float64](e, "the spend chart", chartSum); math.Abs(got-e.spendTotal("")) > 1e-6 {
		t.Errorf("read-only: the chart adds up to $%v, the ledger $%v", got, e.spendTotal(""))
	}
	e.shot("readonly-spend")
}
