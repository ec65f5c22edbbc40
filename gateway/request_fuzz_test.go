package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// The fuzzers of this file hold the gateway's reading of a request to
// what a lenient Go upstream (encoding/json: names matched ignoring case,
// the last of two members winning) would read of it: whatever the gateway
// admits, such an upstream must read the same way, or the gateway meters
// one request and the upstream runs another. Seeds that CI runs as tests
// are in testdata/fuzz/<FuzzName>.

// fzDialects are the dialects of a body, chosen by FuzzRequest's d%3.
var fzDialects = [...]dialect{openAI, anthropic, gemini}

// fzDeep is an object nested depth levels deep in all (the limit of both
// encoding/json and jsontext is 10000).
func fzDeep(depth int) string {
	return `{"model":"m","x":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

// fzRequestSeeds are bodies as the SDKs send them, and the attacks on the
// gateway's reading of them, each with its dialect (index into fzDialects).
var fzRequestSeeds = []struct {
	body string
	d    uint8
}{
	// OpenAI chat completions, as the SDKs send them.
	{`{"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What's the weather in Paris?"}],"model":"gpt-4o","max_completion_tokens":1024,"n":1,"stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"tool_choice":"auto"}`, 0},
	{`{"messages":[{"role":"user","content":"Say this is a test"}],"model":"gpt-4o-mini","stream":true}`, 0},
	{`{"messages":[{"role":"user","content":[{"type":"text","text":"What is in this image?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}],"model":"gpt-4o","max_tokens":300,"n":2,"stream":true,"stream_options":{"include_usage":false}}`, 0},
	{"{\n  \"model\": \"gpt-4.1\",\n  \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}],\n  \"stream\": true,\n  \"stream_options\": { }\n}\n", 0},
	{`{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test","max_tokens":7,"temperature":0,"stream":true,"stream_options":null}`, 0},
	{`{"model":"gpt-4o","stream_options":{"x":1,"include_usage":null},"stream":true,"messages":[]}`, 0},
	// The Responses API, and embeddings.
	{`{"model":"gpt-4.1","input":[{"role":"user","content":[{"type":"input_text","text":"Tell me a story"}]}],"instructions":"Be brief","max_output_tokens":500,"reasoning":{"effort":"low"},"store":false,"stream":true,"tools":[{"type":"web_search_preview"}]}`, 0},
	{`{"model":"o3","input":"hi","background":true}`, 0},
	{`{"input":["hello","world"],"model":"text-embedding-3-small","encoding_format":"float"}`, 0},
	// Anthropic messages and token counting.
	{`{"max_tokens":16000,"messages":[{"role":"user","content":"Hello, Claude"}],"model":"claude-sonnet-4-20250514","system":[{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],"thinking":{"type":"enabled","budget_tokens":10000},"stream":true,"metadata":{"user_id":"u-1"},"tools":[{"name":"get_weather","description":"Get the weather","input_schema":{"type":"object","properties":{"location":{"type":"string"}}}}]}`, 1},
	{`{"model":"claude-3-5-haiku-latest","messages":[{"role":"user","content":"Hi"}]}`, 1},
	// Gemini generateContent, camel and snake case.
	{`{"contents":[{"role":"user","parts":[{"text":"Write a story about a magic backpack."}]}],"generationConfig":{"temperature":0.9,"maxOutputTokens":2048,"candidateCount":1,"stopSequences":["END"],"responseMimeType":"application/json","thinkingConfig":{"thinkingBudget":1024}},"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_ONLY_HIGH"}],"systemInstruction":{"parts":[{"text":"Be kind"}]}}`, 2},
	{`{"contents":[{"parts":[{"text":"hi"}]}],"generation_config":{"max_output_tokens":256,"candidate_count":2}}`, 2},
	{`{"content":{"parts":[{"text":"hello"}]},"taskType":"RETRIEVAL_DOCUMENT"}`, 2},
	// Attacks.
	{"\xef\xbb\xbf{\"model\":\"gpt-4o-mini\"}", 0},
	{`{"model":"gpt-4o-mini","model":"o1-pro"}`, 0},
	{`{"model":"claude-3-5-haiku-latest","Model":"claude-opus-4-1"}`, 1},
	{`{"model":"gpt-4o-mini","mod\u0065l":"o1-pro"}`, 0},
	{`{"model":"m","max_tokens":1,"max_to\u212aens":1000000}`, 1},
	{"{\"model\":\"m\",\"max_tokens\":1,\"max_to\u212aens\":1000000}", 0},
	{"{\"model\":\"m\",\"\u017ftream\":true}", 0},
	{`{"model":"m","max_tokens":100.0}`, 1},
	{`{"model":"m","max_tokens":1e400}`, 0},
	{`{"model":"m","max_tokens":-0}`, 1},
	{`{"model":"m","max_tokens":NaN}`, 0},
	{`{"model":"m","max_tokens":1.5e1,"n":-0.0e5}`, 0},
	{fzDeep(10000), 1},
	{fzDeep(10001), 0},
	{"{\"model\":\"gpt\xff\"}", 0},
	{`{"model":"\ud800"}`, 0},
	{`{"model":"m","stream":true,"stream_options":{"include_usage":false,"Include_Usage":true}}`, 0},
	{`{"generationConfig":{"maxOutputTokens":10},"generation_config":{"maxOutputTokens":99999}}`, 2},
	{`{"generationConfig":{"maxoutputtokens":99999}}`, 2},
	{`{"model":"m"} {"model":"x"}`, 0},
	// End users.
	{`{"model":"gpt-4o","user":"u-17","safety_identifier":"s-1","messages":[]}`, 0},
	{`{"model":"gpt-4o","user":"u-17","User":"admin"}`, 0},
	{`{"model":"gpt-4o","safety_identifier":null,"user":null}`, 0},
	{`{"model":"m","metadata":{"user_id":"u-1","User_Id":"u-2"}}`, 1},
	{`{"model":"m","metadata":{"user_id":null},"Metadata":{"user_id":"x"}}`, 1},
	{`{"model":"m","metadata":null}`, 1},
}

