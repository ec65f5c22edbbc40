package strategies

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// sameErr reports whether two errors are the same answer: both nil, or the
// same message matching the same sentinels.
func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	for _, target := range []error{ErrInvalid, ErrCorrupt, ErrMismatch} {
		if errors.Is(a, target) != errors.Is(b, target) {
			return false
		}
	}
	return a.Error() == b.Error()
}

// otherStrategy is a strategy from outside the package, as a Composite
// sees it: a token bucket whose states are not known to be this package's.
type otherStrategy struct{ TokenBucket }

func (o otherStrategy) Prepare() Decider { return otherDecider{o.TokenBucket.Prepare()} }

type otherDecider struct{ d Decider }

type otherState struct{ st State }

func (o otherDecider) NewState() State                         { return &otherState{o.d.NewState()} }
func (o otherDecider) Horizon() time.Duration                  { return o.d.Horizon() }
func (o otherDecider) Clamp(st State, now int64) bool          { return o.d.Clamp(unwrap(st), now) }
func (s *otherState) AppendEncode(dst []byte) []byte           { return s.st.AppendEncode(dst) }
func (o otherDecider) Decide(st State, c Call) (Result, error) { return o.d.Decide(unwrap(st), c) }

func (o otherDecider) Decode(b []byte) (State, error) {
	st, err := o.d.Decode(b)
	if err != nil {
		return nil, err
	}
	return &otherState{st}, nil
}

func unwrap(st State) State {
	if o, ok := st.(*otherState); ok {
		return o.st
	}
	return st
}

// general returns the Decider of s with its shortcuts off: a FixedWindow
// that decides every call by tally, a Composite every call by ask. It is
// the reference that TestShortcuts holds the shortcuts to.
func general(s Strategy) Decider {
	d := s.Prepare()
	switch v := d.(type) {
	case *fixedDecider:
		return tallyOnly{v}
	case *compositeDecider:
		c := s.(Composite)
		return &compositeDecider{p: general(c.Primary), s: general(c.Secondary)}
	}
	return d
}

// tallyOnly is a fixedDecider that decides every call by tally.
type tallyOnly struct{ *fixedDecider }

func (p tallyOnly) Decide(st State, c Call) (res Result, err error) {
	s, ok := st.(*fixedWindowState)
	if !ok {
		return Result{}, wrongState(kindFixedWindow, st)
	}
	f := &p.FixedWindow
	var buf [4]window
	ws := s.matched(f.Quotas, buf[:0])
	if f.tally(ws, c, true, &res) && !c.DryRun {
		s.conform(ws, &p.names)
	}
	return res, nil
}

// duo applies the same calls to a strategy's Decider, through two handles
// (two Prepares, whose states are laid out apart), and to its general
// Decider, each on its own state, and fails at the first difference in a
// Result, an error or an encoding.
type duo struct {
	t      *testing.T
	s      Strategy // the configuration, as generated
	d, d2  Decider  // s.Prepare(), twice
	ref    Decider  // general(s)
	prev   [4]any   // the configuration before s, and its Deciders
	want   State    // ref's
	got    State    // d's and d2's
	calls  int
	before string // want's encoding before the last call
}

func newDuo(t *testing.T, s Strategy) *duo {
	du := &duo{t: t}
	du.configure(s)
	du.fresh()
	return du
}

// configure changes the configuration, keeping the states.
func (du *duo) configure(s Strategy) {
	du.prev = [4]any{du.s, du.d, du.d2, du.ref}
	du.s, du.d, du.d2, du.ref = s, s.Prepare(), s.Prepare(), general(s)
}

// revert goes back to the configuration before, with its Deciders, which
// the states may have been laid out for before they were changed since.
func (du *duo) revert() {
	if du.prev[0] != nil {
		p := du.prev
		du.prev = [4]any{du.s, du.d, du.d2, du.ref}
		du.s, du.d, du.d2, du.ref = p[0].(Strategy), p[1].(Decider), p[2].(Decider), p[3].(Decider)
	}
}

// fresh starts over from new states.
func (du *duo) fresh() {
	du.t.Helper()
	want, got := du.ref.NewState(), du.d.NewState()
	if want == nil {
		return // an invalid configuration makes no state: keep the ones there are
	}
	du.want, du.got = want, got
	du.check("NewState")
}

// recode decodes the reference's encoding into both states, which drops
// what a state remembers beyond its encoding (a fixed window's layout).
func (du *duo) recode() {
	du.t.Helper()
	b := du.want.AppendEncode(nil)
	want, err := du.ref.Decode(b)
	got, gerr := du.d.Decode(b)
	if !sameErr(err, gerr) {
		du.t.Fatalf("%#v: Decode(%q): %v, general %v", du.s, b, gerr, err)
	}
	if err == nil {
		du.want, du.got = want, got
		du.check("Decode")
	}
}

