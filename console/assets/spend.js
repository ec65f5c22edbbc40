// The spend page: cost per day stacked by model, key or team (or, of one key, by its end users), the top keys (of one
// key, its end users) and models, and the refusals.

import { api, failed, path } from './api.js';
import { $, bdi, clear, h, isolate, s, say } from './dom.js';
import { compact, dayFmt, nf, tokensOf, usd } from './format.js';
import { requestsOf } from './endusers.js';
import { fillNames, label, nameRef, suggest } from './names.js';
import { S } from './state.js';

const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f'];
const OTHER_COLOR = '#9aa3ad';
const SERIES = 8; // series of the chart of their own: the top ones by cost over the range; the rest are "other"
const TOP = 10; // rows of the top keys and models tables
const REASONS = {
  window: 'token window full', budget: 'budget spent', rate: 'requests per minute', concurrency: 'too many at once',
  model: 'model not allowed', disabled: 'key disabled', expired: 'key expired', unknown_key: 'unknown key',
};

let spend = null; // what the page shows
let gen = 0;

function todayUTC() {
  return new Date().toISOString().slice(0, 10);
}

function addDays(day, n) {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

// enterSpend shows the spend page; arg, when given, is a key's id (a key's page links here): its spend, stacked by
// its end users.
export function enterSpend(arg) {
  if (arg) {
    $('#spend-key').value = arg;
    $('#spend-stack').value = 'end_user';
  }
  keyChosen();
  if (!$('#spend-to').value) $('#spend-to').value = todayUTC();
  if (!$('#spend-from').value) $('#spend-from').value = addDays($('#spend-to').value, -13);
  loadSpend();
}

// loadSpend reads the range's spend three ways, each bounded by the server's limit: by day and the stacked
// dimension (its top SERIES and one "other" row a day), and the top keys and models over the range. Only the keys
// and teams those name are looked up, for their names.
async function loadSpend() {
  keyChosen();
  const from = $('#spend-from').value, to = $('#spend-to').value, stack = $('#spend-stack').value, key = $('#spend-key').value.trim();
  if (!/^\d{4}-\d{2}-\d{2}$/.test(from) || !/^\d{4}-\d{2}-\d{2}$/.test(to)) { say('Spend: choose both days.', true); return; }
  if (from > to) { say('Spend: the first day is after the last.', true); return; }
  const g = ++gen;
  const range = { from, to: addDays(to, 1), key };
  const get = (group, limit) => api('GET', `${path('/admin/spend', { ...range, limit })}&${group.map((x) => `group_by=${x}`).join('&')}`);
  try {
    // Of one key, the top table is of its end users rather than of keys (it would have one row).
    const [byDay, byKey, byModel] = await Promise.all([get(['day', stack], SERIES), get([key ? 'end_user' : 'key'], TOP), get(['model'], TOP)]);
    if (g !== gen || S.page !== 'spend') return;
    if (stack === 'key' || stack === 'team') await namesOf(stack, byDay.rows);
    if (g !== gen || S.page !== 'spend') return;
    spend = { from, to, stack, key, byDay, byKey, byModel };
    renderSpend();
  } catch (e) {
    if (g === gen) failed(e);
  }
}

// namesOf looks up the names of the keys or teams of rows, which are at most SERIES: the chart's legend and tooltips
// name them in plain text.
async function namesOf(kind, rows) {
  const ids = [...new Set((rows || []).filter((r) => !r.other && r[kind]).map((r) => r[kind]))];
  await fillNames(h('div', {}, ids.map((id) => nameRef(kind, id))));
}

// keyChosen enables stacking by end user when a key is chosen, and falls back to stacking by model when none is:
// the API would read every key's rollups of end users for it, the console asks for one key's.
function keyChosen(ev) {
  const key = $('#spend-key').value.trim();
  const opt = $('#spend-stack option[value="end_user"]');
  opt.disabled = !key;
  if (!key && $('#spend-stack').value === 'end_user') $('#spend-stack').value = 'model';
  if (ev && ev.type === 'input') return; // its name once chosen, not at each letter typed
  const box = clear($('#spend-key-name'));
  if (key) {
    box.append(nameRef('key', key));
    fillNames(box);
  }
}

function seriesLabel(stack, v) {
  if (stack === 'end_user') return v === '(other)' ? '(past the day\u2019s top 256)' : v || '(no end user named)';
  if (stack === 'key') return v ? label('key', v) : '(no key)';
  if (stack === 'team') return v ? label('team', v) : '(no team)';
  return v || '(no model)';
}

function renderSpend() {
  const sp = spend;
  if (!sp) return;
  const t = sp.byDay.total || {};
  const sum = clear($('#spend-summary'));
  for (const [v, l] of [[usd(t.cost_usd), 'cost'], [nf.format(t.requests || 0), 'requests'], [compact.format(tokensOf(t)), 'tokens'],
    [nf.format(t.refused || 0), 'refused']]) {
    sum.append(h('div', { class: 'card' }, h('div', { class: 'v', text: v }), h('div', { class: 'l', text: l })));
  }
  renderChart();
  if (sp.key) {
    $('#top-keys-title').textContent = 'Top end users of the key';
    topTable($('#top-keys'), 'End user', sp.byKey.rows || [], (r) => r.end_user,
      (v) => endUserCell(sp.key, v),
      'all other end users');
  } else {
    $('#top-keys-title').textContent = 'Top keys';
    topTable($('#top-keys'), 'Key', sp.byKey.rows || [], (r) => r.key, (v) => nameRef('key', v, true), 'all other keys');
  }
  topTable($('#top-models'), 'Model', sp.byModel.rows || [], (r) => r.model, (v) => bdi(v || '(none)', { class: 'mono' }), 'all other models');
  fillNames($('#top-keys'));
  renderRefusals(t);
}

function renderRefusals(t) {
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

// topTable lists the top rows by cost, the row of all the others last.
// endUserCell is an end user's name in the top table, linked to its requests; the ledger's row of the end users
// past a day's top ones (its rollups keep 256 a day) and the requests that named none are not names.
function endUserCell(key, v) {
  if (!v) return h('span', { class: 'none', text: '(no end user named)' });
  if (v === '(other)') return h('span', { class: 'none', title: "The end users past each day's top 256, which the ledger adds up in one row", text: '(past the day\u2019s top 256)' });
  return h('a', { href: requestsOf(key, v), title: `The requests of ${isolate(v)}` }, bdi(v, { class: 'end-user' }));
}

function topTable(table, title, rows, dim, cell, others) {
  clear(table);
  table.append(h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: title }), h('th', { scope: 'col', class: 'num', text: 'Requests' }),
    h('th', { scope: 'col', class: 'num', text: 'Tokens' }), h('th', { scope: 'col', class: 'num', text: 'Cost' }))));
  const tb = h('tbody');
  const top = rows.filter((r) => r.requests || r.refused || Number(r.cost_usd))
    .sort((a, b) => (!!a.other - !!b.other) || (b.cost_usd - a.cost_usd) || (b.requests - a.requests));
  for (const r of top) {
    const v = dim(r) || '';
    tb.append(h('tr', { 'data-id': r.other ? '' : v, 'data-other': r.other ? 'true' : null },
      h('td', {}, r.other ? h('span', { class: 'none', text: others }) : cell(v)),
      h('td', { class: 'num' }, nf.format(r.requests || 0), r.refused ? h('span', { class: 'sub', text: `${nf.format(r.refused)} refused` }) : null),
      h('td', { class: 'num', text: compact.format(tokensOf(r)), title: `${nf.format(tokensOf(r))} tokens` }),
      h('td', { class: 'num', 'data-cost': r.cost_usd, text: usd(r.cost_usd) })));
  }
  if (!top.length) tb.append(h('tr', {}, h('td', { colspan: 4, class: 'none', text: 'Nothing in this range.' })));
  table.append(tb);
}

