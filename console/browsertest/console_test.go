package browsertest

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// keyForm is what an operator types into the key dialog (#key-form), by
// input name.
type keyForm map[string]string

// TestConsoleKeyLifecycle is an operator's first flow: sign in with the
// admin token, create a key and read its secret, send requests with the
// official openai client, see the key's window bar and the spend chart
// change after a reload, rotate the key (a new secret, shown once), disable
// it, and sign out, after which the session cookie opens nothing.
func TestConsoleKeyLifecycle(t *testing.T) {
	e := newEnv(t, desktop)
	e.open()
	e.signIn()
	checkCookie(e)
	e.shot("lifecycle-1-signed-in")

	id, secret := e.createKey(keyForm{
		"name": "docs-assistant", "models": "gpt-4o, gpt-4o-mini",
		"window-limit": "2000000", "window": "5h", "budget-usd": "10", "budget-window": "24h",
	})
	var key struct {
		Name    string   `json:"name"`
		Models  []string `json:"models"`
		Windows []struct {
			Limit  int64  `json:"limit"`
			Window string `json:"window"`
		} `json:"windows"`
		Budgets []struct {
			LimitUSD float64 `json:"limit_usd"`
			Window   string  `json:"window"`
		} `json:"budgets"`
	}
	e.api("GET", "/admin/keys/"+id, nil, &key, http.StatusOK)
	if key.Name != "docs-assistant" || strings.Join(key.Models, ",") != "gpt-4o,gpt-4o-mini" ||
		len(key.Windows) != 1 || key.Windows[0].Limit != 2_000_000 || key.Windows[0].Window != "5h0m0s" ||
		len(key.Budgets) != 1 || key.Budgets[0].LimitUSD != 10 || key.Budgets[0].Window != "24h0m0s" {
		t.Errorf("the key the form made: %+v", key)
	}
	bar := fmt.Sprintf(`#keys-table tr[data-key-id=%q] .bar[data-window="5h0m0s"]`, id)
	if used := waitFor[string](e, "the new key's window bar", attr(bar, "used")); used != "0" {
		t.Errorf("a new key's bar: data-used %q, want 0", used)
	}
	if limit := eval[string](e, "data-limit", attr(bar, "limit")); limit != "2000000" {
		t.Errorf("bar data-limit %q, want 2000000", limit)
	}

	// The operator's user puts the secret in the openai client.
	models := []string{"gpt-4o", "gpt-4o", "gpt-4o", "gpt-4o-mini", "gpt-4o-mini"}
	e.chatOK(secret, models...)
	e.reload("keys")
	used := waitFor[string](e, "the window bar to show the usage", fmt.Sprintf(
		`(() => { const b = document.querySelector(%s); return b && Number(b.dataset.used) > 0 ? b.dataset.used : '' })()`, js(bar)))
	if want := strconv.FormatInt(tokensOf(models...), 10); used != want {
		t.Errorf("bar data-used %s after the requests, want %s (what the upstream reported)", used, want)
	}
	if text := eval[string](e, "the bar's text", fmt.Sprintf(`document.querySelector(%s).textContent`, js(bar))); !strings.Contains(text, "/") {
		t.Errorf("the bar's text %q: want \"used / limit\"", text)
	}
	e.shot("lifecycle-2-key-used")

	e.page("spend")
	total := e.spendTotal("")
	if total <= 0 {
		t.Fatalf("GET /admin/spend: total cost %v after the requests, want > 0", total)
	}
	got := waitFor[float64](e, "the spend chart to show the cost", chartSum)
	if math.Abs(got-total) > 1e-6 {
		t.Errorf("the spend chart's segments add up to $%v, want $%v (GET /admin/spend)", got, total)
	}
	series := eval[[]string](e, "the chart's series", chartSeries)
	if strings.Join(series, ",") != "gpt-4o,gpt-4o-mini" {
		t.Errorf("the chart's series (stacked by model, the default) %q, want gpt-4o and gpt-4o-mini", series)
	}
	e.shot("lifecycle-3-spend")

	e.page("keys")
	newSecret := e.rotate(id, secret)
	e.chatOK(newSecret, "gpt-4o-mini") // the new secret works at once
	e.disable(id)
	if status := e.complete(newSecret, "gpt-4o-mini"); status != http.StatusForbidden {
		t.Errorf("a request with the disabled key's secret: %d, want 403", status)
	}

	e.checkNoSecrets(secret, newSecret)
	e.signOut()
}

