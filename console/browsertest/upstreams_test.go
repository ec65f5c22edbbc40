package browsertest

import (
	"context"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/internal/upstreamtest"
)

// upstreamsGateway is the served gateway as the admin API shows it to the
// upstreams page: its traffic and prices, and upstreams in the states the
// test sets, which a gateway only reaches through traffic and failures.
// The server's goroutines call it.
type upstreamsGateway struct {
	*gateway.Gateway
	mu   sync.Mutex
	list []admin.Upstream
}

func (g *upstreamsGateway) Upstreams(context.Context) []admin.Upstream {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.list)
}

func (g *upstreamsGateway) set(list []admin.Upstream) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.list = list
}

// showUpstreams has the admin API show the served gateway with the three
// upstreams of testUpstreams, and returns it to change them.
func (e *env) showUpstreams() *upstreamsGateway {
	g := &upstreamsGateway{Gateway: e.gw.Load(), list: testUpstreams()}
	e.showGateway(g)
	return g
}

// hostileName is an upstream's name that would be markup, and run, if
// the page parsed names.
const hostileName = `claude <img src=x onerror="document.title='pwned'">`

// coolingUntil is when the second upstream of testUpstreams is tried
// again.
var coolingUntil = time.Date(2026, 11, 28, 9, 0, 42, 0, time.UTC)

// testUpstreams are the upstreams of upstreamtest.Three, the route named
// as markup.
func testUpstreams() []admin.Upstream { return upstreamtest.Three(coolingUntil, hostileName) }

// shownUpstream is a row of the upstreams page, as the browser lays it
// out: each cell's text as shown (white space folded), and its bars.
type shownUpstream struct {
	Name, API, URL, Models, Limits, Weight, Status, Requests, Errors string
	Cooling                                                          bool
	Bars                                                             []shownBar
}

// shownBar is a limit's bar: its figures, how much of its track its fill
// covers and how tall it is, in pixels, and whether its label, track and
// text overlap.
type shownBar struct {
	Label, Text, Level string
	Used, Limit        int64
	Frac, Height       float64
	Overlap            bool
}

// shownUpstreamsJS reads the rows of the upstreams page.
const shownUpstreamsJS = `(() => {
	const norm = (s) => s.replace(/[\u202f\u00a0\s]+/g, ' ').trim();
	return [...document.querySelectorAll('#upstreams-table tr[data-upstream]')].map(tr => {
		const td = tr.cells;
		const bars = [...td[2].querySelectorAll('.limit')].map(b => {
			const r = (sel) => b.querySelector(sel).getBoundingClientRect();
			const label = r('.limit-label'), track = r('.bar-track'), fill = r('.bar-fill'), text = r('.bar-text');
			return {label: b.getAttribute('aria-label'), text: norm(b.querySelector('.bar-text').innerText),
				level: [...b.classList].find(c => c.startsWith('lvl-')) || '', used: Number(b.dataset.used), limit: Number(b.dataset.limit),
				frac: fill.width / track.width, height: fill.height,
				overlap: label.right > track.left + 0.5 || track.right > text.left + 0.5 || track.width < 20};
		});
		return {name: tr.querySelector('.key-name').textContent, api: norm(td[0].querySelector('.sub').innerText),
			url: td[0].querySelector('.url').textContent, models: norm(td[1].innerText), limits: norm(td[2].innerText),
			weight: norm(td[3].innerText), status: norm(td[4].innerText), requests: norm(td[5].querySelector('.requests').innerText),
			errors: norm(td[5].querySelector('.errors').innerText), cooling: tr.classList.contains('cooling'), bars};
	});
})()`