// chartCells adds the rows up by day and series: the series are the stacked dimension's values, ranked by what
// they add up to over the range, and "other" (the server's row of the rest) last, so that each series keeps its
// colour from day to day.
function chartCells(sp, val) {
  const OTHER = '\u0000other';
  const rows = (sp.byDay.rows || []).filter((r) => r.requests > 0 || Number(r.cost_usd) > 0);
  const keyOf = (r) => (r.other ? OTHER : r[sp.stack] || '');
  const tot = new Map();
  for (const r of rows) tot.set(keyOf(r), (tot.get(keyOf(r)) || 0) + val(r) + 1e-12 * (r.requests || 0));
  const series = [...tot.keys()].filter((k) => k !== OTHER).sort((a, b) => tot.get(b) - tot.get(a) || (a < b ? -1 : 1));
  if (tot.has(OTHER)) series.push(OTHER);
  const cells = new Map();
  for (const r of rows) {
    if (!cells.has(r.day)) cells.set(r.day, new Map());
    const m = cells.get(r.day), k = keyOf(r);
    const c = m.get(k) || { v: 0, cost: 0, requests: 0 };
    c.v += val(r); c.cost += Number(r.cost_usd) || 0; c.requests += r.requests || 0;
    m.set(k, c);
  }
  return {
    rows, series, cells,
    isOther: (k) => k === OTHER,
    color: (k) => (k === OTHER ? OTHER_COLOR : PALETTE[series.indexOf(k) % PALETTE.length]),
    label: (k) => (k === OTHER ? 'other' : seriesLabel(sp.stack, k)),
  };
}

