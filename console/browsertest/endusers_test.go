package browsertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Names of end users that must show as text: markup, and right-to-left
// letters. A right-to-left override (U+202E) is refused by the gateway
// (400 invalid_end_user): no such name reaches the ledger.
const (
	markupUser = `<img src=x onerror=alert(1)>`
	rtlUser    = "عميل-٧"
	rloUser    = "evil\u202Eresu"
	heavyUser  = "heavy-user"
)

// endUserKey is the key of TestConsoleEndUsers: its end users' limits, a
// model limit on gpt-4o-mini, and its end users' names.
type endUserKey struct {
	id, secret string
	names      []string
}

// sendEndUsers creates a key with limits per end user and per model, and
// sends its requests naming about thirty end users: each one request of
// gpt-4o-mini, by the header X-Ratestore-End-User or OpenAI's user; one
// of them until it is over its window; a few naming none.
func (e *env) sendEndUsers() endUserKey {
	t := e.t
	t.Helper()
	win := func(limit int64, window string) map[string]any {
		return map[string]any{"limit": limit, "window": window}
	}
	var k endUserKey
	k.id, k.secret = e.createKeyAPI(map[string]any{
		"name": "storefront", "windows": []any{win(100_000_000, "5h")},
		"model_limits": []any{map[string]any{"models": []string{"gpt-4o-mini"}, "windows": []any{win(40_000_000, "24h")},
			"budgets": []any{map[string]any{"limit_usd": 50, "period": "day"}}, "requests_per_minute": 600}},
		"end_users": map[string]any{"windows": []any{win(1_000_000, "1h")}, "requests_per_minute": 60},
	})
	for i := range 26 {
		k.names = append(k.names, fmt.Sprintf("user-%02d", i))
	}
	k.names = append(k.names, "acme-1", "acme-2", markupUser, rtlUser)
	for i, name := range k.names {
		if status := e.completeAs(k.secret, "gpt-4o-mini", name, i%3 == 0); status != http.StatusOK {
			t.Fatalf("end user %q: %d, want 200", name, status)
		}
	}
	for range 2 {
		if status := e.completeAs(k.secret, "gpt-4o", "", false); status != http.StatusOK {
			t.Fatalf("no end user: %d, want 200", status)
		}
	}
	// heavy-user fills its window of 1,000,000 tokens, 300,000 a request.
	k.names = append(k.names, heavyUser)
	ok := 0
	for range 6 {
		status := e.completeAs(k.secret, "gpt-4o-mini", heavyUser, false)
		if status == http.StatusOK {
			ok++
			continue
		}
		if status != http.StatusTooManyRequests {
			t.Fatalf("%s: %d, want 200 or 429", heavyUser, status)
		}
		break
	}
	if ok == 0 || ok == 6 {
		t.Fatalf("%s: %d requests of 6 accepted, want its window filled", heavyUser, ok)
	}
	if status := e.completeAs(k.secret, "gpt-4o-mini", rloUser, false); status != http.StatusBadRequest {
		t.Errorf("an end user named with U+202E: %d, want 400", status)
	}
	e.settle()
	slices.Sort(k.names)
	return k
}

