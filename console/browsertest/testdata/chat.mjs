// chat.mjs sends chat completions through a ratestore gateway with the
// official openai client for Node.js, the copy that gateway/sdktest installs
// (npm ci --prefix gateway/sdktest), as an operator's user would after
// reading a new key's secret off the console.
//
// Env: BASE_URL (the gateway, no /v1), API_KEY (the key's secret), MODELS
// (comma-separated: one request per model, in order). It prints a JSON line
// {node, openai} first, then one per request: {model, ok, status, error,
// text, usage}.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const sdktest = new URL('../../../gateway/sdktest/', import.meta.url);
const require = createRequire(new URL('package.json', sdktest));
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const version = JSON.parse(readFileSync(new URL('node_modules/openai/package.json', sdktest), 'utf8')).version;
console.log(JSON.stringify({ node: process.version, openai: version }));

const { BASE_URL: base, API_KEY: apiKey, MODELS: models = '' } = process.env;
if (!base || !apiKey) {
  console.error('chat.mjs: set BASE_URL and API_KEY');
  process.exit(2);
}
// No retries: a refusal is reported as it is.
const client = new OpenAI({ apiKey, baseURL: base + '/v1', maxRetries: 0, timeout: 15000 });
for (const model of models.split(',').map((m) => m.trim()).filter(Boolean)) {
  const line = { model, ok: false, status: 0, error: '' };
  try {
    const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }] });
    Object.assign(line, { ok: true, status: 200, text: r.choices[0]?.message?.content, usage: r.usage });
  } catch (e) {
    line.status = e?.status ?? 0;
    line.error = String(e?.message ?? e);
  }
  console.log(JSON.stringify(line));
}
