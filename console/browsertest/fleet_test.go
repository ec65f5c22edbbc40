package browsertest

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/ratestore/ratestore/keystore"
)

// defaultFleetSize is how many keys TestConsoleLargeFleet imports unless
// the environment variable RATESTORE_BROWSER_KEYS says how many.
const defaultFleetSize = 100_000

// fleetSize is how many keys TestConsoleLargeFleet imports:
// RATESTORE_BROWSER_KEYS (at least 10,000; 1000000 for a million), else
// defaultFleetSize.
func fleetSize(t *testing.T) int {
	t.Helper()
	v := os.Getenv("RATESTORE_BROWSER_KEYS")
	if v == "" {
		return defaultFleetSize
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil || n < 10_000 {
		t.Fatalf("RATESTORE_BROWSER_KEYS=%q: want a number of keys, at least 10000", v)
	}
	return n
}

// bigFleet is what importFleet made.
type bigFleet struct {
	ids         []string // by index
	alpha, beta string   // two teams' ids
	teamKeys    map[string]int
	traffic     []string // the secrets of the keys named traffic-00 to traffic-09
	rare        int      // keys named Rare-…: a search for "rare" finds these
	disabled    int
}

// importFleet imports n keys into the gateway's key store at once
// (keystore.Store.Import, as a legacy key file's are): named fleet-NNNNNN,
// but for ten spread evenly named Rare-NNNNNN and the last ten named
// traffic-00 to traffic-09; one in seven last used a while ago, one in a
// thousand expired. Then twenty spread evenly are disabled, and two teams
// made with the admin API get 80 and 20 of them. The counts that a page of
// the admin API lists whole (rare, disabled, a team's) do not grow with n.
func (e *env) importFleet(n int) bigFleet {
	t := e.t
	t.Helper()
	ks := e.gw.Load().Keys()
	ctx := context.Background()
	now := time.Now()
	keys := make([]keystore.Imported, n)
	var f bigFleet
	for i := range keys {
		k := &keys[i]
		k.Secret, k.Name, k.TokenLimit = fmt.Sprintf("sk-fleet-%08d-%s", i, strings.Repeat("x", 24)), fmt.Sprintf("fleet-%06d", i), 1_000_000
		switch {
		case i >= n-10:
			k.Name, k.TokenLimit = fmt.Sprintf("traffic-%02d", i-(n-10)), 10_000_000
			f.traffic = append(f.traffic, k.Secret)
		case i%(n/10) == 7:
			k.Name = fmt.Sprintf("Rare-%06d", i)
			f.rare++
		}
		if i%7 == 0 {
			k.LastUsed = now.Add(-time.Duration(i) * time.Second)
		}
		if i%1000 == 500 {
			k.ExpiresAt = now.Add(-time.Hour)
		}
	}
	start := time.Now()
	res, err := ks.Import(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("imported %d keys in %v", res.Imported, time.Since(start).Round(time.Millisecond))
	f.ids = res.IDs
	for i := 3; i < n-10; i += n / 20 {
		if err := ks.Disable(ctx, f.ids[i]); err != nil {
			t.Fatal(err)
		}
		f.disabled++
	}
	f.alpha, f.beta = e.createTeamAPI("Alpha research"), e.createTeamAPI("Beta ops")
	f.teamKeys = map[string]int{}
	for j, i := 0, 11; i < n-10; j, i = j+1, i+n/100 {
		team := f.alpha
		if j%5 == 0 {
			team = f.beta
		}
		f.teamKeys[team]++
		if _, err := ks.Update(ctx, f.ids[i], func(s *keystore.Spec) error { s.Team = team; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("built the fleet of %d keys (imported, %d disabled, %d in teams) in %v", n, f.disabled, f.teamKeys[f.alpha]+f.teamKeys[f.beta],
		time.Since(start).Round(time.Millisecond))
	return f
}

// createTeamAPI creates a team with the admin API and returns its id.
func (e *env) createTeamAPI(name string) string {
	e.t.Helper()
	var team struct {
		ID string `json:"id"`
	}
	e.api("POST", "/admin/teams", map[string]any{"name": name, "windows": []any{map[string]any{"limit": 1_000_000_000, "window": "24h"}}}, &team, http.StatusCreated)
	return team.ID
}

// keyPage is a page of GET /admin/keys for query: its ids and next cursor.
func (e *env) keyPage(query url.Values) ([]string, string) {
	e.t.Helper()
	var page struct {
		Keys []struct {
			ID string `json:"id"`
		} `json:"keys"`
		Next string `json:"next_cursor"`
	}
	e.api("GET", "/admin/keys?"+query.Encode(), nil, &page, http.StatusOK)
	ids := make([]string, len(page.Keys))
	for i, k := range page.Keys {
		ids[i] = k.ID
	}
	return ids, page.Next
}

// rowIDs lists the ids of the keys table's rows, in order.
const rowIDs = `[...document.querySelectorAll('#keys-table tbody tr[data-key-id]')].map(r => r.dataset.keyId)`

// waitRows waits until the keys table shows the keys of ids, in order.
func (e *env) waitRows(what string, ids []string) {
	e.t.Helper()
	if len(ids) == 0 {
		e.t.Fatalf("%s: the admin API answers no key", what)
	}
	waitFor[bool](e, what, fmt.Sprintf(`JSON.stringify(%s) === %s`, rowIDs, js(jsJSON(ids))))
}

// firstRowsProbe notes, in page time (ms), when the sign-in form is
// submitted (window.__signInAt) and the first frame after it in which the
// keys table shows a row (window.__firstRowsAt).
const firstRowsProbe = `(() => {
	document.addEventListener('submit', (ev) => { if (ev.target.id === 'signin-form') window.__signInAt = performance.now(); }, true);
	const tick = () => {
		const r = document.querySelector('#keys-table tbody tr');
		if (window.__signInAt !== undefined && r && r.getClientRects().length > 0) {
			window.__firstRowsAt = performance.now();
			return;
		}
		requestAnimationFrame(tick);
	};
	requestAnimationFrame(tick);
})()`

// fetchLog records the URL of every fetch the page makes in
// window.__fetched, which the test empties as it goes.
const fetchLog = `(() => {
	window.__fetched = [];
	const f = window.fetch;
	window.fetch = function (input, init) { window.__fetched.push(String(input)); return f.apply(this, arguments); };
})()`

// probe runs script in every document the tab loads, before its own.
func (e *env) probe(script string) {
	e.t.Helper()
	e.do("install a probe", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script})
		return err
	}))
}

// TestConsoleLargeFleet uses the console on 100,000 keys (or
// RATESTORE_BROWSER_KEYS of them), imported into the gateway's key store
// before the browser looks. The keys page shows its first page of 100
// keys, and no more, soon after sign-in (the time is logged, not asserted:
// a shared machine's timings vary); its search, sort, status filter, page
// size and pages show what the admin API answers; a poll of a page that
// did not change gets 304 and draws nothing, a hidden tab polls nothing,
// and a page not shown is not polled; the teams page counts each team's
// keys and links to them; a key's page polls as the list does; the spend
// chart stacked by key shows the top eight keys and one "other", naming
// only those keys.
func TestConsoleLargeFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 100,000 keys")
	}
	n := fleetSize(t)
	e := newEnv(t, desktop)
	f := e.importFleet(n)
	e.probe(firstRowsProbe)
	e.probe(fetchLog)
	nw := e.watchNetwork()
	e.open()
	e.signIn()
	first := waitFor[float64](e, "the first rows", `window.__firstRowsAt !== undefined && (window.__firstRowsAt - window.__signInAt || 0.001)`)
	nw.quiet(e)
	_, lines := nw.report(e.srv.URL)
	t.Logf("%d keys: the keys page showed its first rows %.0f ms after the sign-in form was submitted (target: under 1 s); "+
		"the responses:\n%s", n, first, strings.Join(keyLines(lines), "\n"))
	page1, next := e.keyPage(url.Values{"limit": {"100"}, "sort": {"name"}})
	e.waitRows("the first page", page1)
	e.checkTablesFit(fmt.Sprintf("the keys page of %d keys", n))
	e.shot("fleet-keys")
	e.checkNotModified("#keys-table", "the keys page")
	e.checkHidden("#keys-table")

	e.fleetSearch(f)
	e.fleetPages(page1, next)
	e.fleetTeams(f, page1)
	e.fleetKeyPage(page1[0])
	e.fleetSpend(f)
}

