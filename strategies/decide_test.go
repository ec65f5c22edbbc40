package strategies

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// trio applies the same calls to the reference decisions (refDecide), to
// a configuration and to its prepared form, each on its own state, and
// fails at the first difference in a Result, an error or an encoding.
type trio struct {
	t      *testing.T
	s      Strategy    // the configuration, as generated
	p, p2  Strategy    // Prepare(s), twice: two handles, whose states are laid out apart
	prev   [3]Strategy // the configuration before s, and its handles
	ref    State       // the reference's, made and decoded by values
	val    State       // s's
	prep   State       // p's and p2's
	calls  int
	before string // ref's encoding before the last call
}

func newTrio(t *testing.T, s Strategy) *trio {
	tr := &trio{t: t}
	tr.configure(s)
	tr.fresh()
	return tr
}

// configure changes the configuration, keeping the states.
func (tr *trio) configure(s Strategy) {
	tr.prev = [3]Strategy{tr.s, tr.p, tr.p2}
	tr.s, tr.p, tr.p2 = s, Prepare(s), Prepare(s)
}

// revert goes back to the configuration before, with its handles, which
// the states may have been laid out for before they were changed since.
func (tr *trio) revert() {
	if tr.prev[0] != nil {
		tr.prev, tr.s, tr.p, tr.p2 = [3]Strategy{tr.s, tr.p, tr.p2}, tr.prev[0], tr.prev[1], tr.prev[2]
	}
}

// fresh starts over from new states.
func (tr *trio) fresh() {
	tr.t.Helper()
	tr.ref, tr.val, tr.prep = Unprepare(tr.s).NewState(), tr.s.NewState(), tr.p.NewState()
	tr.check("NewState")
}

// recode decodes the reference's encoding into all three states, which
// drops what a state remembers beyond its encoding (a fixed window's
// layout).
func (tr *trio) recode() {
	tr.t.Helper()
	b := tr.ref.AppendEncode(nil)
	ref, err := Unprepare(tr.s).Decode(b)
	val, verr := tr.s.Decode(b)
	prep, perr := tr.p.Decode(b)
	if !sameErr(err, verr) || !sameErr(err, perr) {
		tr.t.Fatalf("%#v: Decode(%q): %v, value %v, prepared %v", tr.s, b, err, verr, perr)
	}
	if err == nil {
		tr.ref, tr.val, tr.prep = ref, val, prep
		tr.check("Decode")
	}
}

// swap gives the value's state to the prepared form and the reverse.
func (tr *trio) swap() { tr.val, tr.prep = tr.prep, tr.val }

func (tr *trio) check(what string) {
	tr.t.Helper()
	ref, val, prep := enc(tr.ref), enc(tr.val), enc(tr.prep)
	if val != ref || prep != ref {
		tr.t.Fatalf("%#v: after %s (call %d, from %s), the states differ:\nreference %s\nvalue     %s\nprepared  %s",
			tr.s, what, tr.calls, tr.before, ref, val, prep)
	}
}

// apply makes call c on all three states, the prepared one by Apply or
// Decide, through either handle, as how says.
func (tr *trio) apply(c Call, how int) {
	tr.t.Helper()
	tr.calls++
	tr.before = enc(tr.ref)
	rr, er := refApply(tr.s, tr.ref, c)
	rv, ev := tr.s.Apply(tr.val, c)
	var rp Result
	var ep error
	switch how % 3 {
	case 0:
		rp, ep = tr.p.Apply(tr.prep, c)
	case 1:
		ep = Decide(tr.p, tr.prep, c, &rp)
	default:
		ep = Decide(tr.p2, tr.prep, c, &rp)
	}
	want := rr
	if ep != nil && how%3 != 0 {
		want = Result{} // what Decide sets on an error
	}
	if rv != rr || rp != want || !sameErr(er, ev) || !sameErr(er, ep) {
		tr.t.Fatalf("%#v: state %s, call %d %+v:\nreference %+v, %v\nvalue     %+v, %v\nprepared  %+v, %v",
			tr.s, tr.before, tr.calls, c, rr, er, rv, ev, rp, ep)
	}
	tr.check(fmt.Sprintf("%+v", c))
}

