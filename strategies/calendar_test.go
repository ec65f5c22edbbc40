package strategies

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The zones of the calendar tests: the usual ones, and those whose
// offset changed in the ways that make a day odd.
var (
	paris      = zone("Europe/Paris")
	losAngeles = zone("America/Los_Angeles")
	apia       = zone("Pacific/Apia")        // skipped 2011-12-30 crossing the date line
	santiago   = zone("America/Santiago")    // DST begins at 00:00, skipping midnight
	gooseBay   = zone("America/Goose_Bay")   // DST ended at 00:01, back to 23:01 the day before (until 2010)
	casey      = zone("Antarctica/Casey")    // +08 and +11 in turn: 21 and 27-hour days
	algiers    = zone("Africa/Algiers")      // DST ended at 01:00 in 1939, back to 00:00: midnight twice
	kwajalein  = zone("Pacific/Kwajalein")   // a 47-hour day in 1969, a skipped one in 1993
	lordHowe   = zone("Australia/Lord_Howe") // a DST of 30 minutes
)

func zone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// wallNS returns the instant at which the wall clock of loc shows
// y-m-d hh:mm, in Unix nanoseconds.
func wallNS(loc *time.Location, y int, m time.Month, d, hh, mm int) int64 {
	return time.Date(y, m, d, hh, mm, 0, 0, loc).UnixNano()
}

// on returns that instant as a step of a vector takes it: after t0.
func on(loc *time.Location, y int, m time.Month, d, hh, mm int) time.Duration {
	return time.Duration(wallNS(loc, y, m, d, hh, mm) - t0)
}

// calEnc is the encoding of a calendar state that counts used in the
// period that began at 00:00 on y-m-d in loc.
func calEnc(loc *time.Location, y int, m time.Month, d int, used int64) string {
	return "91|" + strconv.FormatInt(wallNS(loc, y, m, d, 0, 0), 10) + "|" + strconv.FormatInt(used, 10)
}