func (du *duo) check(what string) {
	du.t.Helper()
	if want, got := enc(du.want), enc(du.got); got != want {
		du.t.Fatalf("%#v: after %s (call %d, from %s), the states differ:\ngeneral %s\ngot     %s",
			du.s, what, du.calls, du.before, want, got)
	}
}

// swap gives each Decider the other's state.
func (du *duo) swap() { du.want, du.got = du.got, du.want }

// apply makes call c on both states, through the handle how says.
func (du *duo) apply(c Call, how int) {
	du.t.Helper()
	du.calls++
	du.before = enc(du.want)
	want, err := du.ref.Decide(du.want, c)
	d := du.d
	if how%2 == 1 {
		d = du.d2
	}
	got, gerr := d.Decide(du.got, c)
	if got != want || !sameErr(err, gerr) {
		du.t.Fatalf("%#v: state %s, call %d %+v:\ngeneral %+v, %v\ngot     %+v, %v",
			du.s, du.before, du.calls, c, want, err, got, gerr)
	}
	du.check(fmt.Sprintf("%+v", c))
}

// play runs steps random steps: calls, mostly, at instants going forward
// and at times backwards, and changes of the configuration (mostly of the
// same kind, by change, and back), fresh and decoded states, swaps.
func (du *duo) play(r *rand.Rand, steps int, change func(*rand.Rand, Strategy) Strategy) {
	du.t.Helper()
	now := t0 + r.Int64N(int64(time.Hour))
	for range steps {
		switch r.IntN(50) {
		case 0, 1, 2, 3:
			du.configure(change(r, du.s))
		case 4:
			du.configure(generators[r.IntN(len(generators))].gen(r)) // another kind, at times
		case 5:
			du.fresh()
		case 6, 7, 8:
			du.recode()
		case 9, 10:
			du.swap()
		case 11, 12, 13:
			du.revert()
		}
		now += randStep(r, true)
		du.apply(randCall(r, now), r.IntN(2))
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
	case SlidingLog:
		return SlidingLog{Limit: changedLimit(r, v.Limit), Window: randWindow(r)}
	case RollingWindow:
		if r.IntN(10) == 0 {
			v.Limit = 0
			return v
		}
		return randRollingWindow(r)
	case Calendar:
		v.Limit = changedLimit(r, v.Limit)
		switch r.IntN(10) {
		case 0, 1, 2:
			c := randCalendar(r)
			v.Period, v.Location = c.Period, c.Location
		case 3: // not valid
			v.Period = 0
		}
		return v
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
// property_test.go's generators make, plus fixed windows of three quotas
// and a strategy from outside the package.
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
	}
	for {
		if s := generators[r.IntN(len(generators))].gen(r); !isComposite(s) {
			return s
		}
	}
}

// TestShortcuts holds the shortcuts (FixedWindow's take, Composite's
// take and undo) to the general decision, which must answer exactly
// alike: Results, errors and encodings after every call, through random
// calls (n of 0 and beyond every limit, DryRun, Record, a clock going back
// at times), changed configurations, valid or not, fresh and decoded
// states, and states moved between two handles. Composites pair parts of
// every kind.
func TestShortcuts(t *testing.T) {
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
				newDuo(t, g.gen(r)).play(r, steps, changed)
			}
		})
	}
}

// TestShortcutsComposite plays every pair of parts, each kind of part in
// both places.
func TestShortcutsComposite(t *testing.T) {
	parts := []Strategy{
		TokenBucket{Rate: 3, Burst: 4}, GCRA{Rate: 7, Burst: 2}, LeakyBucket{Rate: 2.5, Capacity: 3},
		FixedWindow{Quotas: []Quota{{"s", 3, time.Second}}},
		FixedWindow{Quotas: []Quota{{"s", 3, time.Second}, {"m", 20, time.Minute}}},
		FixedWindow{Quotas: []Quota{{"s", 3, time.Second}, {"m", 20, time.Minute}, {"h", 100, time.Hour}}},
		SlidingWindow{Limit: 4, Window: 1500 * time.Millisecond},
		RollingWindow{Limit: 4, Window: 1500 * time.Millisecond, Bucket: 250 * time.Millisecond},
		SlidingLog{Limit: 4, Window: 1500 * time.Millisecond},
		Calendar{Limit: 4, Period: Day, Location: losAngeles},
		otherStrategy{TokenBucket{Rate: 5, Burst: 1}},
	}
	r := rand.New(rand.NewPCG(6, 6))
	for _, a := range parts {
		for _, b := range parts {
			newDuo(t, Composite{Primary: a, Secondary: b}).play(r, 400, changed)
		}
	}
}

