// The dialogs: a key's and a team's form, the secret shown once, and the confirmation of a deletion.

import { api, item } from './api.js';
import { $, $$, quoted, say } from './dom.js';
import { curlCommand, durSeconds, fmtTime, goDur, prettyDur } from './format.js';
import { created, dropFresh } from './keys.js';
import { fillNames, forget, nameRef, remember, resolveTeam, suggest } from './names.js';
import { S, changed } from './state.js';

// editing is the key or team the open form edits; null for a new one.
let editing = null;

function splitList(v) {
  return String(v || '').split(/[,\s]+/).map((x) => x.trim()).filter(Boolean);
}

// budgetFrom reads a budget amount and its "per" ("24h", "month", "month@Europe/Paris") as an API budget, null for
// none, or an error message.
function budgetFrom(amount, per) {
  amount = String(amount || '').trim();
  if (!amount) return { budget: null };
  const usdv = Number(amount);
  if (!(usdv > 0)) return { error: 'Budget: give an amount in USD above 0, or leave it empty for none.' };
  per = String(per || '').trim();
  const m = /^(day|week|month)(?:@(\S+))?$/i.exec(per);
  if (m) {
    const b = { limit_usd: usdv, period: m[1].toLowerCase() };
    if (m[2]) b.timezone = m[2];
    return { budget: b };
  }
  const w = goDur(per);
  if (!w) return { error: 'Budget per: give a duration (24h) or day, week, month (month@Europe/Paris).' };
  return { budget: { limit_usd: usdv, window: w } };
}

function budgetReq(b) {
  if (!b) return null;
  const r = { limit_usd: Number(b.limit_usd) };
  if (b.period) { r.period = b.period; if (b.timezone) r.timezone = b.timezone; } else r.window = b.window;
  return r;
}

function sameBudget(a, b) {
  if (!a || !b) return !a && !b;
  if (Number(a.limit_usd) !== Number(b.limit_usd)) return false;
  if (a.period || b.period) return a.period === b.period && (a.timezone || 'UTC') === (b.timezone || 'UTC');
  return durSeconds(a.window) === durSeconds(b.window);
}

function budgetPerText(b) {
  if (b.period) return b.timezone && b.timezone !== 'UTC' ? `${b.period}@${b.timezone}` : b.period;
  return prettyDur(durSeconds(b.window));
}

// readWindows reads the first token window of a form; the others of orig are kept as they are.
function readWindows(f, orig, out) {
  const limit = Number(f['window-limit'].value);
  if (!Number.isInteger(limit) || limit < 1) return { error: 'Tokens: give a whole number of tokens above 0.', field: f['window-limit'] };
  const win = goDur(f.window.value);
  if (!win) return { error: 'Window: give a duration, as 5h, 90m or 7d.', field: f.window };
  const ow = orig && orig.windows && orig.windows[0];
  if (!ow || ow.limit !== limit || durSeconds(ow.window) !== durSeconds(win)) {
    const first = { limit, window: win };
    if (ow && durSeconds(ow.window) === durSeconds(win) && ow.bucket) first.bucket = ow.bucket;
    const rest = orig ? (orig.windows || []).slice(1).map((w) => ({ limit: w.limit, window: w.window, bucket: w.bucket })) : [];
    out.windows = [first, ...rest];
  }
  return null;
}

// readPolicy reads the fields a key form and a team form share; orig is what is being edited (null: a new one).
// It returns the fields of the request body that change, or { error, field }.
function readPolicy(form, orig) {
  const f = form.elements;
  const out = {};
  const name = f.name.value.trim();
  if (!orig || name !== (orig.name || '')) out.name = name;
  const models = splitList(f.models.value);
  if (orig ? models.join(',') !== (orig.models || []).join(',') : models.length) out.models = models;
  const bad = readWindows(f, orig, out);
  if (bad) return bad;
  const bud = budgetFrom(f['budget-usd'].value, f['budget-window'].value);
  if (bud.error) return { error: bud.error, field: f['budget-usd'] };
  const ob = orig && orig.budgets && orig.budgets[0];
  if (!sameBudget(bud.budget, ob ? budgetReq(ob) : null)) {
    const rest = orig ? (orig.budgets || []).slice(1).map(budgetReq) : [];
    out.budgets = bud.budget ? [bud.budget, ...rest] : rest;
  }
  for (const [field, key] of [['requests-per-minute', 'requests_per_minute'], ['max-concurrent', 'max_concurrent']]) {
    if (!f[field]) continue;
    const raw = f[field].value.trim();
    const v = raw === '' ? 0 : Number(raw);
    if (!Number.isInteger(v) || v < 0) return { error: 'Limits: give a whole number, or leave it empty for no limit.', field: f[field] };
    if (orig ? v !== (orig[key] || 0) : v > 0) out[key] = v;
  }
  return { body: out };
}