// keyLines are the lines of a network report about the admin API.
func keyLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, "/admin/") {
			out = append(out, l)
		}
	}
	return out
}

// checkNotModified waits for a poll of the list of table that finds
// nothing changed (304: data-unchanged counts them) and checks that the
// table was not drawn again (data-renders).
func (e *env) checkNotModified(table, what string) {
	e.t.Helper()
	renders := eval[string](e, "data-renders", fmt.Sprintf(`document.querySelector(%s).dataset.renders`, js(table)))
	unchanged := eval[string](e, "data-unchanged", fmt.Sprintf(`document.querySelector(%s).dataset.unchanged ?? '0'`, js(table)))
	e.do("forget the fetches", chromedp.Evaluate[chromedp.Void](`window.__fetched = []`))
	waitFor[bool](e, what+" polled with nothing changed", fmt.Sprintf(`Number(document.querySelector(%s).dataset.unchanged ?? 0) > %s`, js(table), unchanged))
	if got := eval[string](e, "data-renders", fmt.Sprintf(`document.querySelector(%s).dataset.renders`, js(table))); got != renders {
		e.t.Errorf("%s: a poll that found nothing changed drew the table again (renders %s, then %s)", what, renders, got)
	}
	fetched := eval[[]string](e, "the fetches", `window.__fetched`)
	e.t.Logf("%s: a poll answered 304 and drew nothing; the page fetched %q meanwhile", what, fetched)
}

