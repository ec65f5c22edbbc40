package fakeprovider

import (
	"strings"
)

// text is what every model of a fake provider says.
const text = "Hello from fakeprovider"

// words are text as a stream sends it, a word a chunk.
func words() []string { return strings.SplitAfter(text, " ") }

// reply is the body of an answer: one JSON document, or the events of a
// stream, each ready to write (its event and data lines and the blank
// line that ends it).
type reply struct {
	sse   bool
	parts []string
}

func jsonReply(v any) reply { return reply{parts: []string{string(marshal(v))}} }

// data is an event of v alone, as OpenAI's and Gemini's streams send them.
func data(v any) string { return "data: " + string(marshal(v)) + "\n\n" }

// event is an event of v named name, as Anthropic's stream and OpenAI's
// Responses API send them.
func event(name string, v any) string { return "event: " + name + "\n" + data(v) }

// reply is the answer to c, with the usage it costs, in the shapes the
// real APIs give (and the gateway's meter reads).
func (p *Provider) reply(c *call) reply {
	switch c.op {
	case opChat, opCompletions:
		return completionReply(c)
	case opEmbeddings:
		return jsonReply(map[string]any{"object": "list", "model": c.model,
			"data":  []any{map[string]any{"object": "embedding", "index": 0, "embedding": []float64{0.1, 0.2, 0.3}}},
			"usage": map[string]any{"prompt_tokens": c.prompt, "total_tokens": c.prompt}})
	case opResponses:
		return responsesReply(c)
	case opMessages:
		return messagesReply(c)
	case opGenerate:
		return geminiReply(c)
	}
	return p.modelsReply(c)
}

// completionReply answers chat completions and completions: a document,
// or chunks whose last one, when the request asked for it
// (stream_options.include_usage), has no choices and the usage, the
// chunks before it "usage": null, as OpenAI sends them.
func completionReply(c *call) reply {
	usage := map[string]any{"prompt_tokens": c.prompt, "completion_tokens": c.completion, "total_tokens": c.prompt + c.completion}
	object, choice := "chat.completion", func(text string, delta bool, finish any) map[string]any {
		if delta {
			return map[string]any{"index": 0, "delta": map[string]any{"content": text}, "finish_reason": finish}
		}
		return map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": finish}
	}
	if c.op == opCompletions {
		object, choice = "text_completion", func(text string, _ bool, finish any) map[string]any {
			return map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": finish}
		}
	}
	doc := func(choices []any, usage any) map[string]any {
		d := map[string]any{"id": c.id, "object": object, "created": c.created, "model": c.model, "choices": choices}
		if usage != nil || c.includeUsage {
			d["usage"] = usage
		}
		return d
	}
	if !c.stream {
		return jsonReply(doc([]any{choice(text, false, "stop")}, usage))
	}
	if c.op == opChat {
		object += ".chunk"
	}
	var parts []string
	if c.op == opChat { // the first chunk says who speaks
		role := map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil}
		parts = append(parts, data(doc([]any{role}, nil)))
	}
	for _, w := range words() {
		parts = append(parts, data(doc([]any{choice(w, true, nil)}, nil)))
	}
	parts = append(parts, data(doc([]any{choice("", true, "stop")}, nil)))
	if c.includeUsage {
		parts = append(parts, data(doc([]any{}, usage)))
	}
	return reply{sse: true, parts: append(parts, "data: [DONE]\n\n")}
}

