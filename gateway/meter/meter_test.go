package meter

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/ratestore/ratestore/internal/sat"
	"github.com/stretchr/testify/require"
)

// Responses as the upstreams send them. anthropicSSE reports 25 input
// tokens in message_start (and 1 output token so far), 15 output in
// message_delta; openAISSE, streamed with stream_options.include_usage,
// has "usage": null in every chunk but the last before [DONE], which has
// 7 input and 8 output tokens and no choices.
const (
	openAIChat    = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	anthropicChat = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`
	anthropicSSE  = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	openAISSE = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}` + "\n\n" +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"content":"Hello"}}],"usage":null}` + "\n\n" +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n" +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-x","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":8,"total_tokens":15}}` + "\n\n" +
		"data: [DONE]\n\n"
)

// result is what a Reader reported at its end.
type result struct {
	calls           int
	tokens          int64 // input + output
	found, tooLarge bool
}

// meterOf returns a Reader of body and what it reports.
func meterOf(body string, k Kind) (*Reader, *result) {
	r := &result{}
	m := New(io.NopCloser(strings.NewReader(body)), k, false, func(u Usage) {
		r.calls++
		r.tokens, r.found, r.tooLarge = total(u.Counts), u.Found, u.TooLarge
	})
	return m, r
}

// total is the input and output tokens of c.
func total(c Counts) int64 { return sat.Add(c.Input, c.Output) }

// readVia reads m to its end through wrap and closes it, requiring the
// bytes to pass unchanged.
func readVia(t *testing.T, m *Reader, wrap func(io.Reader) io.Reader, want string) {
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
	anthropic, openai := anthropicSSE, openAISSE
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
		{"responses incomplete", "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"usage\":{\"input_tokens\":5,\"output_tokens\":64,\"output_tokens_details\":{\"reasoning_tokens\":60}}}}\n\n", 69, true},
		{"responses failed", "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\"},\"usage\":{\"input_tokens\":5,\"output_tokens\":2}}}\n\n", 7, true},
		{"gemini sse", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]}}],\"usageMetadata\":{\"promptTokenCount\":9,\"totalTokenCount\":9}}\r\n\r\ndata: {\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":4,\"thoughtsTokenCount\":20,\"totalTokenCount\":33}}\r\n\r\n", 33, true},
		{"usage in a nested object is not the response's", "data: {\"choices\":[{\"delta\":{\"usage\":{\"total_tokens\":500}}}],\"x\":{\"usage\":{\"total_tokens\":500}}}\n\n", 0, false},
		{"usage in a string", "data: {\"text\":\"{\\\"usage\\\":{\\\"total_tokens\\\":500}}\"}\n\n", 0, false},
		{"malformed json", "data: {\"usage\":{\"total_tokens\":3.5}}\n\n", 0, false},
		{"negative", "data: {\"usage\":{\"total_tokens\":-3}}\n\n", 0, false},
	} {
		// Every split of the stream into two reads, and one byte at a time.
		for i := 0; i <= len(c.stream); i++ {
			m, r := meterOf(c.stream, SSE)
			readVia(t, m, func(rd io.Reader) io.Reader { return &splitReader{rd, []int{i}} }, c.stream)
			require.Equal(t, result{1, c.tokens, c.found, false}, *r, "%s split at %d", c.name, i)
		}
		m, r := meterOf(c.stream, SSE)
		readVia(t, m, iotest.OneByteReader, c.stream)
		require.Equal(t, result{1, c.tokens, c.found, false}, *r, c.name)
	}
}

// TestStreamSizes: lines and events of any size are read, holding
// neither: a usage after megabytes of data in the same event counts, and
// so do the events after it.
func TestStreamSizes(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	for _, stream := range []string{
		"data: {\"pad\":\"" + big + "\",\"usage\":{\"total_tokens\":1000}}\n\ndata: {\"usage\":{\"total_tokens\":7}}\n\n",
		"data: {\"usage\":{\"total_tokens\":7},\ndata: \"pad\":\"" + big + "\",\ndata: \"pad2\":\"" + big[:40] + "\"}\n\n",
		": " + big + "\ndata: {\"usage\":{\"total_tokens\":7}}\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"" + big + "\"}}],\"usage\":{\"total_tokens\":7}}\n\n",
	} {
		for _, wrap := range []func(io.Reader) io.Reader{
			func(r io.Reader) io.Reader { return r },
			iotest.HalfReader,
		} {
			m, r := meterOf(stream, SSE)
			readVia(t, m, wrap, stream)
			require.Equal(t, result{1, 7, true, false}, *r)
			require.Less(t, cap(m.sse.head), 64)
			require.Less(t, cap(m.sse.scan.capture), 1<<10)
		}
	}
}

