package strategies

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// The property tests play random calls on random configurations and check,
// after every call, the promises of the package doc: results in range, a
// denial or a peek changes nothing, states round-trip byte for byte, a
// RetryAfter and a ResetAfter are exact (right then, and not a nanosecond
// earlier), and a ResetAfter of 0 means the state behaves like a fresh one.

// generators make random valid configurations of every strategy.
var generators = []struct {
	name string
	gen  func(r *rand.Rand) Strategy
}{
	{"TokenBucket", func(r *rand.Rand) Strategy { return TokenBucket{Rate: randRate(r), Burst: 1 + r.Int64N(20)} }},
	{"GCRA", func(r *rand.Rand) Strategy { return GCRA{Rate: randRate(r), Burst: 1 + r.Int64N(20)} }},
	{"LeakyBucket", func(r *rand.Rand) Strategy { return LeakyBucket{Rate: randRate(r), Capacity: 1 + r.Int64N(20)} }},
	{"FixedWindow", func(r *rand.Rand) Strategy { return randFixedWindow(r) }},
	{"SlidingWindow", func(r *rand.Rand) Strategy {
		return SlidingWindow{Limit: 1 + r.Int64N(20), Window: randWindow(r)}
	}},
	{"RollingWindow", func(r *rand.Rand) Strategy { return randRollingWindow(r) }},
	{"SlidingLog", func(r *rand.Rand) Strategy { return SlidingLog{Limit: 1 + r.Int64N(20), Window: randWindow(r)} }},
	{"Calendar", func(r *rand.Rand) Strategy { return randCalendar(r) }},
	{"Composite", func(r *rand.Rand) Strategy {
		parts := []func() Strategy{
			func() Strategy { return TokenBucket{Rate: randRate(r), Burst: 1 + r.Int64N(20)} },
			func() Strategy { return GCRA{Rate: randRate(r), Burst: 1 + r.Int64N(20)} },
			func() Strategy { return LeakyBucket{Rate: randRate(r), Capacity: 1 + r.Int64N(20)} },
			func() Strategy { return randFixedWindow(r) },
			func() Strategy { return SlidingWindow{Limit: 1 + r.Int64N(20), Window: randWindow(r)} },
			func() Strategy { return randRollingWindow(r) },
			func() Strategy { return SlidingLog{Limit: 1 + r.Int64N(20), Window: randWindow(r)} },
			func() Strategy { return randCalendar(r) },
		}
		return Composite{Primary: parts[r.IntN(len(parts))](), Secondary: parts[r.IntN(len(parts))]()}
	}},
}

func randRate(r *rand.Rand) float64 {
	rates := []float64{0.1, 1, 3, 7.5, 10, 100, 1000}
	if r.IntN(3) == 0 {
		return 0.01 + r.Float64()*50 // no nice binary fraction
	}
	return rates[r.IntN(len(rates))]
}

func randWindow(r *rand.Rand) time.Duration {
	windows := []time.Duration{100 * time.Millisecond, time.Second, 1500 * time.Millisecond, 7 * time.Second, time.Minute}
	if r.IntN(3) == 0 {
		return time.Duration(1 + r.Int64N(int64(10*time.Second)))
	}
	return windows[r.IntN(len(windows))]
}

// randRollingWindow returns a rolling window of 1 to 30 buckets, of a
// bucket from a millisecond to a second, or of any length up to 1s.
func randRollingWindow(r *rand.Rand) RollingWindow {
	buckets := []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second}
	b := buckets[r.IntN(len(buckets))]
	if r.IntN(3) == 0 {
		b = time.Duration(1 + r.Int64N(int64(time.Second)))
	}
	return RollingWindow{Limit: 1 + r.Int64N(20), Window: b * time.Duration(1+r.IntN(30)), Bucket: b}
}

// randCalendar returns a calendar of any period, in a zone whose day
// begins near t0 at times (t0 is 08:00 UTC, midnight in Los Angeles), so
// that some sequences see a day end.
func randCalendar(r *rand.Rand) Calendar {
	locs := []*time.Location{nil, time.UTC, paris, losAngeles, time.FixedZone("", -8*3600-r.IntN(4000))}
	return Calendar{Limit: 1 + r.Int64N(20), Period: Period(1 + r.IntN(3)), Location: locs[r.IntN(len(locs))]}
}

func randFixedWindow(r *rand.Rand) FixedWindow {
	names := []string{"a", "b:1", "c.d", "e@f", "g+h-i"}
	var f FixedWindow
	for i := range 1 + r.IntN(3) {
		f.Quotas = append(f.Quotas, Quota{Name: names[i], Limit: 1 + r.Int64N(20), Window: randWindow(r)})
	}
	return f
}

func randN(r *rand.Rand) int64 {
	switch p := r.IntN(100); {
	case p < 70:
		return r.Int64N(6)
	case p < 90:
		return r.Int64N(26)
	case p < 95:
		return 1000
	default:
		return math.MaxInt64
	}
}

func randCall(r *rand.Rand, now int64) Call {
	n := randN(r)
	switch p := r.IntN(100); {
	case p < 10:
		return Call{Now: now, N: n, Record: n < math.MaxInt64 || r.IntN(4) == 0}
	case p < 25:
		return Call{Now: now}
	case p < 35:
		return Call{Now: now, N: n, DryRun: true}
	}
	return Call{Now: now, N: n}
}

