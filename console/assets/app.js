// ratestore console: one page, no framework, no build step. It talks to the gateway's admin API with the session cookie
// (set by POST /admin/session) and the CSRF token, which it keeps in this module's memory only: never in storage, never
// in a URL. Everything shown is built with DOM calls and textContent (no innerHTML of data: model names and key names
// are chosen by others), and styled by classes or element.style, which the Content-Security-Policy allows.

const PAGES = ['keys', 'teams', 'spend', 'requests', 'live'];
const TITLES = { keys: 'Keys', teams: 'Teams', spend: 'Spend', requests: 'Requests', live: 'Live' };
const REFRESH_MS = 5000; // keys and teams, while shown: watch a key being used without reloading
const LIVE_MS = 2000;
const LIVE_SAMPLES = 60;
const LIVE_NOTE = 'Averaged over the last 10 seconds, refreshed every 2 seconds; the lines show the last 2 minutes.';
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f'];
const OTHER_COLOR = '#9aa3ad';
const MAX_SERIES = 8;
const REASONS = {
  window: 'token window full', budget: 'budget spent', rate: 'requests per minute', concurrency: 'too many at once',
  model: 'model not allowed', disabled: 'key disabled', expired: 'key expired', unknown_key: 'unknown key',
};

const S = {
  csrf: null, readOnly: false, page: null,
  keys: [], teams: [], keysLoaded: false,
  keySort: { col: 'name', dir: 1 }, teamSort: { col: 'name', dir: 1 },
  fresh: null, editing: null,
  spend: null, spendGen: 0,
  req: { stack: [], cursor: '', next: '', gen: 0, lastKey: '', lastAt: 0 },
  live: [],
};

// ---------- small DOM helpers ----------

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

// h builds an element: attrs are attributes (true: present, false/null: absent), "class" and "text" are shortcuts.
function h(tag, attrs, ...kids) {
  return build(document.createElement(tag), attrs, kids);
}

const SVGNS = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...kids) {
  return build(document.createElementNS(SVGNS, tag), attrs, kids);
}

