// The requests page: the ledger's entries, newest first, a page at a time.

import { api, failed, path } from './api.js';
import { $, bdi, clear, h, say } from './dom.js';
import { fmtTime, nf, tokensOf, usd } from './format.js';
import { baseURL } from './forms.js';
import { fillNames, nameRef, suggest } from './names.js';
import { S, stop } from './state.js';
import { spendModels } from './spend.js';

const LIMIT = 50;

const R = { stack: [], cursor: '', next: '', gen: 0, lastKey: '', lastAt: 0 };

// enterRequests shows the newest requests, filtered as arg says when given: a key's id (a key's page links here),
// or the filters as a query string, "key=ID&end_user=NAME" (an end user's link).
export function enterRequests(arg) {
  stop();
  if (arg) {
    const f = arg.includes('=') ? new URLSearchParams(arg) : new URLSearchParams({ key: arg });
    $('#req-key').value = f.get('key') || '';
    $('#req-end-user').value = f.get('end_user') || '';
    if (f.has('model')) $('#req-model').value = f.get('model');
  }
  const ml = clear($('#req-model-list'));
  for (const m of spendModels()) ml.append(h('option', { value: m }));
  R.stack = [];
  loadRequests('');
}

function reqFilters() {
  // An end user's name is matched as it is, spaces and all: it is not trimmed.
  return { key: $('#req-key').value.trim(), model: $('#req-model').value.trim(), end_user: $('#req-end-user').value, status: $('#req-status').value.trim() };
}

// applyFilters loads the first page for the filters shown; a change event and the submit that follows it (Enter)
// load once.
function applyFilters(ev) {
  if (ev) ev.preventDefault();
  const sig = JSON.stringify(reqFilters());
  if (ev && ev.type === 'change' && sig === R.lastKey) return;
  if (sig === R.lastKey && Date.now() - R.lastAt < 400) return;
  R.stack = [];
  loadRequests('');
}

async function loadRequests(cursor) {
  const f = reqFilters();
  if (f.status && !/^[1-9]\d\d$/.test(f.status)) { say('Status: give an HTTP status, as 200 or 429.', true); return; }
  R.lastKey = JSON.stringify(f);
  R.lastAt = Date.now();
  const gen = ++R.gen;
  try {
    const d = await api('GET', path('/admin/requests', { ...f, limit: LIMIT, cursor }));
    if (gen !== R.gen || S.page !== 'requests') return;
    R.cursor = cursor;
    R.next = d.next_cursor || '';
    renderRequests(d.requests || [], f);
  } catch (e) {
    if (gen === R.gen) failed(e);
  }
}

function statusClass(st) {
  return st >= 500 ? 'st-bad' : st >= 400 ? 'st-warn' : 'st-ok';
}

function requestRow(e, endUsers) {
  const parts = [`input ${e.input_tokens}`, `output ${e.output_tokens}`];
  if (e.cache_read_tokens) parts.push(`cache read ${e.cache_read_tokens}`);
  if (e.cache_write_tokens) parts.push(`cache write ${e.cache_write_tokens}`);
  if (e.reasoning_tokens) parts.push(`reasoning ${e.reasoning_tokens}`);
  return h('tr', { 'data-request-id': e.request_id },
    h('td', { class: 'time' }, h('time', { datetime: e.time, text: fmtTime(e.time) }), h('span', { class: 'sub mono', text: e.request_id })),
    h('td', {}, e.key ? nameRef('key', e.key, true) : h('span', { class: 'none', text: 'no key' })),
    h('td', { class: 'mono' }, bdi(e.model, { class: 'model' })),
    endUsers ? h('td', { class: 'req-end-user' }, e.end_user ? bdi(e.end_user, { class: 'end-user' }) : h('span', { class: 'none', text: '—' })) : null,
    h('td', { class: 'mono' }, e.route, e.upstream ? h('span', { class: 'sub' }, 'via ', bdi(e.upstream, { class: 'upstream' })) : null),
    h('td', { 'data-status': e.status }, h('span', { class: statusClass(e.status), text: String(e.status) })),
    h('td', { class: 'num', text: `${nf.format(e.latency_ms)} ms` }),
    h('td', { class: 'num', title: parts.join(', ') }, nf.format(tokensOf(e)), e.estimated ? h('span', { class: 'est sub', text: 'estimated' }) : null),
    h('td', { class: 'num', text: usd(e.cost_usd) }));
}

function renderRequests(list, f) {
  const table = $('#requests-table');
  // The end user column is there when a request of the page named one, or the page is filtered on one.
  const endUsers = !!f.end_user || list.some((e) => e.end_user);
  const cols = ['Time', 'Key', 'Model', ...(endUsers ? ['End user'] : []), 'Route', 'Status', 'Latency', 'Tokens', 'Cost'];
  clear(table.tHead).append(h('tr', {}, cols.map((l, i) =>
    h('th', { scope: 'col', class: i >= cols.length - 3 ? 'num' : '', text: l }))));
  const tb = clear(table.tBodies[0]);
  tb.append(...list.map((e) => requestRow(e, endUsers)));
  fillNames(tb);
  const empty = $('#requests-empty');
  empty.hidden = list.length > 0;
  table.parentElement.hidden = !list.length;
  const filtered = f.key || f.model || f.end_user || f.status;
  empty.textContent = R.next ? 'No request on this part of the ledger: Older reads on.'
    : filtered ? 'No request matches these filters.'
      : R.cursor ? 'No older requests.' : `No requests yet. Send one to ${baseURL()} with a key's secret: it shows here when it ends.`;
  $('#req-next').disabled = !R.next;
  $('#req-prev').disabled = !R.stack.length;
  $('#req-newest').disabled = !R.stack.length;
  $('#req-page').textContent = `Page ${R.stack.length + 1}`;
}

export function forgetRequests() {
  Object.assign(R, { stack: [], cursor: '', next: '', gen: R.gen + 1, lastKey: '', lastAt: 0 });
  for (const id of ['#req-key-list', '#req-model-list']) clear($(id));
  $('#req-end-user').value = '';
  $('#requests-empty').textContent = '';
}

export function wireRequests() {
  $('#req-form').addEventListener('submit', applyFilters);
  for (const id of ['#req-key', '#req-model', '#req-end-user', '#req-status']) $(id).addEventListener('change', applyFilters);
  suggest($('#req-key'), $('#req-key-list'), 'key');
  $('#req-next').addEventListener('click', () => {
    if (!R.next) return;
    R.stack.push(R.cursor);
    loadRequests(R.next);
  });
  $('#req-prev').addEventListener('click', () => { if (R.stack.length) loadRequests(R.stack.pop()); });
  $('#req-newest').addEventListener('click', () => { R.stack = []; loadRequests(''); });
}