// randStep returns the time to the next call: mostly short, sometimes long
// or backwards.
func randStep(r *rand.Rand, backwards bool) int64 {
	switch p := r.IntN(100); {
	case p < 5:
		return 0
	case p < 65:
		return r.Int64N(int64(500 * time.Millisecond))
	case p < 85:
		return r.Int64N(int64(5 * time.Second))
	case p < 90:
		return r.Int64N(int64(2 * time.Minute))
	case backwards:
		return -r.Int64N(int64(2 * time.Second))
	}
	return 1
}

// checkable reports whether a duration is small enough to be checked by
// calling again then (not saturated, not -1).
func checkable(d time.Duration) bool { return d > 0 && d < 1<<60 }

func TestProperties(t *testing.T) {
	sequences, steps := 150, 60
	if testing.Short() {
		sequences = 30
	}
	for gi, g := range generators {
		t.Run(g.name, func(t *testing.T) {
			testProperties(t, gi, sequences, steps)
		})
	}
}

// testProperties plays the sequences of generator gi.
func testProperties(t *testing.T, gi int, sequences, steps int) {
	g := generators[gi]
	r := rand.New(rand.NewPCG(uint64(gi), 42))
	for seq := range sequences {
		s := g.gen(r)
		if err := s.Validate(); err != nil {
			t.Fatalf("generated an invalid config: %v", err)
		}
		st := newState(s)
		now := t0 + r.Int64N(int64(time.Hour))
		for i := range steps {
			now += randStep(r, true)
			c := randCall(r, now)
			checkCall(t, r, s, st, c, func() string {
				return g.name + " sequence " + itoa(seq) + " step " + itoa(i)
			})
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// checkCall applies c to st and checks the promises about its result.
func checkCall(t *testing.T, r *rand.Rand, s Strategy, st State, c Call, where func() string) {
	t.Helper()
	before := enc(st)
	res := mustApply(t, s, st, c)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %#v\nstate %s\ncall %+v -> %+v\n"+format, append([]any{where(), s, before, c, res}, args...)...)
	}
	after := enc(st)

	// Results in range.
	if res.Remaining < 0 || res.Remaining > res.Limit || res.ResetAfter < 0 {
		fail("Remaining or ResetAfter out of range")
	}
	if res.Allowed != (res.RetryAfter == 0) || res.RetryAfter < -1 {
		fail("Allowed and RetryAfter disagree")
	}
	if res.RetryAfter == -1 && (c.Record || c.N <= res.Limit && !isComposite(s) && !isFixedWindow(s)) {
		fail("RetryAfter -1 for a call that can fit")
	}
	if !c.Taken(res.Allowed) && after != before {
		fail("took nothing, but the state changed to %s", after)
	}
	if c.Taken(res.Allowed) && res.ResetAfter == 0 {
		fail("took something, yet ResetAfter is 0")
	}
	clone(t, s, st) // round-trips byte for byte

	// RetryAfter is exact: the same call (a peek after a Record) is allowed
	// then, and was not a nanosecond earlier.
	again := c
	if c.Record {
		again = Call{Now: c.Now}
	}
	if d := res.RetryAfter; checkable(d) {
		again.Now = c.Now + int64(d)
		if r := mustApply(t, s, clone(t, s, st), again); !r.Allowed {
			fail("the same call after RetryAfter is denied: %+v", r)
		}
		again.Now--
		if r := mustApply(t, s, clone(t, s, st), again); r.Allowed {
			fail("the same call 1ns before RetryAfter is allowed: %+v", r)
		}
	}
	if c.DryRun {
		return // ResetAfter describes a state that was not stored
	}

	// ResetAfter is exact: the state is back to fresh then, not before.
	if d := res.ResetAfter; checkable(d) {
		if r := mustApply(t, s, clone(t, s, st), Call{Now: c.Now + int64(d)}); r.ResetAfter != 0 {
			fail("not reset after ResetAfter: %+v", r)
		}
		if r := mustApply(t, s, clone(t, s, st), Call{Now: c.Now + int64(d) - 1}); r.ResetAfter == 0 {
			fail("reset 1ns before ResetAfter: %+v", r)
		}
	}

	// ResetAfter 0 means fresh: from now on, the state and a new one answer
	// every call alike.
	if res.ResetAfter == 0 {
		a, b := clone(t, s, st), newState(s)
		now := c.Now
		for range 4 {
			now += randStep(r, false)
			c := randCall(r, now)
			ra, rb := mustApply(t, s, a, c), mustApply(t, s, b, c)
			if ra != rb {
				fail("ResetAfter was 0, but %+v answers %+v, and a fresh state %+v", c, ra, rb)
			}
		}
	}
}

func isComposite(s Strategy) bool   { _, ok := s.(Composite); return ok }
func isFixedWindow(s Strategy) bool { _, ok := s.(FixedWindow); return ok }

// TestPropertiesFarInThePast checks the same promises when calls come far
// before the state's own instants (a clock gone back by up to an hour).
func TestPropertiesFarInThePast(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for gi, g := range generators {
		for seq := range 40 {
			s := g.gen(r)
			st := newState(s)
			now := t0
			for i := range 20 {
				now += randStep(r, false)
				c := randCall(r, now)
				if i%5 == 4 {
					c.Now = now - r.Int64N(int64(time.Hour)) // far back
				}
				checkCall(t, r, s, st, c, func() string {
					return generators[gi].name + " back sequence " + itoa(seq) + " step " + itoa(i)
				})
			}
		}
	}
}
