// Package apierror writes the answers the gateway and its console give
// to a request they refuse or answer themselves: JSON, never cached, and
// errors in the body every official SDK reads,
// {"type":"error","error":{"type","code","message"}}.
package apierror

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// The error types of the bodies, as OpenAI's and Anthropic's APIs name
// them.
const (
	Auth       = "authentication_error"
	Permission = "permission_error"
	Rate       = "rate_limit_error"
	Invalid    = "invalid_request_error"
	API        = "api_error"
)

// Body is an error answer's body.
type Body struct {
	Type  string `json:"type"` // always "error"
	Error Detail `json:"error"`
}

// Detail is what Body says of the error.
type Detail struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Param names the request's parameter or field that is wrong, as
	// OpenAI's errors do; left out when none is.
	Param string `json:"param,omitempty"`
}

// TypeOf is the error type of an answer of status: Auth for 401,
// Permission for 403, Rate for 429, Invalid for the rest.
func TypeOf(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return Auth
	case http.StatusForbidden:
		return Permission
	case http.StatusTooManyRequests:
		return Rate
	}
	return Invalid
}

// Write answers status with the error body of typ, code and msg; a 401
// says which scheme it wants.
func Write(w http.ResponseWriter, status int, typ, code, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	WriteJSON(w, status, Body{Type: "error", Error: Detail{Type: typ, Code: code, Message: msg}})
}

// WriteParam is Write for an error about the request's parameter or
// field param, which the body names.
func WriteParam(w http.ResponseWriter, status int, typ, code, param, msg string) {
	WriteJSON(w, status, Body{Type: "error", Error: Detail{Type: typ, Code: code, Message: msg, Param: param}})
}

// WriteJSON answers status with v as JSON, never stored by a cache (an
// answer may hold a key's secret or a session's CSRF token), and not
// HTML-escaped.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // the bodies are strings, numbers, booleans and times
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
