package gateway

import (
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/ratestore/ratestore/internal/text"
)

// The gateway forwards by allowlist (see Endpoints in the package
// documentation): an endpoint below says what the gateway reads of the
// body, which request fields and query parameters go out, and whether
// the response is charged.

// dialect is the API family of an endpoint, which decides the request
// fields that are forwarded and the body fields that are read.
type dialect uint8

const (
	openAI dialect = 1 << iota
	anthropic
	gemini
)

// endpoint is one operation of an upstream API that the gateway forwards.
type endpoint struct {
	name    string  // for messages: "chat completions"
	dialect dialect // openAI|anthropic for the paths both APIs share
	method  string
	// model: the request names a model, which the key's policy must allow:
	// in its JSON body's "model" field (required), or in the path for
	// Gemini (modelInPath).
	model, modelInPath bool
	// generates: the upstream runs a model and bills for it: the request
	// reserves tokens while it runs and, when no usage can be read, is
	// charged that estimate.
	generates bool
	// output: the request may generate output (not an embedding), which
	// the reservation counts: its maximum, or a default.
	output bool
	// retrieve: the response repeats a stored response (and its usage)
	// that was charged when it was made: never charged again.
	retrieve bool
	// askUsage: an OpenAI stream that reports its usage only if asked
	// (stream_options.include_usage).
	askUsage bool
	query    []string // the query parameters forwarded; every other is dropped
	// azure: a path of the Azure OpenAI client's, served by azure-openai
	// upstreams alone; its model is a deployment's (in the path, or, for
	// responses, the body), read back through the upstreams' deployments.
	azure bool
	// op is the operation an azure-openai upstream is sent an OpenAI
	// request of on the path of a deployment ("chat/completions",
	// "completions", "embeddings"), or "responses"; "" for the others.
	op string
}

// body reports whether requests of e carry a JSON body.
func (e *endpoint) body() bool { return e.method == http.MethodPost }

// The endpoints. A path segment "*" matches one segment of a resource ID;
// Gemini's "{model}:action" segments are matched by geminiAction.
var (
	epChat        = endpoint{name: "chat completions", dialect: openAI, method: "POST", model: true, generates: true, output: true, askUsage: true, op: "chat/completions"}
	epCompletions = endpoint{name: "completions", dialect: openAI, method: "POST", model: true, generates: true, output: true, askUsage: true, op: "completions"}
	epResponses   = endpoint{name: "responses", dialect: openAI, method: "POST", model: true, generates: true, output: true, op: "responses"}
	epEmbeddings  = endpoint{name: "embeddings", dialect: openAI, method: "POST", model: true, generates: true, op: "embeddings"}
	epMessages    = endpoint{name: "messages", dialect: anthropic, method: "POST", model: true, generates: true, output: true, query: []string{"beta"}}
	epCount       = endpoint{name: "count tokens", dialect: anthropic, method: "POST", model: true, query: []string{"beta"}}

	epGetResponse    = endpoint{name: "retrieve a response", dialect: openAI, method: "GET", retrieve: true, query: []string{"include", "include[]"}}
	epDeleteResponse = endpoint{name: "delete a response", dialect: openAI, method: "DELETE"}
	epInputItems     = endpoint{name: "list input items", dialect: openAI, method: "GET", retrieve: true, query: []string{"after", "before", "limit", "order", "include", "include[]"}}
	epModels         = endpoint{name: "list models", dialect: openAI | anthropic, method: "GET", query: []string{"after_id", "before_id", "limit"}}
	epModel          = endpoint{name: "retrieve a model", dialect: openAI | anthropic, method: "GET"}

	epAzureChat        = endpoint{name: "chat completions", dialect: openAI, azure: true, method: "POST", model: true, modelInPath: true, generates: true, output: true, askUsage: true, op: "chat/completions", query: []string{"api-version"}}
	epAzureCompletions = endpoint{name: "completions", dialect: openAI, azure: true, method: "POST", model: true, modelInPath: true, generates: true, output: true, askUsage: true, op: "completions", query: []string{"api-version"}}
	epAzureEmbeddings  = endpoint{name: "embeddings", dialect: openAI, azure: true, method: "POST", model: true, modelInPath: true, generates: true, op: "embeddings", query: []string{"api-version"}}
	epAzureResponses   = endpoint{name: "responses", dialect: openAI, azure: true, method: "POST", model: true, generates: true, output: true, op: "responses", query: []string{"api-version"}}

	epGenerate       = endpoint{name: "generate content", dialect: gemini, method: "POST", model: true, modelInPath: true, generates: true, output: true}
	epStreamGenerate = endpoint{name: "stream generated content", dialect: gemini, method: "POST", model: true, modelInPath: true, generates: true, output: true, query: []string{"alt"}}
	epEmbedContent   = endpoint{name: "embed content", dialect: gemini, method: "POST", model: true, modelInPath: true, generates: true}
	epBatchEmbed     = endpoint{name: "batch embed contents", dialect: gemini, method: "POST", model: true, modelInPath: true, generates: true}
	epCountGemini    = endpoint{name: "count tokens", dialect: gemini, method: "POST", model: true, modelInPath: true}
	epGeminiModels   = endpoint{name: "list models", dialect: gemini, method: "GET", query: []string{"pageSize", "pageToken"}}
	epGeminiModel    = endpoint{name: "retrieve a model", dialect: gemini, method: "GET"}
)

