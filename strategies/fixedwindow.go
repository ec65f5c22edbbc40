package strategies

import (
	"bytes"
	"fmt"
	"math"
	"time"
)

// FixedWindow counts calls in fixed windows, under one or more quotas at
// once ("100 per minute and 1000 per day"). Every quota counts every call;
// AllowN is allowed iff every quota has room for n, and then all of them
// take n.
//
// A quota's window starts at the first call that takes something after its
// previous window ended (a Peek starts none), and runs while now <
// start+Window; an instant before start, from a clock gone backwards,
// counts as inside. When the window ends, so does its count. For one quota
// and a call of n:
//
//	Allowed    count + n <= Limit
//	Remaining  Limit - count after the call, never negative
//	ResetAfter start + Window - now while the window counts something, else 0
//	RetryAfter start + Window - now when the quota lacks room; -1 when n > Limit
//
// and the quotas combine as described at merge: the binding one speaks.
// With Record, the count may exceed Limit until its window ends.
//
// The state keeps each quota's name with its count. When the quotas of the
// configuration change, a quota is matched to the state by name: one kept
// keeps its count and window start (under its new Limit and Window), one
// added starts fresh at its first call, and one removed is forgotten the
// next time the state is written.
type FixedWindow struct{ Quotas []Quota }

// Quota is one limit of a FixedWindow: at most Limit per Window.
type Quota struct {
	Name   string // 1-32 of [A-Za-z0-9_.:@+-], unique within its FixedWindow
	Limit  int64
	Window time.Duration // at most MaxWindow
}

// fixedWindowState holds one windowCount per quota. Apply keeps it laid out
// like the configured quotas, in their order.
type fixedWindowState struct{ quotas []windowCount }

// windowCount is one quota's window.
type windowCount struct {
	name  string
	count int64 // taken in the window; 0 means no window, whatever start says
	start int64 // Unix nanoseconds
}

// Validate implements Strategy.
func (f FixedWindow) Validate() error {
	if len(f.Quotas) == 0 {
		return invalid(kindFixedWindow, "at least one quota is required")
	}
	for i, q := range f.Quotas {
		if !validQuotaName(q.Name) {
			return invalid(kindFixedWindow, "quota %d: name must be 1-%d of [A-Za-z0-9_.:@+-], got %q", i+1, maxQuotaName, q.Name)
		}
		for _, p := range f.Quotas[:i] {
			if p.Name == q.Name {
				return invalid(kindFixedWindow, "quota %d: duplicate name %q", i+1, q.Name)
			}
		}
		field := fmt.Sprintf("quota %q: ", q.Name)
		if err := checkAtLeastOne(kindFixedWindow, field+"limit", q.Limit); err != nil {
			return err
		}
		if err := checkWindow(kindFixedWindow, field+"window", q.Window); err != nil {
			return err
		}
	}
	return nil
}

// NewState implements Strategy: no window running.
func (f FixedWindow) NewState() State {
	s := &fixedWindowState{quotas: make([]windowCount, len(f.Quotas))}
	for i, q := range f.Quotas {
		s.quotas[i].name = q.Name
	}
	return s
}

// used returns what w counts at now: its count while its window runs, and 0
// once the window has ended.
func (q Quota) used(w windowCount, now int64) int64 {
	if w.count > 0 && now < q.end(w) {
		return w.count
	}
	return 0
}

// end returns the instant w's window ends.
func (q Quota) end(w windowCount) int64 { return satAdd(w.start, int64(q.Window)) }

// take returns w after a call of n at now: into the running window, or
// into a new one starting now.
func (q Quota) take(w windowCount, now, n int64) windowCount {
	if q.used(w, now) == 0 {
		w.start, w.count = now, 0
	}
	w.count = satAdd(w.count, n)
	return w
}

// result reports on one quota in state w, for a call that still needs
// room for need: the call's n when it was denied, 0 once it was taken. It
// writes the Result to *r.
func (q Quota) result(w windowCount, now, need int64, r *Result) {
	used := q.used(w, now)
	*r = Result{
		Allowed:   satAdd(used, need) <= q.Limit,
		Limit:     q.Limit,
		Remaining: nonNeg(q.Limit - used),
	}
	if used > 0 {
		r.ResetAfter = until(q.end(w), now)
	}
	switch {
	case r.Allowed:
	case need > q.Limit:
		r.RetryAfter = -1
	default: // the window must end: a new one holds any need <= Limit
		r.RetryAfter = r.ResetAfter
	}
}

// Apply implements Strategy.
func (f FixedWindow) Apply(st State, c Call) (res Result, err error) {
	err = f.decide(st, c, &res)
	return res, err
}