// TestShortcutsExtremes plays the extremes of the counts and instants:
// calls of math.MaxInt64 on states near the ends of the int64 range.
func TestShortcutsExtremes(t *testing.T) {
	fw := FixedWindow{Quotas: []Quota{{"a", 1, 1}, {"b", math.MaxInt64, MaxWindow}}}
	for _, s := range []Strategy{
		fw, Composite{Primary: fw, Secondary: GCRA{Rate: 1e9, Burst: 1}},
		Composite{Primary: TokenBucket{Rate: 1e300, Burst: math.MaxInt64}, Secondary: fw},
		Composite{Primary: RollingWindow{Limit: 1, Window: 1, Bucket: 1}, Secondary: LeakyBucket{Rate: 5e-324, Capacity: 3}},
	} {
		for _, b := range []string{"", "23|2|a|9223372036854775807|9223372036854775807|b|1|-9223372036854775808"} {
			du := newDuo(t, s)
			if b != "" && isFixedWindow(s) {
				du.want = mustDecode(t, s, b)
				du.recode()
			}
			for _, c := range []Call{
				{Now: math.MaxInt64, N: math.MaxInt64, Record: true}, {Now: math.MinInt64, N: 1},
				{Now: math.MaxInt64, N: 1}, {Now: 0, N: math.MaxInt64}, {Now: 0, N: math.MaxInt64, DryRun: true},
				{Now: math.MinInt64, N: math.MaxInt64, Record: true}, {Now: math.MaxInt64},
			} {
				for how := range 2 {
					du.apply(c, how)
				}
			}
		}
	}
}

// TestDecideAllocs checks that a decision allocates nothing for a state
// of its own kind under an unchanged configuration: every configuration of
// the tests and benchmarks, and a Composite of every pair of parts.
func TestDecideAllocs(t *testing.T) {
	parts := []Strategy{
		TokenBucket{Rate: 70, Burst: 10}, GCRA{Rate: 70, Burst: 10}, LeakyBucket{Rate: 70, Capacity: 10},
		FixedWindow{Quotas: []Quota{{"second", 70, time.Second}}},
		FixedWindow{Quotas: []Quota{{"second", 70, time.Second}, {"minute", 4000, time.Minute}}},
		FixedWindow{Quotas: []Quota{{"second", 70, time.Second}, {"minute", 4000, time.Minute}, {"hour", 1e5, time.Hour}}},
		SlidingWindow{Limit: 70, Window: time.Second},
		RollingWindow{Limit: 70, Window: time.Second, Bucket: 100 * time.Millisecond},
		Calendar{Limit: 70, Period: Day, Location: paris},
	}
	all := parts
	for _, c := range append(append(configs, benchConfigs...), hotConfigs...) {
		all = append(all, c.s)
	}
	for _, a := range parts {
		for _, b := range parts {
			all = append(all, Composite{Primary: a, Secondary: b})
		}
	}
	for _, s := range all {
		d := s.Prepare()
		st := d.NewState()
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := d.Decide(st, workload(i)); err != nil {
				t.Fatal(err)
			}
			i++
		})
		if allocs != 0 {
			t.Errorf("%#v: Decide allocates %v times per call", s, allocs)
		}
	}
}

// TestClampAmount checks clampAmount against min and max on the edges.
func TestClampAmount(t *testing.T) {
	for _, x := range []float64{0, math.Copysign(0, -1), 1, -1, maxAmount, -maxAmount, math.Nextafter(maxAmount, math.Inf(1)),
		math.Nextafter(-maxAmount, math.Inf(-1)), math.Nextafter(maxAmount, 0), math.MaxFloat64, -math.MaxFloat64,
		math.Inf(1), math.Inf(-1), 5e-324, 1e300} {
		if got, want := clampAmount(x), min(max(x, -maxAmount), maxAmount); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("clampAmount(%v) = %v, want %v", x, got, want)
		}
	}
}

// TestBucketWait checks the estimate of bucket.wait, which skips search
// when the margin allows, against search alone on random buckets and
// states, rates and amounts of every magnitude included: both must give
// the least d that reached accepts.
func TestBucketWait(t *testing.T) {
	runs := 200000
	if testing.Short() {
		runs = 20000
	}
	if checked, fast := checkBucketWait(t, rand.New(rand.NewPCG(9, 9)), runs); fast < checked/4 {
		t.Errorf("the estimate was taken as is only %d times out of %d", fast, checked)
	}
}

