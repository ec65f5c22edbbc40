package strategies

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

func TestCompositeVectors(t *testing.T) {
	c := Composite{
		Primary:   TokenBucket{Rate: 1, Burst: 2},
		Secondary: FixedWindow{Quotas: []Quota{{"day", 3, 24 * time.Hour}}},
	}
	const s = time.Second
	day := 24 * time.Hour
	vector{name: "both must allow", s: c, steps: []step{
		{at: 0, op: peek, want: yes(2, 2, 0), enc: "51|12|2|0$23|1|day|0|0"},
		{at: 0, op: allow, n: 1, want: yes(2, 1, day), enc: "51|12|1|" + ns(0) + "$23|1|day|1|" + ns(0)},
		{at: 0, op: allow, n: 1, want: yes(2, 0, day)},
		// The bucket denies; the window, which would allow, takes nothing
		// and reports its state as it is.
		{at: 0, op: allow, n: 1, want: no(2, 0, day, s), enc: "51|12|0|" + ns(0) + "$23|1|day|2|" + ns(0)},
		{at: 0, op: dry, n: 1, want: no(2, 0, day, s)},
		{at: s, op: allow, n: 1, want: yes(2, 0, day-s), enc: "51|12|0|" + ns(s) + "$23|1|day|3|" + ns(0)},
		// Now the window denies and the full bucket takes nothing.
		{at: 5 * s, op: allow, n: 1, want: no(3, 0, day-5*s, day-5*s)},
		{at: 5 * s, op: allow, n: 3, want: no(3, 0, day-5*s, -1)},
		{at: 5 * s, op: peek, want: yes(3, 0, day-5*s)},
		// Record takes from both, past both limits; on a tie in Remaining
		// the primary's Limit is reported.
		{at: 5 * s, op: record, n: 4, want: no(2, 0, day-5*s, day-5*s), enc: "51|12|-2|" + ns(5*s) + "$23|1|day|7|" + ns(0)},
	}}.run(t)
	vector{name: "record debt outlasts the window", s: c, steps: []step{
		{at: 0, op: record, n: 200000, want: no(2, 0, 200000*s, 199998*s)},
		{at: day, op: peek, want: no(2, 0, 113600*s, 113598*s)},
		{at: 199998 * s, op: peek, want: yes(2, 0, 2*s)},
		{at: 200000 * s, op: peek, want: yes(2, 2, 0)},
	}}.run(t)
}