function build(el, attrs, kids) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k === 'text') el.textContent = v;
    else if (k === 'class') el.setAttribute('class', v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// ---------- formatting ----------

// Formatters are made on first use: making them all at load would delay the sign-in form.
const fmts = {};
const fmt = (name, make) => (fmts[name] ||= make());
const nf = { format: (x) => fmt('nf', () => new Intl.NumberFormat()).format(x) };
const compact = { format: (x) => fmt('compact', () => new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 })).format(x) };
const timeFmt = {
  format: (x) => fmt('time', () => new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short',
  })).format(x),
};
const clockFmt = { format: (x) => fmt('clock', () => new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' })).format(x) };
const dayFmt = { format: (x) => fmt('day', () => new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' })).format(x) };
const rel = { format: (v, u) => fmt('rel', () => new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' })).format(v, u) };

function usd(x) {
  x = Number(x) || 0;
  const a = Math.abs(x);
  const d = a === 0 || a >= 1 ? 2 : a >= 0.01 ? 4 : 6;
  return fmt(`usd${d}`, () => new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: d })).format(x);
}

function fmtTime(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? '' : timeFmt.format(t);
}

function ago(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const sec = Math.round((t - Date.now()) / 1000);
  const a = Math.abs(sec);
  if (a < 60) return rel.format(sec, 'second');
  if (a < 3600) return rel.format(Math.round(sec / 60), 'minute');
  if (a < 86400) return rel.format(Math.round(sec / 3600), 'hour');
  return rel.format(Math.round(sec / 86400), 'day');
}

// durSeconds reads a Go duration ("5h0m0s", "90m", "1.5h") as seconds; NaN when it is not one.
function durSeconds(str) {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0, m, at = 0;
  const unit = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  str = String(str || '').trim();
  if (!str) return NaN;
  while ((m = re.exec(str))) { total += parseFloat(m[1]) * unit[m[2]]; at = re.lastIndex; }
  return at === str.length ? total : NaN;
}

// prettyDur writes seconds the short way a person types them: "5h", "7d", "1h30m".
function prettyDur(sec) {
  if (!Number.isFinite(sec)) return '';
  if (sec >= 2 * 86400 && sec % 86400 === 0) return `${sec / 86400}d`;
  const hh = Math.floor(sec / 3600), mm = Math.floor((sec % 3600) / 60), ss = Math.round(sec % 60);
  return (hh ? `${hh}h` : '') + (mm ? `${mm}m` : '') + (ss || (!hh && !mm) ? `${ss}s` : '');
}

// goDur turns what a person typed ("5h", "7d", "90m") into a Go duration, or null.
function goDur(str) {
  str = String(str || '').trim().toLowerCase();
  const d = /^(\d+)d$/.exec(str);
  if (d) return `${Number(d[1]) * 24}h`;
  const sec = durSeconds(str);
  return sec > 0 ? str : null;
}

function waitText(sec) {
  if (!sec || sec <= 0) return '';
  return prettyDur(sec < 120 ? Math.ceil(sec) : Math.ceil(sec / 60) * 60);
}

function level(frac) {
  return frac >= 0.9 ? 'lvl-crit' : frac >= 0.7 ? 'lvl-warn' : 'lvl-ok';
}

function budgetPer(b) {
  if (b.period) return b.timezone && b.timezone !== 'UTC' ? `${b.period} (${b.timezone})` : `${b.period} (UTC)`;
  return prettyDur(durSeconds(b.window));
}

// ---------- status messages ----------

function say(msg, bad = false) {
  const box = $('#status');
  const el = h('div', { class: bad ? 'bad' : '', text: msg });
  box.append(el);
  setTimeout(() => el.remove(), bad ? 9000 : 5000);
}

// ---------- the admin API ----------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// api calls the admin API. Every call sends the cookie (same origin); one that changes anything sends the CSRF token
// as X-CSRF-Token. A 401 means the session is gone: back to the sign-in page.
async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = S.csrf || '';
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(path, init);
  } catch {
    throw new ApiError(0, 'network', 'The gateway cannot be reached.');
  }
  if (r.status === 401 && path !== '/admin/session') {
    if (S.csrf) showSignin('Your session has ended: sign in again.');
    throw new ApiError(401, 'no_session', 'Signed out.');
  }
  if (r.status === 204) return null;
  let data = null;
  try { data = await r.json(); } catch { /* not JSON */ }
  if (!r.ok) {
    const e = data && data.error;
    const err = new ApiError(r.status, e ? e.code : '', e && e.message ? e.message : `${r.status} ${r.statusText}`);
    err.retryAfter = Number(r.headers.get('Retry-After')) || 0;
    throw err;
  }
  return data;
}

function failed(err) {
  if (err && err.status === 401) return; // handled: we are on the sign-in page
  if (err && err.code === 'read_only') say('This console is read-only: nothing can be changed here.', true);
  else say(err && err.message ? err.message : String(err), true);
}

// ---------- sign-in, session, sign-out ----------

async function boot() {
  wire();
  try {
    const r = await fetch('/admin/session', { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } });
    if (r.ok) signedIn(await r.json());
    else showSignin('');
  } catch {
    showSignin('The gateway cannot be reached.');
  }
  document.body.classList.remove('booting');
}

function signedIn(sess) {
  S.csrf = sess.csrf;
  S.readOnly = !!sess.read_only;
  document.body.classList.toggle('readonly', S.readOnly);
  $('#readonly-banner').hidden = !S.readOnly;
  $('#top').hidden = false;
  $('#page-signin').hidden = true;
  for (const el of $$('.base-url')) el.textContent = baseURL();
  S.page = null;
  if (!PAGES.includes(location.hash.slice(1))) history.replaceState(null, '', '#keys');
  route(false);
}

function showSignin(msg) {
  leave();
  S.csrf = null;
  S.readOnly = false;
  forget();
  for (const d of $$('dialog[open]')) d.close();
  document.body.classList.remove('readonly');
  $('#top').hidden = true;
  $('#readonly-banner').hidden = true;
  for (const p of PAGES) $(`#page-${p}`).hidden = true;
  $('#page-signin').hidden = false;
  $('#signin-error').textContent = msg || '';
  document.title = 'Sign in · ratestore console';
  S.page = null;
  $('#token').focus();
}

// forget drops everything read while signed in, from memory and from the page.
function forget() {
  S.keys = []; S.teams = []; S.keysLoaded = false; S.spend = null; S.live = []; S.fresh = null;
  S.req = { stack: [], cursor: '', next: '', gen: S.req.gen + 1, lastKey: '', lastAt: 0 };
  for (const t of $$("table.data")) { t.headSig = null; for (const part of $$("thead, tbody", t)) clear(part); }
  for (const t of ['#top-keys', '#top-models', '#refusals']) clear($(t));
  for (const id of ['#spend-chart', '#spend-legend', '#spend-summary', '#req-key-list', '#req-model-list', '#keys-empty', '#teams-empty']) clear($(id));
  for (const id of ['#keys-updated', '#requests-empty', '#live-time']) $(id).textContent = '';
}

async function signIn(ev) {
  ev.preventDefault();
  const input = $('#token'), btn = $('#signin'), err = $('#signin-error');
  const token = input.value.trim();
  if (!token) { err.textContent = 'Enter the admin token.'; input.focus(); return; }
  btn.disabled = true;
  err.textContent = '';
  try {
    const r = await fetch('/admin/session', {
      method: 'POST', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify({ token }),
    });
    input.value = '';
    if (r.ok) {
      signedIn(await r.json());
      return;
    }
    if (r.status === 401) err.textContent = 'That is not the admin token.';
    else if (r.status === 429) {
      const wait = Number(r.headers.get('Retry-After')) || 60;
      err.textContent = `Too many failed attempts: try again in ${waitText(wait)}.`;
    } else {
      let m = `${r.status} ${r.statusText}`;
      try { const d = await r.json(); if (d.error && d.error.message) m = d.error.message; } catch { /* keep status */ }
      err.textContent = m;
    }
    input.focus();
  } catch {
    err.textContent = 'The gateway cannot be reached.';
  } finally {
    btn.disabled = false;
  }
}

async function signOut() {
  try { await api('DELETE', '/admin/session'); } catch { /* signed out either way */ }
  showSignin('');
  say('Signed out.');
}

// ---------- pages ----------

let poll = { timer: 0, gen: 0 };

function leave() {
  poll.gen++;
  clearTimeout(poll.timer);
}

// every runs fn now (when now is set) and then every ms while the page that started it is shown and the tab is
// visible; a call that fails does not stop it.
function every(ms, fn, { now = false, skipWhileDialog = false } = {}) {
  leave();
  const gen = poll.gen;
  const tick = async () => {
    if (gen !== poll.gen) return;
    if (!document.hidden && !(skipWhileDialog && $('dialog[open]'))) {
      try { await fn(); } catch { /* fn shows its own errors */ }
    }
    if (gen === poll.gen) poll.timer = setTimeout(tick, ms);
  };
  if (now) tick();
  else poll.timer = setTimeout(tick, ms);
}

function route(focus = true) {
  if (!S.csrf) return;
  let p = location.hash.slice(1);
  if (!PAGES.includes(p)) p = 'keys';
  if (p === S.page) return;
  leave();
  S.page = p;
  for (const q of PAGES) $(`#page-${q}`).hidden = q !== p;
  for (const a of $$('nav a[data-page]')) {
    if (a.dataset.page === p) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${TITLES[p]} · ratestore console`;
  if (focus) $(`#page-${p} h1`).focus({ preventScroll: true });
  ENTER[p]();
}

const ENTER = {
  keys: () => { loadKeys(true); every(REFRESH_MS, () => loadKeys(false), { skipWhileDialog: true }); },
  teams: () => { loadTeams(true); every(REFRESH_MS, () => loadTeams(false), { skipWhileDialog: true }); },
  spend: enterSpend,
  requests: enterRequests,
  live: enterLive,
};

// ---------- keys and teams: data ----------

async function fetchKeysTeams() {
  const [k, t] = await Promise.all([api('GET', '/admin/keys'), api('GET', '/admin/teams').catch((e) => {
    if (e.status === 401) throw e;
    return { teams: [] };
  })]);
  S.keys = k.keys || [];
  S.teams = t.teams || [];
  S.keysLoaded = true;
}

async function loadKeys(first) {
  try {
    await fetchKeysTeams();
    renderKeys();
    $('#keys-updated').textContent = `Updated ${clockFmt.format(Date.now())}; refreshes every ${REFRESH_MS / 1000} s while shown.`;
  } catch (e) {
    if (first) failed(e);
  }
}

async function loadTeams(first) {
  try {
    await fetchKeysTeams();
    renderTeams();
  } catch (e) {
    if (first) failed(e);
  }
}

function teamName(id) {
  if (!id) return '';
  const t = S.teams.find((x) => x.id === id);
  return t ? t.name || t.id : id;
}

function keyName(id) {
  const k = S.keys.find((x) => x.id === id);
  return k && k.name ? k.name : id;
}

function keyStatus(k) {
  if (k.disabled) return 'disabled';
  if (k.expires_at && Date.parse(k.expires_at) <= Date.now()) return 'expired';
  return 'active';
}

function maxFrac(list, used, limit) {
  let m = -1;
  for (const x of list || []) {
    const l = Number(x[limit]) || 0;
    m = Math.max(m, l > 0 ? Number(x[used]) / l : 0);
  }
  return m;
}

// ---------- bars ----------

// fillWidth is a bar's filled part: any use at all shows as a sliver, so that a first request is seen.
function fillWidth(frac) {
  return frac > 0 ? `${Math.min(100, Math.max(2, frac * 100)).toFixed(1)}%` : '0%';
}

// windowBar is one token window: a bar of used / limit, coloured by how full it is, the part of used that
// requests in flight reserve (not charged yet) drawn lighter at its end.
function windowBar(w, reserved) {
  const frac = w.limit > 0 ? w.used / w.limit : 0;
  const held = Math.min(reserved || 0, w.used);
  const fill = h('div', { class: 'bar-fill' });
  fill.style.width = fillWidth(frac);
  if (held > 0 && w.used > 0) {
    const part = h('div', { class: 'bar-reserved' });
    part.style.width = `${(held / w.used * 100).toFixed(1)}%`;
    fill.append(part);
  }
  const heldText = held > 0 ? `, ${nf.format(held)} of them reserved by requests in flight` : '';
  const per = prettyDur(durSeconds(w.window));
  const reset = w.used > 0 && w.reset_after_seconds > 0 ? `; back to 0 in ${waitText(w.reset_after_seconds)}` : '';
  const bar = h('div', {
    class: `bar ${level(frac)}`, 'data-window': w.window, 'data-used': w.used, 'data-limit': w.limit,
    role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': w.limit, 'aria-valuenow': Math.min(w.used, w.limit),
    'data-reserved': held,
    'aria-label': `${per} token window`, 'aria-valuetext': `${w.used} of ${w.limit} tokens used${heldText}${reset}`,
    title: `${nf.format(w.used)} of ${nf.format(w.limit)} tokens used in ${per} (${Math.round(frac * 100)}%)${heldText}${reset}`,
  }, h('div', { class: 'bar-track' }, fill), h('span', { class: 'bar-text', text: `${w.used} / ${w.limit}${held > 0 ? ` (${held} reserved)` : ''}` }));
  return h('div', { class: 'win' }, h('span', { class: 'win-label', text: per }), bar);
}

function windowsCell(ws, reserved) {
  if (!ws || !ws.length) return h('span', { class: 'none', text: 'none' });
  return h('div', { class: 'meters' }, ws.map((w) => windowBar(w, reserved)));
}

function budgetLine(b) {
  const lim = Number(b.limit_usd) || 0, spent = Number(b.spent_usd) || 0;
  const frac = lim > 0 ? spent / lim : 0;
  const fill = h('div', { class: 'budget-fill' });
  fill.style.width = fillWidth(frac);
  const resets = b.resets_at ? ` · resets ${ago(b.resets_at)}` : '';
  return h('div', {
    class: `budget ${level(frac)}`, 'data-spent': b.spent_usd, 'data-remaining': b.remaining_usd, 'data-limit': b.limit_usd,
    title: `${usd(spent)} spent of ${usd(lim)} per ${budgetPer(b)}, in-flight reservations included`,
  },
  h('div', { class: 'budget-track' }, fill),
  h('span', { class: 'budget-text', text: `${usd(spent)} / ${usd(lim)}` }),
  h('span', { class: 'budget-note', text: `${usd(b.remaining_usd)} left · ${budgetPer(b)}${resets}` }));
}

function budgetsCell(bs) {
  if (!bs || !bs.length) return h('span', { class: 'none', text: 'no budget' });
  return h('div', { class: 'meters' }, bs.map(budgetLine));
}

// ---------- sortable tables ----------

// head fills a table's header: one button per sortable column, so that sorting works from the keyboard.
function head(table, cols, sort, onSort) {
  const sig = JSON.stringify([cols.length, sort]);
  if (table.headSig === sig) return; // unchanged: keep it, and the focus in it
  table.headSig = sig;
  const tr = h('tr');
  for (const c of cols) {
    const th = h('th', { scope: 'col', class: c.num ? 'num' : '' });
    if (c.sort) {
      const on = sort.col === c.sort;
      if (on) th.setAttribute('aria-sort', sort.dir > 0 ? 'ascending' : 'descending');
      const b = h('button', { type: 'button', class: 'sort', 'data-sort': c.sort },
        c.label, h('span', { class: 'sort-mark', 'aria-hidden': 'true', text: on ? (sort.dir > 0 ? '▲' : '▼') : '' }));
      b.addEventListener('click', () => {
        if (sort.col === c.sort) sort.dir = -sort.dir;
        else { sort.col = c.sort; sort.dir = c.desc ? -1 : 1; }
        onSort();
        $(`button[data-sort="${c.sort}"]`, table).focus();
      });
      th.append(b);
    } else {
      th.append(c.label);
    }
    tr.append(th);
  }
  clear(table.tHead).append(tr);
}

function compare(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), undefined, { sensitivity: 'base', numeric: true });
}

