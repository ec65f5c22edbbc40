package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// kind is the type of a response body, as far as its usage goes.
type kind uint8

const (
	kindNone kind = iota // not metered
	kindJSON
	kindSSE
)

// bodyKind returns the kind of a response body from its fields. An encoded
// body (Content-Encoding other than identity) cannot be read: kindNone.
func bodyKind(h http.Header) kind {
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return kindNone
	}
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	ct = strings.TrimSpace(ct)
	switch {
	case strings.EqualFold(ct, "text/event-stream"):
		return kindSSE
	case strings.EqualFold(ct, "application/json"),
		len(ct) > 5 && strings.EqualFold(ct[len(ct)-5:], "+json"):
		return kindJSON
	}
	return kindNone
}

// meter is a response body that passes every byte through as it is, and
// reads the usage from a copy: a JSON body kept up to a bound and parsed at
// its end, or an event stream parsed line by line. It calls end once, when
// the body ends or is closed, whichever comes first.
//
// ReverseProxy reads and closes a response body in the handler's
// goroutine, so a meter needs no lock.
type meter struct {
	body  io.ReadCloser
	kind  kind
	eof   bool
	done  bool
	tally tally
	end   func(tokens int64, found, tooLarge bool)

	// JSON
	buf      []byte
	maxJSON  int64
	tooLarge bool

	// event stream
	sse sseParser
}

func newMeter(body io.ReadCloser, k kind, maxJSON int64, maxEvent int, end func(tokens int64, found, tooLarge bool)) *meter {
	return &meter{body: body, kind: k, maxJSON: maxJSON, sse: sseParser{max: maxEvent}, end: end}
}

