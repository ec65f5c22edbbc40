package strategies

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/rollingwindow"
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

// twins applies the same calls to a configuration and to its prepared form,
// each on its own state, and fails at the first difference in a Result, an
// error or the encoding of a state.
type twins struct {
	t    *testing.T
	s, p Strategy
	a, b State // a for s, b for p
}

// newTwins starts from fresh states; p is Prepare(s) unless given.
func newTwins(t *testing.T, s Strategy) *twins {
	tw := &twins{t: t}
	tw.configure(s)
	tw.a, tw.b = s.NewState(), tw.p.NewState()
	tw.check("NewState")
	return tw
}

// configure changes the configuration, keeping the states.
func (tw *twins) configure(s Strategy) {
	tw.t.Helper()
	tw.s, tw.p = s, Prepare(s)
	if err, perr := s.Validate(), tw.p.Validate(); !sameErr(err, perr) {
		tw.t.Fatalf("%#v: Validate: %v, prepared: %v", s, err, perr)
	}
}

// check compares the encodings of the two states.
func (tw *twins) check(what string) {
	tw.t.Helper()
	if ea, eb := enc(tw.a), enc(tw.b); ea != eb {
		tw.t.Fatalf("%#v: after %s, the states differ:\nvalue    %s\nprepared %s", tw.s, what, ea, eb)
	}
}

// apply makes call c on both and compares the answers.
func (tw *twins) apply(c Call) {
	tw.t.Helper()
	before := enc(tw.a)
	ra, ea := tw.s.Apply(tw.a, c)
	rb, eb := tw.p.Apply(tw.b, c)
	if ra != rb || !sameErr(ea, eb) {
		tw.t.Fatalf("%#v: state %s, call %+v:\nvalue    %+v, %v\nprepared %+v, %v", tw.s, before, c, ra, ea, rb, eb)
	}
	tw.check("Apply")
}

// swap gives each state to the other: states are interchangeable.
func (tw *twins) swap() { tw.a, tw.b = tw.b, tw.a }

// recode decodes each state's encoding with the other form, keeping the
// states when both fail alike.
func (tw *twins) recode() {
	tw.t.Helper()
	b := tw.a.AppendEncode(nil)
	sa, ea := tw.p.Decode(b)
	sb, eb := tw.s.Decode(b)
	if !sameErr(ea, eb) {
		tw.t.Fatalf("%#v: Decode(%q): value %v, prepared %v", tw.s, b, eb, ea)
	}
	if ea == nil {
		tw.a, tw.b = sa, sb
		tw.check("Decode")
	}
}

// TestPreparedTwins runs random workloads through every kind of strategy
// and its prepared form, on twin states, through configuration changes
// (of the same kind, whose states they read, and of another kind, which
// they refuse alike), swaps of the states and decodes by the other form.
func TestPreparedTwins(t *testing.T) {
	sequences, steps := 150, 80
	if testing.Short() {
		sequences = 30
	}
	for gi, g := range generators {
		t.Run(g.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(gi), 1001))
			for range sequences {
				tw := newTwins(t, g.gen(r))
				now := t0 + r.Int64N(int64(time.Hour))
				for range steps {
					switch r.IntN(40) {
					case 0, 1: // a changed configuration of the same kind
						tw.configure(g.gen(r))
					case 2: // another kind
						tw.configure(generators[r.IntN(len(generators))].gen(r))
					case 3, 4:
						tw.swap()
					case 5, 6:
						tw.recode()
					}
					now += randStep(r, true)
					tw.apply(randCall(r, now))
				}
			}
		})
	}
}