// responsesReply answers OpenAI's Responses API: a response object, or a
// stream of events whose response.completed carries the usage (the
// earlier ones "usage": null).
func responsesReply(c *call) reply {
	usage := map[string]any{
		"input_tokens": c.prompt, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": c.completion, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": c.prompt + c.completion,
	}
	msgID := "msg_" + c.id
	msg := func(text, status string) map[string]any {
		return map[string]any{"type": "message", "id": msgID, "status": status, "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	response := func(status string, output []any, usage any) map[string]any {
		return map[string]any{"id": "resp_" + c.id, "object": "response", "created_at": c.created, "status": status,
			"model": c.model, "error": nil, "incomplete_details": nil, "output": output, "usage": usage}
	}
	done := response("completed", []any{msg(text, "completed")}, usage)
	if !c.stream {
		return jsonReply(done)
	}
	var parts []string
	ev := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, len(parts)
		parts = append(parts, event(typ, v))
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	ev("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": msg("", "in_progress")})
	for _, w := range words() {
		ev("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "delta": w})
	}
	ev("response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "text": text})
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": msg(text, "completed")})
	ev("response.completed", map[string]any{"response": done})
	return reply{sse: true, parts: parts}
}

// messagesReply answers Anthropic's messages: a message, or a stream
// whose message_start reports the input tokens (and 1 output token so
// far) and whose message_delta reports the output tokens.
func messagesReply(c *call) reply {
	msg := map[string]any{"id": "msg_" + c.id, "type": "message", "role": "assistant", "model": c.model,
		"content":     []any{map[string]any{"type": "text", "text": text}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": c.prompt, "output_tokens": c.completion}}
	if !c.stream {
		return jsonReply(msg)
	}
	msg["content"], msg["stop_reason"] = []any{}, nil
	msg["usage"] = map[string]any{"input_tokens": c.prompt, "output_tokens": 1}
	parts := []string{
		event("message_start", map[string]any{"type": "message_start", "message": msg}),
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}}),
	}
	for _, w := range words() {
		parts = append(parts, event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": w}}))
	}
	parts = append(parts,
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
		event("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": c.completion}}),
		event("message_stop", map[string]any{"type": "message_stop"}))
	return reply{sse: true, parts: parts}
}

// geminiReply answers generateContent with a GenerateContentResponse, and
// streamGenerateContent with one a chunk, each with the usageMetadata so
// far: with alt=sse an event each (CRLF-delimited, as Gemini sends them),
// else a JSON array of them.
func geminiReply(c *call) reply {
	chunk := func(text string, out int64, last bool) string {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}, "index": 0}
		if last {
			cand["finishReason"] = "STOP"
		}
		return string(marshal(map[string]any{"candidates": []any{cand},
			"usageMetadata": map[string]any{"promptTokenCount": c.prompt, "candidatesTokenCount": out, "totalTokenCount": c.prompt + out},
			"modelVersion":  c.model, "responseId": c.id}))
	}
	if !c.stream {
		return reply{parts: []string{chunk(text, c.completion, true)}}
	}
	ws := words()
	docs := make([]string, len(ws))
	for i, w := range ws {
		docs[i] = chunk(w, c.completion*int64(i+1)/int64(len(ws)), i == len(ws)-1)
	}
	if !c.sse {
		return reply{parts: []string{"[" + strings.Join(docs, ",\r\n") + "]"}}
	}
	for i := range docs {
		docs[i] = "data: " + docs[i] + "\r\n\r\n"
	}
	return reply{sse: true, parts: docs}
}

// defaultModels are the models a provider lists when Options.Models is
// nil.
var defaultModels = map[string][]string{
	OpenAI:    {"gpt-4o", "gpt-4o-mini", "text-embedding-3-small"},
	Anthropic: {"claude-sonnet-4-5", "claude-haiku-4-5"},
}

// modelsReply answers GET /v1/models, as OpenAI or Anthropic lists them.
func (p *Provider) modelsReply(c *call) reply {
	models := p.opts.Models
	if models == nil {
		models = defaultModels[p.opts.API]
	}
	list := make([]any, len(models))
	for i, m := range models {
		list[i] = map[string]any{"id": m, "object": "model", "created": c.created, "owned_by": "fakeprovider"}
		if p.opts.API == Anthropic {
			list[i] = map[string]any{"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
		}
	}
	if p.opts.API == Anthropic {
		first, last := "", ""
		if len(models) > 0 {
			first, last = models[0], models[len(models)-1]
		}
		return jsonReply(map[string]any{"data": list, "has_more": false, "first_id": first, "last_id": last})
	}
	return jsonReply(map[string]any{"object": "list", "data": list})
}