// play runs steps random steps: calls, mostly, at instants going forward
// and at times backwards, and changes of the configuration (mostly of the
// same kind, by change, and back), fresh and decoded states, swaps.
func (tr *trio) play(r *rand.Rand, steps int, change func(*rand.Rand, Strategy) Strategy) {
	tr.t.Helper()
	now := t0 + r.Int64N(int64(time.Hour))
	for range steps {
		switch r.IntN(50) {
		case 0, 1, 2, 3:
			tr.configure(change(r, tr.s))
		case 4:
			tr.configure(generators[r.IntN(len(generators))].gen(r)) // another kind, at times
		case 5:
			tr.fresh()
		case 6, 7, 8:
			tr.recode()
		case 9, 10:
			tr.swap()
		case 11, 12, 13:
			tr.revert()
		}
		now += randStep(r, true)
		tr.apply(randCall(r, now), r.IntN(3))
	}
}

// changed returns a changed configuration of the kind of s, valid or, at
// times, not: for a FixedWindow, quotas added, removed, reordered or
// changed; for a bucket, a lower or higher burst or capacity and another
// rate; for a Composite, one part changed, or replaced by another kind.
func changed(r *rand.Rand, s Strategy) Strategy {
	switch v := s.(type) {
	case FixedWindow:
		return changedFixedWindow(r, v)
	case TokenBucket:
		v.Burst = changedLimit(r, v.Burst)
		if r.IntN(3) == 0 {
			v.Rate = randRate(r)
		}
		return v
	case LeakyBucket:
		v.Capacity = changedLimit(r, v.Capacity)
		if r.IntN(3) == 0 {
			v.Rate = randRate(r)
		}
		return v
	case GCRA:
		v.Burst = changedLimit(r, v.Burst)
		if r.IntN(3) == 0 {
			v.Rate = randRate(r)
		}
		return v
	case SlidingWindow:
		return SlidingWindow{Limit: changedLimit(r, v.Limit), Window: randWindow(r)}
	case RollingWindow:
		if r.IntN(10) == 0 {
			v.Limit = 0
			return v
		}
		return randRollingWindow(r)
	case Composite:
		switch r.IntN(10) {
		case 0: // a part of another kind: its state is a mismatch
			v.Secondary = randPart(r)
		case 1:
			v.Primary = randPart(r)
		case 2, 3, 4, 5:
			v.Secondary = changed(r, v.Secondary)
		default:
			v.Primary = changed(r, v.Primary)
		}
		return v
	}
	return s
}

// changedLimit returns a limit lower or higher than l, or, at times, one
// that is not valid.
func changedLimit(r *rand.Rand, l int64) int64 {
	switch r.IntN(10) {
	case 0:
		return 0
	case 1, 2, 3, 4:
		return 1 + r.Int64N(max(l, 1)) // lower, or the same
	}
	return l + 1 + r.Int64N(20)
}

var quotaNames = []string{"a", "b:1", "c.d", "e@f", "g+h-i"}

func changedFixedWindow(r *rand.Rand, f FixedWindow) FixedWindow {
	qs := append([]Quota(nil), f.Quotas...)
	switch r.IntN(12) {
	case 0, 1, 2: // one added
		q := Quota{Name: quotaNames[r.IntN(len(quotaNames))], Limit: 1 + r.Int64N(20), Window: randWindow(r)}
		for _, p := range qs {
			if p.Name == q.Name {
				q.Name += "x"
			}
		}
		i := r.IntN(len(qs) + 1)
		qs = append(qs[:i], append([]Quota{q}, qs[i:]...)...)
	case 3, 4: // one removed
		if len(qs) > 1 {
			i := r.IntN(len(qs))
			qs = append(qs[:i], qs[i+1:]...)
		}
	case 5, 6: // reordered
		r.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
	case 7, 8: // limits and windows changed
		for i := range qs {
			qs[i].Limit = changedLimit(r, qs[i].Limit)
			if r.IntN(2) == 0 {
				qs[i].Window = randWindow(r)
			}
		}
	case 9: // not valid: a duplicate name, a window of 0, no quota
		if len(qs) == 0 {
			return randFixedWindow(r)
		}
		switch r.IntN(3) {
		case 0:
			qs = append(qs, qs[0])
		case 1:
			qs[0].Window = 0
		default:
			qs = nil
		}
	default:
		return randFixedWindow(r)
	}
	return FixedWindow{Quotas: qs}
}