// TestPreparedInvalid checks that an invalid configuration, which Prepare
// does not refuse, gives a prepared form that fails Validate alike and
// answers Apply alike, without a panic, on the states of a valid
// configuration of its kind.
func TestPreparedInvalid(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tb := TokenBucket{Rate: 1, Burst: 1}
	fw := FixedWindow{Quotas: []Quota{{"a", 2, time.Second}, {"b", 5, time.Minute}}}
	rw := RollingWindow{Limit: 3, Window: time.Second, Bucket: 100 * time.Millisecond}
	for _, c := range []struct {
		bad, good Strategy // good makes the states
	}{
		{TokenBucket{Rate: nan, Burst: 1}, tb},
		{TokenBucket{Rate: 0, Burst: 1}, tb},
		{TokenBucket{Rate: -3, Burst: 2}, tb},
		{TokenBucket{Rate: inf, Burst: 2}, tb},
		{TokenBucket{Rate: 1, Burst: 0}, tb},
		{TokenBucket{Rate: 1, Burst: -5}, tb},
		{LeakyBucket{Rate: nan, Capacity: 1}, LeakyBucket{Rate: 1, Capacity: 1}},
		{LeakyBucket{Rate: -1, Capacity: 1}, LeakyBucket{Rate: 1, Capacity: 1}},
		{LeakyBucket{Rate: 1, Capacity: math.MinInt64}, LeakyBucket{Rate: 1, Capacity: 1}},
		{GCRA{Rate: nan, Burst: 1}, GCRA{Rate: 1, Burst: 1}},
		{GCRA{Rate: 0, Burst: 1}, GCRA{Rate: 1, Burst: 1}},
		{GCRA{Rate: -1, Burst: 1}, GCRA{Rate: 1, Burst: 1}},
		{GCRA{Rate: 1, Burst: -2}, GCRA{Rate: 1, Burst: 1}},
		{FixedWindow{}, fw},
		{FixedWindow{Quotas: []Quota{{"a", 1, time.Second}, {"a", 2, time.Minute}}}, fw},
		{FixedWindow{Quotas: []Quota{{"b", 0, time.Second}}}, fw},
		{FixedWindow{Quotas: []Quota{{"a", 1, -time.Second}}}, fw},
		{FixedWindow{Quotas: []Quota{{"a|b", 1, time.Second}}}, fw},
		{SlidingWindow{Limit: 0, Window: time.Second}, SlidingWindow{Limit: 1, Window: time.Second}},
		{SlidingWindow{Limit: 1, Window: 0}, SlidingWindow{Limit: 1, Window: time.Second}},
		{SlidingWindow{Limit: 1, Window: -1}, SlidingWindow{Limit: 1, Window: time.Second}},
		{RollingWindow{Limit: 0, Window: time.Second, Bucket: time.Second}, rw},
		{RollingWindow{Limit: -1, Window: time.Second, Bucket: 100 * time.Millisecond}, rw},
		{RollingWindow{Limit: 1, Window: 0, Bucket: 100 * time.Millisecond}, rw},
		{RollingWindow{Limit: 1, Window: time.Second, Bucket: 0}, rw},
		{RollingWindow{Limit: 1, Window: time.Second, Bucket: -1}, rw},
		{RollingWindow{Limit: 1, Window: time.Second, Bucket: 300 * time.Millisecond}, rw},
		{RollingWindow{Limit: 1, Window: time.Second, Bucket: 2 * time.Second}, rw},
		{RollingWindow{Limit: 1, Window: time.Second, Bucket: 1}, rw},
		{RollingWindow{Limit: 1, Window: MaxWindow + 1, Bucket: 1}, rw},
		{Composite{}, Composite{Primary: tb, Secondary: fw}},
		{Composite{Primary: tb}, Composite{Primary: tb, Secondary: fw}},
		{Composite{Secondary: fw}, Composite{Primary: tb, Secondary: fw}},
		{Composite{Primary: Composite{Primary: tb, Secondary: tb}, Secondary: fw}, Composite{Primary: tb, Secondary: fw}},
		{Composite{Primary: tb, Secondary: Prepare(Composite{Primary: tb, Secondary: tb})}, Composite{Primary: tb, Secondary: fw}},
		{Composite{Primary: TokenBucket{Rate: nan, Burst: 1}, Secondary: FixedWindow{}}, Composite{Primary: tb, Secondary: fw}},
	} {
		if c.bad.Validate() == nil {
			t.Fatalf("%#v is valid", c.bad)
		}
		tw := newTwins(t, c.good)
		tw.configure(c.bad)
		tw.play(rand.New(rand.NewPCG(3, 3)), 200)
	}
	// And the extremes of the valid ones.
	for _, s := range []Strategy{
		TokenBucket{Rate: 5e-324, Burst: 3}, TokenBucket{Rate: 1e300, Burst: math.MaxInt64},
		LeakyBucket{Rate: 5e-324, Capacity: 3}, LeakyBucket{Rate: 1e-300, Capacity: math.MaxInt64},
		GCRA{Rate: 1e9, Burst: int64(MaxWindow)}, GCRA{Rate: 1e-9, Burst: 3}, GCRA{Rate: 1e9, Burst: 1},
		SlidingWindow{Limit: math.MaxInt64, Window: MaxWindow}, SlidingWindow{Limit: 1, Window: 1},
		RollingWindow{Limit: math.MaxInt64, Window: MaxWindow, Bucket: MaxWindow / rollingwindow.MaxBuckets * 4},
		RollingWindow{Limit: 1, Window: 1, Bucket: 1}, RollingWindow{Limit: 5, Window: rollingwindow.MaxBuckets, Bucket: 1},
		FixedWindow{Quotas: []Quota{{"a", 1, 1}, {"b", math.MaxInt64, MaxWindow}}},
	} {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		newTwins(t, s).play(rand.New(rand.NewPCG(3, 4)), 200)
	}
}