func (m *meter) Read(p []byte) (int, error) {
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

func (m *meter) Close() error {
	err := m.body.Close()
	if !m.done {
		m.finish()
	}
	return err
}

func (m *meter) feed(p []byte) {
	switch m.kind {
	case kindJSON:
		if m.tooLarge {
			return
		}
		if int64(len(m.buf))+int64(len(p)) > m.maxJSON {
			m.tooLarge, m.buf = true, nil
			return
		}
		m.buf = append(m.buf, p...)
	case kindSSE:
		m.sse.feed(p, &m.tally)
	}
}

// finish reads what is left and reports the usage. A JSON body counts only
// when it was read to its end; an event stream counts the usage its events
// reported before it ended.
func (m *meter) finish() {
	m.done = true
	switch m.kind {
	case kindJSON:
		if m.eof && !m.tooLarge {
			m.tally.addJSON(m.buf)
		}
		m.buf = nil
	case kindSSE:
		m.sse.flush(&m.tally)
	}
	tokens, found := m.tally.tokens()
	m.end(tokens, found, m.tooLarge)
}

// sseParser splits an event stream (text/event-stream, as the WHATWG HTML
// standard defines it) into events and hands the data of those that
// mention "usage" to a tally. Lines end with LF, CRLF or CR. A line longer
// than max is skipped, and so is the event of a data line longer than max
// or of data longer than max in all; so it never holds more than max bytes
// of line and max of data.
type sseParser struct {
	max  int
	line []byte // the start of a line that a read split
	data []byte // the data of the event being read, its lines joined by LF
	skip bool   // the line is too long: discard it up to its end
	drop bool   // the event is too long: discard its data up to its end
	cr   bool   // the last byte was a CR that ended a line: an LF next is part of it
}

var (
	dataField  = []byte("data")
	dataPrefix = []byte("data:")
	usageWord  = []byte(`"usage"`)
)

func (s *sseParser) feed(p []byte, t *tally) {
	for len(p) > 0 {
		if s.cr {
			s.cr = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.appendLine(p)
			return
		}
		if len(s.line) == 0 && !s.skip {
			s.processLine(p[:i], t) // the whole line is in p: no copy
		} else {
			s.appendLine(p[:i])
			if !s.skip {
				s.processLine(s.line, t)
			}
		}
		s.line, s.skip = s.line[:0], false
		s.cr = p[i] == '\r'
		p = p[i+1:]
	}
}

func (s *sseParser) appendLine(b []byte) {
	if s.skip {
		return
	}
	if len(s.line)+len(b) > s.max {
		// A data line drops its event; another (a comment) only itself.
		var hb [len("data:")]byte
		head := s.line
		if len(head) < len(hb) {
			head = append(append(hb[:0], s.line...), b[:min(len(b), len(hb)-len(s.line))]...)
		}
		if bytes.HasPrefix(head, dataPrefix) {
			s.drop = true
		}
		s.line, s.skip = s.line[:0], true
		return
	}
	s.line = append(s.line, b...)
}

func (s *sseParser) processLine(line []byte, t *tally) {
	if len(line) == 0 {
		s.dispatch(t)
		return
	}
	name, value, _ := bytes.Cut(line, []byte{':'})
	if s.drop || !bytes.Equal(name, dataField) { // comments (":...") and other fields
		return
	}
	value = bytes.TrimPrefix(value, []byte{' '})
	if len(s.data) > 0 {
		if len(s.data)+1+len(value) > s.max {
			s.data, s.drop = s.data[:0], true
			return
		}
		s.data = append(s.data, '\n')
	}
	s.data = append(s.data, value...)
}

// dispatch ends the event being read.
func (s *sseParser) dispatch(t *tally) {
	if !s.drop && bytes.Contains(s.data, usageWord) {
		t.addJSON(s.data)
	}
	s.data, s.drop = s.data[:0], false
}

// flush ends the stream: a last line or event without its end counts.
func (s *sseParser) flush(t *tally) {
	if len(s.line) > 0 && !s.skip {
		s.processLine(s.line, t)
	}
	s.dispatch(t)
	s.line, s.data = nil, nil
}

// usageJSON is a usage object: OpenAI's (prompt, completion and total
// tokens; input, output and total in the Responses API) or Anthropic's
// (input and output tokens, and the prompt-cache tokens, which Anthropic
// counts apart from input_tokens where OpenAI's prompt_tokens includes
// them).
type usageJSON struct {
	TotalTokens              *int64 `json:"total_tokens"`
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	PromptTokens             *int64 `json:"prompt_tokens"`
	CompletionTokens         *int64 `json:"completion_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// envelope is where a JSON document may hold a usage object: at its top
// (a response; an OpenAI chunk; Anthropic's message_delta), in "message"
// (Anthropic's message_start), or in "response" (the OpenAI Responses
// API's events).
type envelope struct {
	Usage   *usageJSON `json:"usage"`
	Message *struct {
		Usage *usageJSON `json:"usage"`
	} `json:"message"`
	Response *struct {
		Usage *usageJSON `json:"usage"`
	} `json:"response"`
}

// tokenCounts are the tokens a response reported, by type. input
// includes the cached input (cacheRead and cacheWrite), output the
// reasoning tokens.
type tokenCounts struct {
	input, output         int64
	cacheRead, cacheWrite int64
	reasoning             int64
}

// tally is the usage a response reported. The counts of a stream are
// cumulative, so the latest of each wins.
type tally struct {
	total, input, output          int64
	cacheWrite, cacheRead         int64
	hasTotal, hasInput, hasOutput bool
	hasCacheWrite, hasCacheRead   bool
}

// addJSON adds the usage of one JSON document, if it holds any.
func (t *tally) addJSON(b []byte) {
	var e envelope
	if json.Unmarshal(b, &e) != nil {
		return
	}
	t.add(e.Usage)
	if e.Message != nil {
		t.add(e.Message.Usage)
	}
	if e.Response != nil {
		t.add(e.Response.Usage)
	}
}

func (t *tally) add(u *usageJSON) {
	if u == nil {
		return
	}
	set(&t.total, &t.hasTotal, u.TotalTokens)
	set(&t.input, &t.hasInput, u.InputTokens, u.PromptTokens)
	set(&t.output, &t.hasOutput, u.OutputTokens, u.CompletionTokens)
	set(&t.cacheWrite, &t.hasCacheWrite, u.CacheCreationInputTokens)
	set(&t.cacheRead, &t.hasCacheRead, u.CacheReadInputTokens)
}

// set sets *v to the first of counts that is there and not negative.
func set(v *int64, has *bool, counts ...*int64) {
	for _, c := range counts {
		if c != nil && *c >= 0 {
			*v, *has = *c, true
			return
		}
	}
}

// tokens returns the tokens reported: total_tokens when there is one, else
// input plus output tokens plus Anthropic's cache writes and reads (added
// up saturating); found is false when no usage was reported.
func (t *tally) tokens() (n int64, found bool) {
	switch {
	case t.hasTotal:
		return t.total, true
	case t.hasInput || t.hasOutput || t.hasCacheWrite || t.hasCacheRead:
		for _, c := range [...]int64{t.input, t.output, t.cacheWrite, t.cacheRead} {
			if n += c; n < c {
				return 1<<63 - 1, true
			}
		}
		return n, true
	}
	return 0, false
}
