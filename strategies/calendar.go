package strategies

import (
	"fmt"
	"math"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// Calendar is a quota per calendar period in a time zone: "500 dollars per
// month, Europe/Paris", as a budget is set. Units are whatever the caller
// counts (nano-dollars, tokens, requests); every Limit up to math.MaxInt64
// is accepted, and sums saturate there.
//
// A period is a day, an ISO week (from Monday) or a month (from the 1st)
// of Location's wall clock. It begins at the first instant whose wall
// clock shows its first date, 00:00 unless a change of offset skips or
// repeats it, and ends when the next one begins: a day lasts 23 or 25
// hours when DST begins or ends, a month 28 to 31 days. The state holds
// the usage of one period, which it names by its first instant. For a
// call of n at now, where used is the state's usage, or 0 when now lies in
// a later period than the state's (the usage rolled over):
//
//	Allowed    used + n <= Limit
//	Remaining  Limit - used after the call, never negative
//	ResetAfter until the state's period ends while it counts something, else 0
//	RetryAfter until the state's period ends; -1 when n > Limit
//
// With Record, used may exceed Limit until the period ends. A clock gone
// back into a period earlier than the state's gives no refill and no
// penalty: the call is decided against the state's period as it is, and
// what it takes counts there.
//
// A changed Limit applies to the usage as it is. A changed Period or
// Location counts the usage in the period, under the new configuration,
// that holds the instant the state's period began, the one instant a
// state keeps: day to month keeps a day's usage until the end of its
// month; month to day keeps a month's usage for the month's first day,
// which has usually passed; Europe/Paris to America/Los_Angeles keeps a
// Paris day's usage until the end of the Los Angeles day in which it
// began, 9 hours after it began. So usage is never carried into a period
// that began after it was taken, which a new budget would pay for.
type Calendar struct {
	Limit    int64 // at least 1
	Period   Period
	Location *time.Location // nil means UTC
}

// Period is the length of a Calendar's period.
type Period uint8

// The periods of a Calendar.
const (
	Day   Period = iota + 1 // from 00:00 to the next day's 00:00
	Week                    // ISO: from Monday 00:00 to the next Monday's 00:00
	Month                   // from the 1st, 00:00, to the next month's 1st, 00:00
)

// String returns "day", "week" or "month", what ParsePeriod reads.
func (p Period) String() string {
	switch p {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return fmt.Sprintf("Period(%d)", uint8(p))
}

// ParsePeriod reads "day", "week" or "month". Anything else is an error
// matching ErrInvalid that names it.
func ParsePeriod(s string) (Period, error) {
	for p := Day; p <= Month; p++ {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, invalid(kindCalendar, "period must be \"day\", \"week\" or \"month\", got %q", s)
}

// maxShift is the most a change of a zone's offset has lengthened a day
// since 2000 in the time zone database: 3 hours, at Antarctica/Casey
// (DST is 1 hour, 2 at Antarctica/Troll, 30 minutes at Lord Howe Island).
const maxShift = 3 * time.Hour

// longest returns the longest a period lasts: the longest calendar one
// and a change of offset. Some zones changed their offset by up to a day
// long ago, Kwajalein's 47-hour day of 1969, which it leaves out: see
// Clamp, which does not rely on it.
func (p Period) longest() time.Duration {
	days := time.Duration(31)
	switch p {
	case Day:
		days = 1
	case Week:
		days = 7
	}
	return days*24*time.Hour + maxShift
}

// kindCalendar names calendar states: "91|start|used".
var kindCalendar = newKind('9', '1', "calendar", func() Decider { return new(calendarDecider) })

// calendarState is the usage of one period, and the end of that period
// as the Decider by reckoned it. The end spares every call within the
// period but the first the calendar arithmetic, which costs several times
// what the rest of a decision does, ten times in a zone with DST; by tells
// whose configuration it was reckoned under, as a FixedWindow's names
// tell that its state is laid out like its quotas.
type calendarState struct {
	start int64 // Unix nanoseconds: the first instant of the period used counts in
	used  int64 // in [0, math.MaxInt64]; 0 means nothing counts, whatever start says
	end   int64 // the first instant of the next period, if byLoc is set
	// The configuration that reckoned start and end: its period and zone
	// (never nil when set); byLoc nil if none did (decoded).
	byPeriod Period
	byLoc    *time.Location
}

// cachedBy reports whether s's start and end were reckoned under d's
// configuration, so that they hold for d.
func (s *calendarState) cachedBy(d *calendarDecider) bool {
	return s.byLoc == d.loc && s.byPeriod == d.period
}

// cache notes that start and end were reckoned under d.
func (s *calendarState) cache(d *calendarDecider, start, end int64) {
	s.start, s.end, s.byPeriod, s.byLoc = start, end, d.period, d.loc
}

// Validate implements Strategy.
func (c Calendar) Validate() error {
	if err := checkAtLeastOne(kindCalendar, "limit", c.Limit); err != nil {
		return err
	}
	if c.Period < Day || c.Period > Month {
		return invalid(kindCalendar, "period must be Day, Week or Month, got %v", c.Period)
	}
	return nil
}

// Prepare implements Strategy: the configuration, with its Location
// resolved.
func (c Calendar) Prepare() Decider {
	if err := c.Validate(); err != nil {
		return refused{err}
	}
	d := c.decider()
	return &d
}

// decider returns c prepared, valid or not.
func (c Calendar) decider() calendarDecider {
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	return calendarDecider{limit: c.Limit, period: c.Period, loc: loc}
}

// calendarDecider is a prepared Calendar.
type calendarDecider struct {
	limit  int64
	period Period
	loc    *time.Location // never nil
}

// NewState implements Decider: nothing used.
func (d *calendarDecider) NewState() State { return new(calendarState) }

// bounds returns the period that holds the instant t: its first instant,
// and the first instant of the next one. A period begins at the first
// instant whose wall clock shows its first date (midnight), and ends when
// the next one begins: an instant at which the wall clock went back over a
// period's end, to the date before (a DST that ends at 00:01, back to
// 23:01), is in the period that began. Instants beyond the int64 range
// saturate, so start <= t < end except at math.MaxInt64, whose period ends
// there too.
func (d *calendarDecider) bounds(t int64) (start, end int64) {
	local := time.Unix(0, t).In(d.loc)
	y, m, day := local.Date()
	switch d.period {
	case Week:
		day -= (int(local.Weekday()) + 6) % 7 // back to Monday
	case Month:
		day = 1
	}
	start = unixNano(midnight(y, m, day, d.loc))
	for {
		y, m, day = d.next(y, m, day)
		end = unixNano(midnight(y, m, day, d.loc))
		if t < end || end == math.MaxInt64 {
			return start, end
		}
		start = end // the wall clock went back: t is in the period that began
	}
}

// next returns the first date of the period after the one that begins on
// y-m-d, not normalized.
func (d *calendarDecider) next(y int, m time.Month, day int) (int, time.Month, int) {
	switch d.period {
	case Week:
		return y, m, day + 7
	case Month:
		return y, m + 1, day
	}
	return y, m, day + 1
}

// midnight returns the first instant of the date y-m-d (normalized, as
// time.Date normalizes it) in loc: the first whose wall clock shows that
// date. That is its 00:00, unless a change of offset skips it (a DST gap
// at midnight, a day skipped by a zone that crossed the date line): then
// the instant of the change, after which the wall clock shows the date;
// or unless a change of offset repeats it (an offset lowered after 00:00,
// the wall clock set back to before it): then the first 00:00.
//
// time.Date resolves a wall time in a gap to one on either side of it, and
// a repeated one to either occurrence: the change is the end of the zone it
// chose before the gap, or the start of the one after, and an earlier
// 00:00 is one at the offset of the zone before the one it chose.
func midnight(y int, m time.Month, day int, loc *time.Location) time.Time {
	t := time.Date(y, m, day, 0, 0, 0, 0, loc)
	from, to := t.ZoneBounds()
	if from.IsZero() && to.IsZero() {
		return t // a zone that never changes: every wall time occurs once
	}
	want := time.Date(y, m, day, 0, 0, 0, 0, time.UTC).Unix() // the wall clock, as a Unix time
	switch wall := t.Unix() + offset(t); {
	case wall < want && !to.IsZero():
		return to
	case wall > want && !from.IsZero():
		return from
	case !from.IsZero():
		// Changes of offset fall on whole seconds.
		if first := want - offset(from.Add(-time.Second)); first < from.Unix() {
			return time.Unix(first, 0).In(loc)
		}
	}
	return t
}

// offset returns the offset of t's zone from UTC, in seconds.
func offset(t time.Time) int64 {
	_, off := t.Zone()
	return int64(off)
}

// The instants an int64 of Unix nanoseconds holds.
var (
	minInstant = time.Unix(0, math.MinInt64)
	maxInstant = time.Unix(0, math.MaxInt64)
)

// unixNano returns t in Unix nanoseconds, saturated to the int64 range
// (years 1677 to 2262), where t.UnixNano would wrap around.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minInstant):
		return math.MinInt64
	case t.After(maxInstant):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// at returns the period a call at now is decided against, and what
// counts in it: now's, with the state's usage if the state is of that
// period, or nothing if it is of an earlier one (or holds nothing); the
// state's own, with its usage, if it is of a later one (a clock gone
// back). The state's period is the one that holds its start, which is its
// first instant unless the configuration changed.
func (d *calendarDecider) at(s *calendarState, now int64) (start, end, used int64) {
	if s.cachedBy(d) && s.used > 0 && now < s.end {
		return s.start, s.end, s.used // now's period, or an earlier one
	}
	start, end = d.bounds(now)
	switch {
	case s.used == 0 || s.start < start:
		return start, end, 0
	case s.start < end:
		return start, end, s.used
	}
	start, end = d.bounds(s.start)
	return start, end, s.used
}

// Decide implements Decider.
func (d *calendarDecider) Decide(st State, c Call) (Result, error) {
	s, ok := st.(*calendarState)
	if !ok {
		return Result{}, wrongState(kindCalendar, st)
	}
	start, end, used := d.at(s, c.Now)
	allowed := used <= sat.Sub(d.limit, c.N)
	need := c.N
	if allowed || c.Record {
		need = 0
		if c.N > 0 {
			used = sat.Add(used, c.N)
			if !c.DryRun {
				s.used = used
				s.cache(d, start, end)
			}
		}
		if c.Record {
			allowed = used <= d.limit
		}
	}
	r := Result{Allowed: allowed, Limit: d.limit, Remaining: nonNeg(d.limit - used)}
	if used > 0 {
		r.ResetAfter = until(end, c.Now)
	}
	switch {
	case allowed:
	case need > d.limit:
		r.RetryAfter = -1
	default: // the period must end: the next one holds any need <= Limit
		r.RetryAfter = r.ResetAfter
	}
	return r, nil
}

// Clamp implements Decider: a state whose period begins after the one
// that follows now's, more than Horizon after now's began, is moved to
// now's period, its usage kept. Only a clock that ran ahead and came back
// leaves such a state behind, which would be decided as it is (a clock
// gone back gives no refill) until the clock got past its end again; in
// now's period, it resets when that period ends, at most Horizon from now.
//
// A state of the period that follows now's is left as it is: a clock that
// steps back over midnight by a second writes one, and moving it to now's
// period would refund it when now's period ends. The rule counts periods
// rather than adding Horizon, so that it holds in a period longer than
// Horizon too.
func (d *calendarDecider) Clamp(st State, now int64) bool {
	s, ok := st.(*calendarState)
	if !ok || s.used == 0 {
		return false
	}
	cur, next := d.bounds(now)
	if s.start <= next {
		return false
	}
	if start, _ := d.bounds(s.start); start <= next {
		return false // the configuration changed: its period is the next one
	}
	s.cache(d, cur, next)
	return true
}

// Horizon implements Decider: the longest the period lasts, 27 hours for
// a day, 7 days and 3 hours for a week, 31 days and 3 hours for a month:
// a change of offset (DST) makes a day up to maxShift longer.
func (d *calendarDecider) Horizon() time.Duration { return d.period.longest() }

// Used returns the usage that st, a state of a Calendar, counts at now:
// 0 once now lies in a later period than the state's, which rolled over.
// It changes nothing. A state of another strategy is an error matching
// ErrMismatch; a Calendar that Validate refuses returns its error.
func (c Calendar) Used(st State, now int64) (int64, error) {
	s, ok := st.(*calendarState)
	if !ok {
		return 0, wrongState(kindCalendar, st)
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	d := c.decider()
	_, _, used := d.at(s, now)
	return used, nil
}

// PeriodEnd returns the end of the period that holds now, in Unix
// nanoseconds: the first instant of the next period, when usage rolls
// over (math.MaxInt64 for a period that ends after 2262). It is when a
// key's usage resets ("resets_at"), unless the clock went back into a
// period earlier than the key's: ResetAfter counts to the end of the key's
// own period. A Period that Validate refuses never ends: math.MaxInt64.
func (c Calendar) PeriodEnd(now int64) int64 {
	if c.Period < Day || c.Period > Month {
		return math.MaxInt64
	}
	d := c.decider()
	_, end := d.bounds(now)
	return end
}

// Adjust adds delta to the usage of st, a state of a Calendar, at now, in
// the period that holds the instant at: the other half of a reservation.
// A key store that reserves a cost when a request starts (Decide at at)
// and learns the real cost when it ends settles the difference: a
// negative delta refunds, a positive one charges more.
//
// While the state is of at's period (as of now: Used), delta applies
// there, and the usage never falls below 0. Once it has moved to a later
// period, or rolls over at now, a positive delta is charged to the state's
// period as of now, so that no cost goes uncharged; a negative one is
// dropped, as the usage it would refund no longer counts. A positive delta
// for an at in a later period than the state's (a clock that went back
// since, a state clamped since) is charged to the state's period too:
// usage is never booked ahead of it. The caller refunds no more than it
// took: Adjust cannot tell a reservation from other usage of its period.
//
// delta = 0 changes nothing. A state of another strategy is an error
// matching ErrMismatch; a Calendar that Validate refuses returns its error.
func (c Calendar) Adjust(st State, now, at, delta int64) error {
	s, ok := st.(*calendarState)
	if !ok {
		return wrongState(kindCalendar, st)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	d := c.decider()
	start, end, used := d.at(s, now)
	if (at < start || at >= end) && delta < 0 {
		return nil // refunds a period whose usage no longer counts
	}
	if n := max(sat.Add(used, delta), 0); n != used {
		s.used = n
		s.cache(&d, start, end)
	}
	return nil
}

// Decode implements Decider. It reads "91|start|used".
func (d *calendarDecider) Decode(b []byte) (State, error) {
	f, r, err := openState(b, kindCalendar)
	if err != nil {
		return nil, err
	}
	if f != formatCurrent {
		return nil, corrupt(kindCalendar, "no legacy encoding exists, got %s", quote(b[:min(len(b), 2)]))
	}
	s := &calendarState{
		start: r.int("start", math.MinInt64, math.MaxInt64),
		used:  r.int("used", 0, math.MaxInt64),
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return s, nil
}

// AppendEncode implements State: "91|start|used".
func (s *calendarState) AppendEncode(dst []byte) []byte {
	return appendInt(appendInt(kindCalendar.appendHeader(dst), s.start), s.used)
}

func (s *calendarState) kind() *kind { return kindCalendar }

func (s *calendarState) describe() Description {
	return describeAs(kindCalendar, map[string]any{"start": instant(s.start), "used": s.used})
}
