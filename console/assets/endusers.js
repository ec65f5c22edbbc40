// A key's end users (its own customers, named by its requests): a page of them at a time from GET
// /admin/keys/{id}/end-users, by name, searched by the start of the name, each with its usage under the limits
// per end user. A key can have millions: the page shows one page of them, polled with the key's page.

import { failed } from './api.js';
import { budgetsCell, windowsCell } from './bars.js';
import { $, bdi, clear, debounce, h, isolate } from './dom.js';
import { ago, compact, fmtTime, nf, usd } from './format.js';
import { PagedList, head, reconcile, showPager, wirePager } from './lists.js';

const COLS = [
  { label: 'End user' }, { label: 'Usage' }, { label: 'Requests', num: true }, { label: 'Tokens', num: true },
  { label: 'Cost', num: true }, { label: 'Last used' },
];

const list = new PagedList('', 'end_users', render, $('#endusers-table'));

// E is the key whose end users are shown, and what its page knows of them: whether the gateway keeps no ledger
// (then there is no list, and nothing to poll), whether the key limits each end user.
const E = { key: '', noLedger: false, limited: false };

// enterEndUsers shows the end users of key id (the key's page): its first page, when refreshEndUsers is called.
export function enterEndUsers(id) {
  E.key = id;
  E.noLedger = false;
  $('#enduser-search').value = '';
  list.base = `/admin/keys/${encodeURIComponent(id)}/end-users`;
  list.query = {};
  list.reset();
  list.renders = 0;
  list.unchanged = 0;
  clear($('#endusers-table').tBodies[0]);
  clear($('#endusers-empty')).hidden = true;
  $('#endusers-table').parentElement.hidden = true;
  $('#endusers-pager').hidden = true;
  $('#key-endusers').hidden = true;
}

// refreshEndUsers reads the page of end users shown again, with its ETag unless force; limited says whether the
// key sets limits per end user (its end_users). It shows its own errors: on the first read, or when the gateway
// keeps no ledger.
export async function refreshEndUsers(id, limited, { first = false, force = false } = {}) {
  if (id !== E.key || E.noLedger) return;
  $('#key-endusers').hidden = false;
  if (E.limited !== limited) {
    E.limited = limited;
    force = true;
  }
  try {
    await list.refresh({ force });
  } catch (e) {
    if (id !== E.key) return;
    if (e.status === 404 && e.code === 'no_ledger') {
      E.noLedger = true;
      noLedger();
    } else if (first) {
      failed(e);
    }
  }
}

function noLedger() {
  $('#endusers-table').parentElement.hidden = true;
  $('#endusers-pager').hidden = true;
  $('#enduser-search').disabled = true;
  clear($('#endusers-empty')).append(h('p', {}, h('strong', { text: 'No list of end users here.' })),
    h('p', { text: 'The gateway runs without a spend ledger (--no-ledger): it keeps no record of the end users its requests named. Their limits still apply.' }));
  $('#endusers-empty').hidden = false;
}

function render(l) {
  const table = $('#endusers-table');
  head(table, COLS, '', () => {});
  reconcile(table.tBodies[0], l.items, (u) => u.id, (u) => JSON.stringify(u) + E.limited, row);
  const n = l.items.length;
  table.parentElement.hidden = n === 0;
  $('#endusers-pager').hidden = n === 0 && !l.stack.length;
  showPager($('#endusers-pager'), l);
  const empty = clear($('#endusers-empty'));
  empty.hidden = n > 0;
  $('#enduser-search').disabled = false;
  if (n > 0) return;
  const q = l.query.q || '';
  if (l.next) {
    empty.append(h('p', { text: 'No end user on this part of the list: Next reads on.' }));
  } else if (q) {
    empty.append(h('p', {}, h('strong', {}, 'No end user’s name starts with “', bdi(q), '”.')),
      h('p', { text: 'The search is by the start of the name, upper and lower case apart.' }));
  } else if (l.stack.length) {
    empty.append(h('p', { text: 'No more end users.' }));
  } else {
    empty.append(h('p', {}, h('strong', { text: 'No end users yet.' })),
      h('p', {}, 'A request names one with the header ', h('code', { text: 'X-Ratestore-End-User' }), ', OpenAI’s ',
        h('code', { text: 'user' }), ' or Anthropic’s ', h('code', { text: 'metadata.user_id' }),
        ': each end user the key’s requests name is listed here, with its usage', E.limited ? ' under the limits of each end user.' : '.'));
  }
}

// requestsOf is the hash of the requests page filtered on key and end user.
export function requestsOf(key, endUser) {
  return `#requests/${encodeURIComponent(new URLSearchParams({ key, end_user: endUser }).toString())}`;
}

function row(u) {
  const usage = [];
  if (u.windows && u.windows.length) usage.push(windowsCell(u.windows, 0, u.binding));
  if (u.budgets && u.budgets.length) usage.push(budgetsCell(u.budgets));
  if (!usage.length) usage.push(h('span', { class: 'none', text: E.limited ? 'no window' : 'no limit per end user' }));
  const name = u.id === '' ? h('span', { class: 'none', text: '(no name)' }) : bdi(u.id, { class: 'end-user' });
  return h('tr', { 'data-end-user': u.id },
    h('td', { class: 'eu-name' }, h('a', { class: 'key-name', href: requestsOf(E.key, u.id), title: `The requests of ${isolate(u.id)}` }, name),
      u.in_flight ? h('span', { class: 'sub', text: `${nf.format(u.in_flight)} in flight` }) : null),
    h('td', { class: 'eu-usage' }, usage),
    h('td', { class: 'num' }, nf.format(u.requests || 0), u.refused ? h('span', { class: 'sub', text: `${nf.format(u.refused)} refused` }) : null),
    h('td', { class: 'num', text: compact.format(u.tokens || 0), title: `${nf.format(u.tokens || 0)} tokens` }),
    h('td', { class: 'num', text: usd(u.cost_usd) }),
    h('td', { class: 'used', title: u.last_used ? fmtTime(u.last_used) : '' }, u.last_used ? ago(u.last_used) : h('span', { class: 'none', text: 'never' })));
}

export function forgetEndUsers() {
  E.key = '';
  list.reset();
  $('#enduser-search').value = '';
}

export function wireEndUsers() {
  const search = debounce(() => {
    if (!E.key || E.noLedger) return;
    const q = $('#enduser-search').value;
    list.change(q ? { q } : {}).catch(failed);
  }, 250);
  $('#enduser-search').addEventListener('input', search);
  $('#enduser-search').addEventListener('keydown', (e) => { if (e.key === 'Enter') search.now(); });
  wirePager($('#endusers-pager'), list, failed, { noun: 'end user' });
}
