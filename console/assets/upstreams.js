// The upstreams page: every upstream the gateway sends requests to, a bar for each of its provider's limits (what is
// in use of it now), until when it cools down after errors, and its requests and errors. It only reads, so a
// read-only console shows it as any other. Polled while shown with the ETag of what it shows, as the live page is:
// a poll that finds nothing changed costs a 304 and draws nothing; one that does redraws only the upstreams that
// changed.

import { revalidate } from './api.js';
import { limitBar, models } from './bars.js';
import { $, bdi, h } from './dom.js';
import { clockFmt, fmtTime, nf } from './format.js';
import { reconcile } from './lists.js';
import { S, show } from './state.js';

const POLL_MS = 2000;
const NOTE = 'What is in use of each limit counts the last minute, and the reservations of the requests in flight; refreshed every 2 seconds.';
const COLUMNS = [['Upstream'], ['Models'], ['Limits: in use now'], ['Weight', 'num'], ['Status'], ['Requests, errors', 'num']];

// LIMITS are an upstream's limits: the field of its limits and of its use, a bar's label, and what it counts.
const LIMITS = [
  { limit: 'requests_per_minute', used: 'requests_per_minute', label: 'Requests / min', what: 'requests in the last minute' },
  { limit: 'tokens_per_minute', used: 'tokens_per_minute', label: 'Tokens / min', what: 'tokens in the last minute' },
  { limit: 'max_concurrent', used: 'in_flight', label: 'In flight', what: 'requests in flight' },
];

// enterUpstreams shows the upstreams, and polls them while they are shown.
export function enterUpstreams() {
  const page = $('#page-upstreams');
  page.dataset.renders = '0';
  page.dataset.unchanged = '0';
  $('#upstreams-note').textContent = NOTE;
  let etag = '';
  const view = {
    every: POLL_MS,
    refresh: async () => {
      try {
        const r = await revalidate('/admin/upstreams', etag);
        if (S.page !== 'upstreams') return;
        $('#upstreams-updated').textContent = `As of ${clockFmt.format(Date.now())}.`;
        if (!r) {
          page.dataset.unchanged = String(Number(page.dataset.unchanged) + 1);
          return;
        }
        etag = r.etag;
        page.dataset.renders = String(Number(page.dataset.renders) + 1);
        render(r.data.upstreams || []);
      } catch (e) {
        if (S.page !== 'upstreams') return;
        if (e.status === 404) {
          view.every = 0;
          $('#upstreams-note').textContent = '';
          $('#upstreams-updated').textContent = '';
          render([], 'No upstreams here: they are a running gateway\'s, and this console has none.');
        } else if (e.status !== 401) {
          $('#upstreams-note').textContent = `Upstreams unavailable: ${e.message}`;
        }
      }
    },
  };
  show(view);
}

// render shows list, an upstream a row; an empty list says so (none: why).
function render(list, none = 'No upstreams configured.') {
  const table = $('#upstreams-table');
  if (!table.tHead.rows.length) {
    table.tHead.append(h('tr', {}, COLUMNS.map(([l, cls]) => h('th', { scope: 'col', class: cls || false, text: l }))));
  }
  reconcile(table.tBodies[0], list, (u) => u.name, (u) => JSON.stringify(u), upstreamRow);
  table.parentElement.hidden = !list.length;
  const empty = $('#upstreams-empty');
  empty.hidden = list.length > 0;
  empty.textContent = none;
  const cooling = list.filter((u) => u.cooling_down_until).length;
  $('#upstreams-count').textContent = list.length
    ? `${list.length} upstream${list.length === 1 ? '' : 's'}${cooling ? `, ${cooling} cooling down` : ''}` : '';
}

// upstreamRow is u as a row of the table: every name, URL and model in it is text (names are the configuration's,
// and may hold anything).
function upstreamRow(u) {
  const cooling = !!u.cooling_down_until;
  return h('tr', { 'data-upstream': u.name, class: cooling ? 'cooling' : false },
    h('td', {}, bdi(u.name, { class: 'key-name' }), h('span', { class: 'sub' }, apiOf(u)), h('span', { class: 'sub mono url', text: u.url })),
    h('td', { class: 'models' }, u.models && u.models.length ? models(u.models) : h('span', { class: 'none', text: u.api ? `every ${u.api} model` : 'every model' })),
    h('td', { class: 'limits' }, limitsOf(u)),
    h('td', { class: 'num', text: nf.format(u.weight || 0) }),
    h('td', { class: 'state' }, cooling ? coolingUntil(u.cooling_down_until) : h('span', { class: 'st-ok', text: 'in service' })),
    h('td', { class: 'num' }, h('span', { class: 'requests', text: nf.format(u.requests || 0) }), errorsOf(u)));
}

// apiOf says what u speaks: its api, or the path prefix of an --upstream route.
function apiOf(u) {
  if (u.api) return h('code', { text: u.api });
  return ['route ', h('code', { text: u.prefix || '/' })];
}

// limitsOf is a bar for each limit u has, and its requests in flight when it has no cap on them (an upstream with
// limits counts them whatever they are); "no limits" when it has none: its use of what it has no limit on is not
// counted, so it is not shown.
function limitsOf(u) {
  const lim = u.limits || {}, used = u.used || {};
  const has = (l) => Number(lim[l.limit]) > 0;
  const bars = LIMITS.filter(has).map((l) => limitBar(l.label, Number(used[l.used]) || 0, Number(lim[l.limit]), l.what));
  if (!bars.length) return h('div', { class: 'meters' }, h('span', { class: 'none no-limits', text: 'no limits' }));
  const inFlight = has(LIMITS[2]) ? '' : `${nf.format(Number(used.in_flight) || 0)} in flight`;
  return h('div', { class: 'meters' }, bars, inFlight ? h('span', { class: 'sub', text: inFlight }) : null);
}

// coolingUntil says, prominently, until when an upstream is not sent requests.
function coolingUntil(iso) {
  const t = Date.parse(iso);
  return h('strong', { class: 'cooling-until', title: fmtTime(iso) }, h('span', { text: 'Cooling down until' }), ' ',
    h('time', { datetime: iso, text: Number.isNaN(t) ? iso : clockFmt.format(t) }));
}

// errorsOf is u's errors (429s, 5xx, failed connections), and what share of its requests they are.
function errorsOf(u) {
  const n = Number(u.errors) || 0, of = Number(u.requests) || 0;
  if (!n) return h('span', { class: 'sub errors', text: 'no errors' });
  const pct = of ? n / of * 100 : 0;
  const share = !of ? '' : pct < 0.1 ? ' (<0.1%)' : ` (${pct.toFixed(1)}%)`;
  return h('span', { class: 'sub errors st-bad', text: `${nf.format(n)} error${n === 1 ? '' : 's'}${share}` });
}

// forgetUpstreams drops what the page says of the upstreams (forgetTables empties their table).
export function forgetUpstreams() {
  for (const id of ['#upstreams-updated', '#upstreams-count']) $(id).textContent = '';
}
