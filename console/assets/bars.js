// The bars of token windows and budgets, shown by the keys and teams pages and a key's or team's detail, and of an
// upstream's limits.

import { h } from './dom.js';
import { ago, budgetPer, durSeconds, fmtTime, level, nf, prettyDur, usd } from './format.js';

// fillWidth is a bar's filled part: any use at all shows as a sliver, so that a first request is seen.
function fillWidth(frac) {
  return frac > 0 ? `${Math.min(100, Math.max(2, frac * 100)).toFixed(1)}%` : '0%';
}

// windowBar is one token window: a bar of used / limit, coloured by how full it is, the part of used that
// requests in flight reserve (not charged yet) drawn lighter at its end.
function windowBar(w, reserved, binding = false) {
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
  // The countdown read as an instant, when the answer is shown: a poll answered 304 (the tag ignores countdowns)
  // keeps this text, which stays true while the usage does.
  const reset = w.used > 0 && w.reset_after_seconds > 0
    ? `; back to 0 at ${fmtTime(new Date(Date.now() + w.reset_after_seconds * 1000).toISOString())}` : '';
  const bar = h('div', {
    class: `bar ${level(frac)}`, 'data-window': w.window, 'data-used': w.used, 'data-limit': w.limit,
    role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': w.limit, 'aria-valuenow': Math.min(w.used, w.limit),
    'data-reserved': held,
    'aria-label': `${per} token window`, 'aria-valuetext': `${w.used} of ${w.limit} tokens used${heldText}${reset}`,
    title: `${nf.format(w.used)} of ${nf.format(w.limit)} tokens used in ${per} (${Math.round(frac * 100)}%)${heldText}${reset}`,
  }, h('div', { class: 'bar-track' }, fill), h('span', { class: 'bar-text', text: `${w.used} / ${w.limit}${held > 0 ? ` (${held} reserved)` : ''}` }));
  const label = h('span', { class: 'win-label', text: per });
  if (binding) label.title = 'The binding window: the one that refuses first';
  return h('div', { class: binding ? 'win binding' : 'win', 'data-binding': binding ? 'true' : null }, label, bar);
}

// limitBar is one limit of an upstream (upstreams.js): a bar of used / limit, coloured by how full it is, labelled, with
// the figures beside it; what says what it counts ("tokens in the last minute").
export function limitBar(label, used, limit, what) {
  const frac = limit > 0 ? used / limit : 0;
  const fill = h('div', { class: 'bar-fill' });
  fill.style.width = fillWidth(frac);
  return h('div', {
    class: `limit ${level(frac)}`, 'data-used': used, 'data-limit': limit,
    role: 'meter', 'aria-label': label, 'aria-valuemin': 0, 'aria-valuemax': limit, 'aria-valuenow': Math.min(used, limit),
    'aria-valuetext': `${used} of ${limit} ${what}`, title: `${nf.format(used)} of ${nf.format(limit)} ${what} (${Math.round(frac * 100)}%)`,
  }, h('span', { class: 'limit-label', text: label }), h('div', { class: 'bar-track' }, fill),
  h('span', { class: 'bar-text', text: `${nf.format(used)} / ${nf.format(limit)}` }));
}

// windowsCell is the bars of windows ws, the requests in flight reserving reserved tokens of each; binding is the
// index of the binding window (a model limit's, an end user's), marked when there are more windows than one.
export function windowsCell(ws, reserved, binding = -1) {
  if (!ws || !ws.length) return h('span', { class: 'none', text: 'none' });
  return h('div', { class: 'meters' }, ws.map((w, i) => windowBar(w, reserved, ws.length > 1 && i === binding)));
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

export function budgetsCell(bs) {
  if (!bs || !bs.length) return h('span', { class: 'none', text: 'no budget' });
  return h('div', { class: 'meters' }, bs.map(budgetLine));
}

// limitsText lists a key's or team's other limits: requests per minute, at once, and its models (each isolated).
export function limitsOf(x, anyModel = false) {
  const parts = [];
  if (x.requests_per_minute) parts.push(`${x.requests_per_minute}/min`);
  if (x.max_concurrent) parts.push(`${x.max_concurrent} at once`);
  if (x.models && x.models.length) parts.push(models(x.models));
  else if (anyModel) parts.push('any model');
  if (x.in_flight) parts.push(`${x.in_flight} in flight`);
  return parts.flatMap((p, i) => (i ? [' · ', p] : [p]));
}

// models shows model names or globs, each in its own <bdi>, comma-separated.
export function models(list) {
  return h('span', { class: 'models' }, list.flatMap((m, i) => (i ? [', ', h('bdi', { class: 'model', text: m })] : [h('bdi', { class: 'model', text: m })])));
}

// limitSpecs are limits as a policy sets them, without their usage (a team's model limits, the limits of each end
// user): "100,000 tokens per 5h", "$2.00 per day (UTC)", "10/min", "2 at once".
export function limitSpecs(x) {
  const parts = [];
  for (const w of x.windows || []) parts.push(`${nf.format(w.limit)} tokens per ${prettyDur(durSeconds(w.window))}`);
  for (const b of x.budgets || []) parts.push(`${usd(b.limit_usd)} per ${budgetPer(b)}`);
  if (x.requests_per_minute) parts.push(`${nf.format(x.requests_per_minute)}/min`);
  if (x.max_concurrent) parts.push(`${nf.format(x.max_concurrent)} at once`);
  return parts.flatMap((p, i) => (i ? [' · ', p] : [p]));
}
