// Names of keys and teams, for the places that show their ids (a key's team, the spend by key, a request's key, an
// audit event's target): learned from the pages the console shows, or fetched one by one for the few ids on
// screen, never by listing every key. The cache is bounded; past it, the oldest names are forgotten.

import { api, item, path } from './api.js';
import { $$, clear, debounce, h, isolate } from './dom.js';

const MAX_NAMES = 2000; // names kept, of keys and teams together
const MAX_LOOKUPS = 40; // ids fetched for one screen: past them, an id shows as itself
const PARALLEL = 6;

const names = new Map(); // "key:ID" -> name ('' for none), or null: no such key (deleted)

// remember notes the names of the keys or teams a page showed.
export function remember(kind, list) {
  for (const x of list) put(`${kind}:${x.id}`, x.name || '');
}

// forget drops a name (the thing was deleted, or renamed: the next lookup reads it again).
export function forget(kind, id) {
  names.delete(`${kind}:${id}`);
}

export function forgetNames() {
  names.clear();
}

function put(ref, name) {
  names.delete(ref);
  names.set(ref, name);
  for (const old of names.keys()) {
    if (names.size <= MAX_NAMES) break;
    names.delete(old);
  }
}

// nameOf is the name of a key or team: a string ('' when it has none), null when it does not exist, undefined
// when not known here.
function nameOf(kind, id) {
  return names.get(`${kind}:${id}`);
}

// label is how a key or team is shown in plain text: its name, else its id.
export function label(kind, id) {
  const n = nameOf(kind, id);
  return n ? n : id;
}

// nameRef shows a key or team by name: its name when known (else its id, until fillNames finds it), isolated in a
// <bdi>, and its id under it when withId.
export function nameRef(kind, id, withId = false) {
  const el = h('span', { class: 'ref', 'data-ref': `${kind}:${id}` }, h('bdi', { class: 'ref-name' }), withId ? h('span', { class: 'sub mono', text: id }) : null);
  paint(el, names.get(`${kind}:${id}`), id);
  return el;
}

function paint(el, name, id) {
  const n = el.querySelector('.ref-name');
  n.textContent = name || id;
  n.classList.toggle('mono', !name);
  el.classList.toggle('gone', name === null);
  el.title = name === null ? `${id}: deleted` : name ? id : '';
}

// fillNames fetches the names of the refs under root that are not known yet (at most MAX_LOOKUPS) and shows them.
export async function fillNames(root) {
  const refs = $$('[data-ref]', root);
  const missing = [...new Set(refs.map((el) => el.dataset.ref))].filter((r) => !names.has(r)).slice(0, MAX_LOOKUPS);
  await Promise.all(missing.map(lookup));
  for (const el of refs) {
    if (!el.isConnected) continue;
    const n = names.get(el.dataset.ref);
    if (n !== undefined) paint(el, n, split(el.dataset.ref)[1]);
  }
}

const inflight = new Map(); // ref -> the promise of its lookup
let running = 0;
const waiting = [];

// lookup fetches the name of ref once, however many ask for it meanwhile, PARALLEL lookups at a time.
function lookup(ref) {
  let p = inflight.get(ref);
  if (!p) {
    p = new Promise((resolve) => {
      const go = async () => {
        running++;
        try {
          await fetchName(ref);
        } finally {
          running--;
          inflight.delete(ref);
          if (waiting.length) waiting.shift()();
          resolve();
        }
      };
      if (running < PARALLEL) go(); else waiting.push(go);
    });
    inflight.set(ref, p);
  }
  return p;
}

async function fetchName(ref) {
  const [kind, id] = split(ref);
  try {
    const x = await api('GET', item(kind, id));
    put(ref, x.name || '');
  } catch (e) {
    if (e.status === 404) put(ref, null);
  }
}

function split(ref) {
  const i = ref.indexOf(':');
  return [ref.slice(0, i), ref.slice(i + 1)];
}

// suggest fills the datalist of input with the keys or teams whose name or id starts with what is typed (the
// first 20, searched by the server): the value of an option is the id, its label the name.
export function suggest(input, list, kind) {
  let gen = 0;
  const look = debounce(async () => {
    const q = input.value.trim();
    const g = ++gen;
    if (!q) { clear(list); return; }
    try {
      const d = await api('GET', path(`/admin/${kind}s`, { q, limit: 20 }));
      if (g !== gen) return;
      const found = d[`${kind}s`] || [];
      remember(kind, found);
      clear(list).append(...found.map((x) => h('option', { value: x.id, label: x.name || x.id })));
    } catch { /* no suggestions */ }
  }, 200);
  input.addEventListener('input', look);
}

// resolveTeam reads what was typed in a team field: "" (no team), a team's id (picked from the suggestions), or
// the exact name of one team, looked up. It throws an Error saying what is wrong otherwise.
export async function resolveTeam(text) {
  const v = text.trim();
  if (!v || /^team_/.test(v)) return v;
  const d = await api('GET', path('/admin/teams', { q: v, limit: 20 }));
  const same = (d.teams || []).filter((t) => t.name.toLowerCase() === v.toLowerCase());
  if (same.length === 1) return same[0].id;
  throw new Error(same.length ? `${same.length} teams are named “${isolate(v)}”: pick one from the list.` : `No team is named “${isolate(v)}”: pick one from the list.`);
}