// completeAs is complete for the end user named (none: ""), in the header
// X-Ratestore-End-User or, when inBody, in OpenAI's "user".
func (e *env) completeAs(secret, model, endUser string, inBody bool) int {
	e.t.Helper()
	body := map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": "hello"}}}
	if inBody && endUser != "" {
		body["user"] = endUser
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	if !inBody && endUser != "" {
		req.Header.Set("X-Ratestore-End-User", endUser)
	}
	status, _ := e.send(req)
	return status
}

// apiEndUsers is a page of GET /admin/keys/{id}/end-users.
type apiEndUsers struct {
	EndUsers []struct {
		ID      string `json:"id"`
		Windows []struct {
			Used  int64 `json:"used"`
			Limit int64 `json:"limit"`
		} `json:"windows"`
		Requests int64 `json:"requests"`
	} `json:"end_users"`
	NextCursor string `json:"next_cursor"`
}

func (p apiEndUsers) names() []string {
	var out []string
	for _, u := range p.EndUsers {
		out = append(out, u.ID)
	}
	return out
}

// endUsersPage reads a page of key id's end users from the admin API.
func (e *env) endUsersPage(id string, q url.Values) apiEndUsers {
	e.t.Helper()
	var p apiEndUsers
	e.api("GET", "/admin/keys/"+id+"/end-users?"+q.Encode(), nil, &p, http.StatusOK)
	return p
}

// shownEndUsers is the names of the end users the key's page shows, in
// order, once they are want.
func (e *env) shownEndUsers(what string, want []string) {
	e.t.Helper()
	expr := `[...document.querySelectorAll('#endusers-table tbody tr')].map(r => r.dataset.endUser)`
	got := waitFor[[]string](e, what, fmt.Sprintf(`(() => { const got = %s; return JSON.stringify(got) === JSON.stringify(%s) ? got : null })()`,
		expr, mustJSON(want)))
	if !slices.Equal(got, want) {
		e.t.Errorf("%s: the page shows %q, want %q", what, got, want)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// writes watches the tab's requests to the admin API and keeps those that
// are not GETs, but for signing in.
type writes struct {
	mu   sync.Mutex
	seen []string
}

func (e *env) watchWrites() *writes {
	w := &writes{}
	if err := chromedp.Listen(e.tab, func(ev any) {
		if ev, ok := ev.(*network.EventRequestWillBeSent); ok {
			u, _ := url.Parse(ev.Request.URL)
			if ev.Request.Method != http.MethodGet && !(u != nil && u.Path == "/admin/session" && ev.Request.Method == http.MethodPost) {
				w.mu.Lock()
				w.seen = append(w.seen, ev.Request.Method+" "+ev.Request.URL)
				w.mu.Unlock()
			}
		}
	}); err != nil {
		e.t.Fatal(err)
	}
	return w
}

// TestConsoleEndUsers shows a key's limits per model and per end user,
// and its end users, on a key whose requests named about thirty: the
// model limit's bar is its usage, the end users' table is the admin API's
// pages (25 a page, Next and Previous), its search by the start of a
// name, the end user over its window has a full bar, and names that are
// markup or right to left are text; a name links to its requests; the
// spend page stacked by end user of the key, and its top end users, are
// the ledger's; a team's page shows its limits per model and end user;
// the read-only console shows the same and sends no change; at 390 px
// nothing sticks out.
func TestConsoleEndUsers(t *testing.T) {
	e := newEnv(t, desktop)
	k := e.sendEndUsers()
	var team struct {
		ID string `json:"id"`
	}
	e.api("POST", "/admin/teams", map[string]any{"name": "retail",
		"model_limits": []any{map[string]any{"models": []string{"gpt-4o", "claude-*"}, "windows": []any{map[string]any{"limit": 2_000_000, "window": "24h"}}, "max_concurrent": 4}},
		"end_users":    map[string]any{"budgets": []any{map[string]any{"limit_usd": 2, "period": "day"}}, "required": true},
	}, &team, http.StatusCreated)
	quiet, _ := e.createKeyAPI(map[string]any{"name": "quiet", "windows": []any{map[string]any{"limit": 1000, "window": "1h"}}})
	e.setZone("UTC")
	e.open()
	e.signIn()
	e.checkEndUsers(k, "")

	// A key no request named an end user of.
	e.goHash("#key/" + quiet)
	waitFor[bool](e, "the empty state", `(() => { const p = document.getElementById('endusers-empty'); `+
		`return !p.hidden && p.textContent.includes('No end users yet') && p.textContent.includes('X-Ratestore-End-User') })()`)

	// A team: its limits as set, no usage.
	e.goHash("#team/" + team.ID)
	text := waitFor[string](e, "the team's limits", `(() => { const m = document.getElementById('model-limits'), u = document.getElementById('end-user-policy'); `+
		`return m && u ? m.textContent + ' | ' + u.textContent : '' })()`)
	for _, want := range []string{"gpt-4o", "claude-*", "2,000,000 tokens per 24h", "4 at once", "$2.00 per day (UTC)", "required"} {
		if !strings.Contains(text, want) {
			t.Errorf("the team's page: %q lacks %q", text, want)
		}
	}
	e.topShot("endusers-team")

	// The read-only console: the same, and nothing sent but GETs.
	e.readOnly()
	w := e.watchWrites()
	e.open()
	e.signIn()
	e.visible("#readonly-banner")
	e.checkEndUsers(k, "readonly-")
	w.mu.Lock()
	if len(w.seen) > 0 {
		t.Errorf("the read-only console sent changes: %q", w.seen)
	}
	w.mu.Unlock()

	// A phone, 390 px wide.
	const width = 390
	e.do("emulate a phone", chromedp.EmulateViewport(width, 844, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait))
	e.goHash("#key/" + k.id)
	e.setValue("#enduser-search", "")
	waitFor[bool](e, "the end users at 390 px", `document.querySelectorAll('#endusers-table tbody tr').length >= 25`)
	e.checkWidth("the key's page with its end users", width)
	e.topShot("endusers-narrow-key")
	e.typeInto("#enduser-search", "acme")
	e.shownEndUsers("the search for acme at 390 px", []string{"acme-1", "acme-2"})
	e.checkWidth("the key's page with two end users", width)
	e.topShot("endusers-narrow-search")
	e.goHash("#spend/" + k.id)
	waitFor[float64](e, "the spend chart at 390 px", chartSum)
	e.checkWidth("the spend page by end user", width)
	e.topShot("endusers-narrow-spend")
}

// goHash goes to a page of the console by its hash.
func (e *env) goHash(hash string) {
	e.t.Helper()
	e.do("go to "+hash, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %s`, js(hash))))
}

// checkEndUsers checks the key's page, its end users, and the spend and
// requests pages of its end users; shots are named with prefix.
func (e *env) checkEndUsers(k endUserKey, prefix string) {
	t := e.t
	t.Helper()
	e.goHash("#key/" + k.id)
	var key struct {
		ModelUsage []struct {
			Models  []string `json:"models"`
			Windows []struct {
				Used  int64 `json:"used"`
				Limit int64 `json:"limit"`
			} `json:"windows"`
			Budgets []struct {
				Spent float64 `json:"spent_usd"`
			} `json:"budgets"`
		} `json:"model_usage"`
	}
	e.api("GET", "/admin/keys/"+k.id, nil, &key, http.StatusOK)
	if len(key.ModelUsage) != 1 || len(key.ModelUsage[0].Windows) != 1 || key.ModelUsage[0].Windows[0].Used == 0 {
		t.Fatalf("the key's model_usage: %+v, want one model limit with usage", key.ModelUsage)
	}
	mu := key.ModelUsage[0]
	got := waitFor[string](e, "the model limit's bar", `(() => { const b = document.querySelector('#model-limits .bar'); `+
		`return b ? b.dataset.used + '/' + b.dataset.limit : '' })()`)
	if want := fmt.Sprintf("%d/%d", mu.Windows[0].Used, mu.Windows[0].Limit); got != want {
		t.Errorf("the model limit's bar says %s, the admin API %s", got, want)
	}
	if got := eval[float64](e, "the model limit's budget", `Number(document.querySelector('#model-limits .budget')?.dataset.spent ?? -1)`); math.Abs(got-mu.Budgets[0].Spent) > 1e-9 {
		t.Errorf("the model limit's budget says spent %v, the admin API %v", got, mu.Budgets[0].Spent)
	}
	policy := eval[string](e, "the end users' limits", `document.getElementById('end-user-policy')?.textContent ?? ''`)
	for _, want := range []string{"1,000,000 tokens per 1h", "60/min"} {
		if !strings.Contains(policy, want) {
			t.Errorf("the limits of each end user: %q lacks %q", policy, want)
		}
	}

	// Pages of 25.
	e.setValue("#endusers-pager select[data-size]", "25")
	p1 := e.endUsersPage(k.id, url.Values{"limit": {"25"}})
	if len(p1.EndUsers) != 25 || p1.NextCursor == "" {
		t.Fatalf("the admin API's first page: %d end users, next %q", len(p1.EndUsers), p1.NextCursor)
	}
	e.shownEndUsers("the first page of end users", p1.names())
	e.topShot(prefix + "endusers-key")
	p2 := e.endUsersPage(k.id, url.Values{"limit": {"25"}, "cursor": {p1.NextCursor}})
	e.click(`#endusers-pager [data-go="next"]`)
	e.shownEndUsers("the second page of end users", p2.names())
	if all := append(p1.names(), p2.names()...); !slices.Equal(all, k.names) {
		t.Errorf("the two pages hold %q, want the names sent %q", all, k.names)
	}
	e.click(`#endusers-pager [data-go="back"]`)
	e.shownEndUsers("the first page again", p1.names())

	// The end user over its window: a full bar.
	e.typeInto("#enduser-search", "heavy")
	e.shownEndUsers("the search for heavy", []string{heavyUser})
	bar := eval[map[string]any](e, "heavy-user's bar", `(() => { const b = document.querySelector('#endusers-table tr .bar'); `+
		`return { used: Number(b.dataset.used), limit: Number(b.dataset.limit), crit: b.classList.contains('lvl-crit'), `+
		`width: b.querySelector('.bar-fill').style.width } })()`)
	if bar["used"].(float64) < bar["limit"].(float64) || bar["crit"] != true || bar["width"] != "100%" {
		t.Errorf("%s's bar: %v, want used >= limit, lvl-crit and filled", heavyUser, bar)
	}
	// Case-sensitive prefixes.
	e.typeInto("#enduser-search", "acme")
	e.shownEndUsers("the search for acme", []string{"acme-1", "acme-2"})
	e.typeInto("#enduser-search", "Acme")
	e.shownEndUsers("the search for Acme", []string{})
	waitFor[bool](e, "no match said", `document.getElementById('endusers-empty').textContent.includes('starts with')`)

	// Names as text.
	for _, name := range []string{markupUser, rtlUser} {
		e.typeInto("#enduser-search", string([]rune(name)[:3]))
		e.shownEndUsers("the search for "+name, []string{name})
		shown := eval[string](e, "the name "+name, `document.querySelector('#endusers-table tbody tr bdi.end-user')?.textContent ?? ''`)
		if shown != name {
			t.Errorf("the end user %q shows as %q", name, shown)
		}
		if n := eval[int](e, "images", `document.querySelectorAll('img').length`); n != 0 {
			t.Errorf("the page has %d <img> elements: a name became markup", n)
		}
	}
	e.topShot(prefix + "endusers-rtl")
	e.setValue("#enduser-search", "")
	e.shownEndUsers("the first page after the search", p1.names())

	// A name links to its requests.
	e.click(`#endusers-table tr[data-end-user="acme-1"] a`)
	e.visible("#page-requests")
	var reqs struct {
		Requests []struct {
			EndUser string `json:"end_user"`
		} `json:"requests"`
	}
	e.api("GET", "/admin/requests?"+url.Values{"key": {k.id}, "end_user": {"acme-1"}}.Encode(), nil, &reqs, http.StatusOK)
	shownReqs := waitFor[[]string](e, "acme-1's requests", fmt.Sprintf(`(() => { const r = [...document.querySelectorAll('#requests-table tbody bdi.end-user')].map(b => b.textContent); `+
		`return r.length === %d && document.getElementById('req-end-user').value === 'acme-1' && document.getElementById('req-key').value === %s ? r : null })()`,
		len(reqs.Requests), js(k.id)))
	if len(shownReqs) != 1 || shownReqs[0] != "acme-1" {
		t.Errorf("acme-1's requests: the page shows %q, the admin API %d", shownReqs, len(reqs.Requests))
	}
	e.topShot(prefix + "endusers-requests")

	// The spend page, of the key, stacked by end user.
	e.goHash("#spend/" + k.id)
	waitFor[bool](e, "stacked by end user", `document.getElementById('spend-stack').value === 'end_user'`)
	waitFor[float64](e, "the spend chart", chartSum)
	var byDay, top struct {
		Rows []struct {
			EndUser string  `json:"end_user"`
			Other   bool    `json:"other"`
			Cost    float64 `json:"cost_usd"`
		} `json:"rows"`
		Total struct {
			Cost float64 `json:"cost_usd"`
		} `json:"total"`
	}
	e.api("GET", "/admin/spend?"+url.Values{"group_by": {"day", "end_user"}, "key": {k.id}, "limit": {"8"}}.Encode(), nil, &byDay, http.StatusOK)
	var series []string
	for _, r := range byDay.Rows {
		s := r.EndUser
		if r.Other {
			s = "(other)"
		}
		if !slices.Contains(series, s) {
			series = append(series, s)
		}
	}
	legend := eval[[]string](e, "the legend", `[...document.querySelectorAll('#spend-legend li')].map(l => l.dataset.series)`)
	if !sameSet(legend, series) {
		t.Errorf("the legend stacked by end user: %q, the admin API %q", legend, series)
	}
	if got := waitFor[float64](e, "the chart's sum", chartSum); math.Abs(got-byDay.Total.Cost) > 1e-6 {
		t.Errorf("the chart adds up to $%v, the admin API $%v", got, byDay.Total.Cost)
	}
	e.api("GET", "/admin/spend?"+url.Values{"group_by": {"end_user"}, "key": {k.id}, "limit": {"10"}}.Encode(), nil, &top, http.StatusOK)
	want := map[string]float64{}
	for _, r := range top.Rows {
		if !r.Other {
			want[r.EndUser] = r.Cost
		}
	}
	rows := eval[map[string]float64](e, "the top end users", `Object.fromEntries([...document.querySelectorAll('#top-keys tbody tr[data-id]:not([data-other])')]`+
		`.map(r => [r.dataset.id, Number(r.cells[3].dataset.cost)]))`)
	if len(rows) != len(want) {
		t.Errorf("the top end users: %d rows, the admin API %d: %v", len(rows), len(want), rows)
	}
	for name, cost := range rows {
		if c, ok := want[name]; !ok || math.Abs(c-cost) > 1e-9 {
			t.Errorf("top end user %q costs %v, the admin API %v (listed %v)", name, cost, c, ok)
		}
	}
	if got := eval[string](e, "the top table's title", `document.getElementById('top-keys-title').textContent`); got != "Top end users of the key" {
		t.Errorf("the top table is titled %q", got)
	}
	e.checkTablesFit("the spend page by end user")
	e.topShot(prefix + "endusers-spend")
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// topShot is shot from the top of the page: a full-page screenshot of a
// page scrolled down draws its sticky header where the view was.
func (e *env) topShot(name string) {
	e.t.Helper()
	e.do("scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	e.shot(name)
}