// renderChart draws cost per day, stacked by the chosen dimension, as SVG: one rect per (day, series) with
// data-day, data-series (the key's, team's or model's value; "(other)" for the rest) and data-cost, and a <title>
// as its tooltip. When nothing cost anything (no prices for the models) it stacks requests instead, and says so.
function renderChart() {
  const sp = spend;
  const svg = clear($('#spend-chart'));
  const days = [];
  for (let d = sp.from; d <= sp.to && days.length < 800; d = addDays(d, 1)) days.push(d);
  const all = (sp.byDay.rows || []);
  const byCost = all.some((r) => Number(r.cost_usd) > 0) || !all.some((r) => r.requests > 0);
  const val = (r) => (byCost ? Number(r.cost_usd) || 0 : r.requests || 0);
  const c = chartCells(sp, val);
  const by = sp.stack === 'end_user' ? 'end user of the key' : sp.stack;
  $('#spend-caption').textContent = byCost
    ? `Cost per day (USD), by ${by}`
    : `Requests per day, by ${by}: nothing had a cost (no price for these models)`;
  let maxDay = 0;
  for (const m of c.cells.values()) { let t = 0; for (const x of m.values()) t += x.v; maxDay = Math.max(maxDay, t); }
  const W = Math.max(300, Math.floor($('#spend-chart-box').clientWidth || 800));
  const H = W < 520 ? 220 : 280;
  const M = { l: W < 520 ? 48 : 64, r: 10, t: 12, b: 40 };
  const g = { W, H, M, pw: W - M.l - M.r, ph: H - M.t - M.b, days, byCost };
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('width', W);
  svg.setAttribute('height', H);
  const ticks = niceTicks(maxDay);
  g.top = ticks[ticks.length - 1] || 1;
  g.y = (v) => M.t + g.ph - (v / g.top) * g.ph;
  svg.append(...axes(g, ticks), bars(g, c));
  if (!c.rows.length) {
    svg.append(s('text', { class: 'chart-note', x: M.l + g.pw / 2, y: M.t + g.ph / 2, 'text-anchor': 'middle', text: 'No requests in this range.' }));
  }
  legend(c, byCost);
}