func TestCompositeLegacy(t *testing.T) {
	c := Composite{Primary: TokenBucket{Rate: 1, Burst: 5}, Secondary: GCRA{Rate: 10, Burst: 5}}
	for _, tc := range []struct{ in, want string }{
		{"cmp1|v2|3|" + ns(0) + "|$v1|" + ns(0) + "|100000000|500000000", "51|12|3|" + ns(0) + "$42|" + ns(0)},
		{"cmp1|12|3|" + ns(0) + "$42|" + ns(0), "51|12|3|" + ns(0) + "$42|" + ns(0)},
		{"51|v1|1|2|5|1$v2|7|", "51|12|1|2$42|7"},
	} {
		if got := enc(mustDecode(t, c, tc.in)); got != tc.want {
			t.Errorf("Decode(%q) encodes as %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCompositePartChange(t *testing.T) {
	stored := "51|12|1|" + ns(0) + "$23|2|a|1|" + ns(0) + "|b|1|" + ns(0)
	c := Composite{Primary: TokenBucket{Rate: 1, Burst: 1}, Secondary: FixedWindow{Quotas: []Quota{{"b", 5, time.Minute}}}}
	vector{name: "a part's config changed", s: c, start: stored, steps: []step{
		{at: 0, op: allow, n: 1, want: yes(1, 0, time.Minute), enc: "51|12|0|" + ns(0) + "$23|1|b|2|" + ns(0)},
	}}.run(t)

	// A part replaced by another kind: the stored state is a mismatch.
	swapped := Composite{Primary: GCRA{Rate: 1, Burst: 1}, Secondary: c.Secondary}
	_, err := swapped.Decode([]byte(stored))
	wantErr(t, "Decode with a swapped part", err, ErrMismatch)
	st := mustDecode(t, c, stored)
	_, err = swapped.Apply(st, Call{Now: t0, N: 1})
	wantErr(t, "Apply with a swapped part", err, ErrMismatch)
	if got := enc(st); got != stored {
		t.Errorf("a failed Apply changed the state: %s", got)
	}
}

// TestCompositeOneObject checks that a Composite's state is one object
// with the states of its parts when both are of this package (see
// joined), for every pair of parts, each as a value and prepared, in a
// Composite value and prepared. NewState allocates that object alone, but
// for what a part's state holds beyond itself: the windows of a fixed
// window of three quotas, and as a value their names, which a prepared
// form's states share. With a part from outside the package, each part's
// state is made on its own, as without a Composite, and a loose pair
// refers to both. Decode allocates one object less per part than it does
// with the parts' states on their own (parts wrapped as from outside the
// package), when both are of this package. TestReferenceComposite plays
// every pair on such states, the undo of Composite.take included.
func TestCompositeOneObject(t *testing.T) {
	type part struct {
		s     Strategy
		own   bool    // of this package: its state is in the composite's object
		extra float64 // what NewState allocates for it besides the composite's object
		names float64 // and for its names, as a value part of a Composite value
	}
	three := FixedWindow{Quotas: []Quota{{"s", 3, time.Second}, {"m", 20, time.Minute}, {"h", 100, time.Hour}}}
	parts := []part{
		{TokenBucket{Rate: 3, Burst: 4}, true, 0, 0}, {GCRA{Rate: 7, Burst: 2}, true, 0, 0},
		{LeakyBucket{Rate: 2.5, Capacity: 3}, true, 0, 0}, {SlidingWindow{Limit: 4, Window: 1500 * time.Millisecond}, true, 0, 0},
		{FixedWindow{Quotas: []Quota{{"s", 3, time.Second}}}, true, 0, 1}, // names
		{FixedWindow{Quotas: []Quota{{"s", 3, time.Second}, {"m", 20, time.Minute}}}, true, 0, 1},
		{three, true, 2, 2}, // its windows and their slice; names and their list
		{RollingWindow{Limit: 4, Window: 1500 * time.Millisecond, Bucket: 250 * time.Millisecond}, true, 0, 0}, // no ring yet
		{otherStrategy{TokenBucket{Rate: 5, Burst: 1}}, false, 0, 0},
	}
	for _, p := range parts[:len(parts)-1] {
		parts = append(parts, part{Prepare(p.s), p.own, p.extra, 0})
	}
	allocs := func(f func()) float64 { return testing.AllocsPerRun(20, f) }
	for _, a := range parts {
		for _, b := range parts {
			for _, f := range forms {
				cs := f.of(Composite{Primary: a.s, Secondary: b.s})
				want := 1 + a.extra + b.extra
				if f.name == "value" {
					want += a.names + b.names
				}
				if !a.own || !b.own {
					pa, pb := f.of(a.s), f.of(b.s) // as cs holds them
					want = 1 + allocs(func() { pa.NewState() }) + allocs(func() { pb.NewState() })
				}
				if got := allocs(func() { cs.NewState() }); got != want {
					t.Errorf("%#v (%s): NewState allocates %v times, want %v", cs, f.name, got, want)
				}
				st := cs.NewState()
				for i := range 20 {
					cs.Apply(st, workload(i))
				}
				raw := st.AppendEncode(nil)
				apart := Composite{Primary: outside{a.s}, Secondary: outside{b.s}}
				want = allocs(func() { apart.Decode(raw) })
				if a.own && b.own {
					want -= 2
				}
				if got := allocs(func() { cs.Decode(raw) }); got != want {
					t.Errorf("%#v (%s): Decode(%q) allocates %v times, want %v", cs, f.name, raw, got, want)
				}
			}
		}
	}
}

// outside is a Strategy from outside the package, as far as a Composite
// can tell, that behaves as the one it holds.
type outside struct{ Strategy }

// TestCompositeStateSize checks the size that the hot path counts on (see
// pair): a fixed window of one or two quotas with a GCRA or a bucket in a
// Composite is allocated in Go's size class of 64 bytes (objects of 49 to
// 64 bytes), whose objects are cache lines.
func TestCompositeStateSize(t *testing.T) {
	for name, size := range map[string]uintptr{
		"Composite{GCRA, FixedWindow}":  unsafe.Sizeof(pair[gcraState, fixedWindowState, *gcraState, *fixedWindowState]{}),
		"Composite{FixedWindow, GCRA}":  unsafe.Sizeof(pair[fixedWindowState, gcraState, *fixedWindowState, *gcraState]{}),
		"Composite{TokenBucket, Fixed}": unsafe.Sizeof(pair[tokenBucketState, fixedWindowState, *tokenBucketState, *fixedWindowState]{}),
		"Composite{LeakyBucket, Fixed}": unsafe.Sizeof(pair[leakyBucketState, fixedWindowState, *leakyBucketState, *fixedWindowState]{}),
	} {
		assert.True(t, 48 < size && size <= 64, "%s: %d bytes", name, size)
	}
}