// checkHidden hides the tab (document.visibilityState, as the browser
// sets it when the tab is behind another) for longer than a poll's
// interval: the page fetches nothing; shown again, it polls at once.
func (e *env) checkHidden(table string) {
	e.t.Helper()
	e.do("hide the tab", chromedp.Evaluate[chromedp.Void](`(() => {
		Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'});
		Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
		document.dispatchEvent(new Event('visibilitychange'));
		window.__fetched = [];
		window.__hiddenAt = performance.now();
	})()`))
	// Nothing to wait for but time: a poll's interval (5 s) and a second.
	waitFor[bool](e, "6 s with the tab hidden", `performance.now() - window.__hiddenAt > 6000`)
	if fetched := eval[[]string](e, "the fetches", `window.__fetched`); len(fetched) > 0 {
		e.t.Errorf("with the tab hidden for 6 s the page fetched %q", fetched)
	}
	unchanged := eval[string](e, "data-unchanged", fmt.Sprintf(`document.querySelector(%s).dataset.unchanged ?? '0'`, js(table)))
	e.do("show the tab", chromedp.Evaluate[chromedp.Void](`(() => {
		delete document.visibilityState;
		delete document.hidden;
		document.dispatchEvent(new Event('visibilitychange'));
		window.__shownAt = performance.now();
	})()`))
	ms := waitFor[float64](e, "a poll once shown", fmt.Sprintf(`Number(document.querySelector(%s).dataset.unchanged ?? 0) > %s && (performance.now() - window.__shownAt || 0.001)`, js(table), unchanged))
	if ms > 2000 {
		e.t.Errorf("shown again, the page polled after %.0f ms, not at once", ms)
	}
}

