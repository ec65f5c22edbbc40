package strategies

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/ratestore/ratestore/internal/sat"
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
// and the quotas combine as described at Result.and: the binding one speaks.
// With Record, the count may exceed Limit until its window ends.
//
// The state keeps each quota's name and its count. When the quotas of the
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

// kindFixedWindow names fixed window states: "23|N|name|count|start|...".
var kindFixedWindow = newKind('2', '3', "fixed window", func() Decider { return new(fixedDecider) })

// fixedWindowState holds the window of each quota, which Decide keeps laid
// out like the configured quotas, in their order, and apart from them the
// quotas' names.
//
// A decision on a state laid out like its quotas reads the windows alone;
// the names serve when the configuration changed (matched) and to encode.
// Kept out of the windows, they leave the state of the usual one or two
// quotas 48 bytes with its windows, which fit one cache line: alone (see
// lineOfFixedWindow). A decision on a key not in the CPU caches waits for that line alone,
// where the windows with their names (96 bytes) spanned two or three
// lines, each a miss of its own.
type fixedWindowState struct {
	// names are the names of the quotas, that of the window at index i
	// at index i. A fixedNames is never changed once made, so states
	// share it: the states that a Decider made or wrote share its own
	// (fixedDecider.names), which tells Decide that they are laid out like
	// its quotas by one comparison of pointers instead of one of strings
	// per quota. Decoded states have names of their own.
	// Only a call that writes s changes names, so that a call that takes
	// nothing leaves s untouched.
	names *fixedNames
	w     [2]window // the windows of up to two quotas: in the state's line
	more  *[]window // the windows of more than two, in storage of their own; else nil
}

// fixedNames are the names of the quotas of a FixedWindow, in order.
type fixedNames []string

// of sets n, len(qs) long, to the names of the quotas qs, and returns it.
func (n fixedNames) of(qs []Quota) fixedNames {
	for i, q := range qs {
		n[i] = q.Name
	}
	return n
}

// ownNames are the names of a state that no prepared FixedWindow laid out,
// in room of their own when there are up to two. They are made once and
// referred to by address, never copied (list may be in room).
type ownNames struct {
	list fixedNames
	room [2]string
}

// init makes o n names long, all empty, and returns them.
func (o *ownNames) init(n int) *fixedNames {
	if n > len(o.room) {
		o.list = make(fixedNames, n)
	} else {
		o.list = o.room[:n:n]
	}
	return &o.list
}

// of makes o the names of the quotas qs, and returns them.
func (o *ownNames) of(qs []Quota) *fixedNames {
	o.init(len(qs)).of(qs)
	return &o.list
}

// window is the window of one quota.
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

// Prepare implements Strategy: a copy of the quotas, and their names,
// which the states it makes and writes share (see fixedWindowState.names):
// a change to f's slice after Prepare cannot falsify them.
func (f FixedWindow) Prepare() Decider {
	if err := f.Validate(); err != nil {
		return refused{err}
	}
	return &fixedDecider{FixedWindow{slices.Clone(f.Quotas)}, make(fixedNames, len(f.Quotas)).of(f.Quotas)}
}

// fixedDecider is a prepared FixedWindow.
type fixedDecider struct {
	FixedWindow
	names fixedNames
}

// init makes s, which must be the zero fixedWindowState, a fresh state of
// the quotas called names, and returns it: no window running.
func (s *fixedWindowState) init(names *fixedNames) *fixedWindowState {
	s.names = names
	if n := len(*names); n > len(s.w) {
		more := make([]window, n)
		s.more = &more
	}
	return s
}

// windows returns the windows of s, given n, the number of its names,
// which a caller that knows it passes: that spares a read of the names.
func (s *fixedWindowState) windows(n int) []window {
	if n > len(s.w) {
		return *s.more
	}
	return s.w[:n]
}

// NewState implements Decider: no window running, in an object of its
// own.
func (p *fixedDecider) NewState() State { return new(lineOfFixedWindow).s.init(&p.names) }

// lineOfFixedWindow is a fixedWindowState padded to a cache line, as a
// state is allocated: Go allocates 64-byte objects 64-byte aligned, but
// lays 48-byte ones end to end, so that every other one would straddle two
// lines, each a cache miss of its own.
type lineOfFixedWindow struct {
	s fixedWindowState
	_ [64 - unsafe.Sizeof(fixedWindowState{})]byte
}

// at returns what w counts at now, and the instant its window ends: its
// count while the window runs, and 0 once it has ended.
func (q *Quota) at(w window, now int64) (used, end int64) {
	end = sat.Add(w.start, int64(q.Window))
	if w.count > 0 && now < end {
		return w.count, end
	}
	return 0, end
}

// add returns w after a call that takes n at now, into the running window
// or into a new one starting now, and the instant that window ends.
func (q *Quota) add(w window, now, n int64) (window, int64) {
	used, end := q.at(w, now)
	if used == 0 {
		w.start, end = now, sat.Add(now, int64(q.Window))
	}
	w.count = sat.Add(used, n)
	return w, end
}