// reconcile puts rows into tbody in order, keeping the rows that did not change (and the focus in them).
function reconcile(tbody, items, idOf, sigOf, rowOf) {
  const old = new Map();
  for (const tr of Array.from(tbody.rows)) old.set(tr.dataset.rowId, tr);
  const want = items.map((it) => {
    const id = idOf(it), sig = sigOf(it);
    const tr = old.get(id);
    old.delete(id);
    if (tr && tr.sig === sig) return tr;
    const fresh = rowOf(it);
    fresh.dataset.rowId = id;
    fresh.sig = sig;
    if (tr) {
      const focused = tr.contains(document.activeElement) && document.activeElement.dataset.action;
      tr.replaceWith(fresh);
      if (focused) { const b = $(`[data-action="${focused}"]`, fresh); if (b) b.focus(); }
    }
    return fresh;
  });
  for (const tr of old.values()) tr.remove();
  want.forEach((tr, i) => { if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null); });
}

// ---------- keys page ----------

const KEY_COLS = [
  { label: 'Name', sort: 'name' }, { label: 'Team', sort: 'team' }, { label: 'Status', sort: 'status' },
  { label: 'Token windows', sort: 'usage', desc: true }, { label: 'Budgets', sort: 'budget', desc: true },
  { label: 'Lifetime', sort: 'lifetime', desc: true, num: true },
];

const KEY_SORT = {
  name: (k) => k.name || k.id, team: (k) => teamName(k.team), status: keyStatus,
  usage: (k) => maxFrac(k.windows, 'used', 'limit'), budget: (k) => maxFrac(k.budgets, 'spent_usd', 'limit_usd'),
  lifetime: (k) => Number(k.lifetime_usd) || 0, last_used: (k) => (k.last_used ? Date.parse(k.last_used) : 0),
};

function renderKeys() {
  const table = $('#keys-table');
  const cols = S.readOnly ? KEY_COLS : [...KEY_COLS, { label: 'Actions' }];
  head(table, cols, S.keySort, renderKeys);
  const q = $('#key-search').value.trim().toLowerCase();
  const list = S.keys.filter((k) => !q || [k.name, k.id, k.team, teamName(k.team)].some((v) => v && v.toLowerCase().includes(q)));
  const by = KEY_SORT[S.keySort.col] || KEY_SORT.name;
  list.sort((a, b) => S.keySort.dir * compare(by(a), by(b)) || compare(a.id, b.id));
  reconcile(table.tBodies[0], list, (k) => k.id,
    (k) => JSON.stringify(k) + teamName(k.team) + S.readOnly + (S.fresh === k.id) + keyStatus(k), keyRow);
  const empty = $('#keys-empty');
  clear(empty);
  table.parentElement.hidden = S.keys.length === 0;
  empty.hidden = list.length > 0;
  if (!S.keys.length) {
    empty.append(h('p', {}, h('strong', { text: 'No keys yet.' })));
    if (!S.readOnly) {
      empty.append(
        h('p', { text: 'A key is what a program sends instead of your provider API key. Create one: you get its secret once, to give to any OpenAI, Anthropic or Gemini SDK as its API key, with this base URL:' }),
        h('p', {}, h('code', { text: baseURL() })),
        h('p', { text: 'Then send a request and watch the key\'s token window fill up here; each request also shows under Requests and Spend.' }));
      const b = h('button', { type: 'button', class: 'primary change', text: 'Create your first key' });
      b.addEventListener('click', () => openKeyDialog(null));
      empty.append(b);
    } else {
      empty.append(h('p', { text: 'Keys are created with the gateway (ratestore keys create, or this console on a running gateway).' }));
    }
  } else if (!list.length) {
    empty.append(h('p', { text: `No key matches “${q}”.` }));
  }
}

