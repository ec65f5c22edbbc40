// Package meter reads the tokens an upstream reports in a response body
// as the body streams past, without holding it back or keeping it: a
// model's response can be of any size, and the caller must get every byte
// as soon as it arrives, while the gateway needs the small usage object
// inside to know what to charge. A Reader passes the body through
// unchanged and reports, once, the usage it read (Usage): the tokens by
// type (Counts) in whichever dialect the upstream speaks (OpenAI,
// Anthropic, Gemini), from a JSON body or an event stream (Kind).
package meter

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/ratestore/ratestore/internal/sat"
)

// Kind is the type of a response body, as far as its usage goes.
type Kind uint8

const (
	None Kind = iota // not metered: no usage can be read from it
	JSON             // a JSON document, or an array of them
	SSE              // an event stream, a JSON document in each event
)

// KindOf returns the kind of a response body from its fields. An encoded
// body (Content-Encoding other than identity) cannot be read: None.
func KindOf(h http.Header) Kind {
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return None
	}
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	ct = strings.TrimSpace(ct)
	switch {
	case strings.EqualFold(ct, "text/event-stream"):
		return SSE
	case strings.EqualFold(ct, "application/json"),
		len(ct) > 5 && strings.EqualFold(ct[len(ct)-5:], "+json"):
		return JSON
	}
	return None
}

// Reader is a response body that passes every byte through as it is, and
// reads the usage on the way: a JSON body through a usageScan, an event
// stream through an sseParser, which each hold only the usage objects
// they copy out, whatever the size of the body. It calls end once, when
// the body ends or is closed, whichever comes first.
//
// When it is closed before its end (the gateway closes the body when the
// caller has gone away), a Reader that drains first reads the rest, so
// that the usage the upstream reports at the end of what it generated is
// charged.
// The upstream request's own context bounds how long that takes.
//
// The gateway reads and closes a response body in the handler's
// goroutine, so a Reader needs no lock.
type Reader struct {
	body  io.ReadCloser
	kind  Kind
	drain bool // read the rest at Close
	eof   bool
	done  bool
	tally tally
	json  usageScan
	sse   sseParser
	end   func(u Usage)
}

// New returns a Reader of body, of kind k, that calls end with the usage
// it read, and drains body at Close if drain is set.
func New(body io.ReadCloser, k Kind, drain bool, end func(u Usage)) *Reader {
	m := &Reader{body: body, kind: k, drain: drain, end: end}
	m.json.found = m.tally.addJSON
	m.sse.scan.found = m.tally.addJSON
	return m
}

func (m *Reader) Read(p []byte) (int, error) {
	n, err := m.body.Read(p)
	if !m.done {
		if n > 0 {
			m.feed(p[:n])
		}
		if err == io.EOF {
			m.eof = true
			m.finish()
		}
	}
	return n, err
}

func (m *Reader) Close() error {
	if !m.done && m.drain {
		buf := make([]byte, 32<<10)
		for !m.done {
			if _, err := m.Read(buf); err != nil {
				break
			}
		}
	}
	err := m.body.Close()
	if !m.done {
		m.finish()
	}
	return err
}

func (m *Reader) feed(p []byte) {
	switch m.kind {
	case JSON:
		m.json.feed(p)
	case SSE:
		m.sse.feed(p)
	}
}

// finish reports the usage read: every usage object that was whole, of a
// body read to its end or not.
func (m *Reader) finish() {
	m.done = true
	u := m.tally.usage()
	u.TooLarge = m.json.tooLarge || m.sse.scan.tooLarge
	u.Complete = m.eof
	m.end(u)
}

// sseParser reads an event stream (text/event-stream, as the WHATWG HTML
// standard defines it) as it arrives and feeds the data of each event to
// a usageScan, its lines joined by LF, one document per event. Lines end
// with LF, CRLF or CR. It holds no line and no event: only the first
// bytes of a line until its field name is known.
type sseParser struct {
	scan  usageScan
	head  []byte // the start of the line, until its field is known
	state uint8
	lines int  // data lines of the event so far
	cr    bool // the last byte was a CR that ended a line: an LF next is part of it
}

// The states of an sseParser within a line.
const (
	lineHead  = iota // reading the field name
	lineSpace        // after "data:": a space may come, which is not data
	lineData         // in the value of a data line
	lineSkip         // in another line: ignored
)

var dataPrefix = []byte("data:")

