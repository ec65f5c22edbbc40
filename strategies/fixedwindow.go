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
type fixedWindowState struct {
	quotas []windowCount
	// layout is the prepared configuration whose quotas s is known to be
	// laid out like (see decide), or nil: the prepared form that made s,
	// or the last one that wrote it. Only a call that writes s changes it,
	// so that a call that takes nothing leaves s untouched, and whatever
	// changes the names in quotas sets it too. It is not encoded: a
	// decoded state has none.
	layout *FixedWindow
}

// windowCount is one quota's window, under the quota's name.
type windowCount struct {
	name string
	window
}

// window is what a call changes in a windowCount, whose name it never
// changes.
type window struct {
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
func (f FixedWindow) NewState() State { return f.newState(nil, newFixedWindowState) }

// newState returns a fresh state laid out like f's quotas, for the
// prepared configuration layout (nil for a value), made by in, which
// returns a state of n windows: newFixedWindowState, or a place in a
// Composite's state (see fixedPart).
func (f *FixedWindow) newState(layout *FixedWindow, in func(n int) *fixedWindowState) *fixedWindowState {
	s := in(len(f.Quotas))
	for i, q := range f.Quotas {
		s.quotas[i].name = q.Name
	}
	s.layout = layout
	return s
}

// fixedWindowBox is a fixedWindowState with room for the windows of the
// usual one or two quotas: a state whose windows are there is one object,
// so a call reads one place in memory instead of two, and a store of many
// keys holds half as many objects.
type fixedWindowBox struct {
	s fixedWindowState
	w [2]windowCount
}

// state returns the state of b, of n windows, all zero: in b's room when
// they fit.
func (b *fixedWindowBox) state(n int) *fixedWindowState {
	if n > len(b.w) {
		b.s.quotas = make([]windowCount, n)
	} else {
		b.s.quotas = b.w[:n]
	}
	return &b.s
}

// newFixedWindowState returns a state of n windows, all zero, in an
// object of its own: a fixedWindowBox when they fit in it.
func newFixedWindowState(n int) *fixedWindowState {
	if n > 2 {
		return &fixedWindowState{quotas: make([]windowCount, n)}
	}
	return new(fixedWindowBox).state(n)
}

// fixedPart is a FixedWindow as a part of a Composite, which makes its
// states in place (see maker), in a fixedWindowBox, for the prepared
// configuration layout (nil for a value), as NewState and the prepared
// form's do. The windows of more than two quotas go to a slice of their
// own, as they do from newFixedWindowState.
type fixedPart struct {
	f      FixedWindow
	layout *FixedWindow
}

func (p fixedPart) newIn(b *fixedWindowBox) State { return p.f.newState(p.layout, b.state) }

func (p fixedPart) decodeIn(b *fixedWindowBox, enc []byte) (State, error) {
	return p.f.decode(enc, b.state)
}

// at returns what w counts at now, and the instant its window ends: its
// count while the window runs, and 0 once it has ended.
func (q *Quota) at(w window, now int64) (used, end int64) {
	end = satAdd(w.start, int64(q.Window))
	if w.count > 0 && now < end {
		return w.count, end
	}
	return 0, end
}

// result reports on one quota after the call, which still needs room for
// need (the call's n when it was denied, 0 once it was taken), from what
// the quota counts then and the end of its window (at). It returns the
// fields of the quota's Result but Limit, which is q.Limit.
func (q *Quota) result(used, end, now, need int64) (allowed bool, remaining int64, reset, retry time.Duration) {
	allowed = satAdd(used, need) <= q.Limit
	remaining = nonNeg(q.Limit - used)
	if used > 0 {
		reset = until(end, now)
	}
	switch {
	case allowed:
	case need > q.Limit:
		retry = -1
	default: // the window must end: a new one holds any need <= Limit
		retry = reset
	}
	return allowed, remaining, reset, retry
}

// Apply implements Strategy.
func (f FixedWindow) Apply(st State, c Call) (res Result, err error) {
	err = f.decide(st, c, &res, nil)
	return res, err
}

// decide is Apply, writing the Result to *res. A fixed window has nothing
// to compute from its configuration ahead of the calls; its prepared form
// (see Prepare) passes itself as layout, which lets a state remember that
// it is laid out like its quotas.
//
// Every call needs the state laid out like the configured quotas: the
// window of quota i at index i. That is so on every call but the first
// after a change of the configuration, and a state remembers the prepared
// configuration it was last written under (fixedWindowState.layout), so
// the check is one comparison of pointers instead of one of strings per
// quota. A state written by another handle, decoded, or applied by a value
// compares the names (laidOut); one that is not laid out is looked up by
// name into a copy (matched), which becomes the state (conform) if the
// call takes something.
func (f *FixedWindow) decide(st State, c Call, res *Result, layout *FixedWindow) error {
	s, ok := st.(*fixedWindowState)
	if !ok {
		return wrongState(kindFixedWindow, st)
	}
	if known := layout != nil && s.layout == layout; known || s.laidOut(f.Quotas) {
		if f.tally(s.quotas, c, !c.DryRun, res) && !c.DryRun && !known && layout != nil {
			s.layout = layout
		}
		return nil
	}
	var buf [4]windowCount // room enough for most configurations
	ws := s.matched(f.Quotas, buf[:0])
	if f.tally(ws, c, true, res) && !c.DryRun {
		s.conform(ws, layout)
	}
	return nil
}

// tally decides c against ws, the windows of f's quotas in their order,
// and writes the Result to *res. It reports whether the call takes
// something, which it takes into ws when write is set.
func (f *FixedWindow) tally(ws []windowCount, c Call, write bool, res *Result) (taken bool) {
	qs := f.Quotas
	ws = ws[:len(qs)]
	fits := true
	for i := range qs {
		if used, _ := qs[i].at(ws[i].window, c.Now); satAdd(used, c.N) > qs[i].Limit {
			fits = false
		}
	}
	if fits && c.N > 0 && write && len(qs) > 0 {
		f.take(ws, c, res)
		return true
	}
	taken = (fits || c.Record) && c.N > 0
	need := c.N
	if fits || c.Record {
		need = 0
	}
	if len(qs) == 0 {
		*res = Result{} // not a valid configuration, but decide sets all of *res
	}
	// The Result of each quota is folded into *res as it comes, without
	// a Result of its own to merge, field by field: a Result literal
	// would be built aside and copied (see merge).
	for i := range qs {
		q := &qs[i]
		w := ws[i].window
		used, end := q.at(w, c.Now)
		if taken {
			// Into the running window, or into a new one starting now.
			if used == 0 {
				w = window{count: c.N, start: c.Now}
			} else {
				w.count = satAdd(w.count, c.N)
			}
			if write {
				ws[i].window = w
			}
			used, end = q.at(w, c.Now)
		}
		allowed, remaining, reset, retry := q.result(used, end, c.Now, need)
		if i == 0 {
			res.Allowed, res.Limit, res.Remaining, res.ResetAfter, res.RetryAfter = allowed, q.Limit, remaining, reset, retry
		} else {
			res.and(allowed, q.Limit, remaining, reset, retry)
		}
	}
	return taken
}

// take is tally for the usual call, one that fits every quota and takes
// n > 0 from each, written to ws: each window is read and changed once,
// and since every quota allows the call, the Result is the minimum of
// what remains and the maximum of the windows' ends, with no RetryAfter.
// It is what tally's general loop answers for such a call (TestReference
// holds it to the code before it), without that loop's second look at
// each window and its per-quota Result.
func (f *FixedWindow) take(ws []windowCount, c Call, res *Result) {
	res.Allowed, res.RetryAfter = true, 0
	for i := range f.Quotas {
		q, w := &f.Quotas[i], &ws[i].window
		end := satAdd(w.start, int64(q.Window))
		if w.count > 0 && c.Now < end { // the running window
			w.count = satAdd(w.count, c.N)
		} else { // a new one, starting now
			w.count, w.start, end = c.N, c.Now, satAdd(c.Now, int64(q.Window))
		}
		// The window counts the call from now on, unless it ends at once
		// (a Window of 0, which no valid configuration has).
		remaining, reset := q.Limit, time.Duration(0)
		if c.Now < end {
			remaining, reset = q.Limit-w.count, until(end, c.Now)
		}
		if i == 0 || remaining < res.Remaining {
			res.Limit, res.Remaining = q.Limit, remaining
		}
		if i == 0 || reset > res.ResetAfter {
			res.ResetAfter = reset
		}
	}
}

// laidOut reports whether s holds the configured quotas qs and no other,
// in their order: as on every call but the first after a change of the
// configuration.
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
// fresh if the state has none.
func (s *fixedWindowState) get(i int, name string) windowCount {
	if i < len(s.quotas) && s.quotas[i].name == name {
		return s.quotas[i]
	}
	for _, w := range s.quotas {
		if w.name == name {
			return w
		}
	}
	return windowCount{name: name}
}

// matched appends to dst the windows of s laid out like the configured
// quotas qs, when s is not (laidOut): a quota the state lacks starts
// fresh, one the configuration dropped is left out.
func (s *fixedWindowState) matched(qs []Quota, dst []windowCount) []windowCount {
	for i, q := range qs {
		dst = append(dst, s.get(i, q.Name))
	}
	return dst
}

// conform lays s out as ws, the windows that matched returned, for the
// prepared configuration layout (or none). The windows go to new storage,
// leaving the old one as it was: a Composite may put the old slice back
// (see undo), and a take only ever changes the window of a windowCount in
// place, never its name.
func (s *fixedWindowState) conform(ws []windowCount, layout *FixedWindow) {
	s.quotas = append([]windowCount(nil), ws...)
	s.layout = layout
}

// Decode implements Strategy. It reads "23|N|name|count|start|..." with N
// quotas, and the legacy single-quota "v1|count|start|duration" and
// "v2|count|start|", which become the count of the first configured quota.
func (f FixedWindow) Decode(b []byte) (State, error) { return f.decode(b, newFixedWindowState) }

// decode is Decode, with the state made by in, as for newState.
func (f *FixedWindow) decode(b []byte, in func(n int) *fixedWindowState) (State, error) {
	fm, r, err := openState(b, kindFixedWindow)
	if err != nil {
		return nil, err
	}
	var s *fixedWindowState
	if fm == formatCurrent {
		n := r.int("quotas", 1, math.MaxInt64)
		if fields := int64(bytes.Count(r.rest, []byte{'|'})) + 1; r.err == nil && n > fields/3 {
			return nil, corrupt(kindFixedWindow, "%d quotas declared, at most %d encoded", n, fields/3)
		}
		s = in(int(n))
		s.quotas = s.quotas[:0]
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
		s = in(1)
		s.quotas[0] = w
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