func TestCalendarVectors(t *testing.T) {
	utc, h, m := time.UTC, time.Hour, time.Minute
	day := 24 * h
	parisDay := Calendar{Limit: 10, Period: Day, Location: paris}
	for _, v := range []vector{
		{name: "month boundary", s: Calendar{Limit: 10, Period: Month}, steps: []step{
			{on(utc, 2026, 1, 31, 23, 59), allow, 7, yes(10, 3, m), calEnc(utc, 2026, 1, 1, 7)},
			{on(utc, 2026, 1, 31, 23, 59), allow, 4, no(10, 3, m, m), ""},
			{on(utc, 2026, 2, 1, 0, 0), peek, 0, yes(10, 10, 0), calEnc(utc, 2026, 1, 1, 7)}, // rolled over, nothing written
			{on(utc, 2026, 2, 1, 0, 0), allow, 4, yes(10, 6, 28*day), calEnc(utc, 2026, 2, 1, 4)},
			{on(utc, 2026, 2, 28, 23, 59), peek, 0, yes(10, 6, m), ""},
			{on(utc, 2026, 3, 1, 0, 0), peek, 0, yes(10, 10, 0), ""},
		}},
		{name: "week boundary: Sunday 23:59, then Monday", s: Calendar{Limit: 5, Period: Week, Location: paris}, steps: []step{
			{on(paris, 2026, 1, 19, 9, 0), allow, 5, yes(5, 0, 6*day+15*h), calEnc(paris, 2026, 1, 19, 5)},
			{on(paris, 2026, 1, 25, 23, 59), allow, 1, no(5, 0, m, m), ""},
			{on(paris, 2026, 1, 26, 0, 0), allow, 1, yes(5, 4, 7*day), calEnc(paris, 2026, 1, 26, 1)},
			{on(paris, 2026, 3, 23, 0, 0), allow, 1, yes(5, 4, 7*day-h), calEnc(paris, 2026, 3, 23, 1)}, // DST begins on its Sunday
		}},
		{name: "23-hour day: DST begins", s: parisDay, steps: []step{
			{on(paris, 2026, 3, 28, 23, 30), allow, 10, yes(10, 0, 30*m), calEnc(paris, 2026, 3, 28, 10)},
			{on(paris, 2026, 3, 29, 0, 0), allow, 3, yes(10, 7, 23*h), calEnc(paris, 2026, 3, 29, 3)},
			{on(paris, 2026, 3, 29, 1, 59), allow, 8, no(10, 7, 21*h+m, 21*h+m), ""},
			{on(paris, 2026, 3, 29, 3, 0), peek, 0, yes(10, 7, 21*h), ""}, // 02:00 CET became 03:00 CEST
			{on(paris, 2026, 3, 30, 0, 0), peek, 0, yes(10, 10, 0), ""},
		}},
		{name: "25-hour day: DST ends", s: parisDay, steps: []step{
			{on(paris, 2026, 10, 25, 0, 0), allow, 4, yes(10, 6, 25*h), calEnc(paris, 2026, 10, 25, 4)},
			{on(paris, 2026, 10, 25, 23, 59), peek, 0, yes(10, 6, m), ""},
			{on(paris, 2026, 10, 26, 0, 0), allow, 1, yes(10, 9, day), calEnc(paris, 2026, 10, 26, 1)},
		}},
		{name: "months with a DST change", s: Calendar{Limit: 10, Period: Month, Location: paris}, steps: []step{
			{on(paris, 2026, 3, 1, 0, 0), allow, 1, yes(10, 9, 31*day-h), calEnc(paris, 2026, 3, 1, 1)},
			{on(paris, 2026, 10, 1, 0, 0), allow, 1, yes(10, 9, 31*day+h), calEnc(paris, 2026, 10, 1, 1)},
		}},
		{name: "Los Angeles: its day, not UTC's", s: Calendar{Limit: 10, Period: Day, Location: losAngeles}, steps: []step{
			{on(losAngeles, 2026, 1, 17, 15, 0), allow, 10, yes(10, 0, 9*h), calEnc(losAngeles, 2026, 1, 17, 10)},
			{on(losAngeles, 2026, 1, 17, 16, 30), allow, 1, no(10, 0, 7*h+30*m, 7*h+30*m), ""}, // 00:30 UTC
			{on(losAngeles, 2026, 1, 18, 0, 0), allow, 1, yes(10, 9, day), calEnc(losAngeles, 2026, 1, 18, 1)},
		}},
		{name: "UTC at the same instants", s: Calendar{Limit: 10, Period: Day}, steps: []step{
			{on(losAngeles, 2026, 1, 17, 15, 0), allow, 10, yes(10, 0, h), calEnc(utc, 2026, 1, 17, 10)},
			{on(losAngeles, 2026, 1, 17, 16, 30), allow, 1, yes(10, 9, 23*h+30*m), calEnc(utc, 2026, 1, 18, 1)},
		}},
		{name: "February of a leap year", s: Calendar{Limit: 10, Period: Month}, steps: []step{
			{on(utc, 2028, 2, 1, 0, 0), allow, 10, yes(10, 0, 29*day), calEnc(utc, 2028, 2, 1, 10)},
			{on(utc, 2028, 2, 29, 12, 0), allow, 1, no(10, 0, 12*h, 12*h), ""},
			{on(utc, 2028, 3, 1, 0, 0), allow, 1, yes(10, 9, 31*day), calEnc(utc, 2028, 3, 1, 1)},
		}},
		{name: "February 29th", s: Calendar{Limit: 10, Period: Day}, steps: []step{
			{on(utc, 2028, 2, 28, 23, 0), allow, 1, yes(10, 9, h), calEnc(utc, 2028, 2, 28, 1)},
			{on(utc, 2028, 2, 29, 0, 0), allow, 1, yes(10, 9, day), calEnc(utc, 2028, 2, 29, 1)},
			{on(utc, 2028, 3, 1, 0, 0), allow, 1, yes(10, 9, day), calEnc(utc, 2028, 3, 1, 1)},
		}},
		{name: "record past the limit", s: Calendar{Limit: 10, Period: Month}, steps: []step{
			{on(utc, 2026, 1, 31, 12, 0), allow, 8, yes(10, 2, 12*h), calEnc(utc, 2026, 1, 1, 8)},
			{on(utc, 2026, 1, 31, 12, 0), record, 5, no(10, 0, 12*h, 12*h), calEnc(utc, 2026, 1, 1, 13)},
			{on(utc, 2026, 1, 31, 18, 0), peek, 0, no(10, 0, 6*h, 6*h), ""},
			{on(utc, 2026, 1, 31, 18, 0), allow, 11, no(10, 0, 6*h, -1), ""},
			{on(utc, 2026, 1, 31, 18, 0), dry, 1, no(10, 0, 6*h, 6*h), ""},
			{on(utc, 2026, 2, 1, 0, 0), allow, 10, yes(10, 0, 28*day), calEnc(utc, 2026, 2, 1, 10)},
		}},
		{name: "n above the limit, dry runs", s: Calendar{Limit: 10, Period: Day}, steps: []step{
			{on(utc, 2026, 1, 18, 12, 0), allow, 11, no(10, 10, 0, -1), "91|0|0"},
			{on(utc, 2026, 1, 18, 12, 0), dry, 4, yes(10, 6, 12*h), "91|0|0"},
			{on(utc, 2026, 1, 18, 12, 0), dry, 11, no(10, 10, 0, -1), "91|0|0"},
		}},
		{name: "clock gone back across midnight", s: Calendar{Limit: 5, Period: Day, Location: paris}, steps: []step{
			{on(paris, 2026, 1, 19, 0, 10), allow, 3, yes(5, 2, day-10*m), calEnc(paris, 2026, 1, 19, 3)},
			{on(paris, 2026, 1, 18, 23, 50), allow, 1, yes(5, 1, day+10*m), calEnc(paris, 2026, 1, 19, 4)}, // no refill
			{on(paris, 2026, 1, 18, 23, 50), allow, 2, no(5, 1, day+10*m, day+10*m), ""},                   // the 19th's limit
			{on(paris, 2026, 1, 19, 12, 0), peek, 0, yes(5, 1, 12*h), ""},
			{on(paris, 2026, 1, 17, 12, 0), peek, 0, yes(5, 1, 2*day+12*h), ""}, // no penalty however far back
			{on(paris, 2026, 1, 20, 0, 0), peek, 0, yes(5, 5, 0), ""},
		}},
	} {
		v.run(t)
	}
}

