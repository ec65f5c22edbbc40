// The console's state while signed in, and the one poller that keeps the view on screen fresh.

import { $ } from './dom.js';

export const REFRESH_MS = 5000; // the keys and teams pages and a key's or team's detail, while shown

// S is what the page knows of its session. The CSRF token lives here, in this module's memory only: never in
// storage, never in a URL.
export const S = { csrf: null, readOnly: false, page: null, arg: '' };

// Listeners of changes the page made itself (a key saved, a team deleted), so that every view showing the
// thing shows the change at once, without waiting for its next poll.
const listeners = [];

export function onChange(fn) {
  listeners.push(fn);
}

// changed tells the listeners that the page changed what of kind ('key', 'team') has id: obj is the thing as
// the API answered the change, null when it was deleted.
export function changed(kind, id, obj) {
  for (const fn of listeners) fn(kind, id, obj);
}

// The poller. A view is what one page shows: refresh({first, force}) fetches it and renders what changed (with
// the ETag of what it shows, so that an answer of 304 changes nothing), and every is how often to refresh it
// (0: never again). Only the view on screen is refreshed, and only while the tab is visible and no dialog is
// open; hiding the tab stops the timer, showing it refreshes at once.
let view = null;
let gen = 0;
let timer = 0;
let busy = -1; // the generation whose refresh is in flight
let pending = null; // a forced refresh asked for while one was in flight

// show makes v the view on screen and refreshes it now.
export function show(v) {
  stop();
  view = v;
  run(gen, { first: true });
}

// stop forgets the view on screen: nothing is refreshed until the next show.
export function stop() {
  gen++;
  clearTimeout(timer);
  view = null;
  pending = null;
}

// refreshNow refreshes the view on screen at once, without its ETag: after a change the page made.
export function refreshNow() {
  if (view) run(gen, { force: true });
}

async function run(g, opts = {}) {
  if (g !== gen || !view) return;
  if (busy === g) {
    if (opts.force) pending = opts; // what is in flight may have been read before the change
    return;
  }
  clearTimeout(timer);
  const wait = !opts.first && !opts.force && (document.visibilityState !== 'visible' || $('dialog[open]'));
  if (!wait) {
    busy = g;
    try {
      await view.refresh(opts);
    } catch { /* the view shows its own errors */ } finally {
      if (busy === g) busy = -1;
    }
    if (pending && g === gen) {
      const p = pending;
      pending = null;
      run(g, p);
      return;
    }
  }
  schedule(g);
}

function schedule(g) {
  clearTimeout(timer);
  if (g === gen && view && view.every > 0 && document.visibilityState === 'visible') {
    timer = setTimeout(() => run(g), view.every);
  }
}

document.addEventListener('visibilitychange', () => {
  clearTimeout(timer);
  if (document.visibilityState === 'visible' && view) run(gen);
});
