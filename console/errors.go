package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// The error types of the console's answers, as the gateway's own.
const (
	typeAuth       = "authentication_error"
	typePermission = "permission_error"
	typeRate       = "rate_limit_error"
	typeInvalid    = "invalid_request_error"
)

// errorBody is the body of an error, the gateway's:
// {"type":"error","error":{"type","code","message"}}.
type errorBody struct {
	Type  string      `json:"type"`
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ErrorType is the error type of an answer of status, as the gateway's
// error body names it: authentication_error for 401, permission_error for
// 403, rate_limit_error for 429, invalid_request_error for the rest.
func ErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return typeAuth
	case http.StatusForbidden:
		return typePermission
	case http.StatusTooManyRequests:
		return typeRate
	}
	return typeInvalid
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	writeJSON(w, status, errorBody{Type: "error", Error: errorDetail{Type: typ, Code: code, Message: msg}})
}

// writeRetry writes the 429 of an address slowed down for wait.
func writeRetry(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.FormatInt(retrySeconds(wait), 10))
	writeError(w, http.StatusTooManyRequests, typeRate, codeTooMany, tooManyMessage(wait))
}

// retrySeconds is wait in whole seconds, rounded up, at least 1.
func retrySeconds(wait time.Duration) int64 {
	return max(1, int64((wait+time.Second-1)/time.Second))
}

func tooManyMessage(wait time.Duration) string {
	return "too many wrong admin tokens: retry in " + (time.Duration(retrySeconds(wait)) * time.Second).String()
}

// writeJSON writes v as the JSON body of an answer of status, as the
// gateway does: never stored by a cache, since a session's answer holds
// its CSRF token.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // the bodies are strings, booleans and times
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
