package config

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/ratestore/ratestore/internal/text"
)

// The APIs an upstream may speak: which of the gateway's routes it serves.
const (
	OpenAI      = "openai"
	AzureOpenAI = "azure-openai"
	Anthropic   = "anthropic"
	Gemini      = "gemini"
)

// APIs lists every api an upstream may name.
var APIs = []string{OpenAI, AzureOpenAI, Anthropic, Gemini}

// Upstream is one provider endpoint of a pool: where requests for its api
// and models may go, and the provider's own quota on them.
type Upstream struct {
	Name   string // unique in the file: in logs, metrics and the ledger
	API    string // one of APIs
	URL    *url.URL
	KeyEnv string // the environment variable of its credential; "": none is sent
	// Models are the globs (path.Match) of the models it serves; none:
	// every model of its api.
	Models []string
	Limits Limits
	Weight int // its share of traffic among the upstreams with room; at least 1
	// APIVersion and Deployments are Azure OpenAI's: the api-version of
	// its paths, and the deployment of each model.
	APIVersion  string
	Deployments map[string]string
	Line        int
}

// Limits are the provider's quota on an upstream; 0: none.
type Limits struct {
	RequestsPerMinute int64
	TokensPerMinute   int64
	MaxConcurrent     int64
}

// MaxUpstreams bounds the upstreams of a file.
const MaxUpstreams = 1024

// upstreams reads the list of upstreams at v.
func upstreams(v *yaml.Node, getenv func(string) string) ([]Upstream, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, errorAt(v, "upstreams: want a list")
	}
	if len(v.Content) > MaxUpstreams {
		return nil, errorAt(v, "upstreams: %d of them, more than %d", len(v.Content), MaxUpstreams)
	}
	var ups []Upstream
	seen := map[string]int{}
	for _, item := range v.Content {
		u, err := upstream(item, getenv)
		if err != nil {
			return nil, err
		}
		if line, ok := seen[u.Name]; ok {
			return nil, errorAt(item, "upstream %q: the name of the upstream at line %d too", u.Name, line)
		}
		seen[u.Name] = u.Line
		ups = append(ups, u)
	}
	return ups, nil
}

// upstream reads one upstream, and checks it whole.
func upstream(n *yaml.Node, getenv func(string) string) (Upstream, error) {
	if n.Kind != yaml.MappingNode {
		return Upstream{}, errorAt(n, "an upstream that is not a mapping")
	}
	u := Upstream{Line: n.Line, Weight: 1}
	es, err := entries(n)
	if err != nil {
		return Upstream{}, err
	}
	for _, e := range es {
		if err := u.set(e.name, e.k, e.v); err != nil {
			return Upstream{}, err
		}
	}
	return u, u.check(n, getenv)
}

// set reads field of an upstream, valued v.
func (u *Upstream) set(field string, k, v *yaml.Node) (err error) {
	switch field {
	case "name":
		u.Name, err = str(field, v)
	case "api":
		u.API, err = str(field, v)
	case "url":
		u.URL, err = upstreamURL(v)
	case "key_env":
		u.KeyEnv, err = str(field, v)
	case "models":
		u.Models, err = strs(field, v)
	case "limits":
		u.Limits, err = limits(v)
	case "weight":
		var w int64
		if w, err = count(field, v); err == nil && w < 1 {
			err = errorAt(v, "weight %d: want at least 1", w)
		}
		u.Weight = int(min(w, 1<<20))
	case "api_version":
		u.APIVersion, err = str(field, v)
	case "deployments":
		u.Deployments, err = strMap(field, v)
	default:
		err = errorAt(k, "upstream: unknown field %q", field)
	}
	return err
}

