package gateway

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseBody: what the gateway reads of a body, and the bodies it
// refuses because an upstream could read them otherwise.
func TestParseBody(t *testing.T) {
	for _, c := range []struct {
		d               dialect
		body            string
		model           string
		maxOut, choices int64
		stream          bool
	}{
		{openAI, `{"model":"gpt-4o","max_tokens":100}`, "gpt-4o", 100, 0, false},
		{openAI, `{"model":"o3","max_completion_tokens":200,"max_tokens":50}`, "o3", 200, 0, false},
		{openAI, `{"model":"gpt-5","max_output_tokens":300,"stream":true}`, "gpt-5", 300, 0, true},
		{openAI, `{"model":"m","max_tokens":100.0,"n":3}`, "m", 100, 3, false},
		{openAI, `{"model":"m","max_tokens":1e2}`, "m", 100, 0, false},
		{openAI, `{"model":"m","max_tokens":1000e-1}`, "m", 100, 0, false},
		{openAI, `{"model":"m","max_tokens":-0}`, "m", 0, 0, false},
		{openAI, `{"model":"m","max_tokens":null,"stream":null}`, "m", 0, 0, false},
		{openAI, `{"model":"m","max_tokens":1e400}`, "m", math.MaxInt64, 0, false},
		{openAI, `{"model":"m","max_tokens":99999999999999999999}`, "m", math.MaxInt64, 0, false},
		{openAI, `{"mod\u0065l":"gpt-4o"}`, "gpt-4o", 0, 0, false},
		{openAI, "\t{\"model\":\"m\"}\n ", "m", 0, 0, false},
		{anthropic, `{"model":"claude-x","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`, "claude-x", 1024, 0, false},
		{anthropic, `{"model":"claude-x","max_completion_tokens":"ignored: not Anthropic's"}`, "claude-x", 0, 0, false},
		{gemini, `{"contents":[],"generationConfig":{"maxOutputTokens":50,"candidateCount":2}}`, "", 50, 2, false},
		{gemini, `{"generation_config":{"max_output_tokens":70}}`, "", 70, 0, false},
		{gemini, `{"model":"ignored: the path names it"}`, "", 0, 0, false},
	} {
		f, err := parseBody([]byte(c.body), c.d)
		require.NoError(t, err, c.body)
		require.Equal(t, c.model, f.model, c.body)
		require.Equal(t, c.maxOut, f.maxOutput, c.body)
		require.Equal(t, c.choices, f.choices, c.body)
		require.Equal(t, c.stream, f.stream, c.body)
	}

	for _, c := range []struct {
		d    dialect
		body string
		msg  string
	}{
		{openAI, ``, "is empty"},
		{openAI, "\ufeff{\"model\":\"m\"}", "not one valid JSON object"},
		{openAI, `x{"model":"m"}`, "not one valid JSON object"},
		{openAI, `{"model":"m"} {}`, "not one valid JSON object"},
		{openAI, `{"model":"m"}x`, "not one valid JSON object"},
		{openAI, `[{"model":"m"}]`, "is not a JSON object"},
		{openAI, `"model"`, "is not a JSON object"},
		{openAI, `{"model":"m","max_tokens":NaN}`, "not one valid JSON object"},
		{openAI, `{"model":"m","temperature":Infinity}`, "not one valid JSON object"},
		{openAI, `{"model":"o1-pro","Model":"gpt-4o-mini"}`, `field "Model"`},
		{openAI, `{"model":"o1-pro","mod\u0065l":"gpt-4o-mini"}`, "duplicate"},
		{openAI, `{"model":"o1-pro","model":"gpt-4o-mini"}`, "duplicate"},
		{openAI, `{"model":"m","max_tokens":100000,"MAX_TOKENS":1}`, `field "MAX_TOKENS"`},
		{openAI, `{"model":"m","max_to\u212aens":1}`, "case-sensitive"},
		{openAI, `{"model":"m","messages":[{"role":"user","role":"system"}]}`, "duplicate"},
		{openAI, `{"model":"m","stream_options":{"include_usage":true,"Include_Usage":false}}`, "case-sensitive"},
		{openAI, `{"model":7}`, "model that is not a string"},
		{openAI, `{"model":"m","max_tokens":100.5}`, "max_tokens that is not a whole number"},
		{openAI, `{"model":"m","max_tokens":-1}`, "max_tokens that is not a whole number"},
		{openAI, `{"model":"m","max_tokens":"100"}`, "max_tokens that is not a whole number"},
		{openAI, `{"model":"m","stream":"yes"}`, "stream that is not true or false"},
		{openAI, `{"model":"m","stream_options":[]}`, "stream_options that is not an object"},
		{openAI, "{\"model\":\"\xff\"}", "not one valid JSON object"},
		{openAI, `{"model":"m"`, "not one valid JSON object"},
		{gemini, `{"generationConfig":{},"generation_config":{}}`, "both generationConfig and generation_config"},
		{gemini, `{"generationConfig":{"maxOutputTokens":1,"max_output_tokens":900}}`, "both maxOutputTokens"},
		{gemini, `{"GenerationConfig":{"maxOutputTokens":1}}`, "case-sensitive"},
		{gemini, `{"generationConfig":7}`, "not an object"},
		{openAI, strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "not a JSON object"},
		{openAI, `{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, "not one valid JSON object"},
	} {
		_, err := parseBody([]byte(c.body), c.d)
		require.Error(t, err, c.body)
		require.Contains(t, err.Error(), c.msg, c.body)
		require.True(t, strings.HasPrefix(err.Error(), "the request body "), err.Error())
	}
}

// TestWholeNumber: JSON numbers as whole numbers, exactly, saturating.
func TestWholeNumber(t *testing.T) {
	for _, c := range []struct {
		num string
		n   int64
		ok  bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"0.000", 0, true}, {"0e99999999999999999999", 0, true},
		{"7", 7, true}, {"100.0", 100, true}, {"1e2", 100, true}, {"1E+2", 100, true}, {"12.50e1", 125, true},
		{"9223372036854775807", math.MaxInt64, true}, {"9223372036854775808", math.MaxInt64, true},
		{"1e19", math.MaxInt64, true}, {"1e18", 1e18, true}, {"1e99999999999999999999", math.MaxInt64, true},
		{"0.5", 0, false}, {"1.5", 0, false}, {"-1", 0, false}, {"1e-1", 0, false}, {"10e-1", 1, true},
		{"1e-99999999999999999999", 0, false}, {"100e-2", 1, true},
	} {
		n, ok := wholeNumber(c.num)
		require.Equal(t, c.ok, ok, c.num)
		if ok {
			require.Equal(t, c.n, n, c.num)
		}
	}
}

// TestLookup: the endpoints served, and the paths and methods refused.
func TestLookup(t *testing.T) {
	for _, c := range []struct {
		method, path, raw string
		ep                *endpoint
		model             string
	}{
		{"POST", "/v1/chat/completions", "", &epChat, ""},
		{"POST", "/v1/responses", "", &epResponses, ""},
		{"GET", "/v1/responses/resp_1", "", &epGetResponse, ""},
		{"DELETE", "/v1/responses/resp_1", "", &epDeleteResponse, ""},
		{"GET", "/v1/responses/resp_1/input_items", "", &epInputItems, ""},
		{"POST", "/v1/messages", "", &epMessages, ""},
		{"POST", "/v1/messages/count_tokens", "", &epCount, ""},
		{"GET", "/v1/models", "", &epModels, ""},
		{"GET", "/v1/models/ft:gpt-4o:org::id", "/v1/models/ft%3Agpt-4o%3Aorg%3A%3Aid", &epModel, ""},
		{"POST", "/v1beta/models/gemini-pro:generateContent", "", &epGenerate, "gemini-pro"},
		{"POST", "/v1/models/gemini-pro:streamGenerateContent", "", &epStreamGenerate, "gemini-pro"},
		{"POST", "/v1beta/models/a:b:countTokens", "", &epCountGemini, "a:b"},
		{"GET", "/v1beta/models/gemini-pro", "", &epGeminiModel, ""},
	} {
		ep, model, err := lookup(c.method, c.path, c.raw)
		require.Nil(t, err, "%s %s", c.method, c.path)
		require.Same(t, c.ep, ep, "%s %s", c.method, c.path)
		require.Equal(t, c.model, model)
	}
	for _, c := range []struct {
		method, path, raw string
		status            int
	}{
		{"POST", "/v1/chat/completions/", "", 404},
		{"POST", "/v1//chat/completions", "", 404},
		{"POST", "/v1/chat/./completions", "", 404},
		{"POST", "/v1/x/../chat/completions", "", 404},
		{"POST", "/v1/chat/completions", "/v1/chat%2Fcompletions", 404},
		{"POST", "/v1/chat\\completions", "", 404},
		{"POST", "", "", 404},
		{"POST", "v1/chat/completions", "", 404},
		{"POST", "/v1/messages/batches", "", 404},
		{"POST", "/v1/batches", "", 404},
		{"POST", "/v1/files", "", 404},
		{"POST", "/v1beta/models/gemini-pro:predictLongRunning", "", 405},
		{"POST", "/v1beta/cachedContents", "", 404},
		{"GET", "/v1/chat/completions", "", 405},
		{"HEAD", "/v1/chat/completions", "", 405},
		{"OPTIONS", "/v1/messages", "", 405},
		{"PUT", "/v1/responses/resp_1", "", 405},
		{"GET", "/v1beta/models/gemini-pro:generateContent", "", 405},
		{"POST", "/v1/models", "", 405},
	} {
		_, _, err := lookup(c.method, c.path, c.raw)
		require.NotNil(t, err, "%s %s", c.method, c.path)
		require.Equal(t, c.status, err.status, "%s %s", c.method, c.path)
	}
}

// TestCheckModel: model names are valid UTF-8, printable, 1-256 bytes,
// without format characters that would disguise them in the ledger.
func TestCheckModel(t *testing.T) {
	for _, ok := range []string{"gpt-4o", "claude-sonnet-4-5@20250929", "models/gemini-pro", "ft:gpt-4o:org::id", strings.Repeat("m", 256), "模型"} {
		require.Empty(t, checkModel(ok), ok)
	}
	for _, bad := range []string{"", strings.Repeat("m", 257), "\xff", "a\x00b", "a\nb", "a\u0085b", "gpt-4o\u200b", "gpt\u202e"} {
		require.NotEmpty(t, checkModel(bad), bad)
	}
}
