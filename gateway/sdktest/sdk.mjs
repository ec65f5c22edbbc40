// sdk.mjs runs the official openai and @anthropic-ai/sdk clients against a
// ratestore gateway and prints one JSON line per scenario:
// {sdk, scenario, ok, status, error_message, elapsed_ms, detail}.
//
// Env: BASE_URL (the gateway, no /v1), API_KEY (a ratestore secret with room),
// FULL_KEY (a secret past its token window), NOMODEL_KEY (a secret whose
// policy refuses the model "forbidden-model"), TIMEOUT_MS (client timeout of
// the refusal scenarios, default 15000: bounds retries that would otherwise
// wait for Retry-After).
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const base = process.env.BASE_URL;
const key = process.env.API_KEY;
const fullKey = process.env.FULL_KEY || 'rs_unset';
const noModelKey = process.env.NOMODEL_KEY || 'rs_unset';
const timeout = Number(process.env.TIMEOUT_MS || 15000);
if (!base || !key) {
  console.error('sdk.mjs: set BASE_URL and API_KEY');
  process.exit(2);
}

const oa = (apiKey, opts = {}) => new OpenAI({ apiKey, baseURL: base + '/v1', ...opts });
const an = (apiKey, opts = {}) => new Anthropic({ apiKey, baseURL: base, ...opts });

async function run(sdk, scenario, fn) {
  const t0 = Date.now();
  const line = { sdk, scenario, ok: false, status: 0, error_message: '', elapsed_ms: 0 };
  try {
    line.detail = await fn();
    line.ok = true;
    line.status = 200;
  } catch (e) {
    line.status = e?.status ?? 0;
    line.error_message = String(e?.message ?? e);
    line.error_name = e?.constructor?.name;
    // What a program would show: the API's own message when the SDK parsed
    // one (Anthropic's e.message is the whole JSON body, as with the real API).
    line.api_message = e?.apiMessage ?? e?.error?.message ?? null;
    line.error_type = e?.type ?? e?.error?.type ?? null;
    line.code = e?.code ?? e?.error?.code ?? null;
    line.retry_after = e?.headers?.get?.('retry-after') ?? null;
    line.should_retry = e?.headers?.get?.('x-should-retry') ?? null;
  }
  line.elapsed_ms = Date.now() - t0;
  console.log(JSON.stringify(line));
}

const msg = [{ role: 'user', content: 'hello' }];
// Refusal scenarios keep the SDKs' default retries; only a timeout bounds them.
const bounded = { timeout };

await run('openai', 'json', async () => {
  const r = await oa(key).chat.completions.create({ model: 'gpt-test', messages: msg });
  return { text: r.choices[0].message.content, usage: r.usage };
});
await run('openai', 'stream_include_usage', async () => {
  const s = await oa(key).chat.completions.create({ model: 'gpt-test', messages: msg, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null, chunks = 0;
  for await (const c of s) { chunks++; text += c.choices[0]?.delta?.content ?? ''; if (c.usage) usage = c.usage; }
  return { text, usage, chunks };
});
await run('openai', 'stream_no_usage', async () => {
  const s = await oa(key).chat.completions.create({ model: 'gpt-test', messages: msg, stream: true });
  let text = '', usage = null, chunks = 0;
  for await (const c of s) { chunks++; text += c.choices[0]?.delta?.content ?? ''; if (c.usage) usage = c.usage; }
  return { text, usage, chunks };
});
await run('anthropic', 'json', async () => {
  const r = await an(key).messages.create({ model: 'claude-test', max_tokens: 64, messages: msg });
  return { text: r.content[0]?.text, usage: r.usage };
});
await run('anthropic', 'stream', async () => {
  const s = an(key).messages.stream({ model: 'claude-test', max_tokens: 64, messages: msg });
  const m = await s.finalMessage();
  return { text: m.content[0]?.text, usage: m.usage };
});
await run('openai', 'unknown_key', async () => {
  await oa('rs_not_a_key', bounded).chat.completions.create({ model: 'gpt-test', messages: msg });
});
await run('anthropic', 'unknown_key', async () => {
  await an('rs_not_a_key', bounded).messages.create({ model: 'claude-test', max_tokens: 64, messages: msg });
});
await run('openai', 'window_exhausted', async () => {
  await oa(fullKey, bounded).chat.completions.create({ model: 'gpt-test', messages: msg });
});
await run('anthropic', 'window_exhausted', async () => {
  await an(fullKey, bounded).messages.create({ model: 'claude-test', max_tokens: 64, messages: msg });
});
await run('openai', 'model_forbidden', async () => {
  await oa(noModelKey, bounded).chat.completions.create({ model: 'forbidden-model', messages: msg });
});
await run('anthropic', 'model_forbidden', async () => {
  await an(noModelKey, bounded).messages.create({ model: 'forbidden-model', max_tokens: 64, messages: msg });
});