// randPart returns a part for a Composite of any kind: those that
// property_test.go's generators make, plus fixed windows of three quotas,
// prepared parts and a strategy from outside the package.
func randPart(r *rand.Rand) Strategy {
	switch r.IntN(10) {
	case 0:
		return otherStrategy{TokenBucket{Rate: randRate(r), Burst: 1 + r.Int64N(20)}}
	case 1:
		f := randFixedWindow(r)
		for len(f.Quotas) < 3 {
			f = randFixedWindow(r)
		}
		return f
	case 2:
		return Prepare(randPart(r))
	}
	for {
		if s := generators[r.IntN(len(generators))].gen(r); !isComposite(s) {
			return s
		}
	}
}

// TestReference holds every decision to the reference, which the cheaper
// FixedWindow and Composite decisions must answer exactly alike, value and
// prepared: Results, errors and encodings after every call, through
// random calls (n of 0 and beyond every limit, DryRun, Record, a clock
// going back at times), changed configurations, fresh and decoded states
// and states moved between the forms and between two prepared handles.
// Composites pair parts of every kind.
func TestReference(t *testing.T) {
	sequences, steps := 150, 120
	if testing.Short() {
		sequences = 30
	}
	gens := append(generators[:len(generators):len(generators)], struct {
		name string
		gen  func(r *rand.Rand) Strategy
	}{"CompositeOfAnyPart", func(r *rand.Rand) Strategy { return Composite{Primary: randPart(r), Secondary: randPart(r)} }})
	for gi, g := range gens {
		t.Run(g.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(gi), 2026))
			for range sequences {
				newTrio(t, g.gen(r)).play(r, steps, changed)
			}
		})
	}
}

// TestReferenceComposite plays every pair of parts, each kind of part in
// both places, as TestPreparedComposite does, against the reference.
func TestReferenceComposite(t *testing.T) {
	parts := []Strategy{
		TokenBucket{Rate: 3, Burst: 4}, GCRA{Rate: 7, Burst: 2}, LeakyBucket{Rate: 2.5, Capacity: 3},
		FixedWindow{Quotas: []Quota{{"s", 3, time.Second}}},
		FixedWindow{Quotas: []Quota{{"s", 3, time.Second}, {"m", 20, time.Minute}}},
		FixedWindow{Quotas: []Quota{{"s", 3, time.Second}, {"m", 20, time.Minute}, {"h", 100, time.Hour}}},
		SlidingWindow{Limit: 4, Window: 1500 * time.Millisecond},
		RollingWindow{Limit: 4, Window: 1500 * time.Millisecond, Bucket: 250 * time.Millisecond},
		otherStrategy{TokenBucket{Rate: 5, Burst: 1}},
		Prepare(GCRA{Rate: 4, Burst: 3}),
	}
	r := rand.New(rand.NewPCG(6, 6))
	for _, a := range parts {
		for _, b := range parts {
			newTrio(t, Composite{Primary: a, Secondary: b}).play(r, 400, changed)
		}
	}
}

