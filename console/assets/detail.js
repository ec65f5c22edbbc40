// A key's page and a team's page: one key or team, polled with its ETag while shown, with links to its requests,
// its keys and its changes in the audit log.

import { failed, item, revalidate } from './api.js';
import { budgetsCell, limitsOf, models, windowsCell } from './bars.js';
import { $, bdi, clear, h, isolate } from './dom.js';
import { ago, compact, fmtTime, usd } from './format.js';
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
  const view = {
    every: REFRESH_MS,
    refresh: async ({ first, force } = {}) => {
      const me = shown;
      try {
        const r = await revalidate(item(kind, id), force || !me.obj ? '' : me.etag);
        if (shown !== me) return;
        if (!r) {
          page.dataset.unchanged = String(Number(page.dataset.unchanged) + 1);
          return;
        }
        me.etag = r.etag;
        render(me, r.data);
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
    h('p', { class: 'links' },
      h('a', { href: `#requests/${encodeURIComponent(k.id)}`, text: 'Its requests' }), ' · ',
      h('a', { href: `#audit/${encodeURIComponent(k.id)}`, text: 'Its changes' })));
  fillNames(body);
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
