package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/gateway/pool"
	"github.com/ratestore/ratestore/internal/text"
	"github.com/ratestore/ratestore/keystore"
)

// The apis an Upstream may speak: which endpoints it serves.
const (
	APIOpenAI      = "openai"       // OpenAI's paths: /v1/chat/completions, /v1/responses, ...
	APIAzureOpenAI = "azure-openai" // OpenAI's requests, sent on Azure's paths to a deployment
	APIAnthropic   = "anthropic"    // /v1/messages
	APIGemini      = "gemini"       // /v1beta/models/{model}:generateContent, ...
)

// Upstream is one provider endpoint of the gateway's pools
// (Options.Upstreams): the requests of its api whose model its globs
// match may go to it, as far as its limits, the provider's quota on it,
// have room.
type Upstream struct {
	Name string // unique: in logs, metrics, the ledger and /admin/upstreams
	API  string // APIOpenAI, APIAzureOpenAI, APIAnthropic or APIGemini
	URL  *url.URL
	// Key is its credential, sent as the api expects it: Authorization:
	// Bearer (openai), api-key (azure-openai), x-api-key (anthropic),
	// x-goog-api-key (gemini). "" sends none.
	Key string
	// Models are the globs (path.Match) of the models it serves; none:
	// every model of its api (on Azure, of its Deployments).
	Models []string
	Limits UpstreamLimits
	Weight int // its share of the requests among the upstreams with room; 0 means 1
	// APIVersion and Deployments are Azure OpenAI's: the api-version of
	// its paths, and the deployment of each model it serves.
	APIVersion  string
	Deployments map[string]string
}

// UpstreamLimits are the provider's quota on an upstream, which the
// gateway keeps as it keeps a key's limits; 0: none. TokensPerMinute is
// counted over a minute and a second (quotaMinute), so that what the
// gateway sends never passes a provider's exact rolling minute.
type UpstreamLimits struct {
	RequestsPerMinute int64
	TokensPerMinute   int64
	MaxConcurrent     int
}

// Defaults of Options' upstream settings.
const (
	DefaultUpstreamAttempts     = 3
	DefaultUpstreamQueueTimeout = 30 * time.Second
)

// member is an upstream as the gateway sends requests to it: one of
// Options.Upstreams, or the one upstream of a Route.
type member struct {
	name     string
	api      string         // "": a route's, which serves by path
	pu       *pool.Upstream // its place in the pool, and its cooldown; a route's has one of its own
	url      *url.URL
	keyField string // "": no credential
	keyValue string
	limits   UpstreamLimits
	quotas   []*keystore.Quota // its limits, held with each request's admission; nil: none
	version  string            // Azure's api-version
	deploy   map[string]string // Azure's deployment of each model

	requests, errors atomic.Int64 // sent to it, and of those answered 429 or 5xx or not at all
}

// newMember checks u and returns its member, whose quota is ks's.
func newMember(ks *keystore.Store, u Upstream) (*member, error) {
	if err := checkUpstream(u); err != nil {
		return nil, fmt.Errorf("gateway: upstream %q: %s: %w", u.Name, err, backend.ErrInvalid)
	}
	m := &member{name: u.Name, api: u.API, url: u.URL, limits: u.Limits, version: u.APIVersion, deploy: u.Deployments,
		pu: &pool.Upstream{Name: u.Name, API: u.API, Models: u.Models, Weight: u.Weight}}
	if u.API == APIAzureOpenAI {
		m.pu.Models = azureModels(u)
	}
	if u.Key != "" {
		m.keyField, m.keyValue = credentialField[u.API], u.Key
		if m.keyField == "Authorization" {
			m.keyValue = "Bearer " + u.Key
		}
	}
	if l := u.Limits; l != (UpstreamLimits{}) {
		p := keystore.Policy{RequestsPerMinute: l.RequestsPerMinute, MaxConcurrent: l.MaxConcurrent}
		if l.TokensPerMinute > 0 {
			p.Windows = []keystore.Window{{Limit: l.TokensPerMinute, Window: quotaMinute, Bucket: time.Second}}
		}
		q, err := ks.Quota("upstream:"+u.Name, p)
		if err != nil {
			return nil, fmt.Errorf("gateway: upstream %q: limits: %w", u.Name, err)
		}
		m.quotas = []*keystore.Quota{q}
	}
	return m, nil
}

// quotaMinute is the window of an upstream's tokens per minute: a minute
// and one bucket. A window in buckets forgets usage up to a bucket early
// (package rollingwindow: what came at 12:00:00.9 stops counting at
// 12:01:00), and a provider that counts an exact rolling minute would
// still hold it, refusing with 429 what the gateway let through. With
// the bucket added, usage counts at least a minute and at most a second
// more, which costs under 2% of the provider's quota.
const quotaMinute = time.Minute + time.Second

// credentialField is the request field of each api's credential.
var credentialField = map[string]string{
	APIOpenAI: "Authorization", APIAzureOpenAI: "Api-Key", APIAnthropic: "X-Api-Key", APIGemini: "X-Goog-Api-Key",
}