// TestCalendarReconfigured: a changed Period or Location counts the
// usage in the period that holds its start; a lowered Limit keeps it.
func TestCalendarReconfigured(t *testing.T) {
	h := time.Hour
	for _, c := range []struct {
		name  string
		start string // written under another configuration
		s     Calendar
		at    int64
		want  Result
		enc   string // after a call of 1 at at
	}{
		{"day to month", calEnc(paris, 2026, 1, 18, 3), Calendar{Limit: 10, Period: Month, Location: paris},
			wallNS(paris, 2026, 1, 25, 0, 0), yes(10, 7, 7*24*h), calEnc(paris, 2026, 1, 1, 4)},
		{"month to day: only the 1st", calEnc(paris, 2026, 1, 1, 3), Calendar{Limit: 10, Period: Day, Location: paris},
			wallNS(paris, 2026, 1, 18, 0, 0), yes(10, 10, 0), calEnc(paris, 2026, 1, 18, 1)},
		{"Paris to Los Angeles: the day in which Paris's began", calEnc(paris, 2026, 1, 18, 3), Calendar{Limit: 10, Period: Day, Location: losAngeles},
			wallNS(losAngeles, 2026, 1, 17, 20, 0), yes(10, 7, 4*h), calEnc(losAngeles, 2026, 1, 17, 4)},
		{"Paris to Los Angeles, the next day", calEnc(paris, 2026, 1, 18, 3), Calendar{Limit: 10, Period: Day, Location: losAngeles},
			wallNS(losAngeles, 2026, 1, 18, 0, 0), yes(10, 10, 0), calEnc(losAngeles, 2026, 1, 18, 1)},
		{"limit lowered", calEnc(time.UTC, 2026, 1, 18, 8), Calendar{Limit: 5, Period: Day},
			wallNS(time.UTC, 2026, 1, 18, 12, 0), no(5, 0, 12*h, 12*h), calEnc(time.UTC, 2026, 1, 18, 8)},
	} {
		st := mustDecode(t, c.s, c.start)
		if got := mustApply(t, c.s, st, Call{Now: c.at}); got != c.want {
			t.Errorf("%s: peek %+v, want %+v", c.name, got, c.want)
		}
		if enc(st) != c.start {
			t.Errorf("%s: a peek wrote %s", c.name, enc(st))
		}
		mustApply(t, c.s, st, Call{Now: c.at, N: 1})
		if enc(st) != c.enc {
			t.Errorf("%s: after a call of 1: %s, want %s", c.name, enc(st), c.enc)
		}
	}
}

// adjuster settles reservations of a monthly budget in Paris, made on
// January 31st at 23:00, in January (at 23:30) or in February (00:30).
type adjuster struct {
	t               testing.TB
	cal             Calendar
	jan, later, feb int64
}

func newAdjuster(t testing.TB) *adjuster {
	return &adjuster{t, Calendar{Limit: 1000, Period: Month, Location: paris},
		wallNS(paris, 2026, 1, 31, 23, 0), wallNS(paris, 2026, 1, 31, 23, 30), wallNS(paris, 2026, 2, 1, 0, 30)}
}

func (a *adjuster) used(st State, now int64) int64 {
	a.t.Helper()
	n, err := a.cal.Used(st, now)
	require.NoError(a.t, err)
	return n
}

func (a *adjuster) adjust(st State, now, at, delta int64) {
	a.t.Helper()
	require.NoError(a.t, a.cal.Adjust(st, now, at, delta))
}

