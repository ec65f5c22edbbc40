// A key's page and a team's page: one key or team, polled with its ETag while shown, with links to its requests,
// its keys and its changes in the audit log.

import { failed, item, revalidate } from './api.js';
import { budgetsCell, limitSpecs, limitsOf, models, windowsCell } from './bars.js';
import { $, bdi, clear, h, isolate } from './dom.js';
import { enterEndUsers, refreshEndUsers } from './endusers.js';
import { ago, compact, fmtTime, nf, usd } from './format.js';
import { keyAct, keyButtons, keyStatus, keysOfTeam, statusNotes } from './keys.js';
import { fillNames, nameRef, remember } from './names.js';
import { REFRESH_MS, S, onChange, show } from './state.js';
import { teamAct, teamButtons } from './teams.js';

// shown is the key or team on screen: its kind, id and, once read, the thing as the API answered it.
let shown = { kind: '', id: '', obj: null, etag: '' };

// enterDetail shows the key or team of id (kind 'key' or 'team'), and polls it while it is shown.
export function enterDetail(kind, id) {
  shown = { kind, id, obj: null, etag: '' };
  const page = $(`#page-${kind}`);
  page.dataset.renders = '0';
  page.dataset.unchanged = '0';
  clear($(`#${kind}-body`));
  clear($(`#${kind}-actions`));
  $(`#${kind}-title`).textContent = kind === 'key' ? 'Key' : 'Team';
  if (kind === 'key') enterEndUsers(id);
  const view = {
    every: REFRESH_MS,
    refresh: async ({ first, force } = {}) => {
      const me = shown;
      try {
        const r = await revalidate(item(kind, id), force || !me.obj ? '' : me.etag);
        if (shown !== me) return;
        if (!r) {
          page.dataset.unchanged = String(Number(page.dataset.unchanged) + 1);
        } else {
          me.etag = r.etag;
          render(me, r.data);
        }
        // A key's end users: one page of them, with its own ETag, after the key (which says whether it limits them).
        if (kind === 'key' && me.obj) await refreshEndUsers(id, !!me.obj.end_users, { first, force });
      } catch (e) {
        if (shown !== me) return;
        if (e.status === 404) {
          view.every = 0;
          gone(kind, id);
        } else if (first) failed(e);
        throw e;
      }
    },
  };
  show(view);
}

function render(me, obj) {
  me.obj = obj;
  remember(me.kind, [obj]);
  const page = $(`#page-${me.kind}`);
  page.dataset.renders = String(Number(page.dataset.renders) + 1);
  if (me.kind === 'key') renderKey(obj); else renderTeam(obj);
  document.title = `${isolate(obj.name || obj.id)} · ratestore console`;
}

function gone(kind, id) {
  $(`#${kind}-title`).textContent = kind === 'key' ? 'No such key' : 'No such team';
  clear($(`#${kind}-actions`));
  clear($(`#${kind}-body`)).append(h('div', { class: 'empty' },
    h('p', {}, `There is no ${kind} `, h('code', { text: id }), ': it was deleted, or never was.'),
    h('p', {}, h('a', { href: `#audit/${encodeURIComponent(id)}`, text: 'Its changes in the audit log' }))));
}

// facts is a list of terms and what they are; a fact without a value is left out.
function facts(rows) {
  const none = (d) => d === null || d === undefined || d === '' || (Array.isArray(d) && !d.length);
  return h('dl', { class: 'facts' }, rows.filter((r) => !none(r[1])).flatMap(([t, d]) => [h('dt', { text: t }), h('dd', {}, d)]));
}

function orNone(parts) {
  return parts.length ? parts : h('span', { class: 'none', text: 'no other limit' });
}

function when(iso, never) {
  return iso ? h('span', { title: fmtTime(iso) }, `${ago(iso)} (${fmtTime(iso)})`) : h('span', { class: 'none', text: never });
}

function renderKey(k) {
  const st = keyStatus(k);
  $('#key-title').replaceChildren(bdi(k.name || '(no name)'));
  const acts = clear($('#key-actions'));
  if (!S.readOnly) {
    const btns = keyButtons(k, st);
    btns.addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-action]');
      if (b) keyAct(b.dataset.action, k, b);
    });
    acts.append(btns);
  }
  const team = k.team ? h('a', { href: `#team/${encodeURIComponent(k.team)}` }, nameRef('team', k.team, true)) : h('span', { class: 'none', text: 'none' });
  const body = clear($('#key-body'));
  body.append(
    h('div', { class: 'detail-grid' },
      h('div', { class: 'card' }, h('h2', { text: 'Key' }), facts([
        ['Id', h('code', { text: k.id })],
        ['Status', h('span', { 'data-status': st, class: 'status-cell' }, h('span', { class: 'pill', text: st }), statusNotes(k, st))],
        ['Team', team],
        ['Models', k.models && k.models.length ? models(k.models) : h('span', { class: 'none', text: 'any model' })],
        ['Limits', orNone(limitsOf({ ...k, models: [], in_flight: 0 }))],
        ['Spent', `${usd(k.lifetime_usd)} · ${compact.format(k.lifetime_tokens || 0)} tokens in all`],
        ['Last used', when(k.last_used, 'never')],
        ['Created', when(k.created_at, 'unknown')],
        ['Expires', k.expires_at ? when(k.expires_at) : null],
      ])),
      h('div', { class: 'card' }, h('h2', { text: 'Token windows' }), windowsCell(k.windows, k.reserved_tokens),
        h('h2', { class: 'second', text: 'Budgets' }), budgetsCell(k.budgets))),
    subLimits(k, k.model_usage || []),
    h('p', { class: 'links' },
      h('a', { href: `#requests/${encodeURIComponent(k.id)}`, text: 'Its requests' }), ' · ',
      h('a', { href: `#spend/${encodeURIComponent(k.id)}`, text: 'Its spend by end user' }), ' · ',
      h('a', { href: `#audit/${encodeURIComponent(k.id)}`, text: 'Its changes' })));
  fillNames(body);
}

