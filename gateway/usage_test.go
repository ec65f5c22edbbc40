package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// result is what a meter reported at its end.
type result struct {
	calls           int
	tokens          int64
	found, tooLarge bool
}

// meterOf returns a meter over body and what it reports.
func meterOf(body string, k kind, maxJSON int64, maxEvent int) (*meter, *result) {
	r := &result{}
	m := newMeter(io.NopCloser(strings.NewReader(body)), k, maxJSON, maxEvent, func(tokens int64, found, tooLarge bool) {
		r.calls++
		r.tokens, r.found, r.tooLarge = tokens, found, tooLarge
	})
	return m, r
}

// readVia reads m to its end through wrap and closes it, requiring the
// bytes to pass unchanged.
func readVia(t *testing.T, m *meter, wrap func(io.Reader) io.Reader, want string) {
	t.Helper()
	got, err := io.ReadAll(wrap(m))
	require.NoError(t, err)
	require.Equal(t, want, string(got))
	require.NoError(t, m.Close())
}

// splitReader returns its bytes in reads of the sizes given, then the rest.
type splitReader struct {
	r     io.Reader
	sizes []int
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.sizes) > 0 {
		p = p[:min(len(p), s.sizes[0])]
		s.sizes = s.sizes[1:]
	}
	return s.r.Read(p)
}