// reserved returns a state that took n at jan.
func (a *adjuster) reserved(n int64) State {
	st := newState(a.cal)
	mustApply(a.t, a.cal, st, Call{Now: a.jan, N: n})
	return st
}

// TestCalendarAdjust settles reservations in the period they were made in.
func TestCalendarAdjust(t *testing.T) {
	a := newAdjuster(t)
	st := a.reserved(100)
	a.adjust(st, a.later, a.jan, -40)
	require.EqualValues(t, 60, a.used(st, a.later), "refunded")
	a.adjust(st, a.later, a.jan, 30)
	require.EqualValues(t, 90, a.used(st, a.later), "charged more")
	a.adjust(st, a.later, a.jan, 0)
	require.Equal(t, calEnc(paris, 2026, 1, 1, 90), enc(st), "nothing")
	a.adjust(st, a.later, a.jan, -1000)
	require.EqualValues(t, 0, a.used(st, a.later), "never below 0")
	require.Zero(t, mustApply(t, a.cal, st, Call{Now: a.later}).ResetAfter, "as fresh")
	a.adjust(st, a.later, a.jan, math.MinInt64)
	a.adjust(st, a.later, a.jan, math.MaxInt64)
	a.adjust(st, a.later, a.jan, math.MaxInt64)
	require.EqualValues(t, math.MaxInt64, a.used(st, a.later), "saturated")
	require.False(t, mustApply(t, a.cal, st, Call{Now: a.later}).Allowed, "decided on what Adjust wrote")
}

// TestCalendarAdjustLate settles reservations once the state has moved to
// another period: charges go to the state's period, refunds are dropped.
func TestCalendarAdjustLate(t *testing.T) {
	a := newAdjuster(t)

	// Settled after the month ended: a charge goes to February.
	st := a.reserved(100)
	before := enc(st)
	a.adjust(st, a.feb, a.jan, -40)
	require.Equal(t, before, enc(st), "a refund of January in February")
	require.EqualValues(t, 100, a.used(st, a.later), "January's usage as it was")
	a.adjust(st, a.feb, a.jan, 25)
	require.EqualValues(t, 25, a.used(st, a.feb), "charged to February")
	require.Equal(t, calEnc(paris, 2026, 2, 1, 25), enc(st))
	mustApply(t, a.cal, st, Call{Now: a.feb, N: 10})
	a.adjust(st, a.feb, a.jan, 5)
	a.adjust(st, a.feb, a.jan, -35)
	require.EqualValues(t, 40, a.used(st, a.feb), "February keeps what January's reservation charged late")

	// At in a month the state has not reached (a clock gone back since the
	// reservation): charged to the state's month, refunds dropped.
	st = a.reserved(10)
	a.adjust(st, a.jan, a.feb, 5)
	a.adjust(st, a.jan, a.feb, -15)
	require.Equal(t, calEnc(paris, 2026, 1, 1, 15), enc(st))

	// A clock gone back: the state's month is later than now's, and at's.
	st = newState(a.cal)
	mustApply(t, a.cal, st, Call{Now: a.feb, N: 10})
	a.adjust(st, a.jan, a.feb, -4)
	a.adjust(st, a.jan, a.jan, 3)
	require.Equal(t, calEnc(paris, 2026, 2, 1, 9), enc(st))
}

// TestCalendarAdjustErrors: errors, which change nothing.
func TestCalendarAdjustErrors(t *testing.T) {
	a := newAdjuster(t)
	st := a.reserved(9)
	err := a.cal.Adjust(newState(GCRA{Rate: 1, Burst: 1}), a.jan, a.jan, 1)
	require.ErrorIs(t, err, ErrMismatch)
	_, err = a.cal.Used(nil, a.jan)
	require.ErrorIs(t, err, ErrMismatch)
	for _, bad := range []Calendar{{Limit: 0, Period: Month}, {Limit: 1}} {
		require.ErrorIs(t, bad.Adjust(st, a.jan, a.jan, 1), ErrInvalid)
		_, err = bad.Used(st, a.jan)
		require.ErrorIs(t, err, ErrInvalid)
	}
	require.Equal(t, calEnc(paris, 2026, 1, 1, 9), enc(st))
}

