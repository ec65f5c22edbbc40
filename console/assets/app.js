// ratestore console: one page, no framework, no build step. It talks to the gateway's admin API with the session
// cookie (set by POST /admin/session) and the CSRF token, which it keeps in memory only (state.js). Everything shown
// is built with DOM calls and textContent (dom.js), styled by classes or element.style, which the
// Content-Security-Policy allows. Each page is a module: keys, teams, a key's or team's detail, spend, requests,
// live, upstreams, audit. Lists are pages of the server's (lists.js), and only the view on screen is polled, with its ETag.

import { onSessionEnd } from './api.js';
import { enterAudit, forgetAudit, wireAudit } from './audit.js';
import { enterDetail } from './detail.js';
import { $, $$, say } from './dom.js';
import { forgetEndUsers, wireEndUsers } from './endusers.js';
import { waitText } from './format.js';
import { baseURL, wireForms } from './forms.js';
import { enterKeys, forgetKeys, wireKeys } from './keys.js';
import { enterLive, forgetLive } from './live.js';
import { forgetTables } from './lists.js';
import { forgetNames } from './names.js';
import { enterRequests, forgetRequests, wireRequests } from './requests.js';
import { enterSpend, forgetSpend, wireSpend } from './spend.js';
import { S, stop } from './state.js';
import { enterTeams, forgetTeams, wireTeams } from './teams.js';
import { enterUpstreams, forgetUpstreams } from './upstreams.js';

// PAGES are the console's pages by the first part of the hash (#keys, #key/key_..., #audit/team_...), each with
// the navigation link it is under, its title, and what shows it (given the hash's second part).
const PAGES = {
  keys: { nav: 'keys', title: 'Keys', enter: enterKeys },
  key: { nav: 'keys', title: 'Key', enter: (id) => enterDetail('key', id) },
  teams: { nav: 'teams', title: 'Teams', enter: enterTeams },
  team: { nav: 'teams', title: 'Team', enter: (id) => enterDetail('team', id) },
  spend: { nav: 'spend', title: 'Spend', enter: (key) => enterSpend(key) },
  requests: { nav: 'requests', title: 'Requests', enter: enterRequests },
  live: { nav: 'live', title: 'Live', enter: enterLive },
  upstreams: { nav: 'upstreams', title: 'Upstreams', enter: enterUpstreams },
  audit: { nav: 'audit', title: 'Audit log', enter: (t) => enterAudit(t || '') },
};

// ---------- sign-in, session, sign-out ----------

async function boot() {
  wire();
  try {
    const r = await fetch('/admin/session', { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } });
    if (r.ok) signedIn(await r.json());
    else showSignin('');
  } catch {
    showSignin('The gateway cannot be reached.');
  }
  document.body.classList.remove('booting');
}

function signedIn(sess) {
  S.csrf = sess.csrf;
  S.readOnly = !!sess.read_only;
  document.body.classList.toggle('readonly', S.readOnly);
  $('#readonly-banner').hidden = !S.readOnly;
  $('#top').hidden = false;
  $('#page-signin').hidden = true;
  for (const el of $$('.base-url')) el.textContent = baseURL();
  S.page = null;
  if (!PAGES[parse().page]) history.replaceState(null, '', '#keys');
  route(false);
}

function showSignin(msg) {
  stop();
  S.csrf = null;
  S.readOnly = false;
  forget();
  for (const d of $$('dialog[open]')) d.close();
  document.body.classList.remove('readonly');
  $('#top').hidden = true;
  $('#readonly-banner').hidden = true;
  for (const p of $$('main > section.page')) p.hidden = true;
  $('#page-signin').hidden = false;
  $('#signin-error').textContent = msg || '';
  document.title = 'Sign in · ratestore console';
  S.page = null;
  $('#token').focus();
}

// forget drops everything read while signed in, from memory and from the page.
function forget() {
  forgetKeys(); forgetTeams(); forgetEndUsers(); forgetSpend(); forgetRequests(); forgetLive(); forgetUpstreams(); forgetAudit(); forgetNames();
  forgetTables();
  for (const id of ['#keys-updated']) $(id).textContent = '';
}

async function signIn(ev) {
  ev.preventDefault();
  const input = $('#token'), btn = $('#signin'), err = $('#signin-error');
  const token = input.value.trim();
  if (!token) { err.textContent = 'Enter the admin token.'; input.focus(); return; }
  btn.disabled = true;
  err.textContent = '';
  try {
    const r = await fetch('/admin/session', {
      method: 'POST', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify({ token }),
    });
    input.value = '';
    if (r.ok) {
      signedIn(await r.json());
      return;
    }
    err.textContent = await signInError(r);
    input.focus();
  } catch {
    err.textContent = 'The gateway cannot be reached.';
  } finally {
    btn.disabled = false;
  }
}

async function signInError(r) {
  if (r.status === 401) return 'That is not the admin token.';
  if (r.status === 429) return `Too many failed attempts: try again in ${waitText(Number(r.headers.get('Retry-After')) || 60)}.`;
  let m = `${r.status} ${r.statusText}`;
  try { const d = await r.json(); if (d.error && d.error.message) m = d.error.message; } catch { /* keep status */ }
  return m;
}

async function signOut() {
  try {
    await fetch('/admin/session', { method: 'DELETE', credentials: 'same-origin', cache: 'no-store', headers: { 'X-CSRF-Token': S.csrf || '' } });
  } catch { /* signed out either way */ }
  showSignin('');
  say('Signed out.');
}

// ---------- pages ----------

// parse reads the hash: #page or #page/arg.
function parse() {
  const hash = location.hash.slice(1);
  const i = hash.indexOf('/');
  const page = i < 0 ? hash : hash.slice(0, i);
  let arg = '';
  try { arg = i < 0 ? '' : decodeURIComponent(hash.slice(i + 1)); } catch { /* not encoded: none */ }
  return { page, arg };
}

function route(focus = true) {
  if (!S.csrf) return;
  let { page, arg } = parse();
  if (!PAGES[page]) { page = 'keys'; arg = ''; }
  if ((page === 'key' || page === 'team') && !arg) page = `${page}s`;
  if (page === S.page && arg === S.arg) return;
  stop();
  S.page = page;
  S.arg = arg;
  const p = PAGES[page];
  for (const sec of $$('main > section.page')) sec.hidden = sec.id !== `page-${page}`;
  for (const a of $$('nav a[data-page]')) {
    if (a.dataset.page === p.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${p.title} · ratestore console`;
  if (focus) $(`#page-${page} h1`).focus({ preventScroll: true });
  p.enter(arg);
}

// ---------- wiring ----------

function wire() {
  onSessionEnd(showSignin);
  $('#signin-form').addEventListener('submit', signIn);
  $('#signout').addEventListener('click', signOut);
  window.addEventListener('hashchange', () => route(true));
  wireKeys();
  wireTeams();
  wireForms();
  wireEndUsers();
  wireSpend();
  wireRequests();
  wireAudit();
  for (const b of $$('.copy-base')) {
    b.addEventListener('click', async () => {
      try { await navigator.clipboard.writeText(baseURL()); say('Base URL copied.'); } catch { say(`Base URL: ${baseURL()}`); }
    });
  }
}

boot();