// createKey creates a key with the key dialog, reads its secret off the
// secret dialog, closes it, and returns the key's id and secret.
func (e *env) createKey(form keyForm) (id, secret string) {
	t := e.t
	t.Helper()
	e.click("#new-key")
	waitFor[bool](e, "#key-dialog to open", dialogOpen("key-dialog"))
	// The team is a <select> of the teams there are; these keys have none.
	for _, name := range []string{"name", "models", "window-limit", "window", "budget-usd", "budget-window"} {
		if v, ok := form[name]; ok {
			e.typeInto(fmt.Sprintf(`#key-form [name=%q]`, name), v)
		}
	}
	e.shot("lifecycle-key-form")
	e.click("#key-submit")
	waitFor[bool](e, "#secret-dialog to open", dialogOpen("secret-dialog"))
	secret = strings.TrimSpace(run(e, "read #secret", chromedp.Text(chromedp.CSS("#secret"))))
	if !strings.HasPrefix(secret, "rsk_") {
		t.Fatalf("#secret %q: want a key's secret (rsk_...)", secret)
	}
	if !eval[bool](e, "#copy-secret", `!!document.querySelector('#secret-dialog #copy-secret')`) {
		t.Error("the secret dialog has no #copy-secret button")
	}
	e.shot("lifecycle-secret")
	e.click("#secret-done")
	waitFor[bool](e, "#secret-dialog to close", "!("+dialogOpen("secret-dialog")+")")
	// Shown once: closing the dialog drops the secret from the page.
	waitFor[bool](e, "the secret to leave the page", "!"+containsText(secret))
	id = waitFor[string](e, "the new key's row", fmt.Sprintf(
		`[...document.querySelectorAll('#keys-table tr[data-key-id]')].find(r => r.textContent.includes(%s))?.dataset.keyId || ''`,
		js(form["name"])))
	return id, secret
}

// rotate rotates a key with its row's rotate button, and returns the new
// secret the secret dialog shows.
func (e *env) rotate(id, old string) string {
	t := e.t
	t.Helper()
	e.click(fmt.Sprintf(`#keys-table tr[data-key-id=%q] button[data-action="rotate"]`, id))
	e.confirmIfAsked()
	waitFor[bool](e, "#secret-dialog to open", dialogOpen("secret-dialog"))
	secret := strings.TrimSpace(run(e, "read #secret", chromedp.Text(chromedp.CSS("#secret"))))
	if !strings.HasPrefix(secret, "rsk_") || secret == old {
		t.Fatalf("#secret after rotating: %q, want a new secret", secret)
	}
	e.shot("lifecycle-4-rotated")
	e.click("#secret-done")
	waitFor[bool](e, "#secret-dialog to close", "!("+dialogOpen("secret-dialog")+")")
	waitFor[bool](e, "the secret to leave the page", "!"+containsText(secret))
	return secret
}

// disable disables a key with its row's disable button and waits for its
// status cell to say so.
func (e *env) disable(id string) {
	t := e.t
	t.Helper()
	row := fmt.Sprintf(`#keys-table tr[data-key-id=%q]`, id)
	e.click(row + ` button[data-action="disable"]`)
	e.confirmIfAsked()
	waitFor[bool](e, "the key's status to be disabled", fmt.Sprintf(
		`document.querySelector(%s)?.dataset.status === 'disabled'`, js(row+" td[data-status]")))
	if !eval[bool](e, "the enable button", fmt.Sprintf(`!!document.querySelector(%s)`, js(row+` button[data-action="enable"]`))) {
		t.Error("a disabled key's row has no enable button")
	}
	var key struct {
		Disabled bool `json:"disabled"`
	}
	e.api("GET", "/admin/keys/"+id, nil, &key, http.StatusOK)
	if !key.Disabled {
		t.Error("the row says disabled, the admin API does not")
	}
	e.shot("lifecycle-5-disabled")
}

