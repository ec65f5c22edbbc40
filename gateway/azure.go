package gateway

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Azure OpenAI serves OpenAI's requests on paths of its own: the model
// calls of a deployment under /openai/deployments/{deployment}/, the
// responses under /openai/responses, each with an api-version in the
// query and the credential in api-key. A request for a model goes to the
// deployment the upstream's Deployments map it to, whether the caller
// used OpenAI's paths and the model's name or the Azure client's paths
// and a deployment's (read back as its model: upstreams.modelOf), so
// that a request may fail over between Azure regions, or between Azure
// and OpenAI, whose deployments of a model are named differently.

// azurePath returns the path of rq (whose path is p) on the Azure upstream
// m, and the body to send there: a responses request names the deployment
// as its model.
func azurePath(rq *request, m *member, p string, body []byte) (path, rawPath string, out []byte) {
	dep := m.deploy[rq.model]
	if dep == "" {
		dep = rq.model
	}
	switch op := rq.ep.op; op {
	case "chat/completions", "completions", "embeddings":
		return "/openai/deployments/" + dep + "/" + op, "", body
	case "responses":
		return "/openai/responses", "", withDeployment(body, rq.modelAt, dep)
	}
	// A stored response's paths: Azure's are OpenAI's under /openai.
	return "/openai" + strings.TrimPrefix(p, "/v1"), "", body
}

// withDeployment returns body with its model, at offsets at (bodyFields), set
// to model.
func withDeployment(body []byte, at [2]int, model string) []byte {
	if at[1] == 0 {
		return body
	}
	q, err := jsontext.AppendQuote(nil, model)
	if err != nil || string(body[at[0]:at[1]]) == string(q) {
		return body
	}
	return splice(body, at[0], at[1], string(q))
}

// azureQuery is the query of a request to ep on an Azure upstream: the
// parameters of OpenAI's endpoint that go out (query), and its own
// api-version, in place of the one an Azure client sent.
func azureQuery(ep *endpoint, query, version string) string {
	if ep.azure {
		query = "" // the api-version alone, which is the upstream's
	}
	v := "api-version=" + url.QueryEscape(version)
	if query == "" {
		return v
	}
	return query + "&" + v
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