func TestCalendarPeriodEnd(t *testing.T) {
	for _, c := range []struct {
		c        Calendar
		now, end int64
	}{
		{Calendar{Period: Day, Location: paris}, wallNS(paris, 2026, 3, 29, 12, 0), wallNS(paris, 2026, 3, 30, 0, 0)},
		{Calendar{Period: Week, Location: paris}, wallNS(paris, 2026, 1, 25, 23, 59), wallNS(paris, 2026, 1, 26, 0, 0)},
		{Calendar{Period: Week, Location: paris}, wallNS(paris, 2026, 1, 26, 0, 0), wallNS(paris, 2026, 2, 2, 0, 0)},
		{Calendar{Period: Month, Location: losAngeles}, wallNS(losAngeles, 2028, 2, 29, 23, 0), wallNS(losAngeles, 2028, 3, 1, 0, 0)},
		{Calendar{Period: Month}, wallNS(time.UTC, 2026, 12, 31, 23, 0), wallNS(time.UTC, 2027, 1, 1, 0, 0)},
		{Calendar{Period: Month}, math.MaxInt64, math.MaxInt64},
		{Calendar{Period: Day}, math.MinInt64, wallNS(time.UTC, 1677, 9, 22, 0, 0)},
		{Calendar{Period: 0}, t0, math.MaxInt64},
		{Calendar{Period: 4}, t0, math.MaxInt64},
	} {
		if got := c.c.PeriodEnd(c.now); got != c.end {
			t.Errorf("%+v.PeriodEnd(%v) = %v, want %v", c.c, instant(c.now), instant(got), instant(c.end))
		}
	}
}

// TestCalendarOddDays: days that changes of offset made odd begin at the
// first instant whose wall clock shows them, and end when the next begins.
func TestCalendarOddDays(t *testing.T) {
	utc := func(y int, m time.Month, d, hh, mm int) int64 { return wallNS(time.UTC, y, m, d, hh, mm) }
	for _, c := range []struct {
		name           string
		loc            *time.Location
		at, start, end int64
		length         time.Duration
	}{
		{"Apia: the 29th ends when the 31st begins", apia, wallNS(apia, 2011, 12, 29, 12, 0),
			wallNS(apia, 2011, 12, 29, 0, 0), wallNS(apia, 2011, 12, 31, 0, 0), 24 * time.Hour},
		{"Santiago: the day whose midnight DST skips begins at 01:00", santiago, wallNS(santiago, 2022, 9, 11, 12, 0),
			wallNS(santiago, 2022, 9, 11, 1, 0), wallNS(santiago, 2022, 9, 12, 0, 0), 23 * time.Hour},
		{"Goose Bay: back at 00:01 to 23:01, the 1st lasts 25 hours", gooseBay, utc(2009, 11, 1, 12, 0),
			utc(2009, 11, 1, 3, 0), utc(2009, 11, 2, 4, 0), 25 * time.Hour},
		{"Goose Bay: 23:30 the second time is the 1st's", gooseBay, utc(2009, 11, 1, 3, 30),
			utc(2009, 11, 1, 3, 0), utc(2009, 11, 2, 4, 0), 25 * time.Hour},
		{"Goose Bay: the 31st ends at the first midnight", gooseBay, utc(2009, 11, 1, 2, 59),
			utc(2009, 10, 31, 3, 0), utc(2009, 11, 1, 3, 0), 24 * time.Hour},
		{"Algiers: the first of two midnights", algiers, utc(1939, 11, 18, 23, 30),
			utc(1939, 11, 18, 23, 0), utc(1939, 11, 20, 0, 0), 25 * time.Hour},
		{"Casey: a 27-hour day", casey, wallNS(casey, 2022, 3, 12, 12, 0),
			wallNS(casey, 2022, 3, 12, 0, 0), wallNS(casey, 2022, 3, 13, 0, 0), 27 * time.Hour},
		{"Kwajalein: a 47-hour day", kwajalein, utc(1969, 9, 30, 12, 0),
			utc(1969, 9, 29, 13, 0), utc(1969, 10, 1, 12, 0), 47 * time.Hour},
	} {
		d := Calendar{Limit: 1, Period: Day, Location: c.loc}.decider()
		start, end := d.bounds(c.at)
		if start != c.start || end != c.end || time.Duration(end-start) != c.length {
			t.Errorf("%s: %v .. %v (%v), want %v .. %v (%v)", c.name, time.Unix(0, start).In(c.loc), time.Unix(0, end).In(c.loc),
				time.Duration(end-start), time.Unix(0, c.start).In(c.loc), time.Unix(0, c.end).In(c.loc), c.length)
		}
	}
}