function axes(g, ticks) {
  const { W, H, M, pw, ph, days } = g;
  const grid = s('g', { class: 'grid' }), axis = s('g', { class: 'axis' });
  for (const tv of ticks) {
    grid.append(s('line', { x1: M.l, x2: W - M.r, y1: g.y(tv), y2: g.y(tv) }));
    axis.append(s('text', { x: M.l - 6, y: g.y(tv) + 4, 'text-anchor': 'end', text: g.byCost ? usdTick(tv) : compact.format(tv) }));
  }
  axis.append(s('line', { x1: M.l, x2: W - M.r, y1: M.t + ph, y2: M.t + ph }));
  const band = pw / days.length;
  const every = Math.max(1, Math.ceil(days.length / Math.max(1, Math.floor(pw / 56))));
  days.forEach((d, i) => {
    if (i % every === 0 || days.length === 1) {
      axis.append(s('text', { x: M.l + band * i + band / 2, y: M.t + ph + 16, 'text-anchor': 'middle', text: dayFmt.format(Date.parse(`${d}T00:00:00Z`)) }));
    }
  });
  axis.append(s('text', { x: M.l + pw / 2, y: H - 4, 'text-anchor': 'middle', text: 'day (UTC)' }));
  if (W >= 520) axis.append(s('text', { x: 12, y: M.t + ph / 2, 'text-anchor': 'middle', transform: `rotate(-90 12 ${M.t + ph / 2})`, text: g.byCost ? 'USD' : 'requests' }));
  return [grid, axis];
}

function bars(g, c) {
  const band = g.pw / g.days.length;
  const bw = Math.max(1, Math.min(48, band * 0.72));
  const out = s('g', { class: 'bars' });
  g.days.forEach((d, i) => {
    const m = c.cells.get(d);
    if (!m) return;
    let acc = 0;
    for (const k of c.series) {
      const x = m.get(k);
      if (!x) continue;
      const y0 = g.y(acc), y1 = g.y(acc + x.v);
      acc += x.v;
      out.append(s('rect', {
        class: 'seg', x: (g.M.l + band * i + (band - bw) / 2).toFixed(1), y: y1.toFixed(1), width: bw.toFixed(1),
        height: Math.max(0, y0 - y1).toFixed(1), fill: c.color(k),
        'data-day': d, 'data-series': c.isOther(k) ? '(other)' : k, 'data-other': c.isOther(k) ? 'true' : null,
        'data-cost': x.cost, 'data-requests': x.requests,
      }, s('title', { text: `${d} · ${isolate(c.label(k))}: ${usd(x.cost)}, ${nf.format(x.requests)} requests` })));
    }
  });
  return out;
}

function legend(c, byCost) {
  const el = clear($('#spend-legend'));
  for (const k of c.series) {
    const sw = h('span', { class: 'swatch', 'aria-hidden': 'true' });
    sw.style.background = c.color(k);
    const total = [...c.cells.values()].reduce((a, m) => a + (m.get(k) ? m.get(k).v : 0), 0);
    el.append(h('li', { 'data-series': c.isOther(k) ? '(other)' : k }, sw, c.isOther(k) ? h('span', { class: 'none', text: 'other' }) : bdi(c.label(k)), ' ',
      h('span', { class: 'muted total', text: byCost ? usd(total) : nf.format(total) })));
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

// spendModels are the models the last spend shown names, for the requests page's suggestions.
export function spendModels() {
  return spend ? (spend.byModel.rows || []).filter((r) => r.model && !r.other).map((r) => r.model) : [];
}

export function forgetSpend() {
  spend = null;
  gen++;
  for (const id of ['#spend-chart', '#spend-legend', '#spend-summary', '#top-keys', '#top-models', '#refusals', '#spend-key-name']) clear($(id));
  $('#spend-key').value = '';
}

export function wireSpend() {
  $('#spend-form').addEventListener('submit', (e) => { e.preventDefault(); loadSpend(); });
  $('#spend-stack').addEventListener('change', loadSpend);
  $('#spend-key').addEventListener('change', loadSpend);
  $('#spend-key').addEventListener('input', keyChosen);
  suggest($('#spend-key'), $('#spend-key-list'), 'key');
  for (const id of ['#spend-from', '#spend-to']) $(id).addEventListener('change', () => { if ($(id).value) loadSpend(); });
  let resize = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resize);
    resize = setTimeout(() => { if (S.page === 'spend' && spend) renderChart(); }, 150);
  });
}