// TestConsoleUpstreams shows the upstreams page on three upstreams: a bar
// for each limit one has, half full, with its figures beside it; "no
// limits" for one that has none; the one cooling down says until when,
// in red; names are text, never markup. Its polls get 304 while nothing
// changes, and redraw only the upstream that did; an empty list says so.
func TestConsoleUpstreams(t *testing.T) {
	e := newEnv(t, desktop)
	g := e.showUpstreams()
	e.setZone("UTC")
	e.open()
	e.signIn()
	e.page("upstreams")
	e.checkUpstreams(desktop.width)
	if got := eval[string](e, "the count", `document.getElementById('upstreams-count').textContent`); got != "3 upstreams, 1 cooling down" {
		t.Errorf("#upstreams-count says %q", got)
	}
	cooling := eval[[]string](e, "the cooldown's look", `(() => { const s = getComputedStyle(document.querySelector('tr.cooling .cooling-until')); `+
		`return [s.backgroundColor, s.color, s.fontWeight] })()`)
	if !slices.Equal(cooling, []string{"rgb(192, 42, 42)", "rgb(255, 255, 255)", "700"}) {
		t.Errorf("the cooldown shows as %q, want white bold on red", cooling)
	}
	if n := eval[int](e, "images", `document.querySelectorAll('img').length`); n != 0 || eval[string](e, "the title", `document.title`) == "pwned" {
		t.Errorf("a name became markup: %d <img> in the page", n)
	}
	e.checkTablesFit("the upstreams page")
	e.shot("upstreams")

	e.checkUpstreamsPolled(g)
	g.set(nil)
	empty := waitFor[string](e, "the empty list", `(() => { const m = document.getElementById('upstreams-empty'); `+
		`return m.getClientRects().length > 0 && document.getElementById('upstreams-table').getClientRects().length === 0 && m.textContent })()`)
	if empty != "No upstreams configured." {
		t.Errorf("with no upstreams, the page says %q", empty)
	}
	e.shot("upstreams-empty")
}

// checkUpstreams waits for the three upstreams of testUpstreams and checks
// what each row shows, and that each bar is drawn, as full as its use, at
// a window width (the page is in the browser's zone, UTC).
func (e *env) checkUpstreams(width int) {
	e.t.Helper()
	waitFor[bool](e, "the upstreams' rows", `document.querySelectorAll('#upstreams-table tr[data-upstream]').length === 3`)
	rows := eval[[]shownUpstream](e, "the upstreams' rows", shownUpstreamsJS)
	want := []shownUpstream{
		{Name: "openai-a", API: "openai", URL: "https://api.openai.com", Models: "gpt-4o*, gpt-4.1*", Weight: "2", Status: "in service",
			Requests: "91,234", Errors: "3 errors (<0.1%)", Bars: []shownBar{
				{Label: "Requests / min", Text: "2,500 / 5,000", Used: 2500, Limit: 5000, Level: "lvl-ok"},
				{Label: "Tokens / min", Text: "400,000 / 800,000", Used: 400_000, Limit: 800_000, Level: "lvl-ok"},
				{Label: "In flight", Text: "100 / 200", Used: 100, Limit: 200, Level: "lvl-ok"}}},
		{Name: "azure-east", API: "azure-openai", URL: "https://east.example.openai.azure.com", Models: "every azure-openai model",
			Limits: "1 in flight", Weight: "1", Status: "Cooling down until 09:00:42 AM UTC", Cooling: true,
			Requests: "812", Errors: "57 errors (7.0%)", Bars: []shownBar{
				{Label: "Tokens / min", Text: "12,000 / 450,000", Used: 12_000, Limit: 450_000, Level: "lvl-ok"}}},
		{Name: hostileName, API: "route /anthropic", URL: "https://api.anthropic.com", Models: "every model",
			Limits: "no limits", Weight: "1", Status: "in service", Requests: "7", Errors: "no errors"},
	}
	if len(rows) != len(want) {
		e.t.Fatalf("at %d px: %d rows, want %d", width, len(rows), len(want))
	}
	for i, got := range rows {
		e.checkLimitBars(width, got.Name, got.Bars, want[i].Bars)
		if w := want[i].Limits; w != "" && !strings.HasSuffix(got.Limits, w) {
			e.t.Errorf("at %d px, %s: the limits say %q, want them to end %q", width, got.Name, got.Limits, w)
		}
		got.Bars, want[i].Bars, got.Limits, want[i].Limits = nil, nil, "", ""
		if !reflect.DeepEqual(got, want[i]) {
			e.t.Errorf("at %d px, row %d:\n got %+v\nwant %+v", width, i, got, want[i])
		}
	}
}