// result reports on one quota after the call, which still needs room for
// need (the call's n when it was denied, 0 once it was taken), from what
// the quota counts then and the end of its window (at). It returns the
// fields of the quota's Result but Limit, which is q.Limit.
func (q *Quota) result(used, end, now, need int64) (allowed bool, remaining int64, reset, retry time.Duration) {
	allowed = sat.Add(used, need) <= q.Limit
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

// Decide implements Decider.
//
// Every call needs the state laid out like the configured quotas: the
// window of quota i at index i. That is so on every call but the first
// after a change of the configuration, and a state written by this Decider
// shares its names (fixedWindowState.names), so the check is one
// comparison of pointers instead of one of strings per quota. A state
// written by another Decider, or decoded, compares the names (laidOut);
// one that is not laid out is looked up by name into a copy (matched),
// which becomes the state (conform) if the call takes something.
func (p *fixedDecider) Decide(st State, c Call) (res Result, err error) {
	s, ok := st.(*fixedWindowState)
	if !ok {
		return Result{}, wrongState(kindFixedWindow, st)
	}
	f := &p.FixedWindow
	if known := s.names == &p.names; known || s.laidOut(f.Quotas) {
		ws := s.windows(len(f.Quotas))
		taken := c.N > 0 && !c.DryRun && f.take(ws, c, &res)
		if !taken {
			taken = f.tally(ws, c, !c.DryRun, &res) && !c.DryRun
		}
		if taken && !known {
			s.names = &p.names
		}
		return res, nil
	}
	var buf [4]window // room enough for most configurations
	ws := s.matched(f.Quotas, buf[:0])
	if f.tally(ws, c, true, &res) && !c.DryRun {
		s.conform(ws, &p.names)
	}
	return res, nil
}

// tally decides c against ws, the windows of f's quotas in their order,
// and writes the Result to *res. It reports whether the call takes
// something, which it takes into ws when write is set.
func (f *FixedWindow) tally(ws []window, c Call, write bool, res *Result) (taken bool) {
	qs := f.Quotas
	ws = ws[:len(qs)]
	fits := f.fits(ws, c)
	taken = (fits || c.Record) && c.N > 0
	need := c.N
	if fits || c.Record {
		need = 0
	}
	// The Result of each quota is folded into *res as it comes, without
	// a Result of its own to merge, field by field: a Result literal
	// would be built aside and copied (see Result.and).
	for i := range qs {
		q := &qs[i]
		w := ws[i]
		if taken {
			w, _ = q.add(w, c.Now, c.N)
			if write {
				ws[i] = w
			}
		}
		used, end := q.at(w, c.Now)
		allowed, remaining, reset, retry := q.result(used, end, c.Now, need)
		if i == 0 {
			res.Allowed, res.Limit, res.Remaining, res.ResetAfter, res.RetryAfter = allowed, q.Limit, remaining, reset, retry
		} else {
			res.and(allowed, q.Limit, remaining, reset, retry)
		}
	}
	return taken
}

// fits reports whether each window of ws, those of f's quotas in their
// order, has room for c.N.
func (f *FixedWindow) fits(ws []window, c Call) bool {
	ws = ws[:len(f.Quotas)]
	for i := range f.Quotas {
		if used, _ := f.Quotas[i].at(ws[i], c.Now); sat.Add(used, c.N) > f.Quotas[i].Limit {
			return false
		}
	}
	return true
}

// take decides the usual call, one that takes n > 0 with no DryRun, when
// it fits every quota: it takes n into ws, the windows of f's quotas in
// their order, writes the Result to *res and reports true. It reports
// false, having changed nothing, when a quota lacks room, and tally
// answers the call.
//
// Since every quota allows the call, the Result is the least of what
// remains, the latest of the windows' ends and no RetryAfter: what tally
// answers for it (TestFixedWindowTakeIsTally holds the two together), with
// one look at each window after fits instead of tally's two, and no
// Result per quota: an allowed call, the common one, costs less than it
// does through tally.
func (f *FixedWindow) take(ws []window, c Call, res *Result) bool {
	qs := f.Quotas
	ws = ws[:len(qs)]
	if !f.fits(ws, c) {
		return false
	}
	var limit, remaining int64
	var reset time.Duration
	for i := range qs {
		q, w := &qs[i], &ws[i]
		// q.add, written out: it is too large for Go to inline.
		used, end := q.at(*w, c.Now)
		if used == 0 {
			w.start, end = c.Now, sat.Add(c.Now, int64(q.Window))
		}
		w.count = sat.Add(used, c.N)
		// The window counts the call from now on, unless it ends at once
		// (a Window of 0, which no valid configuration has).
		left, ends := q.Limit, time.Duration(0)
		if c.Now < end {
			left, ends = q.Limit-w.count, until(end, c.Now)
		}
		if i == 0 || left < remaining {
			limit, remaining = q.Limit, left
		}
		reset = max(reset, ends)
	}
	*res = Result{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
	return true
}

// Clamp implements Decider: a window that counts something and starts
// after now, which only a clock that ran ahead and came back leaves
// behind, and which would count (an instant before start counts as inside)
// until the clock got past its end again, starts at now instead, its count
// kept: it ends at most the longest Window after now.
func (p *fixedDecider) Clamp(st State, now int64) bool {
	s, ok := st.(*fixedWindowState)
	if !ok {
		return false
	}
	changed := false
	ws := s.windows(len(*s.names))
	for i := range ws {
		if ws[i].count > 0 && ws[i].start > now {
			ws[i].start = now
			changed = true
		}
	}
	return changed
}

// Horizon implements Decider: the longest Window.
func (p *fixedDecider) Horizon() time.Duration {
	var h time.Duration
	for _, q := range p.Quotas {
		h = max(h, q.Window)
	}
	return h
}

// laidOut reports whether s holds the configured quotas qs and no other,
// in their order: as on every call but the first after a change of the
// configuration.
func (s *fixedWindowState) laidOut(qs []Quota) bool {
	names := *s.names
	if len(names) != len(qs) {
		return false
	}
	for i, q := range qs {
		if names[i] != q.Name {
			return false
		}
	}
	return true
}

// get returns the window of the quota called name, configured at index i:
// fresh if the state has none.
func (s *fixedWindowState) get(i int, name string) window {
	names := *s.names
	ws := s.windows(len(names))
	if i < len(names) && names[i] == name {
		return ws[i]
	}
	for j, n := range names {
		if n == name {
			return ws[j]
		}
	}
	return window{}
}

// matched appends to dst the windows of s laid out like the configured
// quotas qs, when s is not (laidOut): a quota the state lacks starts
// fresh, one the configuration dropped is left out.
func (s *fixedWindowState) matched(qs []Quota, dst []window) []window {
	for i, q := range qs {
		dst = append(dst, s.get(i, q.Name))
	}
	return dst
}

// conform lays s out as ws, the windows that matched returned, under
// names, those of the configured quotas. The windows of more than two
// quotas go to new storage: the windows of a state are its own.
func (s *fixedWindowState) conform(ws []window, names *fixedNames) {
	*s = fixedWindowState{names: names}
	if len(ws) > len(s.w) {
		more := slices.Clone(ws)
		s.more = &more
	} else {
		copy(s.w[:], ws)
	}
}

// Decode implements Decider. It reads "23|N|name|count|start|..." with N
// quotas, and the legacy single-quota "v1|count|start|duration" and
// "v2|count|start|", which become the count of the first configured quota.
// The state has names of its own, which give way to the Decider's shared
// ones the first time it writes the state.
func (p *fixedDecider) Decode(b []byte) (State, error) {
	fm, r, err := openState(b, kindFixedWindow)
	if err != nil {
		return nil, err
	}
	s := &new(lineOfFixedWindow).s
	if fm == formatCurrent {
		n := r.int("quotas", 1, math.MaxInt64)
		if fields := int64(bytes.Count(r.rest, []byte{'|'})) + 1; r.err == nil && n > fields/3 {
			return nil, corrupt(kindFixedWindow, "%d quotas declared, at most %d encoded", n, fields/3)
		}
		own := new(ownNames).init(int(n))
		names, ws := *own, s.init(own).windows(len(*own))
		seen := make(map[string]bool, n)
		for i := range names {
			name := r.next("name")
			if r.err == nil && (!validQuotaName(string(name)) || seen[string(name)]) {
				r.fail("name", name, "is not a valid, unique quota name")
			}
			names[i] = string(name)
			seen[names[i]] = true
			ws[i].count = r.int("count", 0, math.MaxInt64)
			ws[i].start = r.int("start", math.MinInt64, math.MaxInt64)
		}
	} else {
		if len(p.Quotas) == 0 {
			return nil, corrupt(kindFixedWindow, "a legacy state needs the configured quotas to be read")
		}
		s.init(new(ownNames).of(p.Quotas[:1]))
		s.w[0].count = r.int("count", 0, math.MaxInt64)
		s.w[0].start = r.int("start", math.MinInt64, math.MaxInt64)
		if fm == formatV1 {
			r.int("duration", 0, math.MaxInt64)
		} else {
			r.empty("end")
		}
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return s, nil
}

// AppendEncode implements State: "23|N|name|count|start|...".
func (s *fixedWindowState) AppendEncode(dst []byte) []byte {
	names := *s.names
	ws := s.windows(len(names))
	dst = appendInt(kindFixedWindow.appendHeader(dst), int64(len(names)))
	for i, name := range names {
		dst = append(append(dst, '|'), name...)
		dst = appendInt(dst, ws[i].count)
		dst = appendInt(dst, ws[i].start)
	}
	return dst
}

func (s *fixedWindowState) kind() *kind { return kindFixedWindow }

func (s *fixedWindowState) describe() Description {
	names := *s.names
	ws := s.windows(len(names))
	quotas := make([]map[string]any, len(names))
	for i, w := range ws {
		quotas[i] = map[string]any{"name": names[i], "count": w.count, "start": instant(w.start)}
	}
	return describeAs(kindFixedWindow, map[string]any{"quotas": quotas})
}