// TestReferenceExtremes plays the extremes of the counts and instants:
// calls of math.MaxInt64 on states near the ends of the int64 range.
func TestReferenceExtremes(t *testing.T) {
	fw := FixedWindow{Quotas: []Quota{{"a", 1, 1}, {"b", math.MaxInt64, MaxWindow}}}
	for _, s := range []Strategy{
		fw, Composite{Primary: fw, Secondary: GCRA{Rate: 1e9, Burst: 1}},
		Composite{Primary: TokenBucket{Rate: 1e300, Burst: math.MaxInt64}, Secondary: fw},
		Composite{Primary: RollingWindow{Limit: 1, Window: 1, Bucket: 1}, Secondary: LeakyBucket{Rate: 5e-324, Capacity: 3}},
	} {
		for _, b := range []string{"", "23|2|a|9223372036854775807|9223372036854775807|b|1|-9223372036854775808"} {
			tr := newTrio(t, s)
			if b != "" && isFixedWindow(s) {
				tr.ref = mustDecode(t, s, b)
				tr.recode()
			}
			for _, c := range []Call{
				{Now: math.MaxInt64, N: math.MaxInt64, Record: true}, {Now: math.MinInt64, N: 1},
				{Now: math.MaxInt64, N: 1}, {Now: 0, N: math.MaxInt64}, {Now: 0, N: math.MaxInt64, DryRun: true},
				{Now: math.MinInt64, N: math.MaxInt64, Record: true}, {Now: math.MaxInt64},
			} {
				for how := range 3 {
					tr.apply(c, how)
				}
			}
		}
	}
}

// TestDecideAllocs checks that a decision allocates nothing for a state
// of its own kind under an unchanged configuration, in either form,
// through Decide as the engine calls it: a Composite of every pair of
// parts included.
func TestDecideAllocs(t *testing.T) {
	parts := []Strategy{
		TokenBucket{Rate: 70, Burst: 10}, GCRA{Rate: 70, Burst: 10}, LeakyBucket{Rate: 70, Capacity: 10},
		FixedWindow{Quotas: []Quota{{"second", 70, time.Second}}},
		FixedWindow{Quotas: []Quota{{"second", 70, time.Second}, {"minute", 4000, time.Minute}}},
		FixedWindow{Quotas: []Quota{{"second", 70, time.Second}, {"minute", 4000, time.Minute}, {"hour", 1e5, time.Hour}}},
		SlidingWindow{Limit: 70, Window: time.Second},
		RollingWindow{Limit: 70, Window: time.Second, Bucket: 100 * time.Millisecond},
	}
	configs := parts
	for _, a := range parts {
		for _, b := range parts {
			configs = append(configs, Composite{Primary: a, Secondary: b})
		}
	}
	for _, s := range configs {
		for _, f := range forms {
			s := f.of(s)
			st := s.NewState()
			i := 0
			var res Result
			allocs := testing.AllocsPerRun(1000, func() {
				if err := Decide(s, st, workload(i), &res); err != nil {
					t.Fatal(err)
				}
				i++
			})
			if allocs != 0 {
				t.Errorf("%#v (%s): Decide allocates %v times per call", s, f.name, allocs)
			}
		}
	}
}

// TestArithmeticReference checks sat.Add, sat.Sub and clampAmount against
// the reference on the edges of their ranges and around them, and at
// random.
func TestArithmeticReference(t *testing.T) {
	floats := []float64{0, math.Copysign(0, -1), 1, -1, maxAmount, -maxAmount, math.Nextafter(maxAmount, math.Inf(1)),
		math.Nextafter(-maxAmount, math.Inf(-1)), math.Nextafter(maxAmount, 0), math.MaxFloat64, -math.MaxFloat64,
		math.Inf(1), math.Inf(-1), math.NaN(), 5e-324, 1e300}
	for _, x := range floats {
		if got, want := clampAmount(x), refClampAmount(x); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("clampAmount(%v) = %v, want %v", x, got, want)
		}
	}

	edges := []int64{0, 1, -1, 2, -2, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1,
		math.MaxInt64 / 2, math.MaxInt64/2 + 1, math.MinInt64 / 2, math.MinInt64/2 - 1, 1 << 62, -1 << 62, t0}
	r := rand.New(rand.NewPCG(8, 8))
	for range 1000 {
		edges = append(edges, int64(r.Uint64()), r.Int64N(1<<r.IntN(63)), -r.Int64N(1<<r.IntN(63)))
	}
	for _, a := range edges {
		for _, b := range edges {
			if got, want := sat.Add(a, b), refSatAdd(a, b); got != want {
				t.Fatalf("sat.Add(%d, %d) = %d, want %d", a, b, got, want)
			}
			if got, want := sat.Sub(a, b), refSatSub(a, b); got != want {
				t.Fatalf("sat.Sub(%d, %d) = %d, want %d", a, b, got, want)
			}
		}
	}
}