// confirmIfAsked answers yes when the confirmation dialog is open (the
// click that may have opened it has been handled), and waits for it to
// close.
func (e *env) confirmIfAsked() {
	e.t.Helper()
	if !eval[bool](e, "look for #confirm-dialog", dialogOpen("confirm-dialog")) {
		return
	}
	e.click("#confirm-yes")
	waitFor[bool](e, "#confirm-dialog to close", "!("+dialogOpen("confirm-dialog")+")")
}

// checkNoSecrets fails the test when the page, once reloaded, holds the
// admin token or any of the secrets (in its markup, an input's value, its
// URL or its storage): they are shown once and never kept.
func (e *env) checkNoSecrets(secrets ...string) {
	e.t.Helper()
	e.reload("keys")
	for _, s := range append(secrets, adminToken) {
		what := "a key's secret"
		if s == adminToken {
			what = "the admin token"
		}
		if eval[bool](e, "look for "+what, containsText(s)) {
			e.t.Errorf("the reloaded page holds %s", what)
		}
	}
}

// signOut signs out with #signout, and checks that the session cookie the
// browser had now opens nothing.
func (e *env) signOut() {
	t := e.t
	t.Helper()
	cookie := e.sessionCookie()
	if cookie == nil {
		t.Fatal("no session cookie before signing out")
	}
	e.click("#signout")
	e.visible("#signin-form #token")
	e.shot("lifecycle-6-signed-out")
	for _, path := range []string{"/admin/keys", "/admin/session", "/admin/spend"} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie.Value})
		if status, body := e.send(req); status != http.StatusUnauthorized {
			t.Errorf("GET %s with the signed-out session's cookie: %d, want 401: %s", path, status, body)
		}
	}
	if c := e.sessionCookie(); c != nil && c.Value != "" {
		t.Errorf("the browser still has the session cookie after signing out: %+v", c)
	}
}

// checkCookie checks the session cookie as the browser keeps it.
func checkCookie(e *env) {
	c := e.sessionCookie()
	switch {
	case c == nil:
		e.t.Fatalf("signed in, but the browser has no %s cookie", sessionCookie)
	case !c.HTTPOnly || c.SameSite != "Strict" || c.Path != "/admin":
		e.t.Errorf("session cookie: HttpOnly %v, SameSite %q, Path %q; want HttpOnly, Strict, /admin", c.HTTPOnly, c.SameSite, c.Path)
	case c.Secure:
		e.t.Error("session cookie: Secure over plain HTTP on loopback; the browser would not send it back")
	case len(c.Value) < 43:
		e.t.Errorf("session cookie value %d characters, want 32 random bytes in base64url (43)", len(c.Value))
	}
}

// spendTotal is the admin API's total cost in USD for a spend query.
func (e *env) spendTotal(query string) float64 {
	var spend struct {
		Total struct {
			CostUSD float64 `json:"cost_usd"`
		} `json:"total"`
	}
	e.api("GET", "/admin/spend"+query, nil, &spend, http.StatusOK)
	return spend.Total.CostUSD
}

// Page expressions.
const (
	// chartSum adds the costs of the spend chart's segments; 0 (falsy)
	// while it has none.
	chartSum = `[...document.querySelectorAll('#spend-chart rect[data-cost]')].reduce((s, r) => s + Number(r.dataset.cost), 0)`
	// chartSeries lists the chart's series, sorted.
	chartSeries = `[...new Set([...document.querySelectorAll('#spend-chart rect[data-series]')].map(r => r.dataset.series))].sort()`
)

// attr reads a data- attribute of the element a selector finds: "" (falsy)
// while there is none.
func attr(sel, name string) string {
	return fmt.Sprintf(`document.querySelector(%s)?.getAttribute(%s) ?? ''`, js(sel), js("data-"+name))
}

// dialogOpen is true while the dialog of an id is open.
func dialogOpen(id string) string {
	return fmt.Sprintf(`document.getElementById(%s)?.open === true`, js(id))
}

// containsText is true when the page holds s: in its markup, the value of
// an input, its URL, or its local or session storage.
func containsText(s string) string {
	return fmt.Sprintf(`((s) => document.documentElement.outerHTML.includes(s) || location.href.includes(s) ||
		[...document.querySelectorAll('input, textarea')].some(i => i.value.includes(s)) ||
		JSON.stringify({...localStorage}).includes(s) || JSON.stringify({...sessionStorage}).includes(s))(%s)`, js(s))
}
