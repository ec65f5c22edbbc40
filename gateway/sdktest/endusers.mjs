// endusers.mjs runs the official openai and @anthropic-ai/sdk clients
// against a ratestore gateway whose keys limit their end users (see
// endusers_test.go), and prints one JSON line per scenario as sdk.mjs does
// (harness.mjs). Each call sends its scenario's name in X-Sdktest-Scenario,
// by which the test counts the requests the gateway got for it (a client's
// retries too) and tells which scenario the upstream's requests came from.
//
// The end user of a call is named the ways the clients let a program name
// it: openai's user (chat completions) and safety_identifier (responses),
// Anthropic's metadata.user_id, or the gateway's own X-Ratestore-End-User
// in a client's defaultHeaders. Every client keeps its default retries.
//
// Env: BASE_URL (the gateway, no /v1), KEYS (a JSON object of ratestore
// secrets: "named", a key with room whose end users each have a large
// window; "over", one whose end users each have a token window of 40;
// "required", one that requires an end user; "model", one with a model
// limit on gpt-4o* of 40 tokens), TIMEOUT_MS (client timeout, default
// 15000: bounds retries that would otherwise wait for Retry-After),
// SCENARIOS (see harness.mjs).
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { printVersions, run } from './harness.mjs';

const base = process.env.BASE_URL;
const keys = JSON.parse(process.env.KEYS || '{}');
const timeout = Number(process.env.TIMEOUT_MS || 15000);
if (!base) {
  console.error('endusers.mjs: set BASE_URL');
  process.exit(2);
}

printVersions(['openai', '@anthropic-ai/sdk']);

// scenario runs fn(client options) as sdk/name on the key of role: its
// secret, and the scenario's name in X-Sdktest-Scenario; headers are more
// default headers of the client (X-Ratestore-End-User).
const scenario = (sdk, name, role, fn, headers = {}) => run(sdk, name, () => fn({
  apiKey: keys[role] ?? 'rs_unset', timeout,
  defaultHeaders: { 'X-Sdktest-Scenario': `${sdk}/${name}`, ...headers },
}));
const oa = (opts) => new OpenAI({ baseURL: base + '/v1', ...opts });
const an = (opts) => new Anthropic({ baseURL: base, ...opts });
const endUser = (name) => ({ 'X-Ratestore-End-User': name });

const msg = [{ role: 'user', content: 'hello' }];

// What each kind of call saw: its text and usage. extra is more of the
// request's body (user, safety_identifier, metadata, max_tokens, model).
const chat = async (client, extra = {}) => {
  const r = await client.chat.completions.create({ model: 'gpt-test', messages: msg, ...extra });
  return { text: r.choices[0].message.content, usage: r.usage };
};
const chatStream = async (client, extra = {}, includeUsage = true) => {
  const s = await client.chat.completions.create({ model: 'gpt-test', messages: msg, stream: true,
    ...(includeUsage ? { stream_options: { include_usage: true } } : {}), ...extra });
  let text = '', usage = null;
  for await (const c of s) { text += c.choices[0]?.delta?.content ?? ''; if (c.usage) usage = c.usage; }
  return { text, usage };
};
const respond = async (client, extra = {}) => {
  const r = await client.responses.create({ model: 'gpt-test', input: 'hello', ...extra });
  return { text: r.output_text, usage: r.usage, status: r.status };
};
const respondStream = async (client, extra = {}) => {
  const s = await client.responses.create({ model: 'gpt-test', input: 'hello', stream: true, ...extra });
  let text = '', usage = null, status = null;
  for await (const e of s) {
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed') { usage = e.response.usage; status = e.response.status; }
  }
  return { text, usage, status };
};
const messages = async (client, extra = {}) => {
  const r = await client.messages.create({ model: 'claude-test', max_tokens: 64, messages: msg, ...extra });
  return { text: r.content[0]?.text, usage: r.usage };
};
// messages.create with stream: true: the raw events, the usage of
// message_start and message_delta together, as the API splits it.
const messagesStream = async (client, extra = {}) => {
  const s = await client.messages.create({ model: 'claude-test', max_tokens: 64, messages: msg, stream: true, ...extra });
  let text = '', input = null, output = null;
  for await (const e of s) {
    if (e.type === 'message_start') input = e.message.usage.input_tokens;
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
    if (e.type === 'message_delta') output = e.usage.output_tokens;
  }
  return { text, usage: { input_tokens: input, output_tokens: output } };
};
const uid = (user_id) => ({ metadata: { user_id } });