func TestStreamUsage(t *testing.T) {
	anthropic := strings.Join(anthropicStream(25, 15), "")
	openai := strings.Join(openAIStream(7, 8), "")
	for _, c := range []struct {
		name   string
		stream string
		tokens int64
		found  bool
	}{
		{"anthropic", anthropic, 40, true},
		{"openai", openai, 15, true},
		{"anthropic crlf", strings.ReplaceAll(anthropic, "\n", "\r\n"), 40, true},
		{"openai cr", strings.ReplaceAll(openai, "\n", "\r"), 15, true},
		{"no usage", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", 0, false},
		{"usage null only", "data: {\"usage\":null}\n\n", 0, false},
		{"no final blank line", "data: {\"usage\":{\"total_tokens\":9}}", 9, true},
		{"data over two lines", "data: {\"usage\":\ndata: {\"total_tokens\":12}}\n\n", 12, true},
		{"no space after colon, comment", ": keep-alive\ndata:{\"usage\":{\"total_tokens\":3}}\n\n", 3, true},
		{"responses api", "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":6,\"total_tokens\":11}}}\n\n", 11, true},
		{"other fields ignored", "event: x\nid: 1\nretry: 10\ndata: {\"usage\":{\"output_tokens\":4}}\n\n", 4, true},
		{"malformed json", "data: {\"usage\":{\"total_tokens\":3.5}}\n\n", 0, false},
		{"negative", "data: {\"usage\":{\"total_tokens\":-3}}\n\n", 0, false},
	} {
		// Every split of the stream into two reads, and one byte at a time.
		for i := 0; i <= len(c.stream); i++ {
			m, r := meterOf(c.stream, kindSSE, 0, 1<<10)
			readVia(t, m, func(rd io.Reader) io.Reader { return &splitReader{rd, []int{i}} }, c.stream)
			require.Equal(t, result{1, c.tokens, c.found, false}, *r, "%s split at %d", c.name, i)
		}
		m, r := meterOf(c.stream, kindSSE, 0, 1<<10)
		readVia(t, m, iotest.OneByteReader, c.stream)
		require.Equal(t, result{1, c.tokens, c.found, false}, *r, c.name)
	}
}

// TestStreamBounds: a line or an event over the bound is skipped, and the
// events after it still count.
func TestStreamBounds(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, stream := range []string{
		"data: {\"usage\":{\"total_tokens\":1000},\"pad\":\"" + long + "\"}\n\ndata: {\"usage\":{\"total_tokens\":7}}\n\n",
		"data: {\"usage\":{\"total_tokens\":1000},\ndata: \"pad\":\"" + long[:40] + "\",\ndata: \"pad2\":\"" + long[:40] + "\"}\n\ndata: {\"usage\":{\"total_tokens\":7}}\n\n",
		": " + long + long + "\ndata: {\"usage\":{\"total_tokens\":7}}\n\n",
	} {
		for _, wrap := range []func(io.Reader) io.Reader{
			func(r io.Reader) io.Reader { return r },
			iotest.OneByteReader,
			iotest.HalfReader,
		} {
			m, r := meterOf(stream, kindSSE, 0, 64)
			readVia(t, m, wrap, stream)
			require.Equal(t, result{1, 7, true, false}, *r, stream)
			require.LessOrEqual(t, cap(m.sse.line), 64)
		}
	}
}

func TestJSONUsage(t *testing.T) {
	for _, c := range []struct {
		body   string
		tokens int64
		found  bool
	}{
		{openAIJSON(3, 4), 7, true},
		{anthropicJSON(10, 20), 30, true},
		{`{"usage":{"prompt_tokens":5,"completion_tokens":6}}`, 11, true},
		// Anthropic counts prompt-cache tokens apart from input_tokens.
		{`{"type":"message","usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":3000,"output_tokens":20}}`, 3230, true},
		{`{"usage":{"input_tokens":0,"cache_read_input_tokens":7,"output_tokens":1,"cache_creation_input_tokens":null}}`, 8, true},
		{`{"usage":{"total_tokens":0}}`, 0, true},
		{`{"data":[]}`, 0, false},
		{`{"usage":{"total_tokens":5}`, 0, false},
		{`[1,2]`, 0, false},
	} {
		m, r := meterOf(c.body, kindJSON, 1<<20, 0)
		readVia(t, m, iotest.HalfReader, c.body)
		require.Equal(t, result{1, c.tokens, c.found, false}, *r, c.body)
	}

	// Over the bound: passed through, nothing found.
	body := openAIJSON(3, 4)
	m, r := meterOf(body, kindJSON, int64(len(body)-1), 0)
	readVia(t, m, iotest.OneByteReader, body)
	require.Equal(t, result{1, 0, false, true}, *r)
	require.Nil(t, m.buf)
	// At the bound: read.
	m, r = meterOf(body, kindJSON, int64(len(body)), 0)
	readVia(t, m, iotest.OneByteReader, body)
	require.Equal(t, result{1, 7, true, false}, *r)
}

// TestMeterEnds: the usage is reported once, at the end or the close; a
// JSON body cut short counts nothing, a stream what it reported before.
func TestMeterEnds(t *testing.T) {
	m, r := meterOf(openAIJSON(1, 2), kindJSON, 1<<20, 0)
	buf := make([]byte, 10)
	_, err := m.Read(buf)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.Equal(t, result{1, 0, false, false}, *r)

	stream := strings.Join(anthropicStream(25, 15), "")
	cut := strings.Index(stream, "event: message_stop")
	m, r = meterOf(stream[:cut], kindSSE, 0, 1<<10)
	_, err = io.ReadAll(m)
	require.NoError(t, err)
	require.Equal(t, 1, r.calls)
	require.NoError(t, m.Close())
	require.Equal(t, result{1, 40, true, false}, *r, "closing again reports nothing more")

	// A read error: the stream's usage so far counts, once, at Close.
	broken := errors.New("connection reset")
	r = &result{}
	m = newMeter(io.NopCloser(io.MultiReader(strings.NewReader(stream[:cut]), iotest.ErrReader(broken))), kindSSE, 0, 1<<10,
		func(tokens int64, found, tooLarge bool) { r.calls, r.tokens, r.found = r.calls+1, tokens, found })
	_, err = io.ReadAll(m)
	require.ErrorIs(t, err, broken)
	require.Zero(t, r.calls)
	require.NoError(t, m.Close())
	require.Equal(t, result{1, 40, true, false}, *r)
}

func TestBodyKind(t *testing.T) {
	for ct, want := range map[string]kind{
		"application/json":                   kindJSON,
		"application/json; charset=utf-8":    kindJSON,
		"Application/JSON":                   kindJSON,
		"application/problem+json":           kindJSON,
		"text/event-stream":                  kindSSE,
		"text/event-stream; charset=utf-8":   kindSSE,
		"text/plain":                         kindNone,
		"":                                   kindNone,
		"application/x-ndjson":               kindNone,
		"application/jsonx":                  kindNone,
		"multipart/form-data; boundary=json": kindNone,
	} {
		require.Equal(t, want, bodyKind(http.Header{"Content-Type": {ct}}), ct)
	}
	h := http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	require.Equal(t, kindNone, bodyKind(h))
	h.Set("Content-Encoding", "identity")
	require.Equal(t, kindJSON, bodyKind(h))
}

func TestTallySaturates(t *testing.T) {
	var tl tally
	tl.addJSON([]byte(`{"usage":{"input_tokens":9223372036854775807,"output_tokens":5}}`))
	n, found := tl.tokens()
	require.True(t, found)
	require.Equal(t, int64(1<<63-1), n)
	require.False(t, bytes.Contains(nil, usageWord))

	tl = tally{}
	tl.addJSON([]byte(`{"usage":{"input_tokens":1,"cache_read_input_tokens":9223372036854775807}}`))
	n, found = tl.tokens()
	require.True(t, found)
	require.Equal(t, int64(1<<63-1), n, "cache tokens saturate too")
}
