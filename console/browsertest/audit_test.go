package browsertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleAudit makes changes with the console (a key created, its
// window changed, the key disabled; a team created with the admin API)
// and reads them in the audit log: the key's page links to its changes,
// newest first, each field's as from -> to, made by the console's session;
// the team's page links to its own; the whole log shows both. A gateway
// that keeps no audit log gets a page that says so.
func TestConsoleAudit(t *testing.T) {
	e := newEnv(t, desktop)
	team := e.createTeamAPI("audited-team")
	e.open()
	e.signIn()
	id, _ := e.createKey(keyForm{"name": "audited", "window-limit": "100000", "window": "5h"})
	row := fmt.Sprintf(`#keys-table tr[data-key-id=%q]`, id)
	e.click(row + ` button[data-action="edit"]`)
	waitFor[bool](e, "#key-dialog to open", dialogOpen("key-dialog"))
	e.typeInto(`#key-form [name="window-limit"]`, "200000")
	e.click("#key-submit")
	waitFor[bool](e, "the new limit", fmt.Sprintf(`document.querySelector(%s)?.getAttribute('data-limit') === '200000'`, js(row+" .bar")))
	e.disable(id)

	e.click(row + " a.key-name")
	e.visible("#page-key")
	e.click(`#key-body a[href^="#audit/"]`)
	e.visible("#page-audit")
	actions := waitFor[[]string](e, "the key's changes", `(() => { const a = [...document.querySelectorAll('#audit-table tbody tr')].map(r => r.dataset.action); return a.length === 3 ? a : null })()`)
	if strings.Join(actions, " ") != "key.disable key.update key.create" {
		t.Errorf("the key's changes, newest first: %q, want key.disable, key.update, key.create", actions)
	}
	if got := eval[string](e, "the filter", `document.getElementById('audit-target').value`); got != id {
		t.Errorf("the audit page's target is %q, want the key's id %s", got, id)
	}
	change := eval[map[string]string](e, "the window's change", `(() => {
		const li = document.querySelector('#audit-table tr[data-action="key.update"] li[data-field="windows"]');
		return li ? {from: li.querySelector('.from')?.textContent ?? '', to: li.querySelector('.to')?.textContent ?? '', text: li.textContent} : {};
	})()`)
	if !strings.Contains(change["from"], `"limit":100000`) || !strings.Contains(change["to"], `"limit":200000`) || !strings.Contains(change["text"], "→") {
		t.Errorf("the window's change reads %q (from %q, to %q), want from the limit 100000 -> to 200000", change["text"], change["from"], change["to"])
	}
	who := eval[[]string](e, "who", `[...document.querySelectorAll('#audit-table tbody tr td:nth-child(2) bdi')].map(b => b.textContent)`)
	for _, w := range who {
		if !strings.HasPrefix(w, "session:") {
			t.Errorf("a change made in the console names %q as who made it, want its session", w)
		}
	}
	e.checkTablesFit("the audit page")
	e.shot("audit-key")

	e.do("open the team's page", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %s`, js("#team/"+team))))
	e.visible("#page-team")
	e.click(`#team-body a[href^="#audit/"]`)
	teamActions := waitFor[[]string](e, "the team's changes", fmt.Sprintf(`(() => { const rows = [...document.querySelectorAll('#audit-table tbody tr')]; `+
		`return rows.some(r => r.dataset.target === %s) ? rows.map(r => r.dataset.action + ' ' + r.dataset.target) : null })()`, js(team)))
	if strings.Join(teamActions, ",") != "team.create "+team {
		t.Errorf("the team's changes: %q, want its creation", teamActions)
	}
	e.setValue("#audit-target", "")
	e.click(`#audit-form button[type="submit"]`)
	all := waitFor[int](e, "the whole log", `(() => { const n = document.querySelectorAll('#audit-table tbody tr').length; return n === 4 ? n : 0 })()`)
	t.Logf("the whole audit log shows %d changes", all)
	e.shot("audit-all")

	e.audit = nil
	e.front.Store(e.operator(e.gw.Load().Keys(), e.gw.Load().Ledger(), e.gw.Load()))
	e.reload("audit") // a new console on the same store: the session is kept
	e.visible("#audit-none")
	var page struct{}
	e.api("GET", "/admin/audit", nil, &page, http.StatusNotFound)
	e.shot("audit-none")
}