function keyRow(k) {
  const st = keyStatus(k);
  const tr = h('tr', { 'data-key-id': k.id, class: S.fresh === k.id ? 'fresh' : '' });
  const notes = [];
  if (k.in_flight) notes.push(`${k.in_flight} in flight`);
  if (k.expires_at && st !== 'expired') notes.push(`expires ${ago(k.expires_at)}`);
  if (k.previous_secret_expires_at && Date.parse(k.previous_secret_expires_at) > Date.now()) {
    notes.push(h('span', { class: 'sub', title: `The secret this key had before its rotation works until ${fmtTime(k.previous_secret_expires_at)}`,
      text: `old secret ends ${ago(k.previous_secret_expires_at)}` }));
  }
  const limits = [];
  if (k.requests_per_minute) limits.push(`${k.requests_per_minute}/min`);
  if (k.max_concurrent) limits.push(`${k.max_concurrent} at once`);
  if (k.models && k.models.length) limits.push(k.models.join(', '));
  tr.append(
    h('td', {}, h('span', { class: 'key-name', text: k.name || '(no name)' }), h('span', { class: 'sub mono', text: k.id }),
      limits.length ? h('span', { class: 'sub', text: limits.join(' · ') }) : null),
    h('td', { title: k.team || '' }, k.team ? teamName(k.team) : h('span', { class: 'none', text: '—' })),
    h('td', { 'data-status': st }, h('span', { class: 'pill', text: st }), notes.map((n) => (typeof n === 'string' ? h('span', { class: 'sub', text: n }) : n))),
    h('td', {}, windowsCell(k.windows, k.reserved_tokens)),
    h('td', {}, budgetsCell(k.budgets)),
    h('td', { class: 'num' }, usd(k.lifetime_usd), h('span', { class: 'sub', text: `${compact.format(k.lifetime_tokens || 0)} tokens` }),
      h('span', { class: 'sub', title: k.last_used ? fmtTime(k.last_used) : '', text: k.last_used ? `used ${ago(k.last_used)}` : 'never used' })),
  );
  if (!S.readOnly) {
    const name = k.name || k.id;
    tr.append(h('td', {}, h('div', { class: 'row-actions' },
      actionButton('edit', 'Edit', name),
      st === 'disabled' ? actionButton('enable', 'Enable', name) : actionButton('disable', 'Disable', name),
      actionButton('rotate', 'Rotate', name),
      actionButton('delete', 'Delete', name))));
  }
  return tr;
}

function actionButton(action, label, name) {
  return h('button', { type: 'button', class: 'change', 'data-action': action, 'aria-label': `${label} ${name}`, text: label });
}

async function keyAction(ev) {
  const btn = ev.target.closest('button[data-action]');
  if (!btn || S.readOnly) return;
  const id = btn.closest('tr').dataset.keyId;
  const k = S.keys.find((x) => x.id === id);
  if (!k) return;
  const name = k.name || k.id;
  const act = btn.dataset.action;
  if (act === 'edit') { openKeyDialog(k); return; }
  if (act === 'delete') {
    const ok = await confirmDialog(`Delete key “${name}” (${k.id})? Requests with its secret are refused from now on. Its spend stays in the ledger. This cannot be undone.`, 'Delete key');
    if (!ok) return;
  }
  btn.disabled = true;
  try {
    if (act === 'disable' || act === 'enable') {
      const nk = await api('PATCH', `/admin/keys/${encodeURIComponent(id)}`, { disabled: act === 'disable' });
      putKey(nk);
      say(act === 'disable' ? `Key “${name}” disabled: its requests are refused until it is enabled.` : `Key “${name}” enabled.`);
    } else if (act === 'rotate') {
      const r = await api('POST', `/admin/keys/${encodeURIComponent(id)}/rotate`, { grace: '24h' });
      putKey(r.key);
      showSecret(r.secret, r.key, true);
    } else if (act === 'delete') {
      await api('DELETE', `/admin/keys/${encodeURIComponent(id)}`);
      S.keys = S.keys.filter((x) => x.id !== id);
      renderKeys();
      say(`Key “${name}” deleted.`);
    }
  } catch (e) {
    failed(e);
  } finally {
    btn.disabled = false;
  }
}

function putKey(k) {
  const i = S.keys.findIndex((x) => x.id === k.id);
  if (i >= 0) S.keys[i] = k; else S.keys.push(k);
  if (S.page === 'keys') renderKeys();
}

// ---------- teams page ----------

const TEAM_COLS = [
  { label: 'Name', sort: 'name' }, { label: 'Keys', sort: 'keys', num: true, desc: true },
  { label: 'Token windows', sort: 'usage', desc: true }, { label: 'Budgets', sort: 'budget', desc: true },
  { label: 'Limits' },
];

const TEAM_SORT = {
  name: (t) => t.name || t.id, keys: (t) => t.key_count || 0,
  usage: (t) => maxFrac(t.windows, 'used', 'limit'), budget: (t) => maxFrac(t.budgets, 'spent_usd', 'limit_usd'),
};

function renderTeams() {
  const table = $('#teams-table');
  head(table, S.readOnly ? TEAM_COLS : [...TEAM_COLS, { label: 'Actions' }], S.teamSort, renderTeams);
  const q = $('#team-search').value.trim().toLowerCase();
  const list = S.teams.filter((t) => !q || [t.name, t.id].some((v) => v && v.toLowerCase().includes(q)));
  const by = TEAM_SORT[S.teamSort.col] || TEAM_SORT.name;
  list.sort((a, b) => S.teamSort.dir * compare(by(a), by(b)) || compare(a.id, b.id));
  reconcile(table.tBodies[0], list, (t) => t.id, (t) => JSON.stringify(t) + S.readOnly, teamRow);
  const empty = $('#teams-empty');
  clear(empty);
  table.parentElement.hidden = S.teams.length === 0;
  empty.hidden = list.length > 0;
  if (!S.teams.length) {
    empty.append(h('p', {}, h('strong', { text: 'No teams yet.' })),
      h('p', { text: 'A team groups keys under shared token windows and budgets: create one, then pick it in a key\'s Team field.' }));
    if (!S.readOnly) {
      const b = h('button', { type: 'button', class: 'primary change', text: 'Create a team' });
      b.addEventListener('click', () => openTeamDialog(null));
      empty.append(b);
    }
  } else if (!list.length) {
    empty.append(h('p', { text: `No team matches “${q}”.` }));
  }
}

function teamRow(t) {
  const n = t.key_count || 0;
  const limits = [];
  if (t.requests_per_minute) limits.push(`${t.requests_per_minute}/min`);
  if (t.max_concurrent) limits.push(`${t.max_concurrent} at once`);
  limits.push(t.models && t.models.length ? t.models.join(', ') : 'any model');
  if (t.in_flight) limits.push(`${t.in_flight} in flight`);
  const tr = h('tr', { 'data-team-id': t.id },
    h('td', {}, h('span', { class: 'key-name', text: t.name || '(no name)' }), h('span', { class: 'sub mono', text: t.id })),
    h('td', { class: 'num', 'data-keys': n }, String(n)),
    h('td', {}, windowsCell(t.windows)),
    h('td', {}, budgetsCell(t.budgets)),
    h('td', {}, limits.join(' · ')));
  if (!S.readOnly) {
    const name = t.name || t.id;
    tr.append(h('td', {}, h('div', { class: 'row-actions' }, actionButton('edit', 'Edit', name), actionButton('delete', 'Delete', name))));
  }
  return tr;
}

