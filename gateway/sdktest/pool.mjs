// pool.mjs runs the official openai (OpenAI and AzureOpenAI) and
// @anthropic-ai/sdk clients against a ratestore gateway in front of pools of
// fake providers (see pool_test.go), and prints one JSON line per scenario
// as sdk.mjs does (harness.mjs). Each call sends its scenario's name in
// X-Sdktest-Scenario, by which the test counts the requests the gateway got
// for it (a client's retries too) and sets up its providers.
//
// Env: BASE_URL (the gateway, no /v1), KEYS (a JSON object of a ratestore
// secret for each "sdk/scenario", each key charged for its scenario alone),
// AZURE_API_VERSION (the AzureOpenAI client's apiVersion), SCENARIOS (see
// harness.mjs; pool_test.go runs the groups one at a time, each against a
// gateway of its own: "azure/,openai/azure_*", "openai/wait_*" ...).
import OpenAI, { AzureOpenAI } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { printVersions, run } from './harness.mjs';

const base = process.env.BASE_URL;
const keys = JSON.parse(process.env.KEYS || '{}');
const apiVersion = process.env.AZURE_API_VERSION || '2024-10-21';
if (!base) {
  console.error('pool.mjs: set BASE_URL');
  process.exit(2);
}

printVersions(['openai', '@anthropic-ai/sdk']);

// scenario runs fn(client options) as sdk/name: the key of its name, and
// its name in X-Sdktest-Scenario.
const scenario = (sdk, name, fn) => {
  const full = `${sdk}/${name}`;
  return run(sdk, name, () => fn({ apiKey: keys[full] ?? 'rs_unset', defaultHeaders: { 'X-Sdktest-Scenario': full } }));
};
const oa = (opts, more = {}) => new OpenAI({ baseURL: base + '/v1', ...opts, ...more });
// The Azure client: {endpoint}/openai/deployments/{deployment or model}/...
// and {endpoint}/openai/responses, each ?api-version=, the secret in api-key.
const az = (opts, more = {}) => new AzureOpenAI({ endpoint: base, apiVersion, ...opts, ...more });
const an = (opts, more = {}) => new Anthropic({ baseURL: base, ...opts, ...more });

const msg = [{ role: 'user', content: 'hello' }];

// What each kind of call saw: its text (or vector's length) and usage.
const chat = async (client, model) => {
  const r = await client.chat.completions.create({ model, messages: msg });
  return { text: r.choices[0].message.content, usage: r.usage, model: r.model };
};
const chatStream = async (client, model, includeUsage = true) => {
  const s = await client.chat.completions.create({ model, messages: msg, stream: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) });
  let text = '', usage = null, chunks = 0;
  for await (const c of s) { chunks++; text += c.choices[0]?.delta?.content ?? ''; if (c.usage) usage = c.usage; }
  return { text, usage, chunks };
};
// encoding_format float: the fake provider answers floats, whatever the
// request asks (the SDK asks base64 by default, and decodes it).
const embed = async (client, model) => {
  const r = await client.embeddings.create({ model, input: 'hello', encoding_format: 'float' });
  return { dims: r.data[0].embedding.length, usage: r.usage, model: r.model };
};
const respond = async (client, model) => {
  const r = await client.responses.create({ model, input: 'hello' });
  return { text: r.output_text, usage: r.usage, status: r.status, model: r.model };
};
const respondStream = async (client, model) => {
  const s = await client.responses.create({ model, input: 'hello', stream: true });
  let text = '', usage = null, status = null, events = 0;
  for await (const e of s) {
    events++;
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed') { usage = e.response.usage; status = e.response.status; }
  }
  return { text, usage, status, events };
};
const messages = async (client, model) => {
  const r = await client.messages.create({ model, max_tokens: 64, messages: msg });
  return { text: r.content[0]?.text, usage: r.usage };
};
const messagesStream = async (client, model) => {
  const m = await client.messages.stream({ model, max_tokens: 64, messages: msg }).finalMessage();
  return { text: m.content[0]?.text, usage: m.usage };
};

