package gateway

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// TestAskUsage: a streamed OpenAI chat or completions request without
// include_usage gets it, keeping its other fields and stream options; any
// other request is left alone.
func TestAskUsage(t *testing.T) {
	out, ok := askUsage("/v1/chat/completions", []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"x":1},"messages":[{"role":"user","content":"hi"}]}`))
	require.True(t, ok)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, map[string]any{"include_usage": true, "x": 1.0}, got["stream_options"])
	require.Equal(t, "gpt-4o", got["model"])
	require.Len(t, got["messages"], 1)

	_, ok = askUsage("/v1/completions", []byte(`{"stream":true,"stream_options":null}`))
	require.True(t, ok)
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"stream":false}`},
		{"/v1/chat/completions", `{"messages":[]}`},
		{"/v1/chat/completions", `{"stream":true,"stream_options":{"include_usage":true}}`},
		{"/v1/chat/completions", `{"stream":true,"stream_options":"bad"}`},
		{"/v1/chat/completions", `not json`},
		{"/v1/messages", `{"stream":true}`},
		{"/v1/responses", `{"stream":true}`},
	} {
		_, ok := askUsage(c.path, []byte(c.body))
		require.False(t, ok, "%s %s", c.path, c.body)
	}
}

// TestStripUsage: the stream the caller sees is the upstream's less its
// usage-only chunk, byte for byte, however the reads are cut; an event
// longer than the bound passes unread.
func TestStripUsage(t *testing.T) {
	chunk := "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n"
	usage := "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":7,\"total_tokens\":18}}\n\n"
	done := "data: [DONE]\n\n"
	long := "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", 300) + "\"}}]}\r\n\r\n"
	for _, read := range []func(io.Reader) io.Reader{
		func(r io.Reader) io.Reader { return r },
		iotest.OneByteReader,
		iotest.HalfReader,
	} {
		up := chunk + ": comment\n" + chunk + long + usage + done
		s := newStripUsage(io.NopCloser(read(strings.NewReader(up))), 200)
		got, err := io.ReadAll(s)
		require.NoError(t, err)
		require.Equal(t, chunk+": comment\n"+chunk+long+done, string(got))
	}

	// A stream cut off mid-event gives what it had, and the upstream's error.
	s := newStripUsage(io.NopCloser(strings.NewReader(chunk+"data: {\"cho")), 200)
	got, err := io.ReadAll(s)
	require.NoError(t, err)
	require.Equal(t, chunk+"data: {\"cho", string(got))
}