async function teamAction(ev) {
  const btn = ev.target.closest('button[data-action]');
  if (!btn || S.readOnly) return;
  const id = btn.closest('tr').dataset.teamId;
  const t = S.teams.find((x) => x.id === id);
  if (!t) return;
  const name = t.name || t.id;
  if (btn.dataset.action === 'edit') { openTeamDialog(t); return; }
  if (btn.dataset.action !== 'delete') return;
  if (t.key_count) {
    say(`Team “${name}” still has ${t.key_count} key(s): move them to another team or to none (Edit on the key) first.`, true);
    return;
  }
  if (!await confirmDialog(`Delete team “${name}” (${t.id})? This cannot be undone.`, 'Delete team')) return;
  btn.disabled = true;
  try {
    await api('DELETE', `/admin/teams/${encodeURIComponent(id)}`);
    S.teams = S.teams.filter((x) => x.id !== id);
    renderTeams();
    say(`Team “${name}” deleted.`);
  } catch (e) {
    failed(e);
  } finally {
    btn.disabled = false;
  }
}

// ---------- key and team forms ----------

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

// readPolicy reads the fields a key form and a team form share; orig is what is being edited (null: a new one).
// It returns the fields of the request body that change, or { error }.
function readPolicy(form, orig) {
  const f = form.elements;
  const out = {};
  const name = f.name.value.trim();
  if (!orig || name !== (orig.name || '')) out.name = name;
  const models = splitList(f.models.value);
  if (orig ? models.join(',') !== (orig.models || []).join(',') : models.length) out.models = models;
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
  const bud = budgetFrom(f['budget-usd'].value, f['budget-window'].value);
  if (bud.error) return { error: bud.error, field: f['budget-usd'] };
  const ob = orig && orig.budgets && orig.budgets[0];
  if (!sameBudget(bud.budget, ob ? budgetReq(ob) : null)) {
    const rest = orig ? (orig.budgets || []).slice(1).map(budgetReq) : [];
    out.budgets = bud.budget ? [bud.budget, ...rest] : rest;
  }
  for (const [field, api] of [['requests-per-minute', 'requests_per_minute'], ['max-concurrent', 'max_concurrent']]) {
    if (!f[field]) continue;
    const raw = f[field].value.trim();
    const v = raw === '' ? 0 : Number(raw);
    if (!Number.isInteger(v) || v < 0) return { error: 'Limits: give a whole number, or leave it empty for no limit.', field: f[field] };
    if (orig ? v !== (orig[api] || 0) : v > 0) out[api] = v;
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
    name: o ? o.name || '' : '', models: o ? (o.models || []).join(', ') : '',
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

function openKeyDialog(k) {
  if (S.readOnly) return;
  const form = $('#key-form');
  const team = k && k.team ? k.team : '';
  clear(form.elements.team).append(h('option', { value: '', text: 'No team', selected: !team }),
    ...S.teams.map((t) => h('option', { value: t.id, text: t.name ? `${t.name} (${t.id})` : t.id, selected: t.id === team })));
  fillPolicy(form, k);
  $('#key-dialog-title').textContent = k ? `Edit key “${k.name || k.id}”` : 'New key';
  $('#key-submit').textContent = k ? 'Save' : 'Create key';
  $('#key-error').textContent = '';
  const more = $('details.more', form);
  more.open = !!(k && (k.requests_per_minute || k.max_concurrent));
  S.editing = k ? k.id : null;
  $('#key-dialog').showModal();
  form.elements.name.focus();
}

async function submitKey(ev) {
  ev.preventDefault();
  const form = $('#key-form');
  const orig = S.editing ? S.keys.find((x) => x.id === S.editing) : null;
  if (S.editing && !orig) { $('#key-error').textContent = 'This key was deleted meanwhile.'; return; }
  const r = readPolicy(form, orig);
  if (r.error) { $('#key-error').textContent = r.error; r.field.focus(); return; }
  const team = form.elements.team.value;
  if (orig ? team !== (orig.team || '') : team) r.body.team = team;
  const btn = $('#key-submit');
  btn.disabled = true;
  try {
    if (!orig) {
      const created = await api('POST', '/admin/keys', r.body);
      $('#key-dialog').close();
      S.fresh = created.key.id;
      putKey(created.key);
      showSecret(created.secret, created.key, false);
    } else if (!Object.keys(r.body).length) {
      $('#key-dialog').close();
      say('Nothing changed.');
    } else {
      const nk = await api('PATCH', `/admin/keys/${encodeURIComponent(orig.id)}`, r.body);
      $('#key-dialog').close();
      putKey(nk);
      say(`Key “${nk.name || nk.id}” saved.`);
    }
  } catch (e) {
    if (e.status !== 401) $('#key-error').textContent = e.code === 'read_only' ? 'This console is read-only.' : e.message;
  } finally {
    btn.disabled = false;
  }
}

function openTeamDialog(t) {
  if (S.readOnly) return;
  const form = $('#team-form');
  fillPolicy(form, t);
  $('#team-dialog-title').textContent = t ? `Edit team “${t.name || t.id}”` : 'New team';
  $('#team-submit').textContent = t ? 'Save' : 'Create team';
  $('#team-error').textContent = '';
  S.editing = t ? t.id : null;
  $('#team-dialog').showModal();
  form.elements.name.focus();
}

async function submitTeam(ev) {
  ev.preventDefault();
  const form = $('#team-form');
  const orig = S.editing ? S.teams.find((x) => x.id === S.editing) : null;
  if (S.editing && !orig) { $('#team-error').textContent = 'This team was deleted meanwhile.'; return; }
  const r = readPolicy(form, orig);
  if (r.error) { $('#team-error').textContent = r.error; r.field.focus(); return; }
  const btn = $('#team-submit');
  btn.disabled = true;
  try {
    let t;
    if (!orig) t = await api('POST', '/admin/teams', r.body);
    else if (Object.keys(r.body).length) t = await api('PATCH', `/admin/teams/${encodeURIComponent(orig.id)}`, r.body);
    $('#team-dialog').close();
    if (!t) { say('Nothing changed.'); return; }
    const i = S.teams.findIndex((x) => x.id === t.id);
    if (i >= 0) S.teams[i] = t; else S.teams.push(t);
    if (S.page === 'teams') renderTeams();
    say(orig ? `Team “${t.name || t.id}” saved.` : `Team “${t.name || t.id}” created: pick it in a key's Team field.`);
  } catch (e) {
    if (e.status !== 401) $('#team-error').textContent = e.code === 'read_only' ? 'This console is read-only.' : e.message;
  } finally {
    btn.disabled = false;
  }
}

// ---------- the secret, shown once ----------

function baseURL() {
  return `${location.origin}/v1`;
}

// showSecret shows a key's secret in the secret dialog, the only place it ever appears; closing the dialog (Done,
// Escape) drops it from the page, and nothing else holds it.
function showSecret(secret, k, rotated) {
  const name = k.name || k.id;
  $('#secret-title').textContent = rotated ? `New secret for “${name}”` : `Key “${name}” created`;
  $('#secret').textContent = secret;
  const model = (k.models || []).find((m) => !/[*?[\]]/.test(m)) || 'gpt-4o-mini';
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello' }] });
  $('#secret-curl').textContent = `curl ${baseURL()}/chat/completions -H "Authorization: Bearer ${secret}" -H "Content-Type: application/json" -d '${body}'`;
  $('#copy-status').textContent = '';
  const grace = $('#secret-grace');
  grace.hidden = !(rotated && k.previous_secret_expires_at);
  grace.textContent = grace.hidden ? '' : `The previous secret keeps working until ${fmtTime(k.previous_secret_expires_at)}: update its users before then.`;
  $('#secret-dialog').showModal();
  $('#copy-secret').focus();
}

function dropSecret() {
  const fresh = S.fresh;
  if (fresh) setTimeout(() => { if (S.fresh === fresh) { S.fresh = null; if (S.page === 'keys') renderKeys(); } }, 20000);
  $('#secret').textContent = '';
  $('#secret-curl').textContent = '';
  $('#copy-status').textContent = '';
  if (S.fresh && S.page === 'keys') {
    const tr = $(`tr[data-key-id="${CSS.escape(S.fresh)}"]`);
    if (tr) tr.scrollIntoView({ block: 'nearest' });
  }
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

function confirmDialog(message, yes) {
  const d = $('#confirm-dialog');
  $('#confirm-message').textContent = message;
  $('#confirm-yes').textContent = yes || 'Delete';
  d.returnValue = '';
  return new Promise((resolve) => {
    confirmDone = resolve;
    d.showModal();
    $('#confirm-no').focus();
  });
}

// ---------- spend page ----------

function todayUTC() {
  return new Date().toISOString().slice(0, 10);
}

function addDays(day, n) {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

function enterSpend() {
  if (!$('#spend-to').value) $('#spend-to').value = todayUTC();
  if (!$('#spend-from').value) $('#spend-from').value = addDays($('#spend-to').value, -13);
  loadSpend();
}

async function loadSpend() {
  const from = $('#spend-from').value, to = $('#spend-to').value, stack = $('#spend-stack').value;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(from) || !/^\d{4}-\d{2}-\d{2}$/.test(to)) { say('Spend: choose both days.', true); return; }
  if (from > to) { say('Spend: the first day is after the last.', true); return; }
  const gen = ++S.spendGen;
  const q = `from=${from}&to=${addDays(to, 1)}`;
  try {
    const [byDay, byKey, byModel] = await Promise.all([
      api('GET', `/admin/spend?${q}&group_by=day&group_by=${stack}`),
      api('GET', `/admin/spend?${q}&group_by=key`),
      api('GET', `/admin/spend?${q}&group_by=model`),
      S.keysLoaded ? null : fetchKeysTeams().catch(() => null),
    ]);
    if (gen !== S.spendGen || S.page !== 'spend') return;
    S.spend = { from, to, stack, byDay, byKey, byModel };
    renderSpend();
  } catch (e) {
    if (gen === S.spendGen) failed(e);
  }
}

function seriesLabel(stack, v) {
  if (stack === 'key') return v ? keyName(v) : '(no key)';
  if (stack === 'team') return v ? teamName(v) : '(no team)';
  return v || '(no model)';
}

function tokensOf(c) {
  return (c.input_tokens || 0) + (c.output_tokens || 0) + (c.cache_read_tokens || 0) + (c.cache_write_tokens || 0) + (c.reasoning_tokens || 0);
}

function renderSpend() {
  const sp = S.spend;
  if (!sp) return;
  const t = sp.byDay.total || {};
  const sum = clear($('#spend-summary'));
  for (const [v, l] of [[usd(t.cost_usd), 'cost'], [nf.format(t.requests || 0), 'requests'], [compact.format(tokensOf(t)), 'tokens'],
    [nf.format(t.refused || 0), 'refused']]) {
    sum.append(h('div', { class: 'card' }, h('div', { class: 'v', text: v }), h('div', { class: 'l', text: l })));
  }
  renderChart();
  topTable($('#top-keys'), 'Key', sp.byKey.rows || [], (r) => r.key, (v) => {
    const n = keyName(v);
    if (n !== v) return [n, h('span', { class: 'sub mono', text: v })];
    return [h('span', { class: 'mono', text: v || '(none)' }), S.keysLoaded && v ? h('span', { class: 'sub', text: 'deleted' }) : null];
  });
  topTable($('#top-models'), 'Model', sp.byModel.rows || [], (r) => r.model, (v) => [v || '(none)']);
  const ref = clear($('#refusals'));
  const by = Object.entries(t.refused_by || {}).sort((a, b) => b[1] - a[1]);
  ref.append(h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: 'Reason' }), h('th', { scope: 'col', class: 'num', text: 'Refused' }))));
  const tb = h('tbody');
  for (const [reason, n] of by) {
    tb.append(h('tr', { 'data-reason': reason }, h('td', {}, REASONS[reason] || reason, REASONS[reason] ? h('span', { class: 'sub mono', text: reason }) : null),
      h('td', { class: 'num', text: nf.format(n) })));
  }
  if (!by.length) tb.append(h('tr', {}, h('td', { colspan: 2, class: 'none', text: t.refused ? `${nf.format(t.refused)} refused` : 'No refusals in this range.' })));
  ref.append(tb);
}

