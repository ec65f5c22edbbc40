package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// hostile are names that a shell would run something of, were they pasted
// unquoted or quoted naively: quotes, command substitutions, backquotes,
// variables, newlines, history expansion, options, and Unicode.
var hostile = []string{
	`x'$(touch pwned)'`,
	`a'\''b`,
	"`touch pwned`",
	`$(touch pwned)`,
	`"; touch pwned; "`,
	"line one\nline two; touch pwned",
	`'`, `''`, ``, `\`, `\'`, `$HOME`, `${IFS}`, `!!`, `-n`, `--help`,
	"tab\there", "模型-ü 🚀 \u05e9\u05dc\u05d5\u05dd",
	`x'; touch pwned; echo '`,
}

// TestConsoleShellQuote quotes each hostile name with the console's
// shellQuote (format.js, imported by the page itself) and has sh print the
// word it reads back: each is one argument, the name byte for byte, and
// nothing of it runs (no file named pwned appears where sh runs).
func TestConsoleShellQuote(t *testing.T) {
	e := newEnv(t, desktop)
	e.open()
	e.visible("#signin-form #token")
	quoted := run(e, "shellQuote the hostile names", chromedp.Evaluate[[]string](fmt.Sprintf(
		`import('/admin/assets/format.js').then(m => %s.map(m.shellQuote))`, jsJSON(hostile)), chromedp.EvalAwaitPromise))
	if len(quoted) != len(hostile) {
		t.Fatalf("%d quoted names for %d", len(quoted), len(hostile))
	}
	dir := t.TempDir()
	for i, name := range hostile {
		args := shell(t, dir, `printf '%s\0' `+quoted[i], nil)
		if len(args) != 1 || args[0] != name {
			t.Errorf("shellQuote(%q) = %s: sh reads %q, want the one argument %q", name, quoted[i], args, name)
		}
	}
	checkNothingRan(t, dir)
}

// TestConsoleCopyCommand rotates a key whose model is a hostile name and
// runs the secret dialog's command line, as shown and as copied, in sh
// with curl replaced by a script that records its arguments: curl gets
// the URL, the headers and a body naming the model exactly, and nothing of
// the name runs.
func TestConsoleCopyCommand(t *testing.T) {
	e := newEnv(t, desktop)
	model := `gpt'$(touch pwned)'` + "`touch pwned`" + `"$(touch pwned)"; touch pwned \'`
	id, _ := e.createKeyAPI(map[string]any{"name": "hostile-model", "models": []string{model},
		"windows": []any{map[string]any{"limit": 100_000, "window": "5h"}}})
	e.open()
	e.signIn()
	e.grantClipboard()
	e.click(fmt.Sprintf(`#keys-table tr[data-key-id=%q] button[data-action="rotate"]`, id))
	waitFor[bool](e, "#secret-dialog to open", dialogOpen("secret-dialog"))
	secret := strings.TrimSpace(run(e, "read #secret", chromedp.Text(chromedp.CSS("#secret"))))
	shown := eval[string](e, "the command", `document.getElementById('secret-curl').textContent`)
	e.click("#copy-curl")
	waitFor[string](e, "the copy", `document.getElementById('copy-status').textContent`)
	copied := run(e, "read the clipboard", chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	e.shot("copy-command")
	if copied != shown {
		t.Errorf("the clipboard holds %q, the dialog shows %q", copied, shown)
	}
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	body, _ := json.Marshal(struct {
		Model    string    `json:"model"`
		Messages []message `json:"messages"`
	}{model, []message{{"user", "Say hello"}}})
	want := []string{e.srv.URL + "/v1/chat/completions", "-H", "Authorization: Bearer " + secret,
		"-H", "Content-Type: application/json", "-d", string(body)}
	dir := t.TempDir()
	args := shell(t, dir, shown, fakeCurl)
	if strings.Join(args, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("sh -c %q runs curl with\n%q\nwant\n%q", shown, args, want)
	}
	var sent struct {
		Model string `json:"model"`
	}
	if len(args) == len(want) {
		if err := json.Unmarshal([]byte(args[len(args)-1]), &sent); err != nil || sent.Model != model {
			t.Errorf("the body curl would send names the model %q (%v), want %q", sent.Model, err, model)
		}
	}
	checkNothingRan(t, dir)
	e.click("#secret-done")
	waitFor[bool](e, "the secret to leave the page", "!"+containsText(secret))
}

// grantClipboard lets the page read and write the clipboard, as a user's
// browser does once asked.
func (e *env) grantClipboard() {
	e.t.Helper()
	e.do("grant the clipboard", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			_, err := cdp.Call(ctx, tg, browser.SetPermission, browser.SetPermissionParams{
				Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted, Origin: e.srv.URL,
			})
			if err != nil {
				return err
			}
		}
		return nil
	}))
}