// fleetSearch searches, sorts and filters the keys page, each as the
// admin API does.
func (e *env) fleetSearch(f bigFleet) {
	t := e.t
	t.Helper()
	e.typeInto("#key-search", "rare")
	rare, _ := e.keyPage(url.Values{"q": {"rare"}, "sort": {"name"}})
	if len(rare) != f.rare {
		t.Errorf("GET /admin/keys?q=rare: %d keys, want %d", len(rare), f.rare)
	}
	e.waitRows("the search for rare", rare)
	e.shot("fleet-search")
	e.setValue("#key-search", "")
	e.click(`#keys-table button[data-sort="name"]`)
	desc, _ := e.keyPage(url.Values{"sort": {"-name"}})
	e.waitRows("the keys by name, descending", desc)
	if !strings.HasPrefix(eval[string](e, "the first name", `document.querySelector('#keys-table tbody .key-name').textContent`), "traffic-") {
		t.Error("sorted by name descending, the first key is not a traffic-… one")
	}
	e.click(`#keys-table button[data-sort="last_used"]`)
	used, _ := e.keyPage(url.Values{"sort": {"-last_used"}})
	e.waitRows("the keys last used first", used)
	e.shot("fleet-last-used")
	e.setValue("#key-status", "disabled")
	disabled, _ := e.keyPage(url.Values{"status": {"disabled"}, "sort": {"-last_used"}})
	if len(disabled) != f.disabled {
		t.Errorf("GET /admin/keys?status=disabled: %d keys, want %d", len(disabled), f.disabled)
	}
	e.waitRows("the disabled keys", disabled)
	if n := eval[int](e, "statuses", `[...document.querySelectorAll('#keys-table td[data-status]')].filter(td => td.dataset.status !== 'disabled').length`); n > 0 {
		t.Errorf("filtered on disabled, %d rows are not", n)
	}
	e.setValue("#key-status", "expired")
	expired, _ := e.keyPage(url.Values{"status": {"expired"}, "sort": {"-last_used"}})
	e.waitRows("the expired keys", expired)
	e.shot("fleet-expired")
	e.setValue("#key-status", "")
	e.click(`#keys-table button[data-sort="name"]`)
}

// fleetPages goes to the next page and back, and shows 1,000 keys a page.
func (e *env) fleetPages(page1 []string, next string) {
	t := e.t
	t.Helper()
	e.waitRows("the first page again", page1)
	page2, _ := e.keyPage(url.Values{"sort": {"name"}, "cursor": {next}})
	e.click(`#keys-pager [data-go="next"]`)
	e.waitRows("the second page", page2)
	if got := eval[string](e, "the page number", `document.querySelector('#keys-pager .page-no').textContent`); !strings.HasPrefix(got, "Page 2") {
		t.Errorf("the pager says %q on the second page", got)
	}
	e.click(`#keys-pager [data-go="back"]`)
	e.waitRows("the first page, back", page1)
	e.setValue("#keys-pager select[data-size]", "1000")
	big, _ := e.keyPage(url.Values{"sort": {"name"}, "limit": {"1000"}})
	e.waitRows("a page of 1,000 keys", big)
	e.checkTablesFit("a page of 1,000 keys")
	e.setValue("#keys-pager select[data-size]", "100")
	e.waitRows("a page of 100 keys", page1)
}

// fleetTeams checks the teams page's key counts, and its link to a team's
// keys.
func (e *env) fleetTeams(f bigFleet, page1 []string) {
	t := e.t
	t.Helper()
	e.page("teams")
	for id, want := range f.teamKeys {
		var team struct {
			KeyCount int `json:"key_count"`
		}
		e.api("GET", "/admin/teams/"+id, nil, &team, http.StatusOK)
		if team.KeyCount != want {
			t.Errorf("team %s: key_count %d, want %d", id, team.KeyCount, want)
		}
		got := waitFor[string](e, "the team's key count", attr(fmt.Sprintf(`#teams-table tr[data-team-id=%q] td[data-keys]`, id), "keys"))
		if got != fmt.Sprint(want) {
			t.Errorf("team %s: the teams page counts %s keys, want %d", id, got, want)
		}
	}
	e.shot("fleet-teams")
	e.checkNotModified("#teams-table", "the teams page")
	if fetched := eval[[]string](e, "the fetches", `window.__fetched`); slices.ContainsFunc(fetched, func(u string) bool { return strings.HasPrefix(u, "/admin/keys") }) {
		t.Errorf("on the teams page, the page fetched keys: %q", fetched)
	}
	e.click(fmt.Sprintf(`#teams-table tr[data-team-id=%q] a[data-team-keys]`, f.beta))
	beta, next := e.keyPage(url.Values{"team": {f.beta}, "sort": {"name"}})
	if len(beta) != f.teamKeys[f.beta] || next != "" {
		t.Errorf("GET /admin/keys?team=%s: %d keys and a next cursor %q, want %d and none", f.beta, len(beta), next, f.teamKeys[f.beta])
	}
	e.waitRows("the keys of team Beta ops", beta)
	e.shot("fleet-team-keys")
	e.setValue("#key-team", "")
	e.waitRows("every team's keys again", page1)
}