function topTable(table, label, rows, dim, cell) {
  clear(table);
  table.append(h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: label }), h('th', { scope: 'col', class: 'num', text: 'Requests' }),
    h('th', { scope: 'col', class: 'num', text: 'Tokens' }), h('th', { scope: 'col', class: 'num', text: 'Cost' }))));
  const tb = h('tbody');
  const top = rows.filter((r) => r.requests || r.refused || Number(r.cost_usd)).sort((a, b) => (b.cost_usd - a.cost_usd) || (b.requests - a.requests)).slice(0, 10);
  for (const r of top) {
    const v = dim(r) || '';
    tb.append(h('tr', { 'data-id': v }, h('td', {}, cell(v)),
      h('td', { class: 'num' }, nf.format(r.requests || 0), r.refused ? h('span', { class: 'sub', text: `${nf.format(r.refused)} refused` }) : null),
      h('td', { class: 'num', text: compact.format(tokensOf(r)), title: `${nf.format(tokensOf(r))} tokens` }),
      h('td', { class: 'num', text: usd(r.cost_usd) })));
  }
  if (!top.length) tb.append(h('tr', {}, h('td', { colspan: 4, class: 'none', text: 'Nothing in this range.' })));
  table.append(tb);
}

// renderChart draws cost per day, stacked by the chosen dimension, as SVG: one rect per (day, series) with
// data-day, data-series and data-cost, and a <title> as its tooltip. When nothing cost anything (no prices for
// the models) it stacks requests instead, and says so.
function renderChart() {
  const sp = S.spend;
  const svg = clear($('#spend-chart'));
  const legend = clear($('#spend-legend'));
  const days = [];
  for (let d = sp.from; d <= sp.to && days.length < 800; d = addDays(d, 1)) days.push(d);
  // Rows of refusals alone (no request served, nothing spent) have nothing to draw: the refusals table shows them.
  const rows = (sp.byDay.rows || []).filter((r) => r.requests > 0 || Number(r.cost_usd) > 0);
  const totalCost = rows.reduce((a, r) => a + (Number(r.cost_usd) || 0), 0);
  const byCost = totalCost > 0 || !rows.some((r) => r.requests > 0);
  const val = (r) => (byCost ? Number(r.cost_usd) || 0 : r.requests || 0);
  const fmtV = (v) => (byCost ? usd(v) : nf.format(v));
  $('#spend-caption').textContent = byCost
    ? `Cost per day (USD), by ${sp.stack}`
    : `Requests per day, by ${sp.stack}: nothing had a cost (no price for these models)`;
  // Series, largest first; past MAX_SERIES the rest are one "other".
  const tot = new Map();
  for (const r of rows) { const k = r[sp.stack] || ''; tot.set(k, (tot.get(k) || 0) + val(r) + 1e-12 * (r.requests || 0)); }
  const order = [...tot.keys()].sort((a, b) => tot.get(b) - tot.get(a));
  const keep = new Set(order.slice(0, order.length > MAX_SERIES + 1 ? MAX_SERIES : order.length));
  const OTHER = '\u0000other';
  const series = order.filter((k) => keep.has(k));
  if (keep.size < order.length) series.push(OTHER);
  const color = (k) => (k === OTHER ? OTHER_COLOR : PALETTE[series.indexOf(k) % PALETTE.length]);
  const label = (k) => (k === OTHER ? 'other' : seriesLabel(sp.stack, k));
  // Cells: day -> series -> {v, cost, requests}.
  const cells = new Map();
  for (const r of rows) {
    const k = keep.has(r[sp.stack] || '') ? r[sp.stack] || '' : OTHER;
    if (!cells.has(r.day)) cells.set(r.day, new Map());
    const c = cells.get(r.day).get(k) || { v: 0, cost: 0, requests: 0 };
    c.v += val(r); c.cost += Number(r.cost_usd) || 0; c.requests += r.requests || 0;
    cells.get(r.day).set(k, c);
  }
  let maxDay = 0;
  for (const m of cells.values()) { let t = 0; for (const c of m.values()) t += c.v; maxDay = Math.max(maxDay, t); }
  const W = Math.max(300, Math.floor($('#spend-chart-box').clientWidth || 800));
  const H = W < 520 ? 220 : 280;
  const M = { l: W < 520 ? 48 : 64, r: 10, t: 12, b: 40 };
  const pw = W - M.l - M.r, ph = H - M.t - M.b;
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('width', W);
  svg.setAttribute('height', H);
  const ticks = niceTicks(maxDay);
  const top = ticks[ticks.length - 1] || 1;
  const y = (v) => M.t + ph - (v / top) * ph;
  const grid = s('g', { class: 'grid' }), axis = s('g', { class: 'axis' });
  for (const tv of ticks) {
    grid.append(s('line', { x1: M.l, x2: W - M.r, y1: y(tv), y2: y(tv) }));
    axis.append(s('text', { x: M.l - 6, y: y(tv) + 4, 'text-anchor': 'end', text: byCost ? usdTick(tv) : compact.format(tv) }));
  }
  axis.append(s('line', { x1: M.l, x2: W - M.r, y1: M.t + ph, y2: M.t + ph }));
  const band = pw / days.length;
  const bw = Math.max(1, Math.min(48, band * 0.72));
  const every = Math.max(1, Math.ceil(days.length / Math.max(1, Math.floor(pw / 56))));
  days.forEach((d, i) => {
    if (i % every === 0 || days.length === 1) {
      axis.append(s('text', { x: M.l + band * i + band / 2, y: M.t + ph + 16, 'text-anchor': 'middle', text: dayFmt.format(Date.parse(`${d}T00:00:00Z`)) }));
    }
  });
  axis.append(s('text', { x: M.l + pw / 2, y: H - 4, 'text-anchor': 'middle', text: 'day (UTC)' }));
  if (W >= 520) axis.append(s('text', { x: 12, y: M.t + ph / 2, 'text-anchor': 'middle', transform: `rotate(-90 12 ${M.t + ph / 2})`, text: byCost ? 'USD' : 'requests' }));
  svg.append(grid, axis);
  const bars = s('g', { class: 'bars' });
  days.forEach((d, i) => {
    const m = cells.get(d);
    if (!m) return;
    let acc = 0;
    for (const k of series) {
      const c = m.get(k);
      if (!c) continue;
      const y0 = y(acc), y1 = y(acc + c.v);
      acc += c.v;
      bars.append(s('rect', {
        class: 'seg', x: (M.l + band * i + (band - bw) / 2).toFixed(1), y: y1.toFixed(1), width: bw.toFixed(1),
        height: Math.max(0, y0 - y1).toFixed(1), fill: color(k),
        'data-day': d, 'data-series': k === OTHER ? 'other' : k, 'data-cost': c.cost, 'data-requests': c.requests,
      }, s('title', { text: `${d} · ${label(k)}: ${usd(c.cost)}, ${nf.format(c.requests)} requests` })));
    }
  });
  svg.append(bars);
  if (!rows.length) {
    svg.append(s('text', { class: 'chart-note', x: M.l + pw / 2, y: M.t + ph / 2, 'text-anchor': 'middle', text: 'No requests in this range.' }));
  }
  for (const k of series) {
    const sw = h('span', { class: 'swatch', 'aria-hidden': 'true' });
    sw.style.background = color(k);
    const total = [...cells.values()].reduce((a, m) => a + (m.get(k) ? m.get(k).v : 0), 0);
    legend.append(h('li', {}, sw, `${label(k)} `, h('span', { class: 'muted', text: fmtV(total) })));
  }
}

