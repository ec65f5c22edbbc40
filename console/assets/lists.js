// Paged lists: the keys, the teams and the audit log, a page at a time, searched, filtered and sorted by the
// server. A list holds the page it shows and the cursors of the pages before it, nothing more.

import { path, revalidate } from './api.js';
import { $, $$, clear, h } from './dom.js';

const PAGE_SIZES = [25, 50, 100, 250, 500, 1000];
const DEFAULT_LIMIT = 100;
const MAX_HOPS = 4; // empty pages followed at once (see refresh)
const MAX_STACK = 10000; // cursors kept for Previous; past them the oldest go, and First still goes back

// A PagedList is one page of a list of the admin API: its query (the parameters other than limit and cursor), the
// cursors of the pages before it (Previous pops one), its own and the next one, and the ETag of what it shows. Its
// render is called with it when the page changed, and only then. On mark, the list notes how often it rendered and
// how often a poll found nothing changed (data-renders, data-unchanged: the browser tests read them).
export class PagedList {
  constructor(base, field, render, mark) {
    this.base = base;
    this.field = field; // the answer's list: "keys", "teams", "events"
    this.render = render;
    this.mark = mark;
    this.query = {};
    this.limit = DEFAULT_LIMIT;
    this.renders = 0;
    this.unchanged = 0;
    this.reset();
  }

  // reset goes back to the first page and forgets what is shown.
  reset() {
    this.stack = [];
    this.cursor = '';
    this.next = '';
    this.etag = '';
    this.items = null;
    this.gen = (this.gen || 0) + 1;
  }

  // set replaces the query (and the page size) and goes back to the first page; it reports whether that changed
  // anything.
  set(query, limit = this.limit) {
    if (JSON.stringify(query) === JSON.stringify(this.query) && limit === this.limit) return false;
    this.query = query;
    this.limit = limit;
    this.reset();
    return true;
  }

  // change sets the query and the page size and, when that changed anything, shows the first page they select.
  async change(query, limit = this.limit) {
    if (this.set(query, limit)) await this.refresh();
  }

  url(cursor) {
    return path(this.base, { ...this.query, limit: this.limit, cursor });
  }

  // refresh fetches the page shown with its ETag (without it when force is set) and renders it when it changed. A
  // page may come back empty with a next cursor (the server stops a page whose filters refused as many keys as it
  // may walk): up to MAX_HOPS such pages are followed at once, so that a search shows what it finds.
  async refresh({ force = false } = {}) {
    const gen = this.gen;
    let cursor = this.cursor;
    for (let hop = 0; ; hop++) {
      const tag = force || cursor !== this.cursor || !this.items ? '' : this.etag;
      const r = await revalidate(this.url(cursor), tag);
      if (gen !== this.gen) return;
      if (!r) {
        this.unchanged++;
        this.mark.dataset.unchanged = String(this.unchanged);
        return;
      }
      const items = r.data[this.field] || [];
      if (!items.length && r.data.next_cursor && hop < MAX_HOPS) {
        cursor = r.data.next_cursor;
        continue;
      }
      Object.assign(this, { cursor, next: r.data.next_cursor || '', etag: r.etag, items });
      this.show();
      return;
    }
  }

  // show renders the page, as it is now.
  show() {
    this.renders++;
    this.mark.dataset.renders = String(this.renders);
    this.render(this);
  }

  // go shows the page of a cursor.
  go(cursor) {
    this.cursor = cursor;
    this.etag = '';
    this.items = null;
    this.gen++;
    return this.refresh();
  }

  async forward() {
    if (!this.next) return;
    this.stack.push(this.cursor);
    if (this.stack.length > MAX_STACK) this.stack.splice(0, this.stack.length - MAX_STACK);
    return this.go(this.next);
  }

  async back() {
    if (!this.stack.length) return;
    return this.go(this.stack.pop());
  }

  first() {
    this.stack = [];
    return this.go('');
  }

  get pageNumber() {
    return this.stack.length + 1;
  }
}