func TestJSONUsage(t *testing.T) {
	for _, c := range []struct {
		body   string
		tokens int64
		found  bool
	}{
		{openAIChat, 7, true},
		{anthropicChat, 30, true},
		{`{"usage":{"prompt_tokens":5,"completion_tokens":6}}`, 11, true},
		// Anthropic counts prompt-cache tokens apart from input_tokens.
		{`{"type":"message","usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":3000,"output_tokens":20}}`, 3230, true},
		{`{"usage":{"input_tokens":0,"cache_read_input_tokens":7,"output_tokens":1,"cache_creation_input_tokens":null}}`, 8, true},
		{`{"usage":{"total_tokens":0}}`, 0, true},
		{`{"data":[]}`, 0, false},
		// Embeddings.
		{`{"object":"list","data":[{"embedding":[0.1,-2e-3]}],"usage":{"prompt_tokens":8,"total_tokens":8}}`, 8, true},
		// OpenAI's prompt_tokens includes its cached tokens; completion_tokens its reasoning.
		{`{"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":80},"completion_tokens_details":{"reasoning_tokens":40}}}`, 150, true},
		// The Responses API.
		{`{"object":"response","status":"completed","output":[],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":25},"total_tokens":40}}`, 40, true},
		// Gemini: thoughtsTokenCount is output that candidatesTokenCount leaves out.
		{`{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}],"usageMetadata":{"promptTokenCount":9,"cachedContentTokenCount":3,"candidatesTokenCount":4,"thoughtsTokenCount":20,"toolUsePromptTokenCount":2,"totalTokenCount":35}}`, 35, true},
		// Gemini's streamGenerateContent without alt=sse: an array of chunks, the last usage wins.
		{`[{"candidates":[],"usageMetadata":{"promptTokenCount":9}},` + "\n" + `{"candidates":[],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":7,"totalTokenCount":16}}]`, 16, true},
		// A total alone counts.
		{`{"usage":{"total_tokens":12}}`, 12, true},
		{`{"usage":{"total_tokens":5}`, 5, true}, // the usage object is whole
		{`{"usage":{"total_tokens":5`, 0, false},
		{`[1,2]`, 0, false},
	} {
		m, r := meterOf(c.body, JSON)
		readVia(t, m, iotest.HalfReader, c.body)
		require.Equal(t, result{1, c.tokens, c.found, false}, *r, c.body)
	}

	// A body of any size: the usage after 20 MiB of content counts, and
	// the meter holds none of it.
	big := `{"id":"x","choices":[{"message":{"content":"` + strings.Repeat("y", 20<<20) + `"}}],` + `"usage":{"prompt_tokens":5,"completion_tokens":6}}`
	m, r := meterOf(big, JSON)
	readVia(t, m, func(r io.Reader) io.Reader { return r }, big)
	require.Equal(t, result{1, 11, true, false}, *r)
	require.Less(t, cap(m.json.capture), 1<<10)

	// A usage object too large to be one is skipped, and said so.
	huge := `{"usage":{"pad":"` + strings.Repeat("z", MaxUsageBytes) + `","total_tokens":5}}`
	m, r = meterOf(huge, JSON)
	readVia(t, m, iotest.HalfReader, huge)
	require.Equal(t, result{1, 0, false, true}, *r)
}

