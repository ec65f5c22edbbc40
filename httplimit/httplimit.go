package httplimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/strategies"
)

// A KeyFunc returns the key under which a request is counted: whose
// allowance it spends. An error refuses the request; see StatusError for
// the status of the answer.
type KeyFunc func(r *http.Request) (string, error)

// A CostFunc returns how much of the allowance a request spends: 1 for a
// request, or its size in some unit (bytes, tokens it may produce). A cost
// of 0 takes nothing but is still refused once the key is past its limit.
// A CostFunc that reads the body must leave it readable for the handler.
type CostFunc func(r *http.Request) (int64, error)

// Limiter is what decides a Rule: the limiter of any backend meeting the
// backend contract (backend.Limiter), a *ratestore.Limiter or a
// *redisstore.Limiter, whose limits several processes share.
type Limiter = backend.Limiter

// isNil reports whether l is nil, or a nil pointer (the Limiter of a
// failed db.Limiter call): a limiter's name is never empty but a nil
// one's.
func isNil(l Limiter) bool { return l == nil || l.Name() == "" }

// Rule is one limit that a request must pass.
type Rule struct {
	// Limiter decides the rule. Two rules of one Middleware may not share
	// a limiter name: they would count one request twice.
	Limiter Limiter
	// Key derives the request's key. Required.
	Key KeyFunc
	// Cost derives the request's cost; nil means 1.
	Cost CostFunc

	// Policy names the rule in the RateLimit-Policy and RateLimit fields:
	// printable ASCII. "" means the limiter's name.
	Policy string
	// Quota and Window, when Quota > 0, are what RateLimit-Policy says of
	// the rule (Window 0 leaves out w), instead of what New derives from
	// the limiter's strategy: for TokenBucket and GCRA, q is Burst and w
	// the time to refill it, Burst/Rate seconds rounded up; for
	// LeakyBucket, Capacity and the time to drain it; for SlidingWindow,
	// RollingWindow and SlidingLog, Limit and Window; for FixedWindow, each
	// quota's Limit and Window; for Composite, those of its parts. A
	// strategy this package does not know is not listed.
	Quota  int64
	Window time.Duration
}

// Options configures a Middleware.
type Options struct {
	// Rules are the limits every request must pass, at least one.
	Rules []Rule
	// Deny answers a request that is refused: denied by a rule, or one
	// whose key or cost could not be derived, or whose limiter failed
	// (unless FailOpen). The rate-limit fields and Retry-After are already
	// set when it is called. nil means DefaultDeny.
	Deny func(w http.ResponseWriter, r *http.Request, d Decision)
	// FailOpen serves a request when a limiter fails, rather than refusing
	// it with 503 Service Unavailable: availability over enforcement
	// while the store is broken. The failure is logged either way.
	FailOpen bool
	// Logger receives limiter failures (level Error) and refused keys and
	// costs (level Debug). nil discards them.
	Logger *slog.Logger
}

// Decision is what Deny is told about a refused request.
type Decision struct {
	// Status is the status DefaultDeny answers with: 429 or 413 for a
	// denial, 401, 400 or 500 for a key or cost that could not be derived,
	// 503 for a failed limiter. See the package documentation.
	Status int
	// Err is why the request could not be decided: the error of a
	// KeyFunc, a CostFunc or a limiter. It is nil for a denial.
	Err error
	// Rule is the index in Options.Rules of the binding rule of a denial
	// (the one that denies the longest), or of the rule that failed.
	Rule int
	// Policy names that rule: for a denial, the policy item that the
	// RateLimit field names (of a rule with several quotas, the binding
	// one); otherwise the rule's Policy or limiter name.
	Policy string
	// Cost is the request's cost for that rule; 0 when it is not known.
	Cost int64
	// Result is the binding rule's result, for a denial.
	Result strategies.Result
	// Results holds every rule's result for a denial, in the order of
	// Options.Rules. A rule that fits reports its state with nothing
	// taken.
	Results []strategies.Result
}

// StatusError is an error that a KeyFunc or CostFunc returns to choose the
// status of the answer: a KeyFunc that looks a key up in a database would
// return a 503 when the database is down, rather than the default 400.
// The middleware finds it with errors.As, so it may be wrapped.
type StatusError struct {
	Status int // 400 to 599; another status is ignored
	Err    error
}

func (e *StatusError) Error() string {
	if e.Err == nil {
		return http.StatusText(e.Status)
	}
	return e.Err.Error()
}

func (e *StatusError) Unwrap() error { return e.Err }

// Middleware rate-limits the handlers it wraps. It is safe for concurrent
// use, and one Middleware may wrap any number of handlers: they share its
// rules and their limits.
type Middleware struct {
	rules    []rule
	deny     func(http.ResponseWriter, *http.Request, Decision)
	failOpen bool
	log      *slog.Logger
	policy   []string // the RateLimit-Policy field; nil when no rule is listed
	locks    *keyLocks
}