// checkLimitBars compares the bars of an upstream with want, and requires each
// to be drawn: its fill as much of its track as used is of limit (at
// least a sliver), a few pixels tall, its label, track and figures side
// by side.
func (e *env) checkLimitBars(width int, name string, got, want []shownBar) {
	e.t.Helper()
	if len(got) != len(want) {
		e.t.Errorf("at %d px, %s: %d bars, want %d", width, name, len(got), len(want))
		return
	}
	for i, b := range got {
		frac := max(float64(b.Used)/float64(b.Limit), 0.02)
		if math.Abs(b.Frac-frac) > 0.02 || b.Height < 4 || b.Overlap {
			e.t.Errorf("at %d px, %s, %s: its fill is %.3f of its track (want %.3f), %.1f px tall; label, track and text overlap: %v",
				width, name, b.Label, b.Frac, frac, b.Height, b.Overlap)
		}
		b.Frac, b.Height, b.Overlap = 0, 0, false
		if b != want[i] {
			e.t.Errorf("at %d px, %s: bar %d is %+v, want %+v", width, name, i, b, want[i])
		}
	}
}

// checkUpstreamsPolled waits for a poll of the page answered 304, which
// draws nothing; then changes two upstreams and waits for the page to
// show it, having redrawn those two rows and kept the third.
func (e *env) checkUpstreamsPolled(g *upstreamsGateway) {
	e.t.Helper()
	waitFor[bool](e, "a poll that finds nothing changed", `Number(document.getElementById('page-upstreams').dataset.unchanged) >= 1`)
	e.do("mark the rows", chromedp.Evaluate[chromedp.Void](`window.__rows = [...document.querySelectorAll('#upstreams-table tr[data-upstream]')]`))
	list := testUpstreams()
	list[0].Used.InFlight = 190
	list[1].CoolingDownUntil = nil
	g.set(list)
	waitFor[bool](e, "the change", `(() => { const b = document.querySelector('#upstreams-table tr[data-upstream="openai-a"] .limit[aria-label="In flight"]'); `+
		`return b && b.dataset.used === '190' && b.classList.contains('lvl-crit') && !document.querySelector('#upstreams-table tr.cooling') })()`)
	kept := eval[[]bool](e, "which rows were kept", `[...document.querySelectorAll('#upstreams-table tr[data-upstream]')].map((tr, i) => tr === window.__rows[i])`)
	if !slices.Equal(kept, []bool{false, false, true}) {
		e.t.Errorf("rows kept across the change: %v, want only the unchanged third", kept)
	}
	renders := eval[string](e, "renders", `document.getElementById('page-upstreams').dataset.renders`)
	e.t.Logf("the upstreams page drew %s times, and found nothing changed %s times", renders,
		eval[string](e, "unchanged", `document.getElementById('page-upstreams').dataset.unchanged`))
	if renders != "2" {
		e.t.Errorf("the page drew %s times, want 2: once, and once for the change", renders)
	}
	e.shot("upstreams-changed")
}

// TestConsoleUpstreamsReadOnly: the read-only console of `ratestore
// console`, with no gateway, says there are no upstreams to show.
func TestConsoleUpstreamsReadOnly(t *testing.T) {
	e := newEnv(t, desktop)
	e.readOnly()
	e.open()
	e.signIn()
	e.page("upstreams")
	got := waitFor[string](e, "the note", `(() => { const m = document.getElementById('upstreams-empty'); return m.getClientRects().length > 0 && m.textContent })()`)
	if !strings.Contains(got, "this console has none") {
		t.Errorf("the read-only console's upstreams page says %q", got)
	}
	e.shot("readonly-upstreams")
}