// shell runs script with sh -c in dir, with the fake commands of bin first
// in PATH, and returns the NUL-terminated words it printed (what printf
// '%s\0' or a fake command wrote).
func shell(t *testing.T, dir, script string, bin map[string]string) []string {
	t.Helper()
	bindir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bindir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range bin {
		if err := os.WriteFile(filepath.Join(bindir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + bindir + ":/usr/bin:/bin", "HOME=" + dir}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v: %s", script, err, stderr.String())
	}
	words := strings.Split(string(out), "\x00")
	return words[:len(words)-1]
}

// fakeCurl is a curl that prints its arguments, each ended by a NUL.
var fakeCurl = map[string]string{"curl": "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done\n"}

// checkNothingRan fails the test when dir holds a file the hostile names
// would have made had any of them run.
func checkNothingRan(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if en.Name() != "bin" {
			t.Errorf("%s appeared where sh ran: part of a name ran as a command", en.Name())
		}
	}
}

// jsJSON is v as a JavaScript literal.
func jsJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestConsoleBidi shows names that read right to left: a key's (Hebrew,
// which an operator may set) and a model's (Arabic, which a caller sends).
// Each is shown in its own <bdi>: in the keys table, the spend legend and
// the requests page, and in the audit log, where the key's renaming reads
// from -> to. There the isolation is what keeps the order: the same text
// without it, drawn beside it as a control, shows the new name first, the
// arrow between the two names turned around.
func TestConsoleBidi(t *testing.T) {
	const keyName, renamed, model = "מפתח-7 צוות", "מפתח-8 צוות", "نموذج-3"
	e := newEnv(t, desktop)
	id, secret := e.createKeyAPI(map[string]any{"name": keyName, "windows": []any{map[string]any{"limit": 10_000_000, "window": "5h"}}})
	for _, m := range []string{"gpt-4o", model} {
		if status := e.complete(secret, m); status != http.StatusOK {
			t.Fatalf("%s: %d", m, status)
		}
	}
	e.settle()
	e.open()
	e.signIn()
	row := fmt.Sprintf(`#keys-table tr[data-key-id=%q]`, id)
	name := waitFor[string](e, "the key's name", fmt.Sprintf(`document.querySelector(%s)?.querySelector('.key-name bdi')?.textContent ?? ''`, js(row)))
	if name != keyName {
		t.Errorf("the key's row shows %q in its <bdi>, want %q", name, keyName)
	}
	e.shot("bidi-keys")
	e.click(row + ` button[data-action="edit"]`)
	waitFor[bool](e, "#key-dialog to open", dialogOpen("key-dialog"))
	e.typeInto(`#key-form [name="name"]`, renamed)
	e.click("#key-submit")
	waitFor[bool](e, "the renamed row", fmt.Sprintf(`document.querySelector(%s)?.querySelector('.key-name bdi')?.textContent === %s`, js(row), js(renamed)))

	e.page("spend")
	waitFor[float64](e, "the spend chart", chartSum)
	legend := eval[string](e, "the legend", fmt.Sprintf(
		`[...document.querySelectorAll('#spend-legend li')].find(l => l.dataset.series === %s)?.querySelector('bdi')?.textContent ?? ''`, js(model)))
	if legend != model {
		t.Errorf("the spend legend shows %q in a <bdi>, want the model %q", legend, model)
	}
	e.shot("bidi-spend")
	e.page("requests")
	cell := waitFor[string](e, "the model's request", fmt.Sprintf(
		`[...document.querySelectorAll('#requests-table bdi.model')].map(b => b.textContent).find(t => t === %s) ?? ''`, js(model)))
	if cell != model {
		t.Errorf("the requests page shows the model as %q, want %q in a <bdi>", cell, model)
	}
	e.shot("bidi-requests")
	e.checkRenameOrder(id, keyName, renamed)
}

// checkRenameOrder checks that the audit log shows the renaming of key id
// from -> to in that order, left to right, and that the same text without
// isolation would not.
func (e *env) checkRenameOrder(id, from, to string) {
	t := e.t
	t.Helper()
	e.page("audit")
	li := fmt.Sprintf(`#audit-table tr[data-target=%q][data-action="key.update"] li[data-field="name"]`, id)
	order := waitFor[map[string]bool](e, "the renaming in the audit log", fmt.Sprintf(`(() => {
		const li = document.querySelector(%s);
		if (!li) return null;
		const from = li.querySelector('bdi.from'), to = li.querySelector('bdi.to');
		const control = document.createElement('li');
		control.textContent = from.textContent + ' → ' + to.textContent;
		li.after(control);
		const r = document.createRange();
		const at = (s) => { const i = control.textContent.indexOf(s); r.setStart(control.firstChild, i); r.setEnd(control.firstChild, i + s.length); return r.getBoundingClientRect(); };
		const cf = at(from.textContent), ct = at(to.textContent);
		const out = {shown: from.textContent === %s && to.textContent === %s,
			inOrder: from.getBoundingClientRect().right <= to.getBoundingClientRect().left + 1,
			controlTurned: ct.right <= cf.left + 1};
		control.remove();
		return out;
	})()`, js(li), js(from), js(to)))
	switch {
	case !order["shown"]:
		t.Errorf("the audit log's renaming is not from %q to %q, each in a <bdi>", from, to)
	case !order["controlTurned"]:
		t.Error("the control (the renaming without isolation) is drawn in order: the test shows nothing")
	case !order["inOrder"]:
		t.Error("the audit log draws the new name left of the old one: the names are not isolated")
	}
	e.shot("bidi-audit")
}
