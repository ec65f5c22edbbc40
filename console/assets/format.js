// Formatting: numbers, money, times and durations as the browser's locale writes them, and command lines.

// Formatters are made on first use: making them all at load would delay the sign-in form.
const fmts = {};
const fmt = (name, make) => (fmts[name] ||= make());
export const nf = { format: (x) => fmt('nf', () => new Intl.NumberFormat()).format(x) };
export const compact = {
  format: (x) => fmt('compact', () => new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 })).format(x),
};
const timeFmt = {
  format: (x) => fmt('time', () => new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short',
  })).format(x),
};
export const clockFmt = {
  format: (x) => fmt('clock', () => new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' })).format(x),
};
export const dayFmt = { format: (x) => fmt('day', () => new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' })).format(x) };
const rel = { format: (v, u) => fmt('rel', () => new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' })).format(v, u) };

export function usd(x) {
  x = Number(x) || 0;
  const a = Math.abs(x);
  const d = a === 0 || a >= 1 ? 2 : a >= 0.01 ? 4 : 6;
  return fmt(`usd${d}`, () => new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: d })).format(x);
}

export function fmtTime(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? '' : timeFmt.format(t);
}

export function ago(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const sec = Math.round((t - Date.now()) / 1000);
  const a = Math.abs(sec);
  if (a < 60) return rel.format(sec, 'second');
  if (a < 3600) return rel.format(Math.round(sec / 60), 'minute');
  if (a < 86400) return rel.format(Math.round(sec / 3600), 'hour');
  return rel.format(Math.round(sec / 86400), 'day');
}

// durSeconds reads a Go duration ("5h0m0s", "90m", "1.5h") as seconds; NaN when it is not one.
export function durSeconds(str) {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0, m, at = 0;
  const unit = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  str = String(str || '').trim();
  if (!str) return NaN;
  while ((m = re.exec(str))) { total += parseFloat(m[1]) * unit[m[2]]; at = re.lastIndex; }
  return at === str.length ? total : NaN;
}

// prettyDur writes seconds the short way a person types them: "5h", "7d", "1h30m".
export function prettyDur(sec) {
  if (!Number.isFinite(sec)) return '';
  if (sec >= 2 * 86400 && sec % 86400 === 0) return `${sec / 86400}d`;
  const hh = Math.floor(sec / 3600), mm = Math.floor((sec % 3600) / 60), ss = Math.round(sec % 60);
  return (hh ? `${hh}h` : '') + (mm ? `${mm}m` : '') + (ss || (!hh && !mm) ? `${ss}s` : '');
}

// goDur turns what a person typed ("5h", "7d", "90m") into a Go duration, or null.
export function goDur(str) {
  str = String(str || '').trim().toLowerCase();
  const d = /^(\d+)d$/.exec(str);
  if (d) return `${Number(d[1]) * 24}h`;
  const sec = durSeconds(str);
  return sec > 0 ? str : null;
}

export function waitText(sec) {
  if (!sec || sec <= 0) return '';
  return prettyDur(sec < 120 ? Math.ceil(sec) : Math.ceil(sec / 60) * 60);
}

export function level(frac) {
  return frac >= 0.9 ? 'lvl-crit' : frac >= 0.7 ? 'lvl-warn' : 'lvl-ok';
}

export function budgetPer(b) {
  if (b.period) return b.timezone && b.timezone !== 'UTC' ? `${b.period} (${b.timezone})` : `${b.period} (UTC)`;
  return prettyDur(durSeconds(b.window));
}

export function tokensOf(c) {
  return (c.input_tokens || 0) + (c.output_tokens || 0) + (c.cache_read_tokens || 0) + (c.cache_write_tokens || 0) + (c.reasoning_tokens || 0);
}

// shellQuote quotes s as one word of a POSIX shell. Between single quotes every character stands for itself ($,
// backquotes, backslashes, double quotes, newlines, any Unicode) but the single quote, which cannot appear there
// at all: each one closes the quotes, adds a backslash-escaped quote, and opens them again ('\''). So whatever a
// name holds, a shell reads it as one argument, byte for byte, and runs nothing of it. Every command line the
// console shows or copies is built from words quoted by this function and fixed text.
export function shellQuote(s) {
  return `'${String(s).replaceAll("'", "'\\''")}'`;
}

// curlCommand is a command line that sends a chat completion of model through the gateway at base with secret.
export function curlCommand(base, secret, model) {
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello' }] });
  return ['curl', shellQuote(`${base}/chat/completions`), '-H', shellQuote(`Authorization: Bearer ${secret}`),
    '-H', shellQuote('Content-Type: application/json'), '-d', shellQuote(body)].join(' ');
}
