package httplimit

import (
	"encoding/json"
	"net/http"
	"strings"
)

// denial is the JSON body of DefaultDeny. The numbers are pointers so that
// a 0 is written and an absent number is not.
type denial struct {
	Error      string `json:"error"`
	Policy     string `json:"policy,omitempty"`
	RetryAfter *int64 `json:"retry_after_seconds,omitempty"`
	Cost       *int64 `json:"cost,omitempty"`
	Limit      *int64 `json:"limit,omitempty"`
	Remaining  *int64 `json:"remaining,omitempty"`
	Reset      *int64 `json:"reset_seconds,omitempty"`
}

// DefaultDeny answers a refused request with d.Status and a JSON body that
// says why, in the words of the package documentation. It never writes a
// key or an error's text: errors can hold anything their KeyFunc put in
// them. A custom Deny can call it for the cases it leaves as they are.
func DefaultDeny(w http.ResponseWriter, r *http.Request, d Decision) {
	body := denial{Error: strings.ReplaceAll(strings.ToLower(http.StatusText(d.Status)), " ", "_")}
	if d.Err == nil { // a denial: the binding rule's numbers
		body.Error = "rate_limited"
		reset := ceilSeconds(d.Result.ResetAfter)
		body.Policy, body.Limit, body.Remaining, body.Reset = d.Policy, &d.Result.Limit, &d.Result.Remaining, &reset
		if d.Result.RetryAfter < 0 {
			body.Error, body.Cost = "cost_exceeds_limit", &d.Cost
		} else {
			retry := retryAfter(&d.Result)
			body.RetryAfter = &retry
		}
	}
	b, _ := json.Marshal(body) // cannot fail: strings and numbers
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if d.Status == http.StatusUnauthorized {
		// RFC 9110, section 15.5.2: a 401 must say how to authenticate.
		h.Set("WWW-Authenticate", "Bearer")
	}
	w.WriteHeader(d.Status)
	w.Write(append(b, '\n'))
}
