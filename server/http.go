package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/strategies"
)

// maxBody bounds a request's body: a strategy and a key.
const maxBody = 64 << 10

// allowRequest is the body of POST /v1/allow.
type allowRequest struct {
	// Limiter names the limiter: states are shared by the requests (and
	// the Go code) that use the same name.
	Limiter  string `json:"limiter"`
	Strategy *spec  `json:"strategy"`
	Key      string `json:"key"`
	// N is what the call takes; absent: 1, 0: a peek.
	N *int64 `json:"n,omitempty"`
	// Record takes N even past the limit, as Limiter.Record does.
	Record bool `json:"record,omitempty"`
}

// allowResponse is the answer of POST /v1/allow: Limiter's Result, with
// its durations in milliseconds, rounded up.
type allowResponse struct {
	Allowed      bool  `json:"allowed"`
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	ResetAfterMS int64 `json:"reset_after_ms"`
	// RetryAfterMS is 0 when allowed; -1 when the call can never be
	// allowed (n over the limit).
	RetryAfterMS int64 `json:"retry_after_ms"`
}

// Handler returns the HTTP API:
//
//	POST /v1/allow   {"limiter", "strategy", "key", "n", "record"}
//
// The answer is 200 with {"allowed", "limit", "remaining",
// "reset_after_ms", "retry_after_ms"} and the IETF RateLimit-Policy and
// RateLimit fields (draft-ietf-httpapi-ratelimit-headers), plus
// Retry-After when the call was denied: the decision is the answer, a
// denial is not an error. A bad request gets 400 with {"error"} naming what
// was wrong, a missing or wrong token 401.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/allow", s.allow)
	return mux
}

// allow serves POST /v1/allow: it checks the token, reads the request and
// its limiter, makes the call and answers with its result.
func (s *Server) allow(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok && s.hasToken || !s.authorized(token) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ratestore"`)
		httpError(w, http.StatusUnauthorized, errors.New("a valid bearer token is required"))
		return
	}
	req, l, err := s.readAllow(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	res, err := req.call(r.Context(), l)
	switch {
	case errors.Is(err, backend.ErrInvalid):
		httpError(w, http.StatusBadRequest, err)
		return
	case err != nil:
		s.log.Error("server: allow", "limiter", req.Limiter, "err", err)
		httpError(w, http.StatusInternalServerError, err)
		return
	}
	writeAllow(w, req.Limiter, res)
}

// readAllow reads the body of r and returns it with the limiter it names.
// Its error, a bad request's, names what was wrong.
func (s *Server) readAllow(r *http.Request) (allowRequest, limiter, error) {
	var req allowRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, nil, fmt.Errorf("body: %w", err)
	}
	if req.Strategy == nil {
		return req, nil, errors.New("body: strategy is required")
	}
	st, err := req.Strategy.strategy()
	if err != nil {
		return req, nil, fmt.Errorf("strategy: %w", err)
	}
	config, _ := json.Marshal(req.Strategy)
	l, err := s.limiter(req.Limiter, string(config), st)
	if err != nil {
		return req, nil, err
	}
	return req, l, nil
}

// call makes the call req asks of l: a Record, or an AllowN; of N, or of
// 1 if N is absent.
func (req *allowRequest) call(ctx context.Context, l limiter) (strategies.Result, error) {
	n := int64(1)
	if req.N != nil {
		n = *req.N
	}
	if req.Record {
		return l.Record(ctx, req.Key, n)
	}
	return l.AllowN(ctx, req.Key, n)
}

// writeAllow answers with res, the result of a call of the limiter named
// limiter: its fields in the body, the RateLimit-Policy and RateLimit
// fields, and Retry-After when the call was denied and can be retried.
func writeAllow(w http.ResponseWriter, limiter string, res strategies.Result) {
	h := w.Header()
	reset := ceilSeconds(res.ResetAfter)
	h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d", limiter, res.Limit))
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", limiter, res.Remaining, reset))
	if !res.Allowed && res.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(ceilSeconds(res.RetryAfter), 10))
	}
	retry := ceilMillis(res.RetryAfter)
	if res.RetryAfter < 0 {
		retry = -1
	}
	writeJSON(w, http.StatusOK, allowResponse{
		Allowed: res.Allowed, Limit: res.Limit, Remaining: res.Remaining,
		ResetAfterMS: ceilMillis(res.ResetAfter), RetryAfterMS: retry,
	})
}

// ceilSeconds and ceilMillis are d in whole units, rounded up.
func ceilSeconds(d time.Duration) int64 { return sat.CeilDiv(int64(d), int64(time.Second)) }
func ceilMillis(d time.Duration) int64  { return sat.CeilDiv(int64(d), int64(time.Millisecond)) }

func httpError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
