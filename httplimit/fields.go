package httplimit

import (
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/strategies"
)

// sfMaxInt is the largest Integer a Structured Field can carry (RFC 9651,
// section 3.3.1): 15 digits.
const sfMaxInt = 999_999_999_999_999

// policyItem is one quota policy of a rule: an item of RateLimit-Policy.
type policyItem struct {
	name   string
	quoted string // name as an sf-string
	q      int64  // -1: not listed in RateLimit-Policy
	w      int64  // seconds; 0: no w parameter
}

// policy returns the item as RateLimit-Policy lists it.
func (it *policyItem) policy() string {
	s := it.quoted + ";q=" + strconv.FormatInt(min(it.q, sfMaxInt), 10)
	if it.w > 0 {
		s += ";w=" + strconv.FormatInt(it.w, 10)
	}
	return s
}

// quota is what a strategy says of one of its quotas: sub names it among
// the quotas of its strategy.
type quota struct {
	sub  string
	q, w int64
}

// policyItems returns the items of rule r named name: one per quota of its
// limiter's strategy, or the one that r.Quota gives.
func policyItems(r Rule, name string) ([]policyItem, error) {
	quoted, err := sfString(name)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Quota < 0 || r.Window < 0:
		return nil, fmt.Errorf("negative Quota or Window: %w", backend.ErrInvalid)
	case r.Quota == 0 && r.Window != 0:
		return nil, fmt.Errorf("a Window without a Quota: %w", backend.ErrInvalid)
	case r.Quota > 0:
		return []policyItem{{name, quoted, r.Quota, ceilSeconds(r.Window)}}, nil
	}
	qs := quotas(r.Limiter.Strategy())
	if len(qs) == 0 {
		return []policyItem{{name, quoted, -1, 0}}, nil // not listed; RateLimit still names it
	}
	if len(qs) == 1 {
		return []policyItem{{name, quoted, qs[0].q, qs[0].w}}, nil
	}
	items := make([]policyItem, len(qs))
	for i, q := range qs {
		n := name + "." + q.sub
		quoted, _ := sfString(n) // sub is of [A-Za-z0-9_.:@+-]
		items[i] = policyItem{n, quoted, q.q, q.w}
	}
	return items, nil
}

// quotas returns the quotas of s: none for a strategy this package does
// not know.
func quotas(s strategies.Strategy) []quota {
	switch v := s.(type) {
	case strategies.GCRA:
		return []quota{{"", v.Burst, refill(v.Burst, v.Rate)}}
	case strategies.TokenBucket:
		return []quota{{"", v.Burst, refill(v.Burst, v.Rate)}}
	case strategies.LeakyBucket:
		return []quota{{"", v.Capacity, refill(v.Capacity, v.Rate)}}
	case strategies.SlidingWindow:
		return []quota{{"", v.Limit, ceilSeconds(v.Window)}}
	case strategies.RollingWindow:
		return []quota{{"", v.Limit, ceilSeconds(v.Window)}}
	case strategies.SlidingLog:
		return []quota{{"", v.Limit, ceilSeconds(v.Window)}}
	case strategies.FixedWindow:
		qs := make([]quota, len(v.Quotas))
		for i, q := range v.Quotas {
			qs[i] = quota{q.Name, q.Limit, ceilSeconds(q.Window)}
		}
		return qs
	case strategies.Composite:
		var qs []quota
		for _, p := range [...]struct {
			sub string
			s   strategies.Strategy
		}{{"primary", v.Primary}, {"secondary", v.Secondary}} {
			part := quotas(p.s)
			if len(part) == 1 {
				part[0].sub = p.sub
			}
			qs = append(qs, part...)
		}
		return qs
	}
	// A configuration given by pointer (&strategies.GCRA{...}) is read as
	// its value: the strategies of this package have value receivers.
	if v := reflect.ValueOf(s); v.Kind() == reflect.Pointer && !v.IsNil() {
		if e, ok := v.Elem().Interface().(strategies.Strategy); ok {
			return quotas(e)
		}
	}
	return nil
}

// refill returns the seconds that n units take at rate per second,
// rounded up: the window over which a bucket of n grants n.
func refill(n int64, rate float64) int64 {
	w := math.Ceil(float64(n) / rate)
	if !(w < sfMaxInt) {
		return sfMaxInt
	}
	return max(int64(w), 1)
}

// ceilSeconds returns d in whole seconds, rounded up, as an sf-integer.
func ceilSeconds(d time.Duration) int64 {
	return min(sat.CeilDiv(int64(d), int64(time.Second)), sfMaxInt)
}

// sfString returns s as an sf-string (RFC 9651, section 3.3.3): printable
// ASCII in quotes, with '"' and '\' escaped.
func sfString(s string) (string, error) {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("policy name %q: want printable ASCII: %w", s, backend.ErrInvalid)
		}
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return string(append(b, '"')), nil
}

// item returns the policy item that res speaks for: of several, one whose
// quota is res.Limit, the one of the longest window (it counts the most).
func (ru *rule) item(res *strategies.Result) *policyItem {
	b := 0
	if len(ru.items) > 1 {
		for i := range ru.items {
			it := &ru.items[i]
			if it.q == res.Limit && (ru.items[b].q != res.Limit || it.w > ru.items[b].w) {
				b = i
			}
		}
	}
	return &ru.items[b]
}

// setFields sets the rate-limit fields of a decided request on h, for its
// binding rule's policy item and result, and Retry-After on a denial that
// a retry can pass.
func (m *Middleware) setFields(h http.Header, it *policyItem, res *strategies.Result, allowed bool) {
	reset := ceilSeconds(res.ResetAfter)
	t := reset
	retry := !allowed && res.RetryAfter >= 0
	if retry {
		t = retryAfter(res)
	}
	// The five values are substrings of one string, in one slice: two
	// allocations rather than one or two per value. Each field gets a
	// slice whose capacity is its length, so that a handler's Header.Add
	// copies it instead of writing over the next field.
	var buf [128]byte
	b := append(buf[:0], it.quoted...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, min(res.Remaining, sfMaxInt), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, t, 10)
	var ends [5]int
	ends[0] = len(b)
	b = strconv.AppendInt(b, res.Limit, 10)
	ends[1] = len(b)
	b = strconv.AppendInt(b, res.Remaining, 10)
	ends[2] = len(b)
	b = strconv.AppendInt(b, reset, 10)
	ends[3] = len(b)
	n := 4
	if retry {
		b = strconv.AppendInt(b, t, 10)
		ends[4] = len(b)
		n = 5
	}
	all := string(b)
	vals := make([]string, n)
	for i, from := 0, 0; i < n; from, i = ends[i], i+1 {
		vals[i] = all[from:ends[i]]
	}
	if m.policy != nil {
		h["Ratelimit-Policy"] = m.policy
	}
	h["Ratelimit"] = vals[0:1:1]
	h["X-Ratelimit-Limit"] = vals[1:2:2]
	h["X-Ratelimit-Remaining"] = vals[2:3:3]
	h["X-Ratelimit-Reset"] = vals[3:4:4]
	if retry {
		h["Retry-After"] = vals[4:5:5]
	}
}

// retryAfter returns the Retry-After of a denial: RetryAfter in whole
// seconds, rounded up and at least 1, since "0" would ask for an
// immediate retry that the rounding down of a fraction could not pass.
func retryAfter(res *strategies.Result) int64 {
	return max(ceilSeconds(res.RetryAfter), 1)
}
