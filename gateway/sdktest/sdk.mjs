// sdk.mjs runs the official openai, @anthropic-ai/sdk and @google/genai
// clients against a ratestore gateway and prints one JSON line per scenario:
// {sdk, scenario, ok, status, error_message, elapsed_ms, detail}, and first a
// line {sdk: "versions", ...} of the versions it runs.
//
// Env: BASE_URL (the gateway, no /v1), API_KEY (a ratestore secret with room,
// for the chat and messages calls), GEMINI_KEY, RESPONSES_KEY and ABORT_KEY
// (secrets with room, one per group of scenarios, so that the test can tell
// each group's charge apart; default API_KEY), FULL_KEY (a secret past its
// token window), NOMODEL_KEY (a secret whose policy refuses the model
// "forbidden-model"), SPENT_KEY (a secret whose budget in money is spent),
// TINY_KEY (a secret whose budget is less than one request's worst case),
// HEADERS_KEY (a secret with a token window, a request rate and a budget, for
// the caller's rate-limit headers), PLAIN_KEY (a secret with a token window
// only), TIMEOUT_MS (client timeout of the refusal scenarios,
// default 15000: bounds retries that would otherwise wait for Retry-After),
// SCENARIOS (comma-separated "sdk/scenario" names or "sdk/" prefixes to run;
// default all: see harness.mjs).
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { printVersions, run } from './harness.mjs';

const base = process.env.BASE_URL;
const key = process.env.API_KEY;
const geminiKey = process.env.GEMINI_KEY || key;
const responsesKey = process.env.RESPONSES_KEY || key;
const abortKey = process.env.ABORT_KEY || key;
const fullKey = process.env.FULL_KEY || 'rs_unset';
const noModelKey = process.env.NOMODEL_KEY || 'rs_unset';
const spentKey = process.env.SPENT_KEY || 'rs_unset';
const tinyKey = process.env.TINY_KEY || 'rs_unset';
const headersKey = process.env.HEADERS_KEY || 'rs_unset';
const plainKey = process.env.PLAIN_KEY || 'rs_unset';
const timeout = Number(process.env.TIMEOUT_MS || 15000);
if (!base || !key) {
  console.error('sdk.mjs: set BASE_URL and API_KEY');
  process.exit(2);
}

printVersions(['openai', '@anthropic-ai/sdk', '@google/genai']);

const oa = (apiKey, opts = {}) => new OpenAI({ apiKey, baseURL: base + '/v1', ...opts });
const an = (apiKey, opts = {}) => new Anthropic({ apiKey, baseURL: base, ...opts });
// The Gemini API's default version is v1beta: the SDK calls
// {baseUrl}/v1beta/models/{model}:generateContent with x-goog-api-key.
const gm = (apiKey, httpOptions = {}) => new GoogleGenAI({ apiKey, httpOptions: { baseUrl: base, apiVersion: 'v1beta', ...httpOptions } });

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

// Gemini: generateContent and streamGenerateContent (alt=sse), with the key
// sent as x-goog-api-key.
const contents = 'hello';
await run('gemini', 'json', async () => {
  const r = await gm(geminiKey).models.generateContent({ model: 'gemini-test', contents });
  return { text: r.text, usage: r.usageMetadata };
});
await run('gemini', 'stream', async () => {
  const s = await gm(geminiKey).models.generateContentStream({ model: 'gemini-test', contents });
  let text = '', usage = null, chunks = 0;
  for await (const c of s) { chunks++; text += c.text ?? ''; if (c.usageMetadata) usage = c.usageMetadata; }
  return { text, usage, chunks };
});
await run('gemini', 'unknown_key', async () => {
  await gm('rs_not_a_key', bounded).models.generateContent({ model: 'gemini-test', contents });
});
await run('gemini', 'window_exhausted', async () => {
  await gm(fullKey, bounded).models.generateContent({ model: 'gemini-test', contents });
});
await run('gemini', 'model_forbidden', async () => {
  await gm(noModelKey, bounded).models.generateContent({ model: 'forbidden-model', contents });
});