// Azure OpenAI through the AzureOpenAI client, which names the deployment
// in the path (its deployment option, else the call's model), and the
// deployment as the model of a responses call (/openai/responses: the
// deployment option does not apply there).
await scenario('azure', 'chat_json', (o) => chat(az(o), 'gpt4o-prod'));
await scenario('azure', 'chat_stream', (o) => chatStream(az(o), 'gpt4o-prod'));
await scenario('azure', 'chat_json_deployment', (o) => chat(az(o, { deployment: 'gpt4o-prod' }), 'gpt-4o'));
await scenario('azure', 'chat_stream_deployment', (o) => chatStream(az(o, { deployment: 'gpt4o-prod' }), 'gpt-4o'));
// A client of another api-version: the upstream gets its own.
await scenario('azure', 'chat_json_other_version', (o) => chat(az(o, { apiVersion: '2025-04-01-preview' }), 'gpt4o-prod'));
await scenario('azure', 'embeddings', (o) => embed(az(o), 'embed-small'));
await scenario('azure', 'embeddings_deployment', (o) => embed(az(o, { deployment: 'embed-small' }), 'text-embedding-3-small'));
await scenario('azure', 'responses', (o) => respond(az(o), 'gpt4o-prod'));
await scenario('azure', 'responses_deployment', (o) => respond(az(o, { deployment: 'gpt4o-prod' }), 'gpt4o-prod'));
await scenario('azure', 'responses_stream', (o) => respondStream(az(o), 'gpt4o-prod'));

// The plain OpenAI client, with model names, in front of the same Azure
// upstream: the gateway sends each to the model's deployment.
await scenario('openai', 'azure_chat_json', (o) => chat(oa(o), 'gpt-4o'));
await scenario('openai', 'azure_chat_stream', (o) => chatStream(oa(o), 'gpt-4o'));
await scenario('openai', 'azure_chat_stream_no_usage', (o) => chatStream(oa(o), 'gpt-4o', false));
await scenario('openai', 'azure_embeddings', (o) => embed(oa(o), 'text-embedding-3-small'));
await scenario('openai', 'azure_responses', (o) => respond(oa(o), 'gpt-4o'));
await scenario('openai', 'azure_responses_stream', (o) => respondStream(oa(o), 'gpt-4o'));

// Failover: the first upstream of a pool of two fails (the test sets it
// up as each scenario's request comes); the clients keep their default
// retries, and must not need them.
await scenario('openai', 'failover_503_json', (o) => chat(oa(o), 'gpt-4o'));
await scenario('openai', 'failover_503_stream', (o) => chatStream(oa(o), 'gpt-4o'));
await scenario('openai', 'failover_down_json', (o) => chat(oa(o), 'gpt-4o'));
await scenario('openai', 'failover_down_stream', (o) => chatStream(oa(o), 'gpt-4o'));
await scenario('anthropic', 'failover_529_json', (o) => messages(an(o), 'claude-sonnet-4-5'));
await scenario('anthropic', 'failover_529_stream', (o) => messagesStream(an(o), 'claude-sonnet-4-5'));

// Waiting: two calls at once on an upstream that serves one at a time;
// the test holds the first at the provider, and lets the second in once
// the first is held. finished is the order in which they ended.
let finished = 0;
const ends = async (p) => ({ ...(await p), finished: ++finished });
await Promise.all([
  scenario('openai', 'wait_first', (o) => ends(chat(oa(o), 'gpt-4o'))),
  scenario('openai', 'wait_second', (o) => ends(chat(oa(o), 'gpt-4o'))),
]);

// The wait bounded (the gateway's UpstreamQueueTimeout): the first call is
// held at the provider until the test has seen the last line before it;
// the others wait for it in vain, once without retries, once with the
// client's default retries (2), which follow Retry-After.
const first = scenario('openai', 'queue_first', (o) => chat(oa(o), 'gpt-4o'));
await scenario('openai', 'queue_timeout', (o) => chat(oa(o, { maxRetries: 0 }), 'gpt-4o'));
await scenario('openai', 'queue_timeout_retries', (o) => chat(oa(o), 'gpt-4o'));
await first;