// play applies n random calls.
func (tw *twins) play(r *rand.Rand, n int) {
	tw.t.Helper()
	now := t0
	for range n {
		now += randStep(r, true)
		tw.apply(randCall(r, now))
	}
}

// TestPreparedDecode checks that the prepared forms decode every seed of
// the fuzzers as their configurations do.
func TestPreparedDecode(t *testing.T) {
	for _, c := range configs {
		p := Prepare(c.s)
		for _, b := range append(nasty, "12|4.5|"+ns(0), "32|4.5|"+ns(0), "42|"+ns(0), "62|6|5|"+ns(0), "72|10000000000|1000000000|"+ns(0)+"|3|2|4",
			"23|2|second|1|"+ns(0)+"|minute|1|"+ns(0), "51|12|1|"+ns(0)+"$23|1|day|1|"+ns(0)) {
			sa, ea := c.s.Decode([]byte(b))
			sb, eb := p.Decode([]byte(b))
			if !sameErr(ea, eb) || (ea == nil) != (sb != nil) || ea == nil && enc(sa) != enc(sb) {
				t.Errorf("%s: Decode(%q): value %v, prepared %v", c.name, b, ea, eb)
			}
		}
	}
}

// otherStrategy is a Strategy from outside the package, as far as Prepare
// can tell.
type otherStrategy struct{ TokenBucket }

func TestPrepare(t *testing.T) {
	tb := TokenBucket{Rate: 10, Burst: 5}
	for _, c := range append(configs, hotConfigs...) {
		p := Prepare(c.s)
		if reflect.TypeOf(p).Kind() != reflect.Pointer {
			t.Errorf("%s: Prepare returns a %T, not a pointer", c.name, p)
		}
		if reflect.TypeOf(p) == reflect.TypeOf(c.s) {
			t.Errorf("%s: Prepare returns a %T, as given", c.name, p)
		}
		if Prepare(p) != p {
			t.Errorf("%s: Prepare(Prepare(s)) is not Prepare(s)", c.name)
		}
		if got := Unprepare(p); !reflect.DeepEqual(got, c.s) {
			t.Errorf("%s: Unprepare(Prepare(s)) = %#v", c.name, got)
		}
		if Unprepare(c.s) == nil || !reflect.DeepEqual(Unprepare(c.s), c.s) {
			t.Errorf("%s: Unprepare(s) is not s", c.name)
		}
		// A pointer to a configuration is not prepared: it still works.
		ptr := reflect.New(reflect.TypeOf(c.s))
		ptr.Elem().Set(reflect.ValueOf(c.s))
		if s := ptr.Interface().(Strategy); Prepare(s) != s {
			t.Errorf("%s: Prepare(&s) = %#v", c.name, Prepare(s))
		}
	}

	// The parts of a Composite are prepared, and so is a Composite of
	// prepared parts, whose Unprepare keeps them as given.
	cs := Composite{Primary: tb, Secondary: GCRA{Rate: 1, Burst: 2}}
	p := Prepare(cs).(*prepared)
	if pp, ok := p.composite.Primary.(*prepared); !ok || pp.kind != kindTokenBucket {
		t.Errorf("primary part prepared as %#v", p.composite.Primary)
	}
	if pp, ok := p.composite.Secondary.(*prepared); !ok || pp.kind != kindGCRA || pp.Strategy != (GCRA{Rate: 1, Burst: 2}) {
		t.Errorf("secondary part prepared as %#v", p.composite.Secondary)
	}
	mixed := Composite{Primary: Prepare(tb), Secondary: GCRA{Rate: 1, Burst: 2}}
	if err := mixed.Validate(); err != nil {
		t.Errorf("a Composite of a prepared part: %v", err)
	}
	pm := Prepare(mixed).(*prepared)
	if pm.composite.Primary != mixed.Primary || Unprepare(pm).(Composite).Primary != mixed.Primary {
		t.Error("a prepared part is prepared again")
	}
	newTwins(t, mixed).apply(Call{Now: t0, N: 1})

	// A prepared Composite does not nest either.
	nested := Composite{Primary: tb, Secondary: Prepare(Composite{Primary: tb, Secondary: tb})}
	if err := nested.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "secondary must not be a Composite") {
		t.Errorf("a Composite of a prepared Composite: %v", err)
	}

	// What Prepare does not know comes back as it is.
	other := otherStrategy{tb}
	for _, s := range []Strategy{nil, other, &other, &tb, (*TokenBucket)(nil), (*GCRA)(nil), (*LeakyBucket)(nil),
		(*FixedWindow)(nil), (*SlidingWindow)(nil), (*RollingWindow)(nil), (*Composite)(nil)} {
		if got := Prepare(s); got != s {
			t.Errorf("Prepare(%#v) = %#v", s, got)
		}
		if got := Unprepare(s); got != s {
			t.Errorf("Unprepare(%#v) = %#v", s, got)
		}
	}
	if p := Prepare(Composite{Primary: other, Secondary: tb}).(*prepared); p.composite.Primary != other {
		t.Errorf("an unknown part became %#v", p.composite.Primary)
	}

	// A FixedWindow's quotas are copied: its states remember the prepared
	// form as their layout, which a change to the caller's slice must not
	// falsify. The prepared form goes on deciding by the quotas it had.
	fw := FixedWindow{Quotas: []Quota{{"a", 1, time.Second}}}
	pf := Prepare(fw)
	st := pf.NewState()
	if r, err := pf.Apply(st, Call{N: 1}); err != nil || !r.Allowed {
		t.Fatalf("first call: %+v, %v", r, err)
	}
	fw.Quotas[0] = Quota{"b", 5, time.Second}
	if r, err := pf.Apply(st, Call{N: 1}); err != nil || r.Allowed || r.Limit != 1 {
		t.Errorf("after the caller changed its quotas: %+v, %v; want denied by quota a, limit 1", r, err)
	}
}