// TestMeterEnds: the usage is reported once, at the end or the close; a
// JSON body cut short counts nothing, a stream what it reported before.
func TestMeterEnds(t *testing.T) {
	m, r := meterOf(openAIChat, JSON)
	buf := make([]byte, 10)
	_, err := m.Read(buf)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.Equal(t, result{1, 0, false, false}, *r)

	stream := anthropicSSE
	cut := strings.Index(stream, "event: message_stop")
	m, r = meterOf(stream[:cut], SSE)
	_, err = io.ReadAll(m)
	require.NoError(t, err)
	require.Equal(t, 1, r.calls)
	require.NoError(t, m.Close())
	require.Equal(t, result{1, 40, true, false}, *r, "closing again reports nothing more")

	// A read error: the stream's usage so far counts, once, at Close.
	broken := errors.New("connection reset")
	r = &result{}
	m = New(io.NopCloser(io.MultiReader(strings.NewReader(stream[:cut]), iotest.ErrReader(broken))), SSE, false,
		func(u Usage) { r.calls, r.tokens, r.found = r.calls+1, total(u.Counts), u.Found })
	_, err = io.ReadAll(m)
	require.ErrorIs(t, err, broken)
	require.Zero(t, r.calls)
	require.NoError(t, m.Close())
	require.Equal(t, result{1, 40, true, false}, *r)
}

func TestKindOf(t *testing.T) {
	for ct, want := range map[string]Kind{
		"application/json":                   JSON,
		"application/json; charset=utf-8":    JSON,
		"Application/JSON":                   JSON,
		"application/problem+json":           JSON,
		"text/event-stream":                  SSE,
		"text/event-stream; charset=utf-8":   SSE,
		"text/plain":                         None,
		"":                                   None,
		"application/x-ndjson":               None,
		"application/jsonx":                  None,
		"multipart/form-data; boundary=json": None,
	} {
		require.Equal(t, want, KindOf(http.Header{"Content-Type": {ct}}), ct)
	}
	h := http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	require.Equal(t, None, KindOf(h))
	h.Set("Content-Encoding", "identity")
	require.Equal(t, JSON, KindOf(h))
}

// TestCounts: the counts by type follow every dialect's own definitions.
func TestCounts(t *testing.T) {
	for _, c := range []struct {
		usage  string
		counts Counts
	}{
		// Anthropic: input_tokens leaves out the cache.
		{`{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":3000,"output_tokens":20}`,
			Counts{Input: 3210, Output: 20, CacheRead: 3000, CacheWrite: 200}},
		{`{"input_tokens":10,"cache_creation_input_tokens":200,"cache_creation":{"ephemeral_5m_input_tokens":150,"ephemeral_1h_input_tokens":50},"output_tokens":20}`,
			Counts{Input: 210, Output: 20, CacheWrite: 200, CacheWrite1h: 50}},
		// OpenAI: prompt_tokens includes the cached, completion_tokens the reasoning.
		{`{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":80},"completion_tokens_details":{"reasoning_tokens":40}}`,
			Counts{Input: 100, Output: 50, CacheRead: 80, Reasoning: 40}},
		// Gemini: thoughts come on top of the candidates; tool-use prompts are input.
		{`{"promptTokenCount":9,"cachedContentTokenCount":3,"toolUsePromptTokenCount":2,"candidatesTokenCount":4,"thoughtsTokenCount":20,"totalTokenCount":35}`,
			Counts{Input: 11, Output: 24, CacheRead: 3, Reasoning: 20}},
	} {
		var tl tally
		tl.addJSON([]byte(c.usage))
		u := tl.usage()
		require.True(t, u.Found)
		require.Equal(t, c.counts, u.Counts, c.usage)
	}
}

func TestTallySaturates(t *testing.T) {
	var tl tally
	tl.addJSON([]byte(`{"input_tokens":9223372036854775807,"output_tokens":5}`))
	u := tl.usage()
	require.True(t, u.Found)
	require.Equal(t, int64(1<<63-1), total(u.Counts))

	tl = tally{}
	tl.addJSON([]byte(`{"input_tokens":1,"cache_read_input_tokens":9223372036854775807}`))
	u = tl.usage()
	require.True(t, u.Found)
	require.Equal(t, Counts{Input: 1<<63 - 1, CacheRead: 1<<63 - 1}, u.Counts, "cache tokens saturate too")
}