// FuzzRequest: parseBody never panics and refuses with a message of its
// own; what it accepts is one valid JSON object that encoding/json reads
// as the gateway did (the same model, no greater maximum output, the same
// stream flags); and askUsage changes an accepted stream only by asking
// for its usage.
func FuzzRequest(f *testing.F) {
	for _, s := range fzRequestSeeds {
		f.Add([]byte(s.body), s.d)
	}
	f.Fuzz(func(t *testing.T, body []byte, d uint8) {
		dl := fzDialects[d%3]
		orig := bytes.Clone(body)
		fields, err := parseBody(body, dl)
		require.Equal(t, orig, body, "parseBody changed its input")
		if err != nil {
			var be *bodyError
			require.True(t, errors.As(err, &be), "%T %v", err, err)
			require.True(t, strings.HasPrefix(err.Error(), "the request body "), err.Error())
			return
		}
		fzAccepted(t, body, dl, fields)
		if dl != openAI || !fields.stream || fields.usageAsked {
			return
		}
		out := askUsage(body, fields)
		require.Equal(t, orig, body, "askUsage changed its input")
		asked, err := parseBody(out, openAI)
		require.NoError(t, err, "askUsage(%q) = %q", body, out)
		require.True(t, asked.stream && asked.usageAsked, "%q", out)
		require.Equal(t, fields.model, asked.model)
		require.Equal(t, fields.hasModel, asked.hasModel)
		require.Equal(t, fields.maxOutput, asked.maxOutput)
		require.Equal(t, fields.choices, asked.choices)
		require.Equal(t, fields.background, asked.background)
		fzAccepted(t, out, openAI, asked)
		fzOnlyUsageAsked(t, body, out)
	})
}

