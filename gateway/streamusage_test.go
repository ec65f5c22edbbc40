package gateway

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// TestAskUsage: a streamed OpenAI request without include_usage gets it,
// every other byte of it as it came; the result reads as asking.
func TestAskUsage(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{`{"model":"m","stream":true}`, `{"stream_options":{"include_usage":true},"model":"m","stream":true}`},
		{` { "model":"m","stream":true}`, ` {"stream_options":{"include_usage":true}, "model":"m","stream":true}`},
		{`{"model":"m","stream":true,"stream_options":null}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{`{"model":"m","stream":true,"stream_options":{ }}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{`{"model":"m","stream":true,"stream_options":{"x":1}}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true,"x":1}}`},
		{`{"model":"m","stream":true,"stream_options":{"include_usage": false ,"x":1}}`, `{"model":"m","stream":true,"stream_options":{"include_usage": true ,"x":1}}`},
		{`{"model":"m","stream_options":{"x":1,"include_usage":null},"stream":true}`, `{"model":"m","stream_options":{"x":1,"include_usage":true},"stream":true}`},
	} {
		f, err := parseBody([]byte(c.in), openAI)
		require.NoError(t, err, c.in)
		require.True(t, f.stream && !f.usageAsked, c.in)
		out := askUsage([]byte(c.in), f)
		require.Equal(t, c.out, string(out), c.in)
		g, err := parseBody(out, openAI)
		require.NoError(t, err, c.out)
		require.True(t, g.stream && g.usageAsked, c.out)
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