// fleetKeyPage opens a key's page from its row: it polls as the list does.
func (e *env) fleetKeyPage(id string) {
	e.t.Helper()
	e.click(fmt.Sprintf(`#keys-table tr[data-key-id=%q] a.key-name`, id))
	waitFor[bool](e, "the key's page", `Number(document.getElementById('page-key').dataset.renders) > 0`)
	facts := eval[string](e, "the key's facts", `document.querySelector('#key-body dl.facts')?.textContent ?? ''`)
	if !strings.Contains(facts, id) || !strings.Contains(facts, "active") || strings.Contains(facts, "[object") {
		e.t.Errorf("the key's page says %q, want its id %s and its status", facts, id)
	}
	e.checkNotModified("#page-key", "a key's page")
	e.shot("fleet-key")
}

// fleetSpend sends traffic with the ten traffic keys, key i i+1 requests,
// and checks the spend chart stacked by key: the eight that cost most are
// series of their own, named, and the other two are one series, "other",
// whose cost is theirs; the page looks up the names of those it shows, and
// lists no key.
func (e *env) fleetSpend(f bigFleet) {
	t := e.t
	t.Helper()
	for i, secret := range f.traffic {
		for range i + 1 {
			if status := e.complete(secret, "gpt-4o-mini"); status != http.StatusOK {
				t.Fatalf("traffic-%02d: %d", i, status)
			}
		}
	}
	e.settle()
	type row struct {
		Key     string  `json:"key"`
		CostUSD float64 `json:"cost_usd"`
	}
	var spend struct {
		Rows []row `json:"rows"`
	}
	e.api("GET", "/admin/spend?group_by=key", nil, &spend, http.StatusOK)
	slices.SortFunc(spend.Rows, func(a, b row) int { return cmp.Compare(b.CostUSD, a.CostUSD) })
	if len(spend.Rows) != 10 {
		t.Fatalf("GET /admin/spend?group_by=key: %d rows, want the 10 traffic keys", len(spend.Rows))
	}
	var other float64
	for _, r := range spend.Rows[8:] {
		other += r.CostUSD
	}
	e.reload("spend") // knowing no key's name
	e.do("forget the fetches", chromedp.Evaluate[chromedp.Void](`window.__fetched = []`))
	e.setValue("#spend-stack", "key")
	got := waitFor[float64](e, "the other series", `[...document.querySelectorAll('#spend-chart rect[data-other]')].reduce((s, r) => s + Number(r.dataset.cost), 0)`)
	if math.Abs(got-other) > 1e-9 {
		t.Errorf("the chart's other series costs $%v, the two cheapest keys $%v", got, other)
	}
	series := eval[[]string](e, "the chart's series", chartSeries)
	want := []string{"(other)"}
	for _, r := range spend.Rows[:8] {
		want = append(want, r.Key)
	}
	slices.Sort(want)
	if !slices.Equal(series, want) {
		t.Errorf("the chart's series %q, want the top 8 keys and (other): %q", series, want)
	}
	legend := eval[string](e, "the legend", `document.getElementById('spend-legend').textContent`)
	for _, name := range []string{"traffic-09", "traffic-02", "other"} {
		if !strings.Contains(legend, name) {
			t.Errorf("the legend %q does not name %s", legend, name)
		}
	}
	fetched := eval[[]string](e, "the fetches", `window.__fetched`)
	var lookups int
	for _, u := range fetched {
		switch {
		case strings.HasPrefix(u, "/admin/keys?") || u == "/admin/keys":
			t.Errorf("the spend page lists keys: %s", u)
		case strings.HasPrefix(u, "/admin/keys/"):
			lookups++
		}
	}
	t.Logf("the spend page by key: %d fetches, %d of them a key's name: %q", len(fetched), lookups, fetched)
	if lookups > 18 {
		t.Errorf("the spend page looked up %d keys, more than it shows (8 series and the top 10)", lookups)
	}
	e.shot("fleet-spend-by-key")
}