// fillPolicy fills a key or team form with o (null: a new one, the fields' defaults). It sets the fields' value
// attributes and resets the form, rather than setting their values: the fields stay as if untouched, so that what
// clears or restores a field by its attribute (form.reset, test drivers) sees what is shown.
function fillPolicy(form, o) {
  const w = o && o.windows && o.windows[0];
  const b = o && o.budgets && o.budgets[0];
  const vals = {
    name: o ? o.name || '' : '', models: o ? (o.models || []).join(', ') : '', team: o ? o.team || '' : '',
    'window-limit': w ? w.limit : null, window: w ? prettyDur(durSeconds(w.window)) : null,
    'budget-usd': b ? b.limit_usd : null, 'budget-window': b ? budgetPerText(b) : null,
    'requests-per-minute': o && o.requests_per_minute ? o.requests_per_minute : '',
    'max-concurrent': o && o.max_concurrent ? o.max_concurrent : '',
  };
  for (const el of $$('input[name]', form)) {
    if (!('def' in el.dataset)) el.dataset.def = el.getAttribute('value') || '';
    const v = vals[el.name];
    el.setAttribute('value', v === null || v === undefined ? el.dataset.def : String(v));
  }
  form.reset();
  const more = o && ((o.windows || []).length > 1 || (o.budgets || []).length > 1);
  $('.multi-note', form).hidden = !more;
}

// title sets a dialog's title: text, and the name edited isolated in quotes.
function title(el, text, name) {
  el.replaceChildren(...(name === undefined ? [text] : [text, ' ', ...quoted(name)]));
}

export function openKeyDialog(k) {
  if (S.readOnly) return;
  const form = $('#key-form');
  fillPolicy(form, k);
  const teamName = $('#kf-team-name');
  teamName.replaceChildren();
  if (k && k.team) {
    teamName.append(nameRef('team', k.team));
    fillNames(teamName);
  }
  title($('#key-dialog-title'), k ? 'Edit key' : 'New key', k ? k.name || k.id : undefined);
  $('#key-submit').textContent = k ? 'Save' : 'Create key';
  $('#key-error').textContent = '';
  $('details.more', form).open = !!(k && (k.requests_per_minute || k.max_concurrent));
  editing = k;
  $('#key-dialog').showModal();
  form.elements.name.focus();
}

async function submitKey(ev) {
  ev.preventDefault();
  const form = $('#key-form'), err = $('#key-error');
  const orig = editing;
  const r = readPolicy(form, orig);
  if (r.error) { err.textContent = r.error; r.field.focus(); return; }
  const btn = $('#key-submit');
  btn.disabled = true;
  try {
    const team = await resolveTeam(form.elements.team.value);
    if (orig ? team !== (orig.team || '') : team) r.body.team = team;
    if (!orig) {
      const c = await api('POST', '/admin/keys', r.body);
      $('#key-dialog').close();
      created(c.key);
      showSecret(c.secret, c.key, false);
    } else if (!Object.keys(r.body).length) {
      $('#key-dialog').close();
      say('Nothing changed.');
    } else {
      const nk = await api('PATCH', item('key', orig.id), r.body);
      $('#key-dialog').close();
      changed('key', nk.id, nk);
      say(['Key ', ...quoted(nk.name || nk.id), ' saved.']);
    }
  } catch (e) {
    if (e.status !== 401) err.textContent = e.code === 'read_only' ? 'This console is read-only.' : e.message;
  } finally {
    btn.disabled = false;
  }
}

export function openTeamDialog(t) {
  if (S.readOnly) return;
  const form = $('#team-form');
  fillPolicy(form, t);
  title($('#team-dialog-title'), t ? 'Edit team' : 'New team', t ? t.name || t.id : undefined);
  $('#team-submit').textContent = t ? 'Save' : 'Create team';
  $('#team-error').textContent = '';
  editing = t;
  $('#team-dialog').showModal();
  form.elements.name.focus();
}