// wirePager fills the pager of a list (el, a .pager) and makes it work: its page size, its buttons to the first
// page, the one before and the next (labelled by names: "First", "Previous", "Next" unless told), and where it
// is. onError shows a failure.
export function wirePager(el, list, onError, { noun, names = ['First', 'Previous', 'Next'] }) {
  const size = h('select', { 'data-size': true, 'aria-label': `${noun}s a page` },
    PAGE_SIZES.map((n) => h('option', { value: n, text: `${n} a page`, selected: n === list.limit })));
  const button = (go, text) => h('button', { type: 'button', class: 'secondary', 'data-go': go, text });
  clear(el).append(size, button('first', names[0]), button('back', names[1]), h('span', { class: 'page-no muted' }), button('next', names[2]));
  const act = (fn) => () => fn().catch(onError);
  size.addEventListener('change', act(() => list.change(list.query, Number(size.value))));
  $('[data-go="first"]', el).addEventListener('click', act(() => list.first()));
  $('[data-go="back"]', el).addEventListener('click', act(() => list.back()));
  $('[data-go="next"]', el).addEventListener('click', act(() => list.forward()));
  el.dataset.noun = noun;
}

// showPager shows where a list is: its page number and which buttons work.
export function showPager(el, list) {
  const noun = el.dataset.noun;
  const n = list.items ? list.items.length : 0;
  $('[data-go="first"]', el).disabled = !list.stack.length;
  $('[data-go="back"]', el).disabled = !list.stack.length;
  $('[data-go="next"]', el).disabled = !list.next;
  $('.page-no', el).textContent = `Page ${list.pageNumber} · ${n} ${noun}${n === 1 ? '' : 's'}${list.next ? ', more after' : ''}`;
  const size = $('select[data-size]', el);
  if (size) size.value = String(list.limit);
}

// head fills a table's header: one button per sortable column, so that sorting works from the keyboard. sort is
// the list's sort parameter ("name", "-spend"); onSort gets the new one.
export function head(table, cols, sort, onSort) {
  const sig = JSON.stringify([cols.map((c) => c.label), sort]);
  if (table.headSig === sig) return; // unchanged: keep it, and the focus in it
  table.headSig = sig;
  const desc = sort.startsWith('-');
  const col = desc ? sort.slice(1) : sort;
  const tr = h('tr');
  for (const c of cols) {
    const th = h('th', { scope: 'col', class: c.num ? 'num' : '' });
    if (c.sort) {
      const on = col === c.sort;
      if (on) th.setAttribute('aria-sort', desc ? 'descending' : 'ascending');
      const b = h('button', { type: 'button', class: 'sort', 'data-sort': c.sort },
        c.label, h('span', { class: 'sort-mark', 'aria-hidden': 'true', text: on ? (desc ? '▼' : '▲') : '' }));
      b.addEventListener('click', () => onSort((on ? !desc : c.desc) ? `-${c.sort}` : c.sort));
      th.append(b);
    } else {
      th.append(c.label);
    }
    tr.append(th);
  }
  const focused = table.tHead.contains(document.activeElement) && document.activeElement.dataset.sort;
  clear(table.tHead).append(tr);
  if (focused) $(`button[data-sort="${focused}"]`, table).focus(); // the header is new: keep the focus where it was
}

// reconcile puts rows into tbody in order, keeping the rows that did not change (and the focus in them).
export function reconcile(tbody, items, idOf, sigOf, rowOf) {
  const old = new Map();
  for (const tr of Array.from(tbody.rows)) old.set(tr.dataset.rowId, tr);
  const want = items.map((it) => {
    const id = idOf(it), sig = sigOf(it);
    const tr = old.get(id);
    old.delete(id);
    if (tr && tr.sig === sig) return tr;
    const fresh = rowOf(it);
    fresh.dataset.rowId = id;
    fresh.sig = sig;
    if (tr) {
      const focused = tr.contains(document.activeElement) && document.activeElement.dataset.action;
      tr.replaceWith(fresh);
      if (focused) { const b = $(`[data-action="${focused}"]`, fresh); if (b) b.focus(); }
    }
    return fresh;
  });
  for (const tr of old.values()) tr.remove();
  want.forEach((tr, i) => { if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null); });
}

// forgetTables empties every data table, as on signing out.
export function forgetTables() {
  for (const t of $$('table.data')) { t.headSig = null; for (const part of $$('thead, tbody', t)) clear(part); }
}
