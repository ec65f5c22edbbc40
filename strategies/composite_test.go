package strategies

import (
	"testing"
	"time"
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
	_, err := decode(swapped, []byte(stored))
	wantErr(t, "Decode with a swapped part", err, ErrMismatch)
	st := mustDecode(t, c, stored)
	_, err = apply(swapped, st, Call{Now: t0, N: 1})
	wantErr(t, "Apply with a swapped part", err, ErrMismatch)
	if got := enc(st); got != stored {
		t.Errorf("a failed Apply changed the state: %s", got)
	}
}