func (s *sseParser) feed(p []byte) {
	for len(p) > 0 {
		if s.cr {
			s.cr = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		s.segment(seg)
		if i < 0 {
			return
		}
		s.endLine()
		s.cr = p[i] == '\r'
		p = p[i+1:]
	}
}

// segment reads part of a line.
func (s *sseParser) segment(b []byte) {
	for len(b) > 0 {
		switch s.state {
		case lineHead:
			n := min(len(b), len(dataPrefix)-len(s.head))
			s.head = append(s.head, b[:n]...)
			b = b[n:]
			switch {
			case bytes.Equal(s.head, dataPrefix):
				s.state = lineSpace
				s.startData()
			case len(s.head) == len(dataPrefix) || bytes.IndexByte(s.head, ':') >= 0:
				s.state = lineSkip // another field, or a comment (":...")
			}
		case lineSpace:
			if b[0] == ' ' {
				b = b[1:]
			}
			s.state = lineData
		case lineData:
			s.scan.feed(b)
			return
		case lineSkip:
			return
		}
	}
}

// startData starts the value of a data line.
func (s *sseParser) startData() {
	if s.lines > 0 {
		s.scan.feed([]byte{'\n'})
	}
	s.lines++
}

// endLine ends a line: a blank one ends the event, and "data" alone is a
// data line with an empty value.
func (s *sseParser) endLine() {
	switch {
	case s.state == lineHead && len(s.head) == 0:
		s.scan.reset()
		s.lines = 0
	case s.state == lineHead && string(s.head) == "data":
		s.startData()
	}
	s.head, s.state = s.head[:0], lineHead
}

// Counts are the tokens a response reported, by type. Input includes the
// cached input (CacheRead and CacheWrite), Output the reasoning tokens:
// every dialect is brought to these definitions, whatever its own.
type Counts struct {
	Input, Output         int64
	CacheRead, CacheWrite int64
	CacheWrite1h          int64 // of CacheWrite: Anthropic's one-hour cache writes, priced apart
	Reasoning             int64
}

// rawUsage is a usage object, in any of the dialects the gateway reads:
//   - OpenAI chat and completions: prompt_tokens (cached included, in
//     prompt_tokens_details.cached_tokens), completion_tokens (reasoning
//     included, in completion_tokens_details.reasoning_tokens),
//     total_tokens; embeddings: prompt_tokens and total_tokens;
//   - OpenAI Responses: input_tokens (cached included, in
//     input_tokens_details), output_tokens (reasoning included, in
//     output_tokens_details), total_tokens;
//   - Anthropic: input_tokens, which leaves out the prompt cache's
//     cache_creation_input_tokens and cache_read_input_tokens, and
//     output_tokens (thinking included);
//   - Gemini's usageMetadata: promptTokenCount (cachedContentTokenCount
//     included), toolUsePromptTokenCount, candidatesTokenCount, which
//     leaves out thoughtsTokenCount, and totalTokenCount.
type rawUsage struct {
	PromptTokens            *int64   `json:"prompt_tokens"`
	CompletionTokens        *int64   `json:"completion_tokens"`
	TotalTokens             *int64   `json:"total_tokens"`
	PromptTokensDetails     *details `json:"prompt_tokens_details"`
	CompletionTokensDetails *details `json:"completion_tokens_details"`

	InputTokens         *int64   `json:"input_tokens"`
	OutputTokens        *int64   `json:"output_tokens"`
	InputTokensDetails  *details `json:"input_tokens_details"`
	OutputTokensDetails *details `json:"output_tokens_details"`

	CacheCreationInputTokens *int64         `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64         `json:"cache_read_input_tokens"`
	CacheCreation            *cacheCreation `json:"cache_creation"`

	PromptTokenCount        *int64 `json:"promptTokenCount"`
	ToolUsePromptTokenCount *int64 `json:"toolUsePromptTokenCount"`
	CachedContentTokenCount *int64 `json:"cachedContentTokenCount"`
	CandidatesTokenCount    *int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      *int64 `json:"thoughtsTokenCount"`
	TotalTokenCount         *int64 `json:"totalTokenCount"`
}

// cacheCreation is Anthropic's split of cache_creation_input_tokens by
// how long the cache entry lasts, which sets its price.
type cacheCreation struct {
	Ephemeral5m *int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
}

type details struct {
	CachedTokens    *int64 `json:"cached_tokens"`
	ReasoningTokens *int64 `json:"reasoning_tokens"`
}

// tally merges the usage objects of a response. The counts of a stream
// are cumulative (Anthropic's message_delta repeats or raises what
// message_start said; every Gemini chunk has its usageMetadata so far), so
// the latest of each count wins.
type tally struct {
	counts [countFields]int64
	has    [countFields]bool
}

// The counts a tally keeps, each the first of its fields a usage object has.
const (
	cInput        = iota // input_tokens, prompt_tokens, promptTokenCount
	cToolPrompt          // toolUsePromptTokenCount
	cOutput              // output_tokens, completion_tokens, candidatesTokenCount
	cThoughts            // thoughtsTokenCount: output that candidatesTokenCount leaves out
	cReasoning           // reasoning_tokens (within output_tokens) or thoughtsTokenCount
	cCacheRead           // cache_read_input_tokens, cached_tokens, cachedContentTokenCount
	cCacheWrite          // cache_creation_input_tokens
	cCacheWrite1h        // cache_creation.ephemeral_1h_input_tokens
	cAnthropic           // > 0: input_tokens leaves the cache out (Anthropic's cache fields were seen)
	cTotal               // total_tokens, totalTokenCount
	countFields
)

// addJSON merges a usage object; one that does not decode is ignored.
func (t *tally) addJSON(b []byte) {
	var u rawUsage
	if json.Unmarshal(b, &u) != nil {
		return
	}
	dt := func(d *details, reasoning bool) *int64 {
		switch {
		case d == nil:
			return nil
		case reasoning:
			return d.ReasoningTokens
		}
		return d.CachedTokens
	}
	t.set(cInput, u.InputTokens, u.PromptTokens, u.PromptTokenCount)
	t.set(cToolPrompt, u.ToolUsePromptTokenCount)
	t.set(cOutput, u.OutputTokens, u.CompletionTokens, u.CandidatesTokenCount)
	t.set(cThoughts, u.ThoughtsTokenCount)
	t.set(cReasoning, dt(u.CompletionTokensDetails, true), dt(u.OutputTokensDetails, true), u.ThoughtsTokenCount)
	t.set(cCacheRead, u.CacheReadInputTokens, dt(u.PromptTokensDetails, false), dt(u.InputTokensDetails, false), u.CachedContentTokenCount)
	t.set(cCacheWrite, u.CacheCreationInputTokens)
	if u.CacheCreation != nil {
		t.set(cCacheWrite1h, u.CacheCreation.Ephemeral1h)
	}
	if u.CacheCreationInputTokens != nil || u.CacheReadInputTokens != nil {
		one := int64(1)
		t.set(cAnthropic, &one)
	}
	t.set(cTotal, u.TotalTokens, u.TotalTokenCount)
}

// set sets count i to the first of vs that is there and not negative.
func (t *tally) set(i int, vs ...*int64) {
	for _, v := range vs {
		if v != nil && *v >= 0 {
			t.counts[i], t.has[i] = *v, true
			return
		}
	}
}

// Usage is what a response reported.
type Usage struct {
	Counts   Counts
	Found    bool // a usage object with a count was read
	TooLarge bool // a usage object over MaxUsageBytes was skipped
	Complete bool // the body was read to its end, not closed before it
}

// usage returns the tally's counts by type: input with the cache reads
// and writes, output with the reasoning. A usage object with a total only
// counts it as input.
func (t *tally) usage() Usage {
	c, h := &t.counts, &t.has
	var u Usage
	u.Counts.Input = sat.Add(c[cInput], c[cToolPrompt])
	u.Counts.Output = sat.Add(c[cOutput], c[cThoughts])
	u.Counts.Reasoning = c[cReasoning]
	u.Counts.CacheRead, u.Counts.CacheWrite = c[cCacheRead], c[cCacheWrite]
	u.Counts.CacheWrite1h = min(c[cCacheWrite1h], c[cCacheWrite])
	if h[cAnthropic] {
		u.Counts.Input = sat.Add(u.Counts.Input, sat.Add(c[cCacheRead], c[cCacheWrite]))
	}
	switch {
	case h[cInput] || h[cToolPrompt] || h[cOutput] || h[cThoughts] || h[cCacheRead] || h[cCacheWrite]:
		u.Found = true
	case h[cTotal]:
		u.Found, u.Counts.Input = true, c[cTotal]
	}
	return u
}