// checkUpstream says what is wrong with u, if anything.
func checkUpstream(u Upstream) error {
	switch {
	case u.Name == "" || text.Problem(u.Name, 256) != "":
		return fmt.Errorf("name: want 1 to 256 bytes of printable UTF-8")
	case credentialField[u.API] == "":
		return fmt.Errorf("api %q: want one of %s, %s, %s, %s", u.API, APIOpenAI, APIAzureOpenAI, APIAnthropic, APIGemini)
	case u.URL == nil || (u.URL.Scheme != "http" && u.URL.Scheme != "https") || u.URL.Host == "":
		return fmt.Errorf("url %s: want an http or https URL with a host", redacted(u.URL))
	case u.Weight < 0 || u.Limits.RequestsPerMinute < 0 || u.Limits.TokensPerMinute < 0 || u.Limits.MaxConcurrent < 0:
		return fmt.Errorf("a negative weight or limit")
	case u.API != APIAzureOpenAI && (len(u.Deployments) > 0 || u.APIVersion != ""):
		return fmt.Errorf("deployments and an api version are Azure OpenAI's")
	case u.API == APIAzureOpenAI && (len(u.Deployments) == 0 || u.APIVersion == ""):
		return fmt.Errorf("an Azure OpenAI upstream needs deployments and an api version")
	}
	for _, g := range u.Models {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return fmt.Errorf("models: %q is not a glob (path.Match)", g)
		}
	}
	for model, d := range u.Deployments {
		if model == "" || d == "" || strings.ContainsAny(d, "/?#%") || text.Problem(d, maxModelBytes) != "" {
			return fmt.Errorf("deployments: %q: %q: want a model and a deployment name without / ? # or %%", model, d)
		}
	}
	return nil
}

// azureModels are the globs of the models an Azure upstream serves: those
// of its deployments that its Models match (all without Models), each
// matching itself alone.
func azureModels(u Upstream) []string {
	var out []string
	for model := range u.Deployments {
		if len(u.Models) == 0 || slices.ContainsFunc(u.Models, func(g string) bool { ok, _ := path.Match(g, model); return ok }) {
			out = append(out, literalGlob(model))
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		out = []string{"\x00"} // matches no model: a glob that matches none serves none
	}
	return out
}

// literalGlob is the glob that matches s alone.
func literalGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// upstreams is the gateway's configuration of upstreams, replaced whole
// by SetUpstreams: a request keeps the one it started with.
type upstreams struct {
	members []*member         // Options.Upstreams', in order: pool's Index i is members[i]
	pool    *pool.Pool        // of members
	routes  []route           // the routes (Options.Routes and Upstream), longest prefix first
	models  map[string]string // an Azure deployment's model, for the Azure client's paths
}

// newUpstreams returns the configuration of ups and routes, with the
// upstreams' quotas on ks.
func newUpstreams(ks *keystore.Store, ups []Upstream, routes []route) (*upstreams, error) {
	u := &upstreams{routes: routes, models: map[string]string{}}
	seen := map[string]bool{}
	pus := make([]*pool.Upstream, 0, len(ups))
	for _, up := range ups {
		if seen[up.Name] {
			return nil, fmt.Errorf("gateway: upstream %q: two upstreams have that name: %w", up.Name, backend.ErrInvalid)
		}
		seen[up.Name] = true
		m, err := newMember(ks, up)
		if err != nil {
			return nil, err
		}
		for model, d := range m.deploy {
			if other, ok := u.models[d]; ok && other != model {
				return nil, fmt.Errorf("gateway: upstream %q: deployment %q is model %q's and, on another upstream, %q's: a deployment names one model: %w", up.Name, d, model, other, backend.ErrInvalid)
			}
			u.models[d] = model
		}
		u.members = append(u.members, m)
		pus = append(pus, m.pu)
	}
	u.pool = pool.New(pus)
	return u, nil
}

// The apis that serve each dialect's endpoints.
var (
	apisOpenAI     = []string{APIOpenAI, APIAzureOpenAI}
	apisAzure      = []string{APIAzureOpenAI}
	apisAnthropic  = []string{APIAnthropic}
	apisGemini     = []string{APIGemini}
	apisOpenAIOnly = []string{APIOpenAI}
)

// apisOf returns the apis that may serve a request to ep: for the paths
// OpenAI and Anthropic share (the model list), Anthropic's when the
// request has its anthropic-version field.
func apisOf(ep *endpoint, h http.Header) []string {
	switch {
	case ep.azure:
		return apisAzure
	case ep.dialect == openAI|anthropic && h.Get("Anthropic-Version") != "":
		return apisAnthropic
	case ep.dialect == openAI|anthropic:
		return apisOpenAIOnly
	case ep.dialect == anthropic:
		return apisAnthropic
	case ep.dialect == gemini:
		return apisGemini
	}
	return apisOpenAI
}

// serves reports whether an upstream of u serves model on one of apis,
// cooling down or not.
func (u *upstreams) serves(apis []string, model string) bool {
	for _, m := range u.members {
		if m.pu.Serves(apis, model) {
			return true
		}
	}
	return false
}

// modelOf returns the model of an Azure deployment d, as the upstreams'
// deployments name it; d itself when none does.
func (u *upstreams) modelOf(d string) string {
	if m, ok := u.models[d]; ok {
		return m
	}
	return d
}

// SetUpstreams replaces the gateway's pools (Options.Upstreams) whole,
// keeping its routes; when ups is invalid it returns why, matching
// backend.ErrInvalid, and those in force stay. A request in flight ends
// on the upstreams it started with. An upstream of the same name keeps
// its counts of requests and errors; cooldowns start anew.
func (g *Gateway) SetUpstreams(ups []Upstream) error {
	old := g.ups.Load()
	next, err := newUpstreams(g.keys, ups, old.routes)
	if err != nil {
		return err
	}
	for _, m := range next.members {
		for _, o := range old.members {
			if o.name == m.name {
				m.requests.Store(o.requests.Load())
				m.errors.Store(o.errors.Load())
			}
		}
	}
	g.ups.Store(next)
	g.lines.finished() // the heads try the new upstreams
	return nil
}