// rule is a Rule as New checked it.
type rule struct {
	lim   Limiter
	key   KeyFunc
	cost  CostFunc
	name  string       // the policy name
	items []policyItem // at least one: what the RateLimit field may name
}

// New checks opts and returns a Middleware. Its errors match
// backend.ErrInvalid.
func New(opts Options) (*Middleware, error) {
	if len(opts.Rules) == 0 {
		return nil, fmt.Errorf("httplimit: no rules: %w", backend.ErrInvalid)
	}
	m := &Middleware{deny: opts.Deny, failOpen: opts.FailOpen, log: opts.Logger}
	if m.deny == nil {
		m.deny = DefaultDeny
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	limiters := map[string]int{}
	names := map[string]int{}
	var policy []string
	for i, r := range opts.Rules {
		if isNil(r.Limiter) || r.Key == nil {
			return nil, fmt.Errorf("httplimit: rule %d: want a Limiter and a Key: %w", i, backend.ErrInvalid)
		}
		if j, dup := limiters[r.Limiter.Name()]; dup {
			return nil, fmt.Errorf("httplimit: rules %d and %d share limiter %q: %w", j, i, r.Limiter.Name(), backend.ErrInvalid)
		}
		limiters[r.Limiter.Name()] = i
		ru := rule{lim: r.Limiter, key: r.Key, cost: r.Cost, name: r.Policy}
		if ru.name == "" {
			ru.name = r.Limiter.Name()
		}
		items, err := policyItems(r, ru.name)
		if err != nil {
			return nil, fmt.Errorf("httplimit: rule %d: %w", i, err)
		}
		ru.items = items
		for _, it := range items {
			if j, dup := names[it.name]; dup && j != i {
				return nil, fmt.Errorf("httplimit: rules %d and %d both have policy %q: set Rule.Policy: %w", j, i, it.name, backend.ErrInvalid)
			} else if dup {
				return nil, fmt.Errorf("httplimit: rule %d: policy %q twice: set Rule.Quota: %w", i, it.name, backend.ErrInvalid)
			}
			names[it.name] = i
			if it.q >= 0 {
				policy = append(policy, it.policy())
			}
		}
		m.rules = append(m.rules, ru)
	}
	if len(policy) > 0 {
		// One string, shared by every response: a slice whose capacity is
		// its length, so that Header.Add by a handler copies it.
		v := strings.Join(policy, ", ")
		m.policy = []string{v}[:1:1]
	}
	if len(m.rules) > 1 {
		m.locks = newKeyLocks()
	}
	return m, nil
}

// Wrap returns a handler that serves a request with next if every rule
// allows it, and otherwise answers with Deny.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	if next == nil {
		panic("httplimit: Wrap of a nil handler")
	}
	return &handler{m, next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.m.serve(w, r, h.next) }

// inline is how many rules a request is decided with no allocation for
// its keys, costs and results.
const inline = 4

// call is one request's decision in the making: per rule, its key, cost,
// result, and whether it fits (see decide).
type call struct {
	keys  []string
	costs []int64
	res   []strategies.Result
	fit   []bool
}

// space backs the slices of a call of up to inline rules. It is apart
// from call: a struct that holds slices of itself is moved to the heap.
type space struct {
	keys  [inline]string
	costs [inline]int64
	res   [inline]strategies.Result
	fit   [inline]bool
}

func (sp *space) call(n int) call {
	if n <= inline {
		return call{sp.keys[:n], sp.costs[:n], sp.res[:n], sp.fit[:n]}
	}
	return call{make([]string, n), make([]int64, n), make([]strategies.Result, n), make([]bool, n)}
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	var sp space
	c := sp.call(len(m.rules))
	for i := range m.rules {
		key, err := m.rules[i].key(r)
		if d, ok := m.derive(r, &c, i, key, err); !ok {
			m.deny(w, r, d)
			return
		}
	}
	if d, ok := m.check(w.Header(), r, &c); !ok {
		m.deny(w, r, d)
		return
	}
	next.ServeHTTP(w, r)
}

// Check decides r as the handler of Wrap does, with key as every rule's
// key in place of its KeyFunc: for a caller that has the key already (a
// gateway that authenticated r). It sets the RateLimit fields in h and
// reports whether r is to be served (allowed, or FailOpen over a limiter
// that failed); otherwise it returns the Decision that refuses r, for the
// caller to answer: Deny is not called.
func (m *Middleware) Check(h http.Header, r *http.Request, key string) (Decision, bool) {
	var sp space
	c := sp.call(len(m.rules))
	for i := range m.rules {
		if d, ok := m.derive(r, &c, i, key, nil); !ok {
			return d, false
		}
	}
	return m.check(h, r, &c)
}

