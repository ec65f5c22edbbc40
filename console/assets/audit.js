// The audit page: every change made to keys, teams, prices and the configuration, newest first, a page at a time,
// each field's change shown as from -> to; filtered on one key's or team's (their pages link here).

import { failed } from './api.js';
import { $, bdi, clear, h } from './dom.js';
import { fmtTime } from './format.js';
import { PagedList, reconcile, showPager, wirePager } from './lists.js';
import { fillNames, nameRef } from './names.js';
import { REFRESH_MS, S, show } from './state.js';

const events = new PagedList('/admin/audit', 'events', renderAudit, $('#audit-table'));
events.limit = 50;
events.query = { target: '' };

const ACTIONS = {
  'key.create': 'created', 'key.update': 'changed', 'key.disable': 'disabled', 'key.enable': 'enabled', 'key.rotate': 'rotated',
  'key.delete': 'deleted', 'team.create': 'created', 'team.update': 'changed', 'team.delete': 'deleted', 'prices.reload': 'reloaded',
  'config.reload': 'reloaded',
};

// enterAudit shows the newest events, of target when given ("" for all).
export function enterAudit(target) {
  $('#audit-target').value = target;
  if (events.set({ target })) clear($('#audit-table').tBodies[0]); // not another target's events meanwhile
  $('#audit-none').hidden = true;
  const view = {
    every: REFRESH_MS,
    refresh: async ({ first, force } = {}) => {
      try {
        await events.refresh({ force });
      } catch (e) {
        if (e.status === 404 && e.code === 'no_audit') {
          view.every = 0;
          noAudit();
          return;
        }
        if (first) failed(e);
        throw e;
      }
    },
  };
  show(view);
}

function noAudit() {
  $('#audit-none').hidden = false;
  $('#audit-table').parentElement.hidden = true;
  $('#audit-empty').hidden = true;
  $('#audit-pager').hidden = true;
}

function renderAudit(list) {
  const table = $('#audit-table');
  if (!table.tHead.rows.length) {
    table.tHead.append(h('tr', {}, ['Time', 'Who', 'What', 'Of', 'Changes'].map((l) => h('th', { scope: 'col', text: l }))));
  }
  reconcile(table.tBodies[0], list.items, eventId, (e) => JSON.stringify(e), eventRow);
  const n = list.items.length;
  table.parentElement.hidden = n === 0;
  $('#audit-pager').hidden = false;
  const empty = $('#audit-empty');
  empty.hidden = n > 0;
  empty.textContent = list.query.target ? 'No change was made to this one in the audit log\'s retention.' : 'No change has been made yet.';
  showPager($('#audit-pager'), list);
  fillNames(table.tBodies[0]);
}

function eventId(e) {
  return `${e.time} ${e.target} ${e.action} ${e.actor}`;
}

function eventRow(e) {
  const kind = /^key_/.test(e.target) ? 'key' : /^team_/.test(e.target) ? 'team' : '';
  const target = kind ? h('a', { href: `#${kind}/${encodeURIComponent(e.target)}` }, nameRef(kind, e.target, true)) : bdi(e.target || '—');
  return h('tr', { 'data-action': e.action, 'data-target': e.target },
    h('td', { class: 'time' }, h('time', { datetime: e.time, text: fmtTime(e.time) })),
    h('td', { class: 'mono' }, bdi(e.actor), e.address ? h('span', { class: 'sub', text: e.address }) : null),
    h('td', {}, h('span', { class: 'pill', text: ACTIONS[e.action] || e.action }), h('span', { class: 'sub mono', text: e.action })),
    h('td', {}, target),
    h('td', {}, changes(e.changes || {})));
}

// changes lists each field's change, from -> to; a field created shows its value only, one deleted its old one.
function changes(ch) {
  const fields = Object.keys(ch).sort();
  if (!fields.length) return h('span', { class: 'none', text: '—' });
  return h('ul', { class: 'changes' }, fields.map((f) => {
    const { from, to } = ch[f] || {};
    const li = h('li', { 'data-field': f }, h('code', { class: 'fname', text: f }), ' ');
    if (from === null || from === undefined) li.append(value(to, 'to'));
    else if (to === null || to === undefined) li.append(value(from, 'from'), ' → ', h('span', { class: 'none', text: 'none' }));
    else li.append(value(from, 'from'), ' → ', value(to, 'to'));
    return li;
  }));
}

// value shows a field's value as JSON would write it, but a string, which shows as itself (isolated: names are
// chosen by others).
function value(v, cls) {
  if (v === null || v === undefined) return h('span', { class: `none ${cls}`, text: 'none' });
  const text = typeof v === 'string' ? v : JSON.stringify(v);
  return bdi(text === '' ? '""' : text, { class: `val ${cls}` });
}

export function forgetAudit() {
  events.query = { target: '' };
  events.reset();
  $('#audit-target').value = '';
}

export function wireAudit() {
  wirePager($('#audit-pager'), events, failed, { noun: 'change', names: ['Newest', 'Newer', 'Older'] });
  $('#audit-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('#audit-target').value.trim();
    const want = t ? `#audit/${encodeURIComponent(t)}` : '#audit';
    if (location.hash !== want) location.hash = want;
    else if (S.page === 'audit') enterAudit(t);
  });
}