// decide is Apply, writing the Result to *res. A fixed window has nothing
// to compute from its configuration ahead of the calls: its prepared form
// (see Prepare) only calls decide directly.
func (f *FixedWindow) decide(st State, c Call, res *Result) error {
	s, ok := st.(*fixedWindowState)
	if !ok {
		return wrongState(kindFixedWindow, st)
	}
	laid := s.laidOut(f.Quotas)
	fits := true
	for i, q := range f.Quotas {
		if satAdd(q.used(s.get(i, q.Name, laid), c.Now), c.N) > q.Limit {
			fits = false
		}
	}
	taken := (fits || c.Record) && c.N > 0
	if taken && !c.DryRun && !laid {
		s.conform(f.Quotas)
		laid = true
	}
	need := c.N
	if fits || c.Record {
		need = 0
	}
	if len(f.Quotas) == 0 {
		*res = Result{} // not a valid configuration, but decide sets all of *res
	}
	for i, q := range f.Quotas {
		w := s.get(i, q.Name, laid)
		if taken {
			w = q.take(w, c.Now, c.N)
			if !c.DryRun {
				s.quotas[i] = w
			}
		}
		if i == 0 {
			q.result(w, c.Now, need, res)
		} else {
			var r Result
			q.result(w, c.Now, need, &r)
			merge(res, res, &r)
		}
	}
	return nil
}

// laidOut reports whether s holds the configured quotas qs and no other,
// in their order: as on every call but the first after a change of the
// configuration. Apply asks once per call, and looks the quotas up only
// when they are not.
func (s *fixedWindowState) laidOut(qs []Quota) bool {
	if len(s.quotas) != len(qs) {
		return false
	}
	for i, q := range qs {
		if s.quotas[i].name != q.Name {
			return false
		}
	}
	return true
}

// get returns the window of the quota called name, configured at index i:
// fresh if the state has none. laid tells that s is laid out like the
// configuration (laidOut).
func (s *fixedWindowState) get(i int, name string, laid bool) windowCount {
	if laid || i < len(s.quotas) && s.quotas[i].name == name {
		return s.quotas[i]
	}
	for _, w := range s.quotas {
		if w.name == name {
			return w
		}
	}
	return windowCount{name: name}
}

// conform lays s out like the configured quotas, before a write, when it
// is not (laidOut): a quota the state lacks starts fresh, one the
// configuration dropped is forgotten.
func (s *fixedWindowState) conform(qs []Quota) {
	next := make([]windowCount, len(qs))
	for i, q := range qs {
		next[i] = s.get(i, q.Name, false)
	}
	s.quotas = next
}

// Decode implements Strategy. It reads "23|N|name|count|start|..." with N
// quotas, and the legacy single-quota "v1|count|start|duration" and
// "v2|count|start|", which become the count of the first configured quota.
func (f FixedWindow) Decode(b []byte) (State, error) {
	fm, r, err := openState(b, kindFixedWindow)
	if err != nil {
		return nil, err
	}
	s := &fixedWindowState{}
	if fm == formatCurrent {
		n := r.int("quotas", 1, math.MaxInt64)
		if fields := int64(bytes.Count(r.rest, []byte{'|'})) + 1; r.err == nil && n > fields/3 {
			return nil, corrupt(kindFixedWindow, "%d quotas declared, at most %d encoded", n, fields/3)
		}
		s.quotas = make([]windowCount, 0, n)
		seen := make(map[string]bool, n)
		for range n {
			name := r.next("name")
			if r.err == nil && (!validQuotaName(string(name)) || seen[string(name)]) {
				r.fail("name", name, "is not a valid, unique quota name")
			}
			w := windowCount{name: string(name)}
			seen[w.name] = true
			w.count = r.int("count", 0, math.MaxInt64)
			w.start = r.int("start", math.MinInt64, math.MaxInt64)
			s.quotas = append(s.quotas, w)
		}
	} else {
		if len(f.Quotas) == 0 {
			return nil, invalid(kindFixedWindow, "at least one quota is required")
		}
		w := windowCount{name: f.Quotas[0].Name}
		w.count = r.int("count", 0, math.MaxInt64)
		w.start = r.int("start", math.MinInt64, math.MaxInt64)
		if fm == formatV1 {
			r.int("duration", 0, math.MaxInt64)
		} else {
			r.empty("end")
		}
		s.quotas = []windowCount{w}
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return s, nil
}

// AppendEncode implements State: "23|N|name|count|start|...".
func (s *fixedWindowState) AppendEncode(dst []byte) []byte {
	dst = appendInt(kindFixedWindow.appendHeader(dst), int64(len(s.quotas)))
	for _, w := range s.quotas {
		dst = append(append(dst, '|'), w.name...)
		dst = appendInt(dst, w.count)
		dst = appendInt(dst, w.start)
	}
	return dst
}