// fzEndUser checks the end user parseBody read of an accepted body
// against what a Go upstream reads.
func fzEndUser(t *testing.T, body []byte, d dialect, fields bodyFields) {
	t.Helper()
	var up struct {
		Metadata *struct {
			UserID *string `json:"user_id"`
		} `json:"metadata"`
	}
	if d == anthropic {
		require.NoError(t, json.Unmarshal(body, &up), "accepted, but a Go upstream refuses %q", body)
		want := ""
		if up.Metadata != nil && up.Metadata.UserID != nil {
			want = *up.Metadata.UserID
		}
		require.Equal(t, want, fields.endUser, "metadata.user_id: %q", body)
		return
	}
	var o struct {
		User   *string `json:"user"`
		Safety *string `json:"safety_identifier"`
	}
	require.NoError(t, json.Unmarshal(body, &o), "accepted, but a Go upstream refuses %q", body)
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	require.Equal(t, deref(o.User), fields.endUser, "user: %q", body)
	require.Equal(t, deref(o.Safety), fields.safetyID, "safety_identifier: %q", body)
}

// fzAccepted checks a body parseBody accepted (as fields) against
// encoding/json.
func fzAccepted(t *testing.T, body []byte, d dialect, fields bodyFields) {
	t.Helper()
	require.True(t, json.Valid(body), "accepted, but not valid JSON: %q", body)
	require.True(t, utf8.Valid(body), "accepted, but not UTF-8: %q", body)
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	require.True(t, len(trimmed) > 0 && trimmed[0] == '{', "accepted, but not an object: %q", body)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), "%q", body)

	// No name twice in an object, at any depth; no name of a field the
	// gateway reads written otherwise but for case.
	read := map[string][]string{}
	switch d {
	case openAI:
		read[""], read["/stream_options"] = openAIFields, optionFields
	case anthropic:
		read[""], read["/metadata"] = anthropicFields, metadataFields
	case gemini:
		read[""] = geminiFields
		read["/generationConfig"], read["/generation_config"] = configFields, configFields
	}
	err := fzObjects(body, func(at string, names []string) {
		seen := map[string]bool{}
		for _, n := range names {
			require.False(t, seen[n], "accepted, but %q is twice in object %q: %q", n, at, body)
			seen[n] = true
			for _, field := range read[at] {
				if strings.EqualFold(n, field) {
					require.Equal(t, field, n, "accepted, but in object %q %q is read as %q: %q", at, n, field, body)
				}
			}
		}
		if at == "" { // the map holds these names, and no other
			require.Len(t, m, len(names), "%q", body)
			for _, n := range names {
				require.Contains(t, m, n, "%q", body)
			}
		}
	})
	require.NoError(t, err, "%q", body)

	// What a Go upstream reads of the fields the gateway reads.
	switch d {
	case openAI, anthropic:
		var up struct {
			Model         string       `json:"model"`
			MaxTokens     *json.Number `json:"max_tokens"`
			MaxCompletion *json.Number `json:"max_completion_tokens"`
			MaxOutput     *json.Number `json:"max_output_tokens"`
			N             *json.Number `json:"n"`
			Stream        *bool        `json:"stream"`
			Background    *bool        `json:"background"`
			StreamOptions *struct {
				IncludeUsage *bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if d == anthropic { // Anthropic reads only model, max_tokens and stream
			var a struct {
				Model     string       `json:"model"`
				MaxTokens *json.Number `json:"max_tokens"`
				Stream    *bool        `json:"stream"`
			}
			require.NoError(t, json.Unmarshal(body, &a), "accepted, but a Go upstream refuses %q", body)
			up.Model, up.MaxTokens, up.Stream = a.Model, a.MaxTokens, a.Stream
		} else {
			require.NoError(t, json.Unmarshal(body, &up), "accepted, but a Go upstream refuses %q", body)
		}
		if fields.hasModel {
			require.Equal(t, fields.model, up.Model, "the gateway admits model %q, a Go upstream runs %q: %q", fields.model, up.Model, body)
		} else {
			require.Empty(t, up.Model, "the gateway read no model, a Go upstream runs %q: %q", up.Model, body)
		}
		fzEndUser(t, body, d, fields)
		fzMax(t, body, fields.maxOutput, up.MaxTokens, up.MaxCompletion, up.MaxOutput)
		fzChoices(t, body, fields.choices, up.N)
		require.Equal(t, fzTrue(up.Stream), fields.stream, "stream: %q", body)
		require.Equal(t, fzTrue(up.Background), fields.background, "background: %q", body)
		var usage *bool
		if up.StreamOptions != nil {
			usage = up.StreamOptions.IncludeUsage
		}
		require.Equal(t, fzTrue(usage), fields.usageAsked, "include_usage: %q", body)
	case gemini:
		type config struct {
			MaxOutputTokens  *json.Number `json:"maxOutputTokens"`
			MaxOutputTokens2 *json.Number `json:"max_output_tokens"`
			CandidateCount   *json.Number `json:"candidateCount"`
			CandidateCount2  *json.Number `json:"candidate_count"`
		}
		var up struct {
			Config  *config `json:"generationConfig"`
			Config2 *config `json:"generation_config"`
		}
		require.NoError(t, json.Unmarshal(body, &up), "accepted, but a Go upstream refuses %q", body)
		require.False(t, up.Config != nil && up.Config2 != nil, "%q", body)
		c := cmpOr(up.Config, up.Config2)
		if c == nil {
			c = &config{}
		}
		require.False(t, c.MaxOutputTokens != nil && c.MaxOutputTokens2 != nil, "%q", body)
		require.False(t, c.CandidateCount != nil && c.CandidateCount2 != nil, "%q", body)
		fzMax(t, body, fields.maxOutput, c.MaxOutputTokens, c.MaxOutputTokens2)
		fzChoices(t, body, fields.choices, cmpOr(c.CandidateCount, c.CandidateCount2))
	}
}

// cmpOr returns the first of its arguments that is not nil.
func cmpOr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

func fzTrue(b *bool) bool { return b != nil && *b }

// fzMax checks the gateway's maximum output got against the counts a Go
// upstream read: never less than any of them (saturated at
// math.MaxInt64), and their greatest.
func fzMax(t *testing.T, body []byte, got int64, counts ...*json.Number) {
	t.Helper()
	var want int64
	known := true
	for _, c := range counts {
		n, ok := fzCount(t, body, c)
		if !ok {
			known = false
			continue
		}
		require.GreaterOrEqual(t, got, n, "the gateway reserves for %d output tokens, a Go upstream allows %d: %q", got, n, body)
		want = max(want, n)
	}
	if known {
		require.Equal(t, want, got, "maximum output: %q", body)
	}
}

// fzChoices checks the gateway's choices got against the count c a Go
// upstream read.
func fzChoices(t *testing.T, body []byte, got int64, c *json.Number) {
	t.Helper()
	if n, ok := fzCount(t, body, c); ok {
		require.Equal(t, n, got, "choices: %q", body)
	}
}

// fzCount is the value of a count the gateway accepted (nil: absent or
// null, 0), and false when its exponent is too large to compute.
func fzCount(t *testing.T, body []byte, c *json.Number) (int64, bool) {
	t.Helper()
	if c == nil {
		return 0, true
	}
	n, whole, known := fzWhole(string(*c))
	if !known {
		return 0, false
	}
	require.True(t, whole, "accepted count %s is not a whole number >= 0: %q", *c, body)
	return n, true
}

// fzWhole computes with math/big what wholeNumber should return for num,
// a JSON number: its value if it is a whole number >= 0, saturated at
// math.MaxInt64, and whether it is. known is false when num's exponent is
// too large to compute with (|exp| >= 400), unless num is zero.
func fzWhole(num string) (n int64, whole, known bool) {
	mant, exp, hasExp := strings.Cut(strings.ToLower(num), "e")
	if strings.Trim(mant, "-0.") == "" {
		return 0, true, true // zero, of any sign and exponent
	}
	e := 0
	if hasExp {
		digits := strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if len(digits) > 3 {
			return 0, false, false
		}
		if digits != "" {
			e, _ = strconv.Atoi(digits)
		}
		if e >= 400 {
			return 0, false, false
		}
		if strings.HasPrefix(exp, "-") {
			e = -e
		}
	}
	var r big.Rat
	if _, ok := r.SetString(mant + "e" + strconv.Itoa(e)); !ok {
		panic("big.Rat cannot read " + num)
	}
	if !r.IsInt() || r.Sign() < 0 {
		return 0, false, true
	}
	if !r.Num().IsInt64() {
		return math.MaxInt64, true, true
	}
	return r.Num().Int64(), true, true
}

// fzObjects walks the JSON text b with encoding/json's tokens and calls
// visit with the names of each object (unescaped, in order, duplicates
// included) and where it is: "" for the top level, "/name" for the value
// of its member name ("/[]" for an array's element), deeper ones "...".
func fzObjects(b []byte, visit func(at string, names []string)) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var walk func(at string, depth int) error
	walk = func(at string, depth int) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		inner := func(name string) string {
			if depth >= 1 {
				return "..."
			}
			return at + "/" + name
		}
		switch tok {
		case json.Delim('{'):
			var names []string
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				name := k.(string)
				names = append(names, name)
				if err := walk(inner(name), depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			visit(at, names)
		case json.Delim('['):
			for dec.More() {
				if err := walk(inner("[]"), depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
		}
		return nil
	}
	return walk("", 0)
}

// fzOnlyUsageAsked checks that out is in with stream_options.include_usage
// set to true, and nothing else changed: as encoding/json reads them, and
// byte for byte, out being in with one of askUsage's splices.
func fzOnlyUsageAsked(t *testing.T, in, out []byte) {
	t.Helper()
	decode := func(b []byte) map[string]any {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var m map[string]any
		require.NoError(t, dec.Decode(&m), "%q", b)
		return m
	}
	want, got := decode(in), decode(out)
	if opts, ok := want["stream_options"].(map[string]any); ok {
		opts["include_usage"] = true
	} else {
		want["stream_options"] = map[string]any{"include_usage": true}
	}
	require.Equal(t, want, got, "askUsage(%q) = %q", in, out)

	// removed reports whether askUsage may take r out where it puts s.
	removed := func(s string, r []byte) bool {
		switch s {
		case "true":
			return string(r) == "false" || string(r) == "null"
		case `{"include_usage":true}`:
			if string(r) == "null" {
				return true
			}
			return len(r) >= 2 && r[0] == '{' && r[len(r)-1] == '}' && len(bytes.TrimLeft(r[1:len(r)-1], " \t\r\n")) == 0
		}
		return len(r) == 0
	}
	for _, s := range []string{"true", `{"include_usage":true}`, `"include_usage":true,`, `"stream_options":{"include_usage":true},`} {
		for i := 0; ; i++ {
			k := bytes.Index(out[i:], []byte(s))
			if k < 0 {
				break
			}
			i += k
			rest := out[i+len(s):]
			j := len(in) - len(rest)
			if j >= i && bytes.Equal(in[:i], out[:i]) && bytes.Equal(in[j:], rest) && removed(s, in[i:j]) {
				return
			}
		}
	}
	t.Fatalf("askUsage(%q) = %q: not one splice asking for the usage", in, out)
}

// fzNumberSeeds are JSON numbers, whole and not, small and large.
var fzNumberSeeds = []string{
	"0", "-0", "100", "100.0", "1e2", "1E+2", "1000e-1", "1e400", "1e-400", "-1e400",
	"0e99999999999999999999", "9223372036854775807", "9223372036854775808", "-1", "1.5",
	"12345678901234567890", "0.000", "-0.0e-5", "922337203685477580.7e1", "1.0000000000000000001",
}

// FuzzWholeNumber holds wholeNumber to math/big on JSON numbers (with an
// exponent small enough to compute), and to not panicking on anything.
func FuzzWholeNumber(f *testing.F) {
	for _, s := range fzNumberSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := wholeNumber(s)
		if s == "" || !(s[0] == '-' || '0' <= s[0] && s[0] <= '9') || s[len(s)-1] < '0' || s[len(s)-1] > '9' || !json.Valid([]byte(s)) {
			return // not a JSON number token: no panic is all
		}
		want, whole, known := fzWhole(s)
		if !known {
			return
		}
		require.Equal(t, whole, ok, "wholeNumber(%q)", s)
		if ok {
			require.Equal(t, want, n, "wholeNumber(%q)", s)
		}
	})
}