function niceTicks(max) {
  if (!(max > 0)) return [0, 1];
  const raw = max / 4;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((st) => st >= raw);
  const out = [];
  for (let v = 0; v < max + step * 0.999; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

function usdTick(v) {
  if (v === 0) return '$0';
  if (v >= 1000) return `$${compact.format(v)}`;
  return usd(v);
}

// ---------- requests page ----------

function enterRequests() {
  const dl = clear($('#req-key-list'));
  const fill = () => { clear(dl); for (const k of S.keys) dl.append(h('option', { value: k.id, text: k.name || k.id })); };
  if (S.keysLoaded) fill(); else fetchKeysTeams().then(fill, () => {});
  if (S.spend) {
    const ml = clear($('#req-model-list'));
    for (const r of S.spend.byModel.rows || []) if (r.model) ml.append(h('option', { value: r.model }));
  }
  S.req.stack = [];
  loadRequests('');
}

function reqFilters() {
  return { key: $('#req-key').value.trim(), model: $('#req-model').value.trim(), status: $('#req-status').value.trim() };
}

// applyFilters loads the first page for the filters shown; a change event and the submit that follows it (Enter)
// load once.
function applyFilters(ev) {
  if (ev) ev.preventDefault();
  const f = reqFilters();
  const sig = JSON.stringify(f);
  if (ev && ev.type === 'change' && sig === S.req.lastKey) return;
  if (sig === S.req.lastKey && Date.now() - S.req.lastAt < 400) return;
  S.req.stack = [];
  loadRequests('');
}

async function loadRequests(cursor) {
  const f = reqFilters();
  if (f.status && !/^[1-9]\d\d$/.test(f.status)) { say('Status: give an HTTP status, as 200 or 429.', true); return; }
  S.req.lastKey = JSON.stringify(f);
  S.req.lastAt = Date.now();
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v) p.set(k, v);
  p.set('limit', '50');
  if (cursor) p.set('cursor', cursor);
  const gen = ++S.req.gen;
  try {
    const d = await api('GET', `/admin/requests?${p}`);
    if (gen !== S.req.gen || S.page !== 'requests') return;
    S.req.cursor = cursor;
    S.req.next = d.next_cursor || '';
    renderRequests(d.requests || [], f);
  } catch (e) {
    if (gen === S.req.gen) failed(e);
  }
}

function statusClass(st) {
  return st >= 500 ? 'st-bad' : st >= 400 ? 'st-warn' : 'st-ok';
}

function renderRequests(list, f) {
  const table = $('#requests-table');
  clear(table.tHead).append(h('tr', {}, ['Time', 'Key', 'Model', 'Route', 'Status', 'Latency', 'Tokens', 'Cost'].map((l, i) =>
    h('th', { scope: 'col', class: i >= 5 ? 'num' : '', text: l }))));
  const tb = clear(table.tBodies[0]);
  for (const e of list) {
    const tok = tokensOf(e);
    const parts = [`input ${e.input_tokens}`, `output ${e.output_tokens}`];
    if (e.cache_read_tokens) parts.push(`cache read ${e.cache_read_tokens}`);
    if (e.cache_write_tokens) parts.push(`cache write ${e.cache_write_tokens}`);
    if (e.reasoning_tokens) parts.push(`reasoning ${e.reasoning_tokens}`);
    const kn = keyName(e.key);
    tb.append(h('tr', { 'data-request-id': e.request_id },
      h('td', { class: 'time' }, h('time', { datetime: e.time, text: fmtTime(e.time) }), h('span', { class: 'sub mono', text: e.request_id })),
      h('td', {}, kn, kn !== e.key ? h('span', { class: 'sub mono', text: e.key }) : null),
      h('td', { class: 'mono', text: e.model }),
      h('td', { class: 'mono', text: e.route }),
      h('td', { 'data-status': e.status }, h('span', { class: statusClass(e.status), text: String(e.status) })),
      h('td', { class: 'num', text: `${nf.format(e.latency_ms)} ms` }),
      h('td', { class: 'num', title: parts.join(', ') }, nf.format(tok), e.estimated ? h('span', { class: 'est sub', text: 'estimated' }) : null),
      h('td', { class: 'num', text: usd(e.cost_usd) })));
  }
  const empty = $('#requests-empty');
  empty.hidden = list.length > 0;
  table.parentElement.hidden = !list.length;
  const filtered = f.key || f.model || f.status;
  empty.textContent = filtered ? 'No request matches these filters.'
    : S.req.cursor ? 'No older requests.' : `No requests yet. Send one to ${baseURL()} with a key's secret: it shows here when it ends.`;
  $('#req-next').disabled = !S.req.next;
  $('#req-prev').disabled = !S.req.stack.length;
  $('#req-newest').disabled = !S.req.stack.length;
  $('#req-page').textContent = `Page ${S.req.stack.length + 1}`;
}

// ---------- live page ----------

function enterLive() {
  S.live = [];
  $('#live-note').textContent = LIVE_NOTE;
  const gen = poll.gen + 1;
  every(LIVE_MS, async () => {
    try {
      const d = await api('GET', '/admin/live');
      if (S.page !== 'live') return;
      showLive(d);
    } catch (e) {
      if (e.status === 404) {
        $('#live-note').textContent = 'No live figures here: they come from a running gateway (this console has none).';
        if (poll.gen === gen) leave();
      } else if (e.status !== 401) {
        $('#live-note').textContent = `Live figures unavailable: ${e.message}`;
      }
    }
  }, { now: true });
}

function showLive(d) {
  const rps = Number(d.requests_per_second) || 0, tps = Number(d.tokens_per_second) || 0, inf = Number(d.in_flight) || 0;
  S.live.push({ rps, tps, inf });
  if (S.live.length > LIVE_SAMPLES) S.live.splice(0, S.live.length - LIVE_SAMPLES);
  $('#live-rps').textContent = rps < 10 ? rps.toFixed(2) : rps.toFixed(1);
  $('#live-tps').textContent = tps < 100 ? tps.toFixed(1) : nf.format(Math.round(tps));
  $('#live-inflight').textContent = nf.format(inf);
  spark($('#live-chart'), S.live.map((x) => x.rps));
  spark($('#live-chart-tps'), S.live.map((x) => x.tps));
  spark($('#live-chart-inflight'), S.live.map((x) => x.inf));
  const at = Date.parse(d.time);
  $('#live-time').textContent = `As of ${clockFmt.format(Number.isNaN(at) ? Date.now() : at)}.`;
}

function spark(svg, vals) {
  const W = 300, H = 60;
  clear(svg);
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.append(s('line', { class: 'base', x1: 0, x2: W, y1: H - 1, y2: H - 1, 'vector-effect': 'non-scaling-stroke' }));
  if (!vals.length) return;
  const max = Math.max(...vals, 1e-9);
  const step = W / (LIVE_SAMPLES - 1);
  const x0 = W - (vals.length - 1) * step;
  const pts = vals.map((v, i) => `${(x0 + i * step).toFixed(1)},${(H - 2 - (v / max) * (H - 6)).toFixed(1)}`);
  svg.append(s('polygon', { points: `${x0.toFixed(1)},${H} ${pts.join(' ')} ${W},${H}` }),
    s('polyline', { points: pts.join(' '), 'vector-effect': 'non-scaling-stroke' }),
    s('title', { text: `last ${vals.length} samples, highest ${max < 10 ? max.toFixed(2) : nf.format(Math.round(max))}` }));
}

// ---------- wiring ----------

function wire() {
  $('#signin-form').addEventListener('submit', signIn);
  $('#signout').addEventListener('click', signOut);
  window.addEventListener('hashchange', () => route(true));
  document.addEventListener('visibilitychange', () => {
    // Back to the tab: refresh at once rather than at the next tick.
    if (!document.hidden && S.csrf && ['keys', 'teams', 'live'].includes(S.page)) ENTER[S.page]();
  });
  $('#key-search').addEventListener('input', renderKeys);
  $('#team-search').addEventListener('input', renderTeams);
  $('#new-key').addEventListener('click', () => openKeyDialog(null));
  $('#new-team').addEventListener('click', () => openTeamDialog(null));
  $('#keys-table').tBodies[0].addEventListener('click', keyAction);
  $('#teams-table').tBodies[0].addEventListener('click', teamAction);
  $('#key-form').addEventListener('submit', submitKey);
  $('#team-form').addEventListener('submit', submitTeam);
  for (const b of $$('dialog [data-close]')) b.addEventListener('click', () => b.closest('dialog').close());
  $('#secret-done').addEventListener('click', () => $('#secret-dialog').close());
  $('#secret-dialog').addEventListener('close', dropSecret);
  $('#copy-secret').addEventListener('click', () => copyFrom($('#secret'), $('#copy-status')));
  $('#copy-curl').addEventListener('click', () => copyFrom($('#secret-curl'), $('#copy-status')));
  for (const b of $$('.copy-base')) b.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(baseURL()); say('Base URL copied.'); } catch { say(`Base URL: ${baseURL()}`); }
  });
  $('#confirm-yes').addEventListener('click', () => $('#confirm-dialog').close('yes'));
  $('#confirm-no').addEventListener('click', () => $('#confirm-dialog').close('no'));
  $('#confirm-dialog').addEventListener('close', () => {
    const done = confirmDone;
    confirmDone = null;
    if (done) done($('#confirm-dialog').returnValue === 'yes');
  });
  $('#spend-form').addEventListener('submit', (e) => { e.preventDefault(); loadSpend(); });
  $('#spend-stack').addEventListener('change', loadSpend);
  for (const id of ['#spend-from', '#spend-to']) $(id).addEventListener('change', () => { if ($(id).value) loadSpend(); });
  let resize = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resize);
    resize = setTimeout(() => { if (S.page === 'spend' && S.spend) renderChart(); }, 150);
  });
  $('#req-form').addEventListener('submit', applyFilters);
  for (const id of ['#req-key', '#req-model', '#req-status']) $(id).addEventListener('change', applyFilters);
  $('#req-next').addEventListener('click', () => {
    if (!S.req.next) return;
    S.req.stack.push(S.req.cursor);
    loadRequests(S.req.next);
  });
  $('#req-prev').addEventListener('click', () => { if (S.req.stack.length) loadRequests(S.req.stack.pop()); });
  $('#req-newest').addEventListener('click', () => { S.req.stack = []; loadRequests(''); });
}

boot();