async function submitTeam(ev) {
  ev.preventDefault();
  const form = $('#team-form');
  const orig = editing;
  const r = readPolicy(form, orig);
  if (r.error) { $('#team-error').textContent = r.error; r.field.focus(); return; }
  const btn = $('#team-submit');
  btn.disabled = true;
  try {
    let t;
    if (!orig) t = await api('POST', '/admin/teams', r.body);
    else if (Object.keys(r.body).length) t = await api('PATCH', item('team', orig.id), r.body);
    $('#team-dialog').close();
    if (!t) { say('Nothing changed.'); return; }
    forget('team', t.id);
    remember('team', [t]);
    changed('team', t.id, t);
    say(orig ? ['Team ', ...quoted(t.name || t.id), ' saved.'] : ['Team ', ...quoted(t.name || t.id), ' created: pick it in a key\'s Team field.']);
  } catch (e) {
    if (e.status !== 401) $('#team-error').textContent = e.code === 'read_only' ? 'This console is read-only.' : e.message;
  } finally {
    btn.disabled = false;
  }
}

// ---------- the secret, shown once ----------

export function baseURL() {
  return `${location.origin}/v1`;
}

// showSecret shows a key's secret in the secret dialog, the only place it ever appears; closing the dialog (Done,
// Escape) drops it from the page, and nothing else holds it. Its command line tries the key with the first of its
// models that is a name rather than a glob: every word of it is shell-quoted (curlCommand), so that a model named
// x'$(id)' is sent as that name and runs nothing when the line is pasted into a shell.
export function showSecret(secret, k, rotated) {
  const name = k.name || k.id;
  title($('#secret-title'), rotated ? 'New secret for' : 'Key', name);
  if (!rotated) $('#secret-title').append(' created');
  $('#secret').textContent = secret;
  const model = (k.models || []).find((m) => !/[*?[\]]/.test(m)) || 'gpt-4o-mini';
  $('#secret-curl').textContent = curlCommand(baseURL(), secret, model);
  $('#copy-status').textContent = '';
  const grace = $('#secret-grace');
  grace.hidden = !(rotated && k.previous_secret_expires_at);
  grace.textContent = grace.hidden ? '' : `The previous secret keeps working until ${fmtTime(k.previous_secret_expires_at)}: update its users before then.`;
  $('#secret-dialog').showModal();
  $('#copy-secret').focus();
}

function dropSecret() {
  $('#secret').textContent = '';
  $('#secret-curl').textContent = '';
  $('#copy-status').textContent = '';
  dropFresh();
}

// copyFrom copies the text of el: with the Clipboard API where the page may use it, else by selecting the text so
// that Ctrl+C copies it.
async function copyFrom(el, statusEl) {
  const text = el.textContent;
  if (!text) return;
  try {
    await navigator.clipboard.writeText(text);
    statusEl.textContent = 'Copied.';
    return;
  } catch { /* no clipboard here: select instead */ }
  const range = document.createRange();
  range.selectNodeContents(el);
  const sel = getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { /* not allowed */ }
  statusEl.textContent = ok ? 'Copied.' : 'Selected: press Ctrl+C (⌘C on a Mac) to copy.';
}

// ---------- confirmation ----------

let confirmDone = null;

// confirmDialog asks to confirm message (text and nodes) with a button labelled yes; it resolves to the answer.
export function confirmDialog(message, yes) {
  const d = $('#confirm-dialog');
  $('#confirm-message').replaceChildren(...[message].flat());
  $('#confirm-yes').textContent = yes || 'Delete';
  d.returnValue = '';
  return new Promise((resolve) => {
    confirmDone = resolve;
    d.showModal();
    $('#confirm-no').focus();
  });
}

export function wireForms() {
  $('#key-form').addEventListener('submit', submitKey);
  $('#team-form').addEventListener('submit', submitTeam);
  for (const b of $$('dialog [data-close]')) b.addEventListener('click', () => b.closest('dialog').close());
  $('#secret-done').addEventListener('click', () => $('#secret-dialog').close());
  $('#secret-dialog').addEventListener('close', dropSecret);
  $('#copy-secret').addEventListener('click', () => copyFrom($('#secret'), $('#copy-status')));
  $('#copy-curl').addEventListener('click', () => copyFrom($('#secret-curl'), $('#copy-status')));
  $('#confirm-yes').addEventListener('click', () => $('#confirm-dialog').close('yes'));
  $('#confirm-no').addEventListener('click', () => $('#confirm-dialog').close('no'));
  $('#confirm-dialog').addEventListener('close', () => {
    const done = confirmDone;
    confirmDone = null;
    if (done) done($('#confirm-dialog').returnValue === 'yes');
  });
  const team = $('#kf-team');
  suggest(team, $('#kf-team-list'), 'team');
  team.addEventListener('change', () => {
    const box = $('#kf-team-name');
    const v = team.value.trim();
    box.replaceChildren(...(/^team_/.test(v) ? [nameRef('team', v)] : []));
    fillNames(box);
  });
}
