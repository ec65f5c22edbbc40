// harness.mjs is what sdk.mjs and pool.mjs share: the line of the versions
// they run, and run, which runs one scenario and prints its JSON line
// {sdk, scenario, ok, status, error_message, elapsed_ms, detail, ...}.
//
// Env: SCENARIOS (comma-separated "sdk/scenario" names, "sdk/" prefixes, or
// prefixes ending in "*", to run; default all).
import { readFileSync } from 'node:fs';

const only = (process.env.SCENARIOS || '').split(',').map((s) => s.trim()).filter(Boolean);

const version = (pkg) => JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url), 'utf8')).version;

// printVersions prints the first line: node's version and those of pkgs.
export function printVersions(pkgs) {
  console.log(JSON.stringify({
    sdk: 'versions', scenario: 'versions', ok: true, node: process.version,
    detail: Object.fromEntries(pkgs.map((p) => [p, version(p)])),
  }));
}

// apiError reads the API's error object out of an SDK error: openai and
// @anthropic-ai/sdk parse it (e.error); @google/genai's ApiError has the
// whole JSON body as its message, as with the real Gemini API.
function apiError(e) {
  if (e?.error && typeof e.error === 'object') return e.error.error ?? e.error;
  try {
    const b = JSON.parse(e?.message);
    return b?.error ?? null;
  } catch {
    return null;
  }
}

// run runs fn as the scenario sdk/scenario, unless SCENARIOS leaves it
// out, and prints its line: what fn returned as its detail, or what the
// SDK's error shows.
export async function run(sdk, scenario, fn) {
  const name = `${sdk}/${scenario}`;
  const match = (o) => (o.endsWith('/') ? name.startsWith(o) : o.endsWith('*') ? name.startsWith(o.slice(0, -1)) : name === o);
  if (only.length && !only.some(match)) return;
  const t0 = Date.now();
  const line = { sdk, scenario, ok: false, status: 0, error_message: '', elapsed_ms: 0 };
  try {
    line.detail = await fn();
    line.ok = true;
    line.status = 200;
  } catch (e) {
    const ae = apiError(e);
    line.status = e?.status ?? 0;
    line.error_message = String(e?.message ?? e);
    line.error_name = e?.constructor?.name;
    // What a program would show: the API's own message when the SDK parsed
    // one (Anthropic's and Gemini's e.message is the whole JSON body, as with
    // the real APIs).
    line.api_message = e?.apiMessage ?? ae?.message ?? null;
    line.error_type = e?.type ?? ae?.type ?? null;
    line.code = e?.code ?? ae?.code ?? null;
    line.retry_after = e?.headers?.get?.('retry-after') ?? null;
    line.should_retry = e?.headers?.get?.('x-should-retry') ?? null;
  }
  line.elapsed_ms = Date.now() - t0;
  console.log(JSON.stringify(line));
}
