// The keys page: a page of keys at a time, searched, filtered and sorted by the server, polled while shown.

import { api, failed, item } from './api.js';
import { budgetsCell, limitsOf, windowsCell } from './bars.js';
import { $, bdi, clear, debounce, h, isolate, quoted, say } from './dom.js';
import { ago, clockFmt, compact, fmtTime, usd } from './format.js';
import { confirmDialog, openKeyDialog, showSecret } from './forms.js';
import { PagedList, head, reconcile, showPager, wirePager } from './lists.js';
import { fillNames, nameRef, remember, resolveTeam, suggest } from './names.js';
import { REFRESH_MS, S, changed, onChange, refreshNow, show } from './state.js';

const KEY_COLS = [
  { label: 'Name', sort: 'name' }, { label: 'Team' }, { label: 'Status' }, { label: 'Token windows' }, { label: 'Budgets' },
  { label: 'Spend', sort: 'spend', desc: true, num: true }, { label: 'Last used', sort: 'last_used', desc: true },
];

const keys = new PagedList('/admin/keys', 'keys', renderKeys, $('#keys-table'));
const NO_FILTER = { q: '', team: '', status: '', sort: 'name' };
keys.query = { ...NO_FILTER };

// fresh is the key just created, shown at the top of the page it was created on, whatever the page's order, until
// its secret's dialog has been closed for a while.
let fresh = null;

export function enterKeys() {
  show({ every: REFRESH_MS, refresh: ({ first, force } = {}) => keys.refresh({ force }).catch((e) => { if (first) failed(e); throw e; }) });
}

export function keyStatus(k) {
  if (k.disabled) return 'disabled';
  if (k.expires_at && Date.parse(k.expires_at) <= Date.now()) return 'expired';
  return 'active';
}

// teamFilter is the id of the team whose keys the page shows, "" for any.
let teamFilter = '';

// applyKeys reads the filters, with changes to them (sort, team), and shows the first page they select.
async function applyKeys(change = {}) {
  if ('team' in change) teamFilter = change.team;
  showTeamFilter();
  const q = {
    q: $('#key-search').value.trim(), team: teamFilter, status: $('#key-status').value,
    sort: change.sort || keys.query.sort || 'name',
  };
  await keys.change(q).catch(failed);
}

// keysOfTeam shows the keys of a team (its detail's link).
export function keysOfTeam(id) {
  $('#key-search').value = '';
  $('#key-status').value = '';
  $('#key-team').value = id;
  teamFilter = id;
  keys.set({ ...keys.query, q: '', status: '', team: id });
  showTeamFilter();
  if (location.hash === '#keys') keys.refresh().catch(failed);
  else location.hash = '#keys';
}

// showTeamFilter shows the name of the team filtered on beside its field.
function showTeamFilter() {
  const box = clear($('#key-team-name'));
  if (teamFilter) {
    box.append(nameRef('team', teamFilter));
    fillNames(box);
  }
}

// readTeamFilter reads the team field: a team's id (picked from its suggestions), or a team's exact name.
async function readTeamFilter() {
  try {
    await applyKeys({ team: await resolveTeam($('#key-team').value) });
  } catch (e) {
    failed(e);
  }
}

function renderKeys(list) {
  const table = $('#keys-table');
  head(table, S.readOnly ? KEY_COLS : [...KEY_COLS, { label: 'Actions' }], list.query.sort || 'name', (sort) => applyKeys({ sort }));
  remember('key', list.items);
  const shown = fresh && !list.items.some((k) => k.id === fresh.id) ? [fresh, ...list.items] : list.items;
  reconcile(table.tBodies[0], shown, (k) => k.id,
    (k) => JSON.stringify(k) + S.readOnly + (fresh && fresh.id === k.id) + keyStatus(k), keyRow);
  emptyKeys(list, shown.length);
  showPager($('#keys-pager'), list);
  $('#keys-updated').textContent = `Shown at ${clockFmt.format(Date.now())}; checked every ${REFRESH_MS / 1000} s while shown.`;
  fillNames(table.tBodies[0]);
}