// subLimits are the cards of a key's or team's limits per model (with their usage, from a key's model_usage) and
// of each of its end users; nothing when it has neither.
function subLimits(x, usage) {
  const cards = [];
  const ms = x.model_limits || [];
  if (ms.length) {
    const team = !usage;
    cards.push(h('div', { class: 'card sublimits', id: 'model-limits' },
      h('h2', { text: team ? 'Limits per model, shared by its keys' : 'Limits per model' }),
      h('ul', { class: 'model-limits' }, ms.map((m, i) => modelLimit(m, usage && usage[i] && sameGlobs(usage[i].models, m.models) ? usage[i] : null, team)))));
  }
  const eu = x.end_users;
  if (eu) {
    const specs = limitSpecs(eu);
    cards.push(h('div', { class: 'card sublimits', id: 'end-user-policy' },
      h('h2', { text: 'Limits of each end user' }),
      facts([
        ['Each end user', specs.length ? h('span', { class: 'specs' }, specs) : h('span', { class: 'none', text: 'no limit' })],
        ['Required', eu.required ? h('span', { class: 'required' }, h('span', { class: 'pill', text: 'required' }),
          h('span', { class: 'sub', text: 'a request that names no end user is refused' })) : h('span', { class: 'none', text: 'no: a request may name none' })],
      ]),
      h('p', { class: 'muted note', text: usage ? 'An end user is the key’s own customer, named by the request: see End users below.'
        : 'Each end user of its keys has these limits, counted across its keys.' })));
  }
  return cards.length ? h('div', { class: 'detail-grid subs' }, cards) : null;
}

function sameGlobs(a, b) {
  return JSON.stringify(a || []) === JSON.stringify(b || []);
}

// modelLimit is one limit per model: its globs, then its usage (a key's) or its limits as set (a team's).
function modelLimit(m, u, team) {
  const li = h('li', { class: 'model-limit', 'data-models': JSON.stringify(m.models || []) },
    h('div', { class: 'ml-models' }, models(m.models || [])));
  if (u) {
    if (u.windows && u.windows.length) li.append(windowsCell(u.windows, 0, u.binding));
    if (u.budgets && u.budgets.length) li.append(budgetsCell(u.budgets));
    const other = [];
    if (m.requests_per_minute) other.push(`${nf.format(m.requests_per_minute)}/min`);
    if (m.max_concurrent) other.push(`${nf.format(m.max_concurrent)} at once`);
    if (u.in_flight) other.push(`${nf.format(u.in_flight)} in flight`);
    if (other.length) li.append(h('span', { class: 'sub', text: other.join(' · ') }));
    if (!u.windows?.length && !u.budgets?.length && !other.length) li.append(h('span', { class: 'none', text: 'no limit' }));
  } else {
    const specs = limitSpecs(m);
    li.append(specs.length ? h('span', { class: 'specs' }, specs) : h('span', { class: 'none', text: 'no limit' }));
    if (!team) li.append(h('span', { class: 'sub', text: 'usage not known yet' }));
  }
  return li;
}

function renderTeam(t) {
  $('#team-title').replaceChildren(bdi(t.name || '(no name)'));
  const acts = clear($('#team-actions'));
  if (!S.readOnly) {
    const btns = teamButtons(t);
    btns.addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-action]');
      if (b) teamAct(b.dataset.action, t, b);
    });
    acts.append(btns);
  }
  const n = t.key_count || 0;
  const keysLink = h('a', { href: '#keys', 'data-keys': n, text: `${n} key${n === 1 ? '' : 's'}` });
  keysLink.addEventListener('click', (ev) => { ev.preventDefault(); keysOfTeam(t.id); });
  clear($('#team-body')).append(
    h('div', { class: 'detail-grid' },
      h('div', { class: 'card' }, h('h2', { text: 'Team' }), facts([
        ['Id', h('code', { text: t.id })],
        ['Keys', keysLink],
        ['Models', t.models && t.models.length ? models(t.models) : h('span', { class: 'none', text: 'any model' })],
        ['Limits', orNone(limitsOf({ ...t, models: [] }))],
        ['Created', when(t.created_at, 'unknown')],
      ])),
      h('div', { class: 'card' }, h('h2', { text: 'Token windows, shared by its keys' }), windowsCell(t.windows),
        h('h2', { class: 'second', text: 'Budgets' }), budgetsCell(t.budgets))),
    subLimits(t, null),
    h('p', { class: 'links' }, h('a', { href: `#audit/${encodeURIComponent(t.id)}`, text: 'Its changes' })));
}

onChange((kind, id, obj) => {
  if (kind !== shown.kind || id !== shown.id || S.page !== kind) return;
  if (!obj) {
    location.hash = kind === 'key' ? '#keys' : '#teams';
    return;
  }
  shown.etag = '';
  render(shown, obj);
});