// 1, 2. The end user in the body, each charged to its own window: openai's
// user on chat completions (JSON, streamed with and without
// include_usage), its safety_identifier on responses (JSON, streamed),
// user ahead of safety_identifier when both are given; Anthropic's
// metadata.user_id (JSON, streamed). Then names at the edges: 256 bytes,
// and one beyond ASCII; and a call that names none, the key's own traffic.
await scenario('openai', 'chat_user', 'named', (o) => chat(oa(o), { user: 'u-chat' }));
await scenario('openai', 'chat_stream_user', 'named', (o) => chatStream(oa(o), { user: 'u-chat-stream' }));
await scenario('openai', 'chat_stream_no_usage_user', 'named', (o) => chatStream(oa(o), { user: 'u-chat-stream-nu' }, false));
await scenario('openai', 'responses_safety_identifier', 'named', (o) => respond(oa(o), { safety_identifier: 'u-resp' }));
await scenario('openai', 'responses_stream_safety_identifier', 'named', (o) => respondStream(oa(o), { safety_identifier: 'u-resp-stream' }));
await scenario('openai', 'responses_user_and_safety_identifier', 'named', (o) => respond(oa(o), { user: 'u-resp-user', safety_identifier: 'u-resp-safety' }));
await scenario('anthropic', 'messages_user_id', 'named', (o) => messages(an(o), uid('u-msg')));
await scenario('anthropic', 'messages_stream_user_id', 'named', (o) => messagesStream(an(o), uid('u-msg-stream')));
await scenario('openai', 'chat_user_256_bytes', 'named', (o) => chat(oa(o), { user: 'y'.repeat(256) }));
await scenario('openai', 'chat_user_unicode', 'named', (o) => chat(oa(o), { user: 'jürgen-用户' }));
await scenario('openai', 'chat_no_end_user', 'named', (o) => chat(oa(o)));

// 3. The header, in a client's defaultHeaders, ahead of the body's name:
// both clients' calls are charged to the header's end user.
await scenario('openai', 'header_over_user', 'named', (o) => chat(oa(o), { user: 'u-body' }), endUser('u-header'));
await scenario('anthropic', 'header_over_user_id', 'named', (o) => messages(an(o), uid('u-body')), endUser('u-header'));
await scenario('openai', 'header_over_safety_identifier', 'named',
  (o) => respondStream(oa(o), { safety_identifier: 'u-body' }), endUser('u-header-resp'));

// 4. An end user over its token window (40 tokens an hour; each call
// reserves its bytes/4 and max_tokens 10, about 35, and is charged 18):
// its second call is refused, by either client, at once with the default
// retries; another end user of the key, and the key's own traffic, pass.
await scenario('openai', 'over_first', 'over', (o) => chat(oa(o), { user: 'u-over', max_tokens: 10 }));
await scenario('openai', 'over_refused', 'over', (o) => chat(oa(o), { user: 'u-over', max_tokens: 10 }));
await scenario('anthropic', 'over_refused', 'over', (o) => messages(an(o), { ...uid('u-over'), max_tokens: 10 }));
await scenario('openai', 'over_refused_header', 'over', (o) => chat(oa(o), { max_tokens: 10 }), endUser('u-over'));
await scenario('openai', 'over_other', 'over', (o) => chat(oa(o), { user: 'u-other', max_tokens: 10 }));
await scenario('openai', 'over_key_own', 'over', (o) => chat(oa(o), { max_tokens: 10 }));

// 5. A key that requires an end user: a call naming none, or an empty one,
// is refused (400, which no client retries); one naming its end user, in
// either client, passes.
await scenario('openai', 'required_missing', 'required', (o) => chat(oa(o)));
await scenario('openai', 'required_empty', 'required', (o) => chat(oa(o), { user: '' }));
await scenario('anthropic', 'required_missing', 'required', (o) => messages(an(o)));
await scenario('openai', 'required_named', 'required', (o) => chat(oa(o), { user: 'u-req' }));
await scenario('anthropic', 'required_named', 'required', (o) => messages(an(o), uid('u-req')));
await scenario('openai', 'required_header', 'required', (o) => respond(oa(o)), endUser('u-req'));

// 6. Names the gateway refuses (400 invalid_end_user) before the upstream
// sees them: 300 bytes in each place a name goes, and a control character.
const long = 'x'.repeat(300);
await scenario('openai', 'invalid_user_long', 'named', (o) => chat(oa(o), { user: long }));
await scenario('openai', 'invalid_safety_identifier_long', 'named', (o) => respond(oa(o), { safety_identifier: long }));
await scenario('anthropic', 'invalid_user_id_long', 'named', (o) => messages(an(o), uid(long)));
await scenario('openai', 'invalid_header_long', 'named', (o) => chat(oa(o)), endUser(long));
await scenario('openai', 'invalid_user_control', 'named', (o) => chat(oa(o), { user: 'tab\there' }));

// 7. A model limit (40 tokens an hour on gpt-4o*): the second gpt-4o call,
// and a gpt-4o-mini one, are refused; calls to other models pass.
await scenario('openai', 'model_first', 'model', (o) => chat(oa(o), { model: 'gpt-4o', max_tokens: 10 }));
await scenario('openai', 'model_refused', 'model', (o) => chat(oa(o), { model: 'gpt-4o', max_tokens: 10 }));
await scenario('openai', 'model_refused_mini', 'model', (o) => chat(oa(o), { model: 'gpt-4o-mini', max_tokens: 10 }));
await scenario('openai', 'model_other', 'model', (o) => chat(oa(o), { model: 'gpt-test', max_tokens: 10 }));
await scenario('anthropic', 'model_other', 'model', (o) => messages(an(o), { max_tokens: 10 }));