// emptyKeys says why the page has no key: there are none yet, none match, or none on this part of a search.
function emptyKeys(list, n) {
  const empty = clear($('#keys-empty'));
  const filtered = Object.entries(list.query).some(([k, v]) => k !== 'sort' && v);
  $('#keys-table').parentElement.hidden = n === 0;
  empty.hidden = n > 0;
  if (n > 0) return;
  if (list.next) {
    empty.append(h('p', { text: 'No key on this part of the search: Next searches on.' }));
  } else if (filtered || list.stack.length) {
    empty.append(h('p', {}, h('strong', { text: 'No keys match.' })), h('p', { text: 'Change the search or the filters above.' }));
  } else if (!S.readOnly) {
    empty.append(
      h('p', {}, h('strong', { text: 'No keys yet.' })),
      h('p', { text: 'A key is what a program sends instead of your provider API key. Create one: you get its secret once, to give to any OpenAI, Anthropic or Gemini SDK as its API key, with this base URL:' }),
      h('p', {}, h('code', { text: `${location.origin}/v1` })),
      h('p', { text: 'Then send a request and watch the key\'s token window fill up here; each request also shows under Requests and Spend.' }));
    const b = h('button', { type: 'button', class: 'primary change', text: 'Create your first key' });
    b.addEventListener('click', () => openKeyDialog(null));
    empty.append(b);
  } else {
    empty.append(h('p', {}, h('strong', { text: 'No keys yet.' })),
      h('p', { text: 'Keys are created with the gateway (ratestore keys create, or this console on a running gateway).' }));
  }
}

function keyRow(k) {
  const st = keyStatus(k);
  const tr = h('tr', { 'data-key-id': k.id, class: fresh && fresh.id === k.id ? 'fresh' : '' });
  const limits = limitsOf({ ...k, in_flight: 0 });
  tr.append(
    h('td', {}, h('a', { class: 'key-name', href: `#key/${encodeURIComponent(k.id)}` }, bdi(k.name || '(no name)')),
      h('span', { class: 'sub mono', text: k.id }), limits.length ? h('span', { class: 'sub' }, limits) : null),
    h('td', { title: k.team || '' }, k.team ? h('a', { href: `#team/${encodeURIComponent(k.team)}` }, nameRef('team', k.team)) : h('span', { class: 'none', text: '—' })),
    h('td', { 'data-status': st }, h('span', { class: 'pill', text: st }), statusNotes(k, st)),
    h('td', {}, windowsCell(k.windows, k.reserved_tokens)),
    h('td', {}, budgetsCell(k.budgets)),
    h('td', { class: 'num' }, usd(k.lifetime_usd), h('span', { class: 'sub', text: `${compact.format(k.lifetime_tokens || 0)} tokens` })),
    h('td', { class: 'used', title: k.last_used ? fmtTime(k.last_used) : '' }, k.last_used ? ago(k.last_used) : h('span', { class: 'none', text: 'never' })),
  );
  if (!S.readOnly) tr.append(h('td', {}, keyButtons(k, st)));
  return tr;
}

// statusNotes are the lines under a key's status: requests in flight, its expiry, its old secret's end.
export function statusNotes(k, st) {
  const notes = [];
  if (k.in_flight) notes.push(h('span', { class: 'sub', text: `${k.in_flight} in flight` }));
  if (k.expires_at && st !== 'expired') notes.push(h('span', { class: 'sub', title: fmtTime(k.expires_at), text: `expires ${ago(k.expires_at)}` }));
  if (k.previous_secret_expires_at && Date.parse(k.previous_secret_expires_at) > Date.now()) {
    notes.push(h('span', { class: 'sub', title: `The secret this key had before its rotation works until ${fmtTime(k.previous_secret_expires_at)}`,
      text: `old secret ends ${ago(k.previous_secret_expires_at)}` }));
  }
  return notes;
}

// keyButtons are a key's actions: edit, disable or enable, rotate, delete.
export function keyButtons(k, st) {
  const name = k.name || k.id;
  return h('div', { class: 'row-actions' },
    actionButton('edit', 'Edit', name),
    st === 'disabled' ? actionButton('enable', 'Enable', name) : actionButton('disable', 'Disable', name),
    actionButton('rotate', 'Rotate', name),
    actionButton('delete', 'Delete', name));
}