// TestCalendarBounds walks every change of offset of the odd zones, and
// checks around each that periods tile time: each holds the instant it
// was asked for, begins where the one before it ends, and begins at the
// first instant of its first date, a Monday for a week, a 1st for a month.
func TestCalendarBounds(t *testing.T) {
	for _, loc := range []*time.Location{time.UTC, paris, losAngeles, apia, santiago, gooseBay, casey, algiers, kwajalein, lordHowe} {
		for p := Day; p <= Month; p++ {
			d := Calendar{Limit: 1, Period: p, Location: loc}.decider()
			check := func(x int64) {
				t.Helper()
				s, e := d.bounds(x)
				s2, e2 := d.bounds(s)
				s3, e3 := d.bounds(e - 1)
				s4, _ := d.bounds(e)
				_, e5 := d.bounds(s - 1)
				first := time.Unix(0, s).In(loc)
				y, m, day := first.Date()
				py, pm, pday := time.Unix(0, s-1).In(loc).Date()
				if s > x || x >= e || s2 != s || e2 != e || s3 != s || e3 != e || s4 != e || e5 != s ||
					!time.Date(py, pm, pday, 0, 0, 0, 0, time.UTC).Before(time.Date(y, m, day, 0, 0, 0, 0, time.UTC)) ||
					p == Week && first.Weekday() != time.Monday || p == Month && day != 1 {
					t.Fatalf("%v %v at %v: %v .. %v", loc, p, time.Unix(0, x).In(loc), first, time.Unix(0, e).In(loc))
				}
			}
			at := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
			for range 1000 {
				check(at.UnixNano())
				_, next := at.In(loc).ZoneBounds()
				if next.IsZero() || next.Year() > 2040 {
					break
				}
				for _, off := range []time.Duration{-25 * time.Hour, -time.Hour, -1, 0, 1, time.Hour, 23 * time.Hour} {
					check(next.UnixNano() + int64(off))
				}
				at = next
			}
		}
	}
}

// TestCalendarBoundsSaturate: periods that begin before 1677 or end after
// 2262 are cut at the ends of the int64 range.
func TestCalendarBoundsSaturate(t *testing.T) {
	for p := Day; p <= Month; p++ {
		d := Calendar{Limit: 1, Period: p, Location: losAngeles}.decider()
		if s, e := d.bounds(math.MinInt64); s != math.MinInt64 || e == math.MinInt64 {
			t.Errorf("%v: bounds(MinInt64) = %d, %d", p, s, e)
		}
		if s, e := d.bounds(math.MaxInt64); s == math.MaxInt64 || e != math.MaxInt64 {
			t.Errorf("%v: bounds(MaxInt64) = %d, %d", p, s, e)
		}
	}
}

// TestCalendarClamp: a state two periods or more ahead of now is moved
// to now's period, its usage kept; one of the next period is not.
func TestCalendarClamp(t *testing.T) {
	for p, want := range map[Period]time.Duration{Day: 27 * time.Hour, Week: 7*24*time.Hour + 3*time.Hour, Month: 31*24*time.Hour + 3*time.Hour} {
		require.Equal(t, want, Calendar{Limit: 1, Period: p}.Prepare().Horizon(), "%v", p)
	}
	cal := Calendar{Limit: 10, Period: Day, Location: paris}
	d := cal.Prepare()
	now := wallNS(paris, 2026, 1, 18, 23, 59)
	for _, c := range []struct {
		name    string
		state   string
		clamped bool
	}{
		{"today", calEnc(paris, 2026, 1, 18, 7), false},
		{"yesterday", calEnc(paris, 2026, 1, 17, 7), false},
		{"tomorrow: a step back over midnight", calEnc(paris, 2026, 1, 19, 7), false},
		{"tomorrow, under another zone", calEnc(losAngeles, 2026, 1, 19, 7), false},
		{"the day after tomorrow", calEnc(paris, 2026, 1, 20, 7), true},
		{"the day after tomorrow, nothing used", calEnc(paris, 2026, 1, 20, 0), false},
		{"a century ahead", calEnc(paris, 2126, 1, 20, 7), true},
		{"the end of time", "91|9223372036854775807|7", true},
	} {
		st := mustDecode(t, cal, c.state)
		require.Equal(t, c.clamped, d.Clamp(st, now), c.name)
		if !c.clamped {
			require.Equal(t, c.state, enc(st), c.name)
			continue
		}
		require.Equal(t, calEnc(paris, 2026, 1, 18, 7), enc(st), c.name)
		used, err := cal.Used(st, now)
		require.NoError(t, err)
		require.EqualValues(t, 7, used, "%s: usage kept", c.name)
		require.False(t, d.Clamp(st, now), "%s: clamped once", c.name)
	}
	require.False(t, d.Clamp(newState(GCRA{Rate: 1, Burst: 1}), now), "another strategy's")
}

