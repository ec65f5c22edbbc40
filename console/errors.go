package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ratestore/ratestore/internal/apierror"
)

// The error types of the console's answers, the gateway's (package
// apierror).
const (
	typeAuth    = apierror.Auth
	typeRate    = apierror.Rate
	typeInvalid = apierror.Invalid
)

// ErrorType is the error type of an answer of status, as the gateway's
// error body names it (apierror.TypeOf).
func ErrorType(status int) string { return apierror.TypeOf(status) }

// writeError answers status with the gateway's error body.
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	apierror.Write(w, status, typ, code, msg)
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
// gateway does (apierror.WriteJSON): never stored by a cache, since a
// session's answer holds its CSRF token.
func writeJSON(w http.ResponseWriter, status int, v any) { apierror.WriteJSON(w, status, v) }