export function actionButton(action, label, name) {
  return h('button', { type: 'button', class: 'change', 'data-action': action, 'aria-label': `${label} ${isolate(name)}`, text: label });
}

function rowAction(ev) {
  const btn = ev.target.closest('button[data-action]');
  if (!btn || S.readOnly) return;
  const id = btn.closest('tr').dataset.keyId;
  const k = (fresh && fresh.id === id ? fresh : null) || keys.items.find((x) => x.id === id);
  if (k) keyAct(btn.dataset.action, k, btn);
}

// keyAct does what a key's button asks; changed() then shows the key as the API answered.
export async function keyAct(act, k, btn) {
  const name = k.name || k.id;
  if (act === 'edit') { openKeyDialog(k); return; }
  if (act === 'delete' && !await confirmDialog(['Delete key ', ...quoted(name), ` (${k.id})? Requests with its secret are refused from now on. Its spend stays in the ledger. This cannot be undone.`], 'Delete key')) return;
  btn.disabled = true;
  try {
    if (act === 'disable' || act === 'enable') {
      const nk = await api('PATCH', item('key', k.id), { disabled: act === 'disable' });
      changed('key', nk.id, nk);
      say(act === 'disable' ? ['Key ', ...quoted(name), ' disabled: its requests are refused until it is enabled.'] : ['Key ', ...quoted(name), ' enabled.']);
    } else if (act === 'rotate') {
      const r = await api('POST', `${item('key', k.id)}/rotate`, { grace: '24h' });
      changed('key', k.id, r.key);
      showSecret(r.secret, r.key, true);
    } else if (act === 'delete') {
      await api('DELETE', item('key', k.id));
      changed('key', k.id, null);
      say(['Key ', ...quoted(name), ' deleted.']);
    }
  } catch (e) {
    failed(e);
  } finally {
    btn.disabled = false;
  }
}

// created shows a key just created at the top of the page until dropFresh.
export function created(k) {
  fresh = k;
  changed('key', k.id, k);
  refreshNow();
}

// dropFresh stops showing the key just created apart, a while after its secret's dialog closed.
export function dropFresh() {
  const f = fresh;
  if (!f) return;
  const tr = $(`#keys-table tr[data-key-id="${CSS.escape(f.id)}"]`);
  if (tr && S.page === 'keys') tr.scrollIntoView({ block: 'nearest' });
  setTimeout(() => {
    if (fresh !== f) return;
    fresh = null;
    if (!keys.items) return;
    if (S.page === 'keys') keys.show();
    else keys.etag = ''; // not shown: the page draws its rows again when it is (no name looked up meanwhile)
  }, 20000);
}

onChange((kind, id, k) => {
  if (kind !== 'key') return;
  if (fresh && fresh.id === id) fresh = k;
  if (!keys.items) return;
  keys.etag = ''; // the next poll reads the page again
  const i = keys.items.findIndex((x) => x.id === id);
  if (i >= 0) {
    if (k) keys.items[i] = k; else keys.items.splice(i, 1);
  }
  if (S.page === 'keys') keys.show();
});

export function forgetKeys() {
  fresh = null;
  teamFilter = '';
  keys.query = { ...NO_FILTER };
  keys.reset();
  for (const id of ['#key-search', '#key-team', '#key-status']) $(id).value = '';
  clear($('#key-team-name'));
}

export function wireKeys() {
  const search = debounce(() => applyKeys(), 250);
  $('#key-search').addEventListener('input', search);
  $('#key-search').addEventListener('keydown', (e) => { if (e.key === 'Enter') search.now(); });
  $('#key-status').addEventListener('change', () => applyKeys());
  $('#key-team').addEventListener('change', readTeamFilter);
  $('#key-team').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); readTeamFilter(); } });
  suggest($('#key-team'), $('#key-team-list'), 'team');
  wirePager($('#keys-pager'), keys, failed, { noun: 'key' });
  $('#new-key').addEventListener('click', () => openKeyDialog(null));
  $('#keys-table').tBodies[0].addEventListener('click', rowAction);
}
