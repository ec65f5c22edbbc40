package meter

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// scanUsages returns the usage objects s copies out of b fed in two pieces
// split at cut, compacted.
func scanUsages(b []byte, cut int) []string {
	var got []string
	s := usageScan{found: func(u []byte) {
		var c bytes.Buffer
		if json.Compact(&c, u) == nil {
			got = append(got, c.String())
		} else {
			got = append(got, "invalid: "+string(u))
		}
	}}
	cut = min(max(cut, 0), len(b))
	s.feed(b[:cut])
	s.feed(b[cut:])
	return got
}

// refUsages returns the usage objects of a valid JSON text, found with
// encoding/json's tokens: the reference usageScan is held to.
func refUsages(t *testing.T, b []byte) []string {
	var out []string
	emit := func(raw json.RawMessage) {
		if len(raw) > 0 && raw[0] == '{' {
			var c bytes.Buffer
			require.NoError(t, json.Compact(&c, raw))
			out = append(out, c.String())
		}
	}
	// members calls fn with each member of the object raw, in order
	// (duplicates included).
	members := func(raw json.RawMessage, fn func(k string, v json.RawMessage)) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		if tok, _ := dec.Token(); tok != json.Delim('{') {
			return
		}
		for dec.More() {
			k, err := dec.Token()
			require.NoError(t, err)
			var v json.RawMessage
			require.NoError(t, dec.Decode(&v))
			fn(k.(string), v)
		}
	}
	doc := func(raw json.RawMessage) {
		members(raw, func(k string, v json.RawMessage) {
			switch k {
			case "usage", "usageMetadata":
				emit(v)
			case "message", "response":
				members(v, func(k string, v json.RawMessage) {
					if k == "usage" {
						emit(v)
					}
				})
			}
		})
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var elems []json.RawMessage
		require.NoError(t, json.Unmarshal(b, &elems))
		for _, e := range elems {
			doc(e)
		}
		return out
	}
	doc(b)
	return out
}

var scanSeeds = []string{
	`{"usage":{"total_tokens":5}}`,
	`{"id":"x","choices":[{"message":{"content":"a \"usage\": {} b","usage":{"n":1}}}],"usage":{"prompt_tokens":5,"completion_tokens":6}}`,
	`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":25,"output_tokens":1}}}`,
	`{"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":6}},"usage":null}`,
	`[{"usageMetadata":{"promptTokenCount":9}},{"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":7}},[{"usage":{"x":1}}],3]`,
	`{"usage":{"a":{"b":[1,{"c":"}"}]}},"usage":{"total_tokens":1}}`,
	`{"message":{"message":{"usage":{"x":1}}},"x":{"usage":{"y":2}},"response":[{"usage":{"z":3}}]}`,
	` { "usage" : { "total_tokens" : 5 } } `,
	`"usage"`, `[]`, `{}`, `null`, `[[[]]]`, `{"usage":"text"}`, `{"usage":[{"a":1}]}`,
	`{"usage":{"total_tokens":5}`, `}}]]{{"usage":{`, `{"a\"usage":{"x":1},"usage\\":{"y":2}}`,
}

// FuzzUsageScan holds usageScan to encoding/json on valid JSON (the same
// usage objects, in the same order, however the text is split) and to
// not panicking on anything else.
func FuzzUsageScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s), len(s)/2)
	}
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		got := scanUsages(b, cut)
		if !json.Valid(b) || bytes.Contains(b, []byte(`\u`)) { // keys are matched as written
			return
		}
		want := refUsages(t, b)
		if len(want) == 0 {
			require.Empty(t, got, "%q", b)
			return
		}
		require.Equal(t, want, got, "%q", b)
	})
}

// FuzzMeterSSE: an event stream passes through a Reader unchanged and
// reports the same usage however it is read.
func FuzzMeterSSE(f *testing.F) {
	f.Add(anthropicSSE, 7)
	f.Add(openAISSE, 1)
	f.Add("data: {\"usage\":\r\ndata: {\"total_tokens\":12}}\r\rdata\n\n:x\ndata:{\"usage\":{\"output_tokens\":4}}", 3)
	f.Fuzz(func(t *testing.T, stream string, size int) {
		size = 1 + min(max(size, 0), 1<<10)
		whole, r1 := meterOf(stream, SSE)
		readVia(t, whole, func(r io.Reader) io.Reader { return r }, stream)
		parts, r2 := meterOf(stream, SSE)
		readVia(t, parts, func(r io.Reader) io.Reader { return &splitReader{r, []int{size, size, 1, size}} }, stream)
		require.Equal(t, *r1, *r2)
	})
}

// TestScanDepth: nesting beyond maxDepth ends the scan, harmlessly.
func TestScanDepth(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+1) + `{"usage":{"total_tokens":1}}`
	require.Empty(t, scanUsages([]byte(deep), 3))
	deep = `{"a":` + strings.Repeat("[", maxDepth-2) + strings.Repeat("]", maxDepth-2) + `,"usage":{"total_tokens":1}}`
	require.Equal(t, []string{`{"total_tokens":1}`}, scanUsages([]byte(deep), 100))
}