// check decides the call c, its keys and costs derived, setting the
// RateLimit fields in h: see Check.
func (m *Middleware) check(h http.Header, r *http.Request, c *call) (Decision, bool) {
	var allowed bool
	var failed int
	var err error
	if len(m.rules) == 1 {
		c.res[0], err = m.rules[0].lim.AllowN(r.Context(), c.keys[0], c.costs[0])
		allowed = err == nil && c.res[0].Allowed
	} else {
		allowed, failed, err = m.decide(r.Context(), c)
	}
	if err != nil {
		return m.failed(r, c, failed, err)
	}
	b := c.binding(allowed)
	ru := &m.rules[b]
	res := &c.res[b]
	m.setFields(h, ru.item(res), res, allowed)
	if allowed {
		return Decision{}, true
	}
	status := http.StatusTooManyRequests
	if res.RetryAfter < 0 {
		status = http.StatusRequestEntityTooLarge
	}
	return Decision{
		Status:  status,
		Rule:    b,
		Policy:  ru.item(res).name,
		Cost:    c.costs[b],
		Result:  *res,
		Results: append([]strategies.Result(nil), c.res...),
	}, false
}

// derive computes rule i's cost for r and puts it in c with key, the
// key of r (or err, its KeyFunc's error), or returns the Decision that
// refuses r.
func (m *Middleware) derive(r *http.Request, c *call, i int, key string, err error) (Decision, bool) {
	ru := &m.rules[i]
	if err == nil && (key == "" || len(key) > backend.MaxKeyLen) {
		err = fmt.Errorf("key of %d bytes: want 1 to %d", len(key), backend.MaxKeyLen)
	}
	if err != nil {
		return m.refuse(r, i, fmt.Errorf("httplimit: rule %q: key: %w", ru.name, err)), false
	}
	cost := int64(1)
	if ru.cost != nil {
		cost, err = ru.cost(r)
		if err == nil && cost < 0 {
			err = &StatusError{http.StatusInternalServerError, fmt.Errorf("negative cost %d", cost)}
		}
		if err != nil {
			return m.refuse(r, i, fmt.Errorf("httplimit: rule %q: cost: %w", ru.name, err)), false
		}
	}
	c.keys[i], c.costs[i] = key, cost
	return Decision{}, true
}

// refuse logs a key or cost error of rule i and returns its Decision.
func (m *Middleware) refuse(r *http.Request, i int, err error) Decision {
	status := http.StatusBadRequest
	var se *StatusError
	switch {
	case errors.As(err, &se) && se.Status >= 400 && se.Status <= 599:
		status = se.Status
	case errors.Is(err, ErrNoAPIKey):
		status = http.StatusUnauthorized
	}
	m.log.LogAttrs(r.Context(), slog.LevelDebug, "httplimit: request refused",
		slog.String("policy", m.rules[i].name), slog.Int("status", status), slog.String("error", err.Error()))
	return Decision{Status: status, Err: err, Rule: i, Policy: m.rules[i].name}
}

// failed logs the error of rule i's limiter and returns the Decision that
// refuses the request, or reports that it is to be served all the same
// (FailOpen).
func (m *Middleware) failed(r *http.Request, c *call, i int, err error) (Decision, bool) {
	ru := &m.rules[i]
	key := c.keys[i]
	ctxErr := r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
	level := slog.LevelError
	if ctxErr {
		level = slog.LevelDebug
	}
	// The store's errors name the key: with it redacted, a KeyFunc that
	// returns a secret as it is still keeps it out of the log.
	m.log.LogAttrs(r.Context(), level, "httplimit: limiter failed",
		slog.String("policy", ru.name), slog.String("limiter", ru.lim.Name()),
		slog.String("key_hash", keyHash(key)), slog.String("error", redact(err.Error(), key)),
		slog.Bool("fail_open", m.failOpen && !ctxErr))
	if m.failOpen && !ctxErr {
		return Decision{}, true
	}
	return Decision{Status: http.StatusServiceUnavailable, Err: err, Rule: i, Policy: ru.name, Cost: c.costs[i]}, false
}

// keyHash is what the log says of a key: enough to tell keys apart, not
// to recover one.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

// redact replaces key in s, as it is and as strconv.Quote writes it.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	q := strconv.Quote(key)
	s = strings.ReplaceAll(s, q[1:len(q)-1], "[key]")
	return strings.ReplaceAll(s, key, "[key]")
}

// binding returns the index of the rule that speaks for the decision: of
// an allowed request, the one with the smallest Remaining (the first on a
// tie); of a denied one, among the rules that deny, the one whose
// RetryAfter is the longest, never (-1) being the longest of all.
func (c *call) binding(allowed bool) int {
	b := -1
	for i := range c.res {
		r := &c.res[i]
		switch {
		case allowed:
			if b < 0 || r.Remaining < c.res[b].Remaining {
				b = i
			}
		case r.Allowed:
		case b < 0, c.res[b].RetryAfter >= 0 && (r.RetryAfter < 0 || r.RetryAfter > c.res[b].RetryAfter):
			b = i
		}
	}
	return max(b, 0)
}