// TestCalendarBigLimits: budgets counted in nano-dollars, up to 1e18 and
// beyond, saturate rather than wrap.
func TestCalendarBigLimits(t *testing.T) {
	const e18 = int64(1e18)
	h := time.Hour
	noon := on(time.UTC, 2026, 1, 18, 12, 0)
	vector{name: "1e18", s: Calendar{Limit: e18, Period: Day}, steps: []step{
		{noon, allow, e18 - 1, yes(e18, 1, 12*h), "91|" + strconv.FormatInt(wallNS(time.UTC, 2026, 1, 18, 0, 0), 10) + "|999999999999999999"},
		{noon, allow, 2, no(e18, 1, 12*h, 12*h), ""},
		{noon, allow, 1, yes(e18, 0, 12*h), ""},
		{noon, record, math.MaxInt64, no(e18, 0, 12*h, 12*h), calEnc(time.UTC, 2026, 1, 18, math.MaxInt64)},
		{noon, record, math.MaxInt64, no(e18, 0, 12*h, 12*h), calEnc(time.UTC, 2026, 1, 18, math.MaxInt64)},
		{noon, allow, math.MaxInt64, no(e18, 0, 12*h, -1), ""},
		{noon + 12*h, allow, e18, yes(e18, 0, 24*h), calEnc(time.UTC, 2026, 1, 19, e18)},
	}}.run(t)
	vector{name: "MaxInt64", s: Calendar{Limit: math.MaxInt64, Period: Month, Location: paris}, steps: []step{
		{noon, allow, math.MaxInt64, yes(math.MaxInt64, 0, time.Duration(wallNS(paris, 2026, 2, 1, 0, 0)-at(noon))), ""},
		{noon, allow, 1, no(math.MaxInt64, 0, time.Duration(wallNS(paris, 2026, 2, 1, 0, 0)-at(noon)), time.Duration(wallNS(paris, 2026, 2, 1, 0, 0)-at(noon))), ""},
		{noon, record, math.MaxInt64, yes(math.MaxInt64, 0, time.Duration(wallNS(paris, 2026, 2, 1, 0, 0)-at(noon))), calEnc(paris, 2026, 1, 1, math.MaxInt64)},
	}}.run(t)
}

func TestCalendarEncoding(t *testing.T) {
	cal := Calendar{Limit: 10, Period: Week, Location: paris}
	for _, b := range []string{"91|0|0", calEnc(paris, 2026, 1, 19, 7), "91|-9223372036854775808|9223372036854775807", "91|1|0"} {
		clone(t, cal, mustDecode(t, cal, b))
	}
	require.Equal(t, "91|0|0", enc(newState(cal)))
	require.Equal(t, "91|5|7", enc(mustDecode(t, cal, "91|005|007")), "canonical")
	for _, c := range []struct{ in, why string }{
		{"91", "field 2 (start) is missing"},
		{"91|", "field 2 (start) \"\" is not a decimal integer"},
		{"91|1", "field 3 (used) is missing"},
		{"91|1|", "field 3 (used) \"\" is not a decimal integer"},
		{"91|1|-1", "field 3 (used) \"-1\" is out of range"},
		{"91|1|9223372036854775808", "out of range"},
		{"91|9223372036854775808|1", "out of range"},
		{"91|1.5|2", "not a decimal integer"},
		{"91|1|+2", "not a decimal integer"},
		{"91|1|1e3", "not a decimal integer"},
		{"91|1|NaN", "not a decimal integer"},
		{"91|1|2|", "trailing data"},
		{"91|1|2|3", "trailing data"},
		{"91|1|2\n", "not a decimal integer"},
		{"92|1|2", "unsupported format version"},
		{"90|1|2", "unsupported format version"},
		{"v1|1|2|3", "no legacy encoding"},
		{"v2|1|2|", "no legacy encoding"},
		{"", "unknown header"},
	} {
		st, err := decode(cal, []byte(c.in))
		if !errors.Is(err, ErrCorrupt) || st != nil || !strings.HasPrefix(err.Error(), "strategies: calendar: ") || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Decode(%q) = %v, %v; want ErrCorrupt saying %q", c.in, st, err, c.why)
		}
	}
	for _, c := range []struct {
		s  Strategy
		in string
	}{
		{cal, "12|1|2"}, {cal, "72|1|1"}, {cal, "cmp1|12|1|2$42|1"}, {cal, "51|12|1|2$91|1|2"},
		{TokenBucket{Rate: 1, Burst: 1}, "91|1|2"}, {FixedWindow{Quotas: []Quota{{"a", 1, 1}}}, "91|garbage"},
		{Composite{Primary: cal, Secondary: GCRA{Rate: 1, Burst: 1}}, "51|91|1|2$91|1|2"},
	} {
		if st, err := decode(c.s, []byte(c.in)); !errors.Is(err, ErrMismatch) || st != nil {
			t.Errorf("%T.Decode(%q) = %v, %v; want ErrMismatch", c.s, c.in, st, err)
		}
	}
}