// check checks what an upstream's fields say together.
func (u *Upstream) check(n *yaml.Node, getenv func(string) string) error {
	switch {
	case u.Name == "":
		return errorAt(n, "upstream: no name")
	case !text.Name(u.Name, 64):
		return errorAt(n, "upstream %q: a name is 1 to 64 of [A-Za-z0-9_.:@+-]", u.Name)
	case u.API == "":
		return errorAt(n, "upstream %q: no api (one of %v)", u.Name, APIs)
	case !slices.Contains(APIs, u.API):
		return errorAt(n, "upstream %q: api %q: want one of %v", u.Name, u.API, APIs)
	case u.URL == nil:
		return errorAt(n, "upstream %q: no url", u.Name)
	case u.KeyEnv != "" && getenv(u.KeyEnv) == "":
		return errorAt(n, "upstream %q: key_env %s: the variable is not set", u.Name, u.KeyEnv)
	case u.API != AzureOpenAI && (u.Deployments != nil || u.APIVersion != ""):
		return errorAt(n, "upstream %q: deployments and api_version are Azure OpenAI's (api: %s)", u.Name, AzureOpenAI)
	case u.API == AzureOpenAI && u.APIVersion == "":
		return errorAt(n, "upstream %q: Azure OpenAI needs an api_version", u.Name)
	case u.API == AzureOpenAI && len(u.Deployments) == 0:
		return errorAt(n, "upstream %q: Azure OpenAI needs deployments (model: deployment)", u.Name)
	}
	for _, g := range u.Models {
		if err := u.checkGlob(g); err != nil {
			return errorAt(n, "%v", err)
		}
	}
	return nil
}

// checkGlob checks that the model glob g of u can match a model: it is a
// well-formed pattern, and on Azure it matches a model of the deployments.
func (u *Upstream) checkGlob(g string) error {
	if _, err := path.Match(g, ""); err != nil || g == "" {
		return fmt.Errorf("upstream %q: models: %q is not a glob (path.Match): it can never match", u.Name, g)
	}
	if u.Deployments == nil {
		return nil
	}
	for m := range u.Deployments {
		if ok, _ := path.Match(g, m); ok {
			return nil
		}
	}
	return fmt.Errorf("upstream %q: models: %q matches none of its deployments' models: it can never match", u.Name, g)
}

// upstreamURL reads an upstream's URL: http or https, absolute, with no
// user, query or fragment (its credential goes in key_env).
func upstreamURL(v *yaml.Node) (*url.URL, error) {
	s, err := str("url", v)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, errorAt(v, "url: not a URL")
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, errorAt(v, "url: want http:// or https:// and a host")
	case u.User != nil:
		return nil, errorAt(v, "url: holds a user or password: give the credential by key_env")
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, errorAt(v, "url: want no query or fragment")
	}
	return u, nil
}

// limits reads an upstream's limits.
func limits(v *yaml.Node) (Limits, error) {
	if v.Kind != yaml.MappingNode {
		return Limits{}, errorAt(v, "limits: want a mapping")
	}
	es, err := entries(v)
	if err != nil {
		return Limits{}, err
	}
	var l Limits
	for _, e := range es {
		name, k, val := e.name, e.k, e.v
		var dst *int64
		switch name {
		case "requests_per_minute":
			dst = &l.RequestsPerMinute
		case "tokens_per_minute":
			dst = &l.TokensPerMinute
		case "max_concurrent":
			dst = &l.MaxConcurrent
		default:
			return Limits{}, errorAt(k, "limits: unknown field %q", name)
		}
		if *dst, err = count("limits: "+name, val); err != nil {
			return Limits{}, err
		}
	}
	return l, nil
}

// str reads a string value: a scalar that is not null.
func str(field string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || v.Value == "" {
		return "", errorAt(v, "%s: want a value", field)
	}
	return v.Value, nil
}

// count reads a whole number >= 0.
func count(field string, v *yaml.Node) (int64, error) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
		return 0, errorAt(v, "%s: want a whole number", field)
	}
	n, err := strconv.ParseInt(v.Value, 0, 64)
	if err != nil || n < 0 {
		return 0, errorAt(v, "%s: %q: want a whole number from 0 to 2^63-1", field, v.Value)
	}
	return n, nil
}

// strs reads a list of strings.
func strs(field string, v *yaml.Node) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, errorAt(v, "%s: want a list", field)
	}
	out := make([]string, 0, len(v.Content))
	for _, item := range v.Content {
		s, err := str(field, item)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// strMap reads a mapping of strings to strings.
func strMap(field string, v *yaml.Node) (map[string]string, error) {
	if v.Kind != yaml.MappingNode {
		return nil, errorAt(v, "%s: want a mapping", field)
	}
	es, err := entries(v)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(es))
	for _, e := range es {
		if m[e.name], err = str(field+": "+e.name, e.v); err != nil {
			return nil, err
		}
	}
	return m, nil
}