// paths maps each clean path pattern to its endpoints, one per method.
var paths = map[string][]*endpoint{
	"/v1/chat/completions":        {&epChat},
	"/v1/completions":             {&epCompletions},
	"/v1/responses":               {&epResponses},
	"/v1/responses/*":             {&epGetResponse, &epDeleteResponse},
	"/v1/responses/*/input_items": {&epInputItems},
	"/v1/embeddings":              {&epEmbeddings},
	"/v1/messages":                {&epMessages},
	"/v1/messages/count_tokens":   {&epCount},
	"/v1/models":                  {&epModels},
	"/v1/models/*":                {&epModel},
	"/v1beta/models":              {&epGeminiModels},

	// The Azure OpenAI client's paths (api-version in the query, the
	// caller's secret in api-key).
	"/openai/deployments/*/chat/completions": {&epAzureChat},
	"/openai/deployments/*/completions":      {&epAzureCompletions},
	"/openai/deployments/*/embeddings":       {&epAzureEmbeddings},
	"/openai/responses":                      {&epAzureResponses},
	"/v1beta/models/*":                       {&epGeminiModel},
}

// geminiActions are the actions of Gemini's /{version}/models/{model}:action
// paths.
var geminiActions = map[string]*endpoint{
	"generateContent":       &epGenerate,
	"streamGenerateContent": &epStreamGenerate,
	"embedContent":          &epEmbedContent,
	"batchEmbedContents":    &epBatchEmbed,
	"countTokens":           &epCountGemini,
}

// maxModelBytes bounds a model name: longer ones are refused.
const maxModelBytes = 256

// pathRefusal is the refusal of a path that is not served: 404, or 405
// with the methods the path allows.
func pathRefusal(status int, allow, msg string) *refusal {
	code := "unknown_endpoint"
	if status == http.StatusMethodNotAllowed {
		code = "method_not_allowed"
	}
	return &refusal{status: status, typ: typeInvalid, code: code, msg: msg, allow: allow}
}

// lookup returns the endpoint of a request's method and path (as
// http.Request.URL has them: Path decoded, RawPath the escaped form when
// it differs from the default), and for Gemini's model paths the model.
// The path must be clean: no "." or ".." segment, no "//", no trailing
// "/", no escaped "/" or "\": an upstream resolves such paths in ways
// of its own, so the gateway refuses them rather than guess.
func lookup(method, p, rawPath string) (*endpoint, string, *refusal) {
	if !cleanPath(p, rawPath) {
		return nil, "", pathRefusal(http.StatusNotFound, "", "the path is not clean (a . or .. segment, //, a trailing / or an escaped / or \\): send it as the API documents it")
	}
	if ep, model, ok := geminiPath(p); ok {
		if method != ep.method {
			return nil, "", pathRefusal(http.StatusMethodNotAllowed, ep.method, "the "+ep.name+" endpoint answers "+ep.method+" only")
		}
		return ep, model, nil
	}
	eps, ok := paths[pattern(p)]
	if !ok {
		return nil, "", pathRefusal(http.StatusNotFound, "", "this gateway does not serve that endpoint")
	}
	allow := make([]string, 0, len(eps))
	for _, ep := range eps {
		if ep.method == method && ep.modelInPath { // an Azure deployment's
			return ep, strings.SplitN(p, "/", 5)[3], nil
		}
		if ep.method == method {
			return ep, "", nil
		}
		allow = append(allow, ep.method)
	}
	a := strings.Join(allow, ", ")
	return nil, "", pathRefusal(http.StatusMethodNotAllowed, a, "this endpoint answers "+a+" only")
}