func TestPeriod(t *testing.T) {
	for _, p := range []Period{Day, Week, Month} {
		got, err := ParsePeriod(p.String())
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	require.Equal(t, []string{"day", "week", "month", "Period(0)", "Period(4)"},
		[]string{Day.String(), Week.String(), Month.String(), Period(0).String(), Period(4).String()})
	for _, s := range []string{"", "Day", "days", "year", " day", "Period(1)"} {
		_, err := ParsePeriod(s)
		require.ErrorIs(t, err, ErrInvalid, s)
		require.Contains(t, err.Error(), strconv.Quote(s))
	}
}

// TestCalendarPropertiesAtBoundaries plays the property tests' random calls
// across the boundaries of periods, odd ones included, with the clock
// going back over them at times.
func TestCalendarPropertiesAtBoundaries(t *testing.T) {
	boundaries := []struct {
		loc *time.Location
		at  int64
	}{
		{time.UTC, wallNS(time.UTC, 2026, 2, 1, 0, 0)},
		{paris, wallNS(paris, 2026, 1, 26, 0, 0)},   // a Monday
		{paris, wallNS(paris, 2026, 3, 29, 3, 0)},   // DST begins
		{paris, wallNS(paris, 2026, 10, 25, 2, 30)}, // DST ends
		{losAngeles, wallNS(losAngeles, 2028, 3, 1, 0, 0)},
		{apia, wallNS(apia, 2011, 12, 31, 0, 0)},
		{santiago, wallNS(santiago, 2022, 9, 11, 1, 0)},
		{gooseBay, wallNS(time.UTC, 2009, 11, 1, 3, 1)},
		{casey, wallNS(casey, 2022, 3, 13, 0, 0)},
	}
	r := rand.New(rand.NewPCG(9, 1))
	for _, b := range boundaries {
		for seq := range 30 {
			s := Calendar{Limit: 1 + r.Int64N(20), Period: Period(1 + r.IntN(3)), Location: b.loc}
			st := newState(s)
			now := b.at - r.Int64N(int64(3*time.Minute))
			for i := range 80 {
				now += randStep(r, true)
				if r.IntN(20) == 0 {
					now -= r.Int64N(int64(10 * time.Minute))
				}
				checkCall(t, r, s, st, randCall(r, now), func() string {
					return b.loc.String() + " sequence " + itoa(seq) + " step " + itoa(i)
				})
			}
		}
	}
}

// TestCalendarRemembersItsPeriod: a state remembers the end of its period
// as the Decider that wrote it reckoned it (calendarState.by), which must
// answer every call as the same state decoded does, which remembers
// nothing: at the ends of periods and a nanosecond either side, with the
// clock gone back, the configuration changed, and after Adjust and Clamp.
func TestCalendarRemembersItsPeriod(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for seq := range 300 {
		cal := randCalendar(r)
		d := cal.Prepare()
		st := d.NewState()
		now := t0 + r.Int64N(int64(time.Hour))
		for i := range 100 {
			switch r.IntN(12) {
			case 0:
				cal = randCalendar(r)
				d = cal.Prepare()
			case 1, 2:
				now = cal.PeriodEnd(now) + r.Int64N(3) - 1
			case 3:
				now -= r.Int64N(int64(48 * time.Hour))
			case 4:
				require.NoError(t, cal.Adjust(st, now, now-r.Int64N(int64(48*time.Hour)), r.Int64N(11)-5))
			case 5:
				d.Clamp(st, now-r.Int64N(int64(100*24*time.Hour)))
			default:
				now += r.Int64N(int64(6 * time.Hour))
			}
			decide := func(st State, c Call) Result {
				t.Helper()
				res, err := d.Decide(st, c)
				require.NoError(t, err)
				return res
			}
			c := randCall(r, now)
			twin := mustDecode(t, cal, enc(st))
			want, got := decide(twin, c), decide(st, c)
			peek := Call{Now: now + r.Int64N(3) - 1}
			if wantP, gotP := decide(clone(t, cal, st), peek), decide(st, peek); want != got || enc(twin) != enc(st) || wantP != gotP {
				t.Fatalf("sequence %d step %d: %+v at %s: %+v, %s; decoded: %+v, %s", seq, i, cal, instant(now), got, enc(st), want, enc(twin))
			}
		}
	}
}

func BenchmarkCalendar(b *testing.B) {
	for _, loc := range []*time.Location{time.UTC, paris} {
		b.Run("loc="+loc.String(), func(b *testing.B) {
			benchApply(b, Calendar{Limit: 70, Period: Month, Location: loc}, workload)
		})
	}
}