// fzLookupSeeds are requests' method, path and escaped path.
var fzLookupSeeds = [][3]string{
	{"POST", "/v1/chat/completions", ""},
	{"GET", "/v1/responses/resp_123/input_items", ""},
	{"DELETE", "/v1/responses/resp_123", ""},
	{"GET", "/v1/models/ft:gpt-4o:org::id", ""},
	{"POST", "/v1beta/models/gemini-2.0-flash:generateContent", ""},
	{"POST", "/v1/models/gemini-1.5-pro:streamGenerateContent", ""},
	{"POST", "/v1beta/models/a:b:countTokens", "/v1beta/models/a%3Ab:countTokens"},
	{"POST", "/v1/chat/completions", "/v1/chat%2Fcompletions"},
	{"POST", "/v1/chat//completions", ""},
	{"POST", "/v1/./chat/completions", ""},
	{"PUT", "/v1/messages", ""},
	{"POST", "/openai/deployments/gpt4o-prod/chat/completions", ""},
	{"POST", "/openai/deployments/a%2Fb/embeddings", "/openai/deployments/a%2Fb/embeddings"},
	{"POST", "/openai/deployments//completions", ""},
	{"POST", "/openai/deployments/x/chat/completions/", ""},
	{"GET", "/openai/deployments/x/chat/completions", ""},
	{"POST", "/openai/responses", ""},
}