// checkBucketWait checks bucket.wait on runs random cases, and reports how
// many it checked, and how many of those took the estimate as is.
func checkBucketWait(t *testing.T, r *rand.Rand, runs int) (checked, fast int) {
	rates := []float64{1e-9, 1e-3, 0.1, 1, 3, 7.5, 10, 1e3, 1e6, 1e8, 1e9, 1e12, 1e15}
	for i := range runs {
		rate := rates[r.IntN(len(rates))]
		if r.IntN(2) == 0 {
			rate *= 0.5 + r.Float64()
		}
		limit := 1 + r.Int64N(20)
		switch r.IntN(4) {
		case 0:
			limit = 1 + r.Int64N(1<<20)
		case 1:
			limit = 1 + r.Int64N(math.MaxInt64-1)
		}
		b := newBucket(rate, float64(limit), 0, 1, limit) // tokens
		if r.IntN(2) == 0 {
			b = newBucket(rate, 0, float64(limit), -1, limit) // a level
		}
		now := t0 + r.Int64N(int64(time.Hour))
		base := bucketState{last: now - r.Int64N(int64(time.Second))}
		switch r.IntN(8) {
		case 0:
			base.last = now + r.Int64N(int64(time.Second)) // a clock gone backwards
		case 1:
			base.last = now
		}
		// An amount away from rest, by a little or a lot, past far at times.
		off := []float64{r.Float64(), r.Float64() * float64(limit), r.Float64() * 2 * float64(limit), math.Ldexp(r.Float64(), r.IntN(64))}[r.IntN(4)]
		base.amount = clampAmount(b.rest - b.sign*off)
		v := b.at(base, now)
		need := -1.0
		short := b.inUse(v.amount)
		if r.IntN(2) == 0 {
			need = float64(1 + r.Int64N(limit))
			if b.fits(v.amount, need) {
				continue
			}
			short = need - b.room(v.amount)
		} else if short <= 0 {
			continue
		}
		got := b.wait(base, now, short, need)
		want := b.search(base, now, 1, need)
		// math.MaxInt64 is the answer when no d is: practically never.
		exact := got == math.MaxInt64 || b.reached(base, now, int64(got), need)
		if got != want || !exact || got > 1 && b.reached(base, now, int64(got)-1, need) {
			t.Fatalf("run %d: %+v, base %+v, now %d, short %v, need %v: wait %d, search %d", i, b, base, now, short, need, got, want)
		}
		checked++
		if x := short * b.perUnit; x < 0x1p62 && x-math.Ceil(x)+1 > (max(math.Abs(base.amount), b.bound, need)+short)*b.slack {
			fast++
		}
	}
	return checked, fast
}

func TestDivisor(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	divisors := []uint64{1, 2, 3, 5, 7, 10, 100, 1e9, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1<<63 - 1, 1 << 63, 1<<63 + 1, math.MaxUint64}
	for range 200 {
		divisors = append(divisors, 1+r.Uint64N(1<<r.IntN(64)), uint64(1)<<r.IntN(64))
	}
	for _, d := range divisors {
		v := newDivisor(d)
		ns := []uint64{0, 1, d - 1, d, d + 1, 2*d - 1, 2 * d, math.MaxUint64, math.MaxUint64 - 1, math.MaxInt64, 1 << 63}
		for range 500 {
			ns = append(ns, r.Uint64(), r.Uint64N(1<<r.IntN(64)), d*r.Uint64N(1<<r.IntN(64))+r.Uint64N(d))
		}
		for _, n := range ns {
			if got, want := v.div(n), n/d; got != want {
				t.Fatalf("%d/%d: got %d, want %d", n, d, got, want)
			}
		}
	}
}

func TestGCRASpan(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for range 2000 {
		g := GCRA{Rate: []float64{1e9, 1e8, 3, 1, 1e-3, 1e-9}[r.IntN(6)] * (0.5 + r.Float64()), Burst: 1}
		p := g.Prepare().(*gcraDecider)
		maxN := math.MaxInt64 / p.t
		for _, n := range []int64{math.MinInt64, -1, 0, 1, 2, maxN - 1, maxN, maxN + 1, math.MaxInt64, r.Int64(), r.Int64N(1 << 20)} {
			if got, want := p.span(n), sat.Mul(n, p.t); got != want {
				t.Fatalf("T = %d: span(%d) = %d, want %d", p.t, n, got, want)
			}
		}
	}
}
