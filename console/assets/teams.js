// The teams page: a page of teams at a time, searched and sorted by the server, each with its key count.

import { api, failed, item } from './api.js';
import { budgetsCell, limitsOf, windowsCell } from './bars.js';
import { $, bdi, clear, debounce, h, quoted, say } from './dom.js';
import { nf } from './format.js';
import { confirmDialog, openTeamDialog } from './forms.js';
import { actionButton, keysOfTeam } from './keys.js';
import { PagedList, head, reconcile, showPager, wirePager } from './lists.js';
import { forget, remember } from './names.js';
import { REFRESH_MS, S, changed, onChange, show } from './state.js';

const TEAM_COLS = [
  { label: 'Name', sort: 'name' }, { label: 'Keys', num: true }, { label: 'Token windows' }, { label: 'Budgets' }, { label: 'Limits' },
];

const teams = new PagedList('/admin/teams', 'teams', renderTeams, $('#teams-table'));
const NO_FILTER = { q: '', sort: 'name' };
teams.query = { ...NO_FILTER };

export function enterTeams() {
  show({ every: REFRESH_MS, refresh: ({ first, force } = {}) => teams.refresh({ force }).catch((e) => { if (first) failed(e); throw e; }) });
}

async function applyTeams(change = {}) {
  await teams.change({ q: $('#team-search').value.trim(), sort: change.sort || teams.query.sort || 'name' }).catch(failed);
}

function renderTeams(list) {
  const table = $('#teams-table');
  head(table, S.readOnly ? TEAM_COLS : [...TEAM_COLS, { label: 'Actions' }], list.query.sort || 'name', (sort) => applyTeams({ sort }));
  remember('team', list.items);
  reconcile(table.tBodies[0], list.items, (t) => t.id, (t) => JSON.stringify(t) + S.readOnly, teamRow);
  const empty = clear($('#teams-empty'));
  const n = list.items.length;
  table.parentElement.hidden = n === 0;
  empty.hidden = n > 0;
  showPager($('#teams-pager'), list);
  if (n > 0) return;
  if (list.next) {
    empty.append(h('p', { text: 'No team on this part of the search: Next searches on.' }));
  } else if (list.query.q || list.stack.length) {
    empty.append(h('p', {}, h('strong', { text: 'No teams match.' })));
  } else {
    empty.append(h('p', {}, h('strong', { text: 'No teams yet.' })),
      h('p', { text: 'A team groups keys under shared token windows and budgets: create one, then pick it in a key\'s Team field.' }));
    if (!S.readOnly) {
      const b = h('button', { type: 'button', class: 'primary change', text: 'Create a team' });
      b.addEventListener('click', () => openTeamDialog(null));
      empty.append(b);
    }
  }
}

function teamRow(t) {
  const n = t.key_count || 0;
  const tr = h('tr', { 'data-team-id': t.id },
    h('td', {}, h('a', { class: 'key-name', href: `#team/${encodeURIComponent(t.id)}` }, bdi(t.name || '(no name)')), h('span', { class: 'sub mono', text: t.id })),
    h('td', { class: 'num', 'data-keys': n }, n ? h('a', { href: '#keys', 'data-team-keys': t.id, title: 'Show its keys' }, nf.format(n)) : '0'),
    h('td', {}, windowsCell(t.windows)),
    h('td', {}, budgetsCell(t.budgets)),
    h('td', {}, limitsOf(t, true)));
  if (!S.readOnly) tr.append(h('td', {}, teamButtons(t)));
  return tr;
}

export function teamButtons(t) {
  const name = t.name || t.id;
  return h('div', { class: 'row-actions' }, actionButton('edit', 'Edit', name), actionButton('delete', 'Delete', name));
}

function rowClick(ev) {
  const link = ev.target.closest('a[data-team-keys]');
  if (link) {
    ev.preventDefault();
    keysOfTeam(link.dataset.teamKeys);
    return;
  }
  const btn = ev.target.closest('button[data-action]');
  if (!btn || S.readOnly) return;
  const t = teams.items.find((x) => x.id === btn.closest('tr').dataset.teamId);
  if (t) teamAct(btn.dataset.action, t, btn);
}

// teamAct does what a team's button asks.
export async function teamAct(act, t, btn) {
  const name = t.name || t.id;
  if (act === 'edit') { openTeamDialog(t); return; }
  if (act !== 'delete') return;
  if (t.key_count) {
    say(['Team ', ...quoted(name), ` still has ${t.key_count} key(s): move them to another team or to none (Edit on the key) first.`], true);
    return;
  }
  if (!await confirmDialog(['Delete team ', ...quoted(name), ` (${t.id})? This cannot be undone.`], 'Delete team')) return;
  btn.disabled = true;
  try {
    await api('DELETE', item('team', t.id));
    forget('team', t.id);
    changed('team', t.id, null);
    say(['Team ', ...quoted(name), ' deleted.']);
  } catch (e) {
    failed(e);
  } finally {
    btn.disabled = false;
  }
}

onChange((kind, id, t) => {
  if (kind !== 'team' || !teams.items) return;
  teams.etag = '';
  const i = teams.items.findIndex((x) => x.id === id);
  if (i >= 0) {
    if (t) teams.items[i] = t; else teams.items.splice(i, 1);
  } else if (t) {
    teams.items.unshift(t);
  }
  if (S.page === 'teams') teams.show();
});

export function forgetTeams() {
  teams.query = { ...NO_FILTER };
  teams.reset();
  $('#team-search').value = '';
}

export function wireTeams() {
  const search = debounce(() => applyTeams(), 250);
  $('#team-search').addEventListener('input', search);
  $('#team-search').addEventListener('keydown', (e) => { if (e.key === 'Enter') search.now(); });
  wirePager($('#teams-pager'), teams, failed, { noun: 'team' });
  $('#new-team').addEventListener('click', () => openTeamDialog(null));
  $('#teams-table').tBodies[0].addEventListener('click', rowClick);
}
