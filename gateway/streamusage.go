package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// An OpenAI chat or completions stream reports its usage only when the
// request asks for it (stream_options.include_usage), in one last chunk
// whose choices are empty. A stream that did not ask would pass unmetered,
// so the gateway asks on the caller's behalf (askUsage) and takes that
// chunk out of what the caller sees (stripUsage): the caller gets the
// stream it asked for, byte for byte, and the key is charged what the
// upstream counted.

// askUsage returns the body of an OpenAI streamed chat or completions
// request with stream_options.include_usage set, and true, when the
// request streams without asking for usage; else nil and false. The other
// fields are kept as they are (re-encoded: key order and white space may
// change, values do not).
func askUsage(urlPath string, body []byte) ([]byte, bool) {
	if !strings.HasSuffix(urlPath, "/chat/completions") && !strings.HasSuffix(urlPath, "/completions") {
		return nil, false
	}
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return nil, false
	}
	var stream bool
	if json.Unmarshal(req["stream"], &stream) != nil || !stream {
		return nil, false
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := req["stream_options"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &opts) != nil {
			return nil, false // not an object: the upstream will say so
		}
	}
	var asked bool
	if raw, ok := opts["include_usage"]; ok && json.Unmarshal(raw, &asked) == nil && asked {
		return nil, false
	}
	opts["include_usage"] = json.RawMessage("true")
	var err error
	if req["stream_options"], err = json.Marshal(opts); err != nil {
		return nil, false
	}
	out, err := json.Marshal(req)
	if err != nil {
		return nil, false
	}
	return out, true
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