// cleanPath reports whether p is a clean absolute path whose escaped form
// hides no "/" or "\".
func cleanPath(p, rawPath string) bool {
	if p == "" || p[0] != '/' || path.Clean(p) != p || strings.IndexByte(p, '\\') >= 0 {
		return false
	}
	raw := strings.ToLower(rawPath)
	return !strings.Contains(raw, "%2f") && !strings.Contains(raw, "%5c")
}

// pattern is p with its resource IDs replaced by "*": the segment after
// /v1/responses/ and /v1/models/ (and /v1beta/models/), and an Azure
// deployment.
func pattern(p string) string {
	for _, pre := range [...]string{"/v1/responses/", "/v1/models/", "/v1beta/models/", "/openai/deployments/"} {
		rest, ok := strings.CutPrefix(p, pre)
		if !ok || rest == "" {
			continue
		}
		id, tail, _ := strings.Cut(rest, "/")
		if id == "" {
			return p
		}
		if tail == "" {
			return pre + "*"
		}
		return pre + "*/" + tail
	}
	return p
}

// geminiPath reads a Gemini model action path,
// /v1beta/models/{model}:{action} or /v1/models/{model}:{action}, of an
// action the gateway serves; ok is false for any other path (an OpenAI
// model ID may hold colons: "ft:gpt-4o:org::id").
func geminiPath(p string) (ep *endpoint, model string, ok bool) {
	var rest string
	if rest, ok = strings.CutPrefix(p, "/v1beta/models/"); !ok {
		if rest, ok = strings.CutPrefix(p, "/v1/models/"); !ok {
			return nil, "", false
		}
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 || strings.IndexByte(rest, '/') >= 0 {
		return nil, "", false
	}
	ep, ok = geminiActions[rest[i+1:]]
	return ep, rest[:i], ok
}

// checkModel returns why model cannot be a model name, or "": it must be
// valid UTF-8 of 1 to maxModelBytes bytes without control or format
// characters (text.Problem).
func checkModel(model string) string {
	if model == "" {
		return "is empty"
	}
	return text.Problem(model, maxModelBytes)
}

// Request fields forwarded upstream, by dialect: what each API documents
// for requests. The credential is the gateway's own (see rewrite); every
// other field, the caller's credentials, cookies, organization and project
// selectors and method overrides among them, is dropped.
var (
	forwardAlways    = []string{"Content-Type", "Accept"}
	forwardOpenAI    = []string{"Openai-Beta"}
	forwardAnthropic = []string{"Anthropic-Version", "Anthropic-Beta"}
)

// forwardHeader returns the request fields of in that go to the upstream
// of an endpoint of dialect d.
func forwardHeader(in http.Header, d dialect) http.Header {
	out := make(http.Header, 4)
	keep := func(names []string) {
		for _, n := range names {
			if v, ok := in[n]; ok {
				out[n] = v
			}
		}
	}
	keep(forwardAlways)
	if d&openAI != 0 {
		keep(forwardOpenAI)
	}
	if d&anthropic != 0 {
		keep(forwardAnthropic)
	}
	return out
}

// Response fields passed back to the caller: the body's own, and the
// upstream's request ID and retry advice. The upstream's rate-limit fields
// (its limits are the operator's account, not the caller's key), its
// organization, cookies and CORS fields are dropped.
var passBack = []string{
	"Content-Type", "Content-Length", "Content-Encoding", "Cache-Control",
	"Retry-After", "X-Should-Retry", "X-Request-Id", "Request-Id",
}

// filterResponse keeps the fields of h that passBack lists, in place.
func filterResponse(h http.Header) {
	for name := range h {
		if !slices.Contains(passBack, name) {
			delete(h, name)
		}
	}
}

// routePath is the pattern of an endpoint's path p, as the ledger records
// it: resource ids as "*" (/v1/responses/*), a Gemini model as {model}
// (/v1beta/models/{model}:generateContent). A route is one of a few
// strings, stored once per block.
func routePath(p string) string {
	if _, model, ok := geminiPath(p); ok {
		return strings.Replace(p, model, "{model}", 1)
	}
	return pattern(p)
}
