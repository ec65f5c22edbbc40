// The live page: the gateway's requests and tokens per second and its requests in flight, polled while shown.

import { revalidate } from './api.js';
import { $, clear, s } from './dom.js';
import { clockFmt, nf } from './format.js';
import { S, show } from './state.js';

const LIVE_MS = 2000;
const SAMPLES = 60;
const NOTE = 'Averaged over the last 10 seconds, refreshed every 2 seconds; the lines show the last 2 minutes.';

let samples = [];

export function enterLive() {
  samples = [];
  $('#live-note').textContent = NOTE;
  let etag = '';
  const view = {
    every: LIVE_MS,
    refresh: async () => {
      try {
        const r = await revalidate('/admin/live', etag);
        if (S.page !== 'live' || !r) return;
        etag = r.etag;
        showLive(r.data);
      } catch (e) {
        if (e.status === 404) {
          $('#live-note').textContent = 'No live figures here: they come from a running gateway (this console has none).';
          view.every = 0;
        } else if (e.status !== 401) {
          $('#live-note').textContent = `Live figures unavailable: ${e.message}`;
        }
      }
    },
  };
  show(view);
}

function showLive(d) {
  const rps = Number(d.requests_per_second) || 0, tps = Number(d.tokens_per_second) || 0, inf = Number(d.in_flight) || 0;
  samples.push({ rps, tps, inf });
  if (samples.length > SAMPLES) samples.splice(0, samples.length - SAMPLES);
  $('#live-rps').textContent = rps < 10 ? rps.toFixed(2) : rps.toFixed(1);
  $('#live-tps').textContent = tps < 100 ? tps.toFixed(1) : nf.format(Math.round(tps));
  $('#live-inflight').textContent = nf.format(inf);
  spark($('#live-chart'), samples.map((x) => x.rps));
  spark($('#live-chart-tps'), samples.map((x) => x.tps));
  spark($('#live-chart-inflight'), samples.map((x) => x.inf));
  const at = Date.parse(d.time);
  $('#live-time').textContent = `As of ${clockFmt.format(Number.isNaN(at) ? Date.now() : at)}.`;
}

function spark(svg, vals) {
  const W = 300, H = 60;
  clear(svg);
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.append(s('line', { class: 'base', x1: 0, x2: W, y1: H - 1, y2: H - 1, 'vector-effect': 'non-scaling-stroke' }));
  if (!vals.length) return;
  const max = Math.max(...vals, 1e-9);
  const step = W / (SAMPLES - 1);
  const x0 = W - (vals.length - 1) * step;
  const pts = vals.map((v, i) => `${(x0 + i * step).toFixed(1)},${(H - 2 - (v / max) * (H - 6)).toFixed(1)}`);
  svg.append(s('polygon', { points: `${x0.toFixed(1)},${H} ${pts.join(' ')} ${W},${H}` }),
    s('polyline', { points: pts.join(' '), 'vector-effect': 'non-scaling-stroke' }),
    s('title', { text: `last ${vals.length} samples, highest ${max < 10 ? max.toFixed(2) : nf.format(Math.round(max))}` }));
}

export function forgetLive() {
  samples = [];
  $('#live-time').textContent = '';
}
