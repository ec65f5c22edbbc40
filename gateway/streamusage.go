package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// An OpenAI chat or completions stream reports its usage only when the
// request asks for it (stream_options.include_usage), in one last chunk
// whose choices are empty. A stream that did not ask would pass unmetered,
// so the gateway asks on the caller's behalf (askUsage) and takes that
// chunk out of what the caller sees (stripUsage): the caller gets the
// stream it asked for, byte for byte, and the key is charged what the
// upstream counted.

// askUsage returns body, an OpenAI chat or completions request that
// streams without asking for its usage (as parseBody read it into f), with
// stream_options.include_usage set to true. Only those bytes change: the
// rest is forwarded as it came, byte for byte, as it was read.
func askUsage(body []byte, f bodyFields) []byte {
	const field, opts = `"include_usage":true`, `{"include_usage":true}`
	switch o := f.opts; {
	case f.includeUsage[1] != 0: // false or null
		return splice(body, f.includeUsage[0], f.includeUsage[1], "true")
	case o[1] == 0: // no stream_options: first in the object
		open := bytes.IndexByte(body, '{') + 1
		return splice(body, open, open, `"stream_options":`+opts+`,`)
	case body[o[0]] == 'n' || len(bytes.TrimSpace(body[o[0]+1:o[1]-1])) == 0: // null or {}
		return splice(body, o[0], o[1], opts)
	default: // an object without include_usage
		return splice(body, o[0]+1, o[0]+1, field+",")
	}
}

// splice returns b with b[i:j] replaced by s, in a new slice.
func splice(b []byte, i, j int, s string) []byte {
	out := make([]byte, 0, len(b)-(j-i)+len(s))
	return append(append(append(out, b[:i]...), s...), b[j:]...)
}

// forwardQuery returns the parameters of query whose (unescaped) names
// names lists, as they came; the others are dropped (a Gemini-style ?key=
// may hold the caller's secret), and so is a pair with a ";", which some
// servers read as a separator ("alt=sse;key=...").
func forwardQuery(query string, names []string) string {
	if query == "" || len(names) == 0 {
		return ""
	}
	var out []string
	for _, pair := range strings.Split(query, "&") {
		name, _, _ := strings.Cut(pair, "=")
		if name, err := url.QueryUnescape(name); err == nil && slices.Contains(names, name) && !strings.Contains(pair, ";") {
			out = append(out, pair)
		}
	}
	return strings.Join(out, "&")
}

// stripUsage is an event stream less its usage-only chunks (see
// askUsage). It reads whole events (lines up to a blank one) and passes
// every other event on as it came. An event longer than max
// (maxStripEvent) is passed on as it comes, unread: a usage chunk is a few
// hundred bytes.
type stripUsage struct {
	src     *bufio.Reader
	body    io.Closer
	max     int
	event   []byte // the event being read
	out     []byte // bytes ready for the caller
	passing bool   // inside an event longer than max: pass lines on
	err     error
}

// maxStripEvent bounds the event a stripUsage holds.
const maxStripEvent = 64 << 10

func newStripUsage(body io.ReadCloser, max int) *stripUsage {
	return &stripUsage{src: bufio.NewReader(body), body: body, max: max}
}

func (s *stripUsage) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.next()
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// next reads one line and moves what is ready to out.
func (s *stripUsage) next() {
	line, err := s.src.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		err = nil // a long line, read in parts: part of an event
	}
	blank := len(bytes.TrimRight(line, "\r\n")) == 0 && len(line) > 0
	switch {
	case s.passing:
		s.out = append(s.out[:0], line...)
		s.passing = !blank
	default:
		s.event = append(s.event, line...)
		if blank || err != nil {
			if !usageOnly(s.event) {
				s.out = append(s.out[:0], s.event...)
			}
			s.event = s.event[:0]
		} else if len(s.event) > s.max {
			s.out, s.event = append(s.out[:0], s.event...), s.event[:0]
			s.passing = true
		}
	}
	s.err = err
}

func (s *stripUsage) Close() error { return s.body.Close() }

// usageOnly reports whether event is a chunk with no choices and a usage:
// the one include_usage adds.
func usageOnly(event []byte) bool {
	var data []byte
	for _, line := range bytes.Split(event, []byte("\n")) {
		if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	var chunk struct {
		Choices *[]json.RawMessage `json:"choices"`
		Usage   json.RawMessage    `json:"usage"`
	}
	if len(data) == 0 || json.Unmarshal(data, &chunk) != nil {
		return false
	}
	return chunk.Choices != nil && len(*chunk.Choices) == 0 && len(chunk.Usage) > 0 && string(chunk.Usage) != "null"
}

// withoutLength drops the Content-Length of a response whose body a
// filter shortens.
func withoutLength(res *http.Response) {
	res.ContentLength = -1
	res.Header.Del("Content-Length")
}