// TestPreparedComposite plays random calls on a Composite of every pair of
// parts, one of them from outside the package, value and prepared.
func TestPreparedComposite(t *testing.T) {
	parts := []Strategy{
		TokenBucket{Rate: 3, Burst: 4}, GCRA{Rate: 7, Burst: 2}, LeakyBucket{Rate: 2.5, Capacity: 3},
		FixedWindow{Quotas: []Quota{{"s", 3, time.Second}, {"m", 20, time.Minute}}},
		SlidingWindow{Limit: 4, Window: 1500 * time.Millisecond},
		RollingWindow{Limit: 4, Window: 1500 * time.Millisecond, Bucket: 250 * time.Millisecond},
		otherStrategy{TokenBucket{Rate: 5, Burst: 1}},
	}
	r := rand.New(rand.NewPCG(5, 5))
	for _, a := range parts {
		for _, b := range parts {
			newTwins(t, Composite{Primary: a, Secondary: b}).play(r, 300)
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
		v, plain := newDivisor(d), divisor{d: d}
		ns := []uint64{0, 1, d - 1, d, d + 1, 2*d - 1, 2 * d, math.MaxUint64, math.MaxUint64 - 1, math.MaxInt64, 1 << 63}
		for range 500 {
			ns = append(ns, r.Uint64(), r.Uint64N(1<<r.IntN(64)), d*r.Uint64N(1<<r.IntN(64))+r.Uint64N(d))
		}
		for _, n := range ns {
			if got, gotPlain, want := v.div(n), plain.div(n), n/d; got != want || gotPlain != want {
				t.Fatalf("%d/%d: got %d (plain %d), want %d", n, d, got, gotPlain, want)
			}
		}
	}
}

func TestGCRASpan(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for range 2000 {
		g := GCRA{Rate: []float64{1e9, 1e8, 3, 1, 1e-3, 1e-9}[r.IntN(6)] * (0.5 + r.Float64()), Burst: 1}
		var p gcraPlan
		p.init(g, true)
		maxN := math.MaxInt64 / p.t
		for _, n := range []int64{math.MinInt64, -1, 0, 1, 2, maxN - 1, maxN, maxN + 1, math.MaxInt64, r.Int64(), r.Int64N(1 << 20)} {
			if got, want := p.span(n), sat.Mul(n, p.t); got != want {
				t.Fatalf("T = %d: span(%d) = %d, want %d", p.t, n, got, want)
			}
		}
	}
}
