// Package fakeprovider is a model provider to run the gateway against, in
// tests and in walkthroughs: an http.Handler that speaks one API (OpenAI,
// Azure OpenAI, Anthropic or Gemini) as the real one does, as far as the
// gateway sees it, and that enforces a quota as the real one does. It is
// an ordinary package, not a test file, so that the tests of several
// packages and the command below can share it.
//
// A Provider answers the generating calls of its API, JSON or streamed,
// with the usage each API reports where it reports it (the shapes the
// gateway's meter reads): OpenAI's /v1/chat/completions, /v1/completions,
// /v1/embeddings and /v1/responses, and GET /v1/models; Azure's
// /openai/deployments/{deployment}/chat/completions, /completions and
// /embeddings and /openai/responses, each with ?api-version=;
// Anthropic's /v1/messages and GET /v1/models; Gemini's
// /v1beta/models/{model}:generateContent and :streamGenerateContent (with
// alt=sse an event stream, else a JSON array). Every model says the same
// few words; what a call costs is Options.Usage.
//
// Its quotas are a provider's: a rolling minute of tokens and of requests,
// and a number of calls in flight (Options). A call holds its prompt and
// its maximum output (max_tokens and the like) of the tokens while it
// runs, as OpenAI checks a request against its quota, and is charged its
// prompt and output when its answer is produced; what is charged in any
// minute never passes TokensPerMinute. A call that does not fit gets 429
// with Retry-After, the seconds until it would (none when no minute can
// hold it), and the API's own error body. The minute is Options.Now's, so
// a test moves it with a fake clock.
//
// A test sets failures at run time (Fail, FailRetryAfter, Down, Hang,
// Heal), keeps calls in flight without sleeping (Hold, WaitHeld), and
// reads what came once it is over (WaitIdle, Stats, Last).
//
// # The command
//
// internal/fakeprovider/cmd/fakeprovider serves one Provider, for an
// operator's walkthrough of the gateway's upstream pools, one shell a
// provider:
//
//	OPENAI_KEY_A=sk-a go run ./internal/fakeprovider/cmd/fakeprovider -listen 127.0.0.1:18101 -api openai -key-env OPENAI_KEY_A -tpm 20000 -rpm 60
//	OPENAI_KEY_B=sk-b go run ./internal/fakeprovider/cmd/fakeprovider -listen 127.0.0.1:18102 -api openai -key-env OPENAI_KEY_B -fail 503
//	AZURE_KEY=az go run ./internal/fakeprovider/cmd/fakeprovider -listen 127.0.0.1:18103 -api azure-openai -key-env AZURE_KEY -api-version 2024-10-21 -deployments gpt4o-prod,mini
//
// Its flags: -listen ADDR (default 127.0.0.1:18101); -api openai |
// azure-openai | anthropic | gemini (default openai); -key-env VAR, the
// environment variable holding the credential it requires (none when not
// given; an empty or unset VAR is an error); -tpm N, -rpm N, -concurrent
// N, the quotas (0: none); -fail STATUS, answer every request with that
// status (429 with Retry-After: 1); -delay D, wait D before each answer;
// -api-version V and -deployments D1,D2 (Azure); -models M1,M2. It logs
// a line a request, and its Stats when stopped (Ctrl-C).
package fakeprovider

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The APIs a Provider speaks (Options.API).
const (
	OpenAI      = "openai"
	AzureOpenAI = "azure-openai"
	Anthropic   = "anthropic"
	Gemini      = "gemini"
)

// Options configure a Provider.
type Options struct {
	API string // OpenAI, AzureOpenAI, Anthropic or Gemini

	// The quotas, each counted over a rolling minute (0: none), and the
	// calls in flight at once (0: any number).
	TokensPerMinute, RequestsPerMinute int64
	MaxConcurrent                      int

	Now func() time.Time // the quotas' clock; nil: time.Now

	// Key is the credential every request must carry, where its API has
	// it: "Authorization: Bearer" (OpenAI), api-key (Azure), x-api-key
	// (Anthropic), x-goog-api-key (Gemini); 401 otherwise. "": none.
	Key string

	// APIVersion is the api-version query an Azure request must have
	// (400 otherwise); "": any, but it must have one.
	APIVersion string
	// Deployments are an Azure resource's deployments; a call to another
	// gets 404 DeploymentNotFound. nil: every name is one.
	Deployments []string
	// Models are the models of the other APIs: a call of another gets
	// 404, and GET /v1/models lists them. nil: every model is served, and
	// a few are listed.
	Models []string

	// Usage is what a call costs, the prompt and output tokens its answer
	// reports, from its model and body. nil: a token per 4 bytes of body,
	// and its maximum output (max_tokens, max_completion_tokens,
	// max_output_tokens, generationConfig.maxOutputTokens) or 16. An
	// embedding has no output, whatever Usage says.
	Usage func(model string, body []byte) (prompt, completion int64)
}

// Provider is a fake model provider: see the package documentation. Its
// methods are safe for concurrent use, with each other and with the calls
// it serves.
type Provider struct {
	opts    Options
	now     func() time.Time
	failure atomic.Pointer[failure] // nil: healthy
	delay   atomic.Int64            // SetDelay's

	mu       sync.Mutex
	tokens   window
	requests window
	stats    Stats // InFlight is the count of calls admitted and not ended
	last     Seen
	gate     chan struct{} // Hold's: calls wait until it is closed; nil: none
	held     int           // calls waiting on a gate, a delay or Hang
	active   int           // requests being handled
	changed  chan struct{} // closed, and replaced, when held or active change
}

// Stats are what a Provider has seen since New. Each request is counted
// once in Requests and, once answered, in one of Served, Limited, Failed,
// Refused and Canceled.
type Stats struct {
	Requests int64 // every request that came
	Served   int64 // answered 200
	Limited  int64 // answered 429 by the quotas
	Failed   int64 // answered by a failure mode (Fail, Down, Hang), or cut off by Down after a hold
	Refused  int64 // answered 4xx as the API would: no credential, unknown path, model or deployment, wrong api-version, not JSON
	Canceled int64 // the caller went away while the call was held or delayed, or sent a broken body

	TokensCharged         int64 // the prompt and output of the calls served
	InFlight, MaxInFlight int   // calls admitted by the quotas and not ended: now, and at most at once
	Paths                 map[string]int64
}

// Seen is a request as the Provider got it.
type Seen struct {
	Method, Path string
	RawQuery     string
	Query        url.Values // RawQuery's
	Header       http.Header
	Body         []byte
}

// failure is a failure mode: how every request is answered until Heal.
type failure struct {
	mode   mode
	status int           // failing's
	retry  time.Duration // failing's Retry-After; 0: none
}

type mode uint8

const (
	failing mode = iota + 1
	down
	hanging
)

// New returns a Provider of opts. An API it does not know is a bug of
// the caller: New panics.
func New(opts Options) *Provider {
	if !slices.Contains([]string{OpenAI, AzureOpenAI, Anthropic, Gemini}, opts.API) {
		panic(fmt.Sprintf("fakeprovider: unknown API %q: want %s, %s, %s or %s", opts.API, OpenAI, AzureOpenAI, Anthropic, Gemini))
	}
	p := &Provider{opts: opts, now: opts.Now, changed: make(chan struct{})}
	if p.now == nil {
		p.now = time.Now
	}
	p.tokens.limit, p.requests.limit = opts.TokensPerMinute, opts.RequestsPerMinute
	p.stats.Paths = map[string]int64{}
	return p
}
