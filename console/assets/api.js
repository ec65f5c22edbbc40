// The admin API, as the console calls it: with the session cookie (same origin) and, on a change, the CSRF token.

import { say } from './dom.js';
import { S } from './state.js';

class ApiError extends Error {
  constructor(status, code, message, param) {
    super(message);
    this.status = status;
    this.code = code;
    this.param = param || '';
  }
}

let ended = () => {};

// onSessionEnd sets what a 401 does: the session is gone, back to the sign-in page.
export function onSessionEnd(fn) {
  ended = fn;
}

// send makes one call and returns its response, anything but a 401 or a failure to reach the gateway. The
// browser keeps no answer (cache: no-store): a view that polls keeps the ETag of what it shows and sends it
// itself, as If-None-Match.
async function send(method, path, body, etag) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = S.csrf || '';
  if (etag) headers['If-None-Match'] = etag;
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(path, init);
  } catch {
    throw new ApiError(0, 'network', 'The gateway cannot be reached.');
  }
  if (r.status === 401) {
    if (S.csrf) ended('Your session has ended: sign in again.');
    throw new ApiError(401, 'no_session', 'Signed out.');
  }
  return r;
}

// read returns the JSON body of a successful response, or throws its error body as an ApiError.
async function read(r) {
  if (r.status === 204) return null;
  let data = null;
  try { data = await r.json(); } catch { /* not JSON */ }
  if (!r.ok) {
    const e = data && data.error;
    const err = new ApiError(r.status, e ? e.code : '', e && e.message ? e.message : `${r.status} ${r.statusText}`, e && e.param);
    err.retryAfter = Number(r.headers.get('Retry-After')) || 0;
    throw err;
  }
  return data;
}

// api calls the admin API and returns its JSON answer (null for 204).
export async function api(method, path, body) {
  return read(await send(method, path, body));
}

// revalidate GETs path with the ETag of what is shown (none: ''), and returns null when nothing changed (304),
// else the answer and its ETag.
export async function revalidate(path, etag) {
  const r = await send('GET', path, undefined, etag);
  if (r.status === 304) return null;
  const data = await read(r);
  return { data, etag: r.headers.get('ETag') || '' };
}

// failed shows what went wrong with a call, unless it was the session's end (the sign-in page says so).
export function failed(err) {
  if (err && err.status === 401) return;
  if (err && err.code === 'read_only') say('This console is read-only: nothing can be changed here.', true);
  else say(err && err.message ? err.message : String(err), true);
}

// path builds an API path with the query parameters that have a value.
export function path(base, params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== null && v !== undefined) p.set(k, v);
  const q = p.toString();
  return q ? `${base}?${q}` : base;
}

// item is the API path of a key or team: /admin/keys/{id}.
export function item(kind, id) {
  return `/admin/${kind}s/${encodeURIComponent(id)}`;
}
