package fakeprovider

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// problem is an error answer, which writeProblem gives in the shape of
// the provider's API, so that the gateway and the SDKs behind it read it
// as they read the real one's.
type problem struct {
	status int
	code   string // OpenAI's error code; "": none
	azure  string // Azure's own code (DeploymentNotFound, BadRequest); "": the status, as Azure's other errors say
	typ    string // OpenAI's error type; "": by status
	msg    string
	retry  time.Duration // > 0: the Retry-After field, in whole seconds rounded up
}

// anthropicTypes are Anthropic's error types by status; any other 5xx is
// an api_error, any other 4xx an invalid_request_error.
var anthropicTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
	404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
	500: "api_error", 529: "overloaded_error",
}

// geminiStatuses are Google's status names by HTTP status; any other 5xx
// is INTERNAL, any other 4xx FAILED_PRECONDITION.
var geminiStatuses = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
	404: "NOT_FOUND", 405: "UNIMPLEMENTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
	500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

// byStatus is table's name of status, or the default of its class.
func byStatus(table map[int]string, status int, client, server string) string {
	if s, ok := table[status]; ok {
		return s
	}
	if status >= 500 {
		return server
	}
	return client
}

// writeProblem answers pr in the shape of the provider's API:
// {"error":{"message","type","param","code"}} for OpenAI,
// {"error":{"code","message"}} for Azure, {"type":"error","error":{"type",
// "message"}} for Anthropic, {"error":{"code","message","status"}} for
// Gemini.
func (p *Provider) writeProblem(w http.ResponseWriter, pr *problem) {
	var body any
	switch p.opts.API {
	case Anthropic:
		typ := byStatus(anthropicTypes, pr.status, "invalid_request_error", "api_error")
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": pr.msg}}
	case Gemini:
		status := byStatus(geminiStatuses, pr.status, "FAILED_PRECONDITION", "INTERNAL")
		body = map[string]any{"error": map[string]any{"code": pr.status, "message": pr.msg, "status": status}}
	case AzureOpenAI:
		code := pr.azure
		if code == "" {
			code = strconv.Itoa(pr.status)
		}
		body = map[string]any{"error": map[string]any{"code": code, "message": pr.msg}}
	default:
		typ := pr.typ
		if typ == "" {
			typ = byStatus(nil, pr.status, "invalid_request_error", "server_error")
		}
		var code any // null, as OpenAI's errors without a code have it
		if pr.code != "" {
			code = pr.code
		}
		body = map[string]any{"error": map[string]any{"message": pr.msg, "type": typ, "param": nil, "code": code}}
	}
	if pr.retry > 0 {
		w.Header().Set("Retry-After", seconds(pr.retry))
	}
	writeJSON(w, pr.status, body)
}

// seconds is d in whole seconds, rounded up, at least 1: how Retry-After
// says it.
func seconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(marshal(v))
}

// marshal is v as JSON. The bodies are maps of strings, numbers and
// slices: an error is a bug.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