// FuzzLookup: lookup never panics, and serves only clean paths whose
// escaped form hides no separator, with the endpoint's method; a Gemini
// model is the path's segment before its action.
func FuzzLookup(f *testing.F) {
	for _, s := range fzLookupSeeds {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, method, p, raw string) {
		fzLookup(t, method, p, raw)
		// And as a server reads a request target.
		if u, err := url.ParseRequestURI(p); err == nil {
			fzLookup(t, method, u.Path, u.RawPath)
		}
	})
}

func fzLookup(t *testing.T, method, p, raw string) {
	t.Helper()
	ep, model, perr := lookup(method, p, raw)
	if ep == nil {
		require.NotNil(t, perr)
		require.Contains(t, []int{404, 405}, perr.status)
		require.Equal(t, perr.status == 405, perr.allow != "", "%+v", perr)
		return
	}
	require.Nil(t, perr)
	require.Equal(t, ep.method, method)
	require.Equal(t, path.Clean(p), p, "served an unclean path")
	require.True(t, strings.HasPrefix(p, "/"), "%q", p)
	require.NotContains(t, p, "//")
	require.NotContains(t, p, `\`)
	require.True(t, p == "/" || !strings.HasSuffix(p, "/"), "%q", p)
	for _, seg := range strings.Split(p, "/") {
		require.True(t, seg != "." && seg != "..", "%q", p)
	}
	lower := strings.ToLower(raw)
	require.NotContains(t, lower, "%2f")
	require.NotContains(t, lower, "%5c")
	if ep.azure && ep.modelInPath {
		require.NotContains(t, model, "/")
		require.Equal(t, "/openai/deployments/"+model+"/"+ep.op, p)
		require.True(t, slices.Contains(paths[pattern(p)], ep), "%q", p)
		return
	}
	if ep.modelInPath {
		require.NotContains(t, model, "/")
		action := p[strings.LastIndexByte(p, ':')+1:]
		require.Same(t, geminiActions[action], ep)
		require.True(t, p == "/v1beta/models/"+model+":"+action || p == "/v1/models/"+model+":"+action, "%q: %q", p, model)
		_ = checkModel(model) // what the gateway checks next: no panic
		return
	}
	require.Empty(t, model)
	require.True(t, slices.Contains(paths[pattern(p)], ep), "%q", p)
}

// fzQuerySeeds are raw queries.
var fzQuerySeeds = []string{
	"alt=sse", "alt=sse&key=SECRET", "key=SECRET&alt=sse", "al%74=sse&k%65y=x",
	"include%5B%5D=a&include[]=b&after=x&before=y", "alt", "=&&alt=", "%zz=1&alt=json",
	"alt+=1&+alt=2", "alt=sse;key=SECRET", "after=1&after=2&key=3",
}

// FuzzForwardQuery: forwardQuery never panics, and keeps exactly the
// pairs of its query (in order, as they came) whose names unescape to one
// of the names listed.
func FuzzForwardQuery(f *testing.F) {
	for _, s := range fzQuerySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		for _, names := range [][]string{{"alt"}, {"include[]", "after"}} {
			out := forwardQuery(query, names)
			var want []string
			if query != "" {
				for _, pair := range strings.Split(query, "&") {
					name, _, _ := strings.Cut(pair, "=")
					if n, err := url.QueryUnescape(name); err == nil && slices.Contains(names, n) && !strings.Contains(pair, ";") {
						want = append(want, pair)
					}
				}
			}
			require.Equal(t, strings.Join(want, "&"), out, "forwardQuery(%q, %q)", query, names)
			require.NotContains(t, out, ";", "a server that splits on ; would read another name")
			if out == "" {
				continue
			}
			// Every pair out is one of the query's, in order.
			in := strings.Split(query, "&")
			i := 0
			for _, pair := range strings.Split(out, "&") {
				for i < len(in) && in[i] != pair {
					i++
				}
				require.Less(t, i, len(in), "forwardQuery(%q, %q) = %q", query, names, out)
				i++
				name, _, _ := strings.Cut(pair, "=")
				n, err := url.QueryUnescape(name)
				require.NoError(t, err)
				require.Contains(t, names, n)
			}
			// And a Go server reads no other name in it.
			vals, _ := url.ParseQuery(out)
			for n := range vals {
				require.Contains(t, names, n, "forwardQuery(%q, %q) = %q", query, names, out)
			}
		}
	})
}

// FuzzWithDeployment: a body the gateway accepts, its model replaced by a
// deployment's (Azure's responses), is accepted again with that model and
// every other field it reads as it was.
func FuzzWithDeployment(f *testing.F) {
	for _, s := range fzRequestSeeds {
		f.Add([]byte(s.body), "gpt4o-prod")
	}
	f.Add([]byte(`{"model":"gpt-\u0034o","stream":true}`), `dep"\`)
	f.Fuzz(func(t *testing.T, body []byte, dep string) {
		fields, err := parseBody(body, openAI)
		if err != nil || !fields.hasModel || !utf8.ValidString(dep) {
			return
		}
		out := withDeployment(body, fields.modelAt, dep)
		again, err := parseBody(out, openAI)
		require.NoError(t, err, "%s", out)
		require.Equal(t, dep, again.model)
		again.model, again.modelAt, fields.modelAt = fields.model, [2]int{}, [2]int{}
		again.opts, again.includeUsage, fields.opts, fields.includeUsage = [2]int{}, [2]int{}, [2]int{}, [2]int{}
		require.Equal(t, fields, again)
	})
}
