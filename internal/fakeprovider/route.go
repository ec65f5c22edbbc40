package fakeprovider

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// op is an operation a provider serves.
type op uint8

const (
	opChat op = iota
	opCompletions
	opEmbeddings
	opResponses
	opModels
	opMessages
	opGenerate // Gemini's generateContent and streamGenerateContent
)

// endpoint is the operation of a path, and the method it answers.
type endpoint struct {
	op     op
	method string
}

// routes are the paths of OpenAI's and Anthropic's APIs; Azure's and
// Gemini's hold a name (azureRoute, geminiRoute).
var routes = map[string]map[string]endpoint{
	OpenAI: {
		"/v1/chat/completions": {opChat, http.MethodPost},
		"/v1/completions":      {opCompletions, http.MethodPost},
		"/v1/embeddings":       {opEmbeddings, http.MethodPost},
		"/v1/responses":        {opResponses, http.MethodPost},
		"/v1/models":           {opModels, http.MethodGet},
	},
	Anthropic: {
		"/v1/messages": {opMessages, http.MethodPost},
		"/v1/models":   {opModels, http.MethodGet},
	},
}

// azureOps are the operations of Azure's /openai/deployments/{d}/... paths.
var azureOps = map[string]op{"chat/completions": opChat, "completions": opCompletions, "embeddings": opEmbeddings}

// call is a request the provider will answer: what it asks for, and what
// it costs.
type call struct {
	op           op
	model        string
	stream       bool  // an event stream, or Gemini's array of chunks
	sse          bool  // Gemini: alt=sse
	includeUsage bool  // OpenAI: stream_options.include_usage
	prompt       int64 // the tokens the answer reports
	completion   int64
	need         int64 // what the call holds of the token quota while it runs
	id           string
	created      int64 // Unix seconds
}