// The OpenAI Responses API, plain, streamed, and a stream that ends
// incomplete (response.incomplete, at max_output_tokens).
await run('openai', 'responses_json', async () => {
  const r = await oa(responsesKey).responses.create({ model: 'gpt-test', input: 'hello' });
  return { text: r.output_text, usage: r.usage, status: r.status };
});
async function responseStream(params) {
  const s = await oa(responsesKey).responses.create({ model: 'gpt-test', input: 'hello', stream: true, ...params });
  let text = '', usage = null, status = null, events = 0;
  for await (const e of s) {
    events++;
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') { usage = e.response.usage; status = e.response.status; }
  }
  return { text, usage, status, events };
}
await run('openai', 'responses_stream', () => responseStream({}));
await run('openai', 'responses_incomplete', () => responseStream({ max_output_tokens: 16 }));

// The caller hangs up after the first chunk of a chat stream. The fake
// upstream holds the rest until the gateway has seen the hang-up, then
// sends it, usage last: the gateway reads on to that usage.
await run('openai', 'abort', async () => {
  const s = await oa(abortKey).chat.completions.create({ model: 'gpt-abort', messages: msg, stream: true },
    { headers: { 'X-Sdktest-Scenario': 'abort' } });
  let text = '', chunks = 0;
  for await (const c of s) {
    chunks++;
    text += c.choices[0]?.delta?.content ?? '';
    s.controller.abort();
    break;
  }
  return { text, chunks, aborted: s.controller.signal.aborted };
});

// Budgets in money, with the clients' default retries: a key whose budget
// is spent, and one whose budget is less than the worst case of one
// request (max_tokens 1000), on priced models. The gateway answers 429
// budget_exceeded with x-should-retry: false, which openai and
// @anthropic-ai/sdk honour: each call is one request (the test counts them
// by X-Sdktest-Scenario) and fails at once.
const tag = (name) => ({ 'X-Sdktest-Scenario': name });
for (const [scenario, apiKey, maxTokens] of [['budget_spent', spentKey, 64], ['budget_too_small', tinyKey, 1000]]) {
  await run('openai', scenario, async () => {
    await oa(apiKey, bounded).chat.completions.create({ model: 'gpt-4o', messages: msg, max_tokens: maxTokens },
      { headers: tag(`openai/${scenario}`) });
  });
  await run('anthropic', scenario, async () => {
    await an(apiKey, bounded).messages.create({ model: 'claude-sonnet-4-20250514', max_tokens: maxTokens, messages: msg },
      { headers: tag(`anthropic/${scenario}`) });
  });
  await run('gemini', scenario, async () => {
    await gm(apiKey, { ...bounded, headers: tag(`gemini/${scenario}`) }).models.generateContent({
      model: 'gemini-2.5-flash', contents, config: { maxOutputTokens: maxTokens },
    });
  });
}

// The caller's own rate-limit headers on an admitted request, as the
// openai client exposes them (.withResponse(), .asResponse()): the
// gateway's figures for the key, never the upstream's.
const limitHeaders = (h) => Object.fromEntries([...h].filter(([k]) => k.startsWith('x-ratelimit-') || k.startsWith('x-ratestore-')));
await run('openai', 'limit_headers', async () => {
  const { data, response } = await oa(headersKey).chat.completions.create({ model: 'gpt-4o', messages: msg, max_tokens: 100 },
    { headers: tag('openai/limit_headers') }).withResponse();
  return { text: data.choices[0].message.content, usage: data.usage, headers: limitHeaders(response.headers) };
});
await run('openai', 'limit_headers_plain', async () => {
  const response = await oa(plainKey).chat.completions.create({ model: 'gpt-4o', messages: msg, max_tokens: 100 },
    { headers: tag('openai/limit_headers_plain') }).asResponse();
  const data = await response.json();
  return { text: data.choices[0].message.content, usage: data.usage, headers: limitHeaders(response.headers) };
});