// fields are the members of a request body the provider reads.
type fields struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int64 `json:"max_tokens"`
	MaxCompletionTokens int64 `json:"max_completion_tokens"`
	MaxOutputTokens     int64 `json:"max_output_tokens"`
	GenerationConfig    struct {
		MaxOutputTokens int64 `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

// maxOut is the most output the request asks for, 0 if it names none.
func (f *fields) maxOut() int64 {
	return max(f.MaxTokens, f.MaxCompletionTokens, f.MaxOutputTokens, f.GenerationConfig.MaxOutputTokens)
}

// maxBody bounds a request body: a larger one gets 413.
const maxBody = 64 << 20

// parse reads r, whose body is body (up to a byte past maxBody), into
// its call: its credential, its path (and for Azure its api-version and
// deployment), its body, and its model. A request the provider would not
// take gets its problem.
func (p *Provider) parse(r *http.Request, body []byte) (*call, *problem) {
	if !p.authorized(r) {
		return nil, p.unauthorized()
	}
	c, model, pr := p.route(r)
	if pr != nil {
		return nil, pr
	}
	if len(body) > maxBody {
		return nil, &problem{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("the body is over %d bytes (fakeprovider)", maxBody)}
	}
	var f fields
	if r.Method == http.MethodPost {
		if err := json.Unmarshal(body, &f); err != nil {
			return nil, &problem{status: http.StatusBadRequest, code: "invalid_json", msg: fmt.Sprintf("the body is not JSON: %v", err)}
		}
	}
	if c.model = model; model == "" {
		c.model = f.Model
	}
	if pr := p.checkModel(c, r.URL.Path); pr != nil {
		return nil, pr
	}
	if c.op != opGenerate {
		c.stream, c.includeUsage = f.Stream, f.StreamOptions.IncludeUsage
	}
	p.cost(c, body, f.maxOut())
	return c, nil
}

// authorized reports whether r carries the provider's credential, where
// its API has it; any request is when Options.Key is "".
func (p *Provider) authorized(r *http.Request) bool {
	if p.opts.Key == "" {
		return true
	}
	var got string
	switch p.opts.API {
	case OpenAI:
		got, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	case AzureOpenAI:
		got = r.Header.Get("api-key")
	case Anthropic:
		got = r.Header.Get("x-api-key")
	case Gemini:
		got = r.Header.Get("x-goog-api-key")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(p.opts.Key)) == 1
}

// unauthorized is the 401 of a request without the credential.
func (p *Provider) unauthorized() *problem {
	pr := &problem{status: http.StatusUnauthorized, code: "invalid_api_key", msg: "Incorrect API key provided (fakeprovider)."}
	if p.opts.API == AzureOpenAI {
		pr.msg = "Access denied due to invalid subscription key or wrong API endpoint (fakeprovider)."
	}
	return pr
}

// route returns the call of r's method and path, and the model its path
// names (Azure's deployment, Gemini's model), if any.
func (p *Provider) route(r *http.Request) (*call, string, *problem) {
	switch p.opts.API {
	case AzureOpenAI:
		return p.azureRoute(r)
	case Gemini:
		return geminiRoute(r)
	}
	ep, ok := routes[p.opts.API][r.URL.Path]
	if !ok {
		return nil, "", notFound(r)
	}
	if r.Method != ep.method {
		return nil, "", notAllowed(r, ep.method)
	}
	return &call{op: ep.op}, "", nil
}

// azureRoute routes Azure OpenAI's paths: /openai/deployments/{d}/...
// (the deployment is the call's model) and /openai/responses (the body's
// model is its deployment), each with the api-version the resource
// serves.
func (p *Provider) azureRoute(r *http.Request) (*call, string, *problem) {
	c, deployment := &call{op: opResponses}, ""
	if r.URL.Path != "/openai/responses" {
		rest, ok := strings.CutPrefix(r.URL.Path, "/openai/deployments/")
		d, action, _ := strings.Cut(rest, "/")
		o, known := azureOps[action]
		if !ok || d == "" || !known {
			return nil, "", notFound(r)
		}
		c, deployment = &call{op: o}, d
	}
	if r.Method != http.MethodPost {
		return nil, "", notAllowed(r, http.MethodPost)
	}
	if v := r.URL.Query().Get("api-version"); v == "" || (p.opts.APIVersion != "" && v != p.opts.APIVersion) {
		return nil, "", &problem{status: http.StatusBadRequest, azure: "BadRequest",
			msg: fmt.Sprintf("API version %q not supported: this resource serves api-version=%s (fakeprovider)", v, p.opts.APIVersion)}
	}
	return c, deployment, nil
}

// geminiRoute routes Gemini's /v1beta/models/{model}:generateContent and
// :streamGenerateContent, an event stream with alt=sse, else a JSON array
// of chunks.
func geminiRoute(r *http.Request) (*call, string, *problem) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	i := strings.LastIndexByte(rest, ':')
	if !ok || i <= 0 || strings.Contains(rest, "/") {
		return nil, "", notFound(r)
	}
	c := &call{op: opGenerate}
	switch rest[i+1:] {
	case "generateContent":
	case "streamGenerateContent":
		c.stream, c.sse = true, r.URL.Query().Get("alt") == "sse"
	default:
		return nil, "", notFound(r)
	}
	if r.Method != http.MethodPost {
		return nil, "", notAllowed(r, http.MethodPost)
	}
	return c, rest[:i], nil
}

// checkModel refuses a call without a model, or of one the provider does
// not have: for Azure a deployment not in Options.Deployments, for the
// others a model not in Options.Models (each when set).
func (p *Provider) checkModel(c *call, path string) *problem {
	if c.op == opModels {
		return nil
	}
	if c.model == "" {
		return &problem{status: http.StatusBadRequest, msg: "you must provide a model parameter (fakeprovider)"}
	}
	if p.opts.API == AzureOpenAI {
		if p.opts.Deployments != nil && !slices.Contains(p.opts.Deployments, c.model) {
			return &problem{status: http.StatusNotFound, azure: "DeploymentNotFound",
				msg: fmt.Sprintf("The API deployment %q for this resource does not exist (fakeprovider).", c.model)}
		}
		return nil
	}
	if p.opts.Models != nil && !slices.Contains(p.opts.Models, c.model) {
		return &problem{status: http.StatusNotFound, code: "model_not_found",
			msg: fmt.Sprintf("The model %q does not exist or you do not have access to it (fakeprovider, %s).", c.model, path)}
	}
	return nil
}

// defaultCompletion is the output of a call that names no maximum, when
// Options.Usage is nil.
const defaultCompletion = 16

// cost sets what c reports and holds: by Options.Usage, else a prompt of a
// token per 4 bytes of body and an output of maxOut, or
// defaultCompletion. It holds its prompt and its maximum output (or its
// output, if more), as OpenAI checks a request against its quota; an
// embedding has no output.
func (p *Provider) cost(c *call, body []byte, maxOut int64) {
	if c.op == opModels {
		return
	}
	prompt, completion := int64(len(body)/4), maxOut
	if completion == 0 {
		completion = defaultCompletion
	}
	if p.opts.Usage != nil {
		prompt, completion = p.opts.Usage(c.model, body)
		prompt, completion = max(0, prompt), max(0, completion)
	}
	if c.op == opEmbeddings {
		c.prompt, c.need = prompt, prompt
		return
	}
	c.prompt, c.completion = prompt, completion
	c.need = prompt + max(maxOut, completion)
}

// notFound is the 404 of a path the provider does not serve.
func notFound(r *http.Request) *problem {
	return &problem{status: http.StatusNotFound, msg: fmt.Sprintf("Invalid URL (%s %s) (fakeprovider)", r.Method, r.URL.Path)}
}

// notAllowed is the 405 of a path served for another method.
func notAllowed(r *http.Request, method string) *problem {
	return &problem{status: http.StatusMethodNotAllowed,
		msg: fmt.Sprintf("%s %s: this path answers %s only (fakeprovider)", r.Method, r.URL.Path, method)}
}
