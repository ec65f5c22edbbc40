package strategies

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rwEnc returns the encoding of a rolling window state of window w in
// buckets of b, followed by fields.
func rwEnc(w, b time.Duration, fields ...string) string {
	s := "72|" + strconv.FormatInt(int64(w), 10) + "|" + strconv.FormatInt(int64(b), 10)
	for _, f := range fields {
		s += "|" + f
	}
	return s
}

func TestRollingWindowVectors(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	rw := RollingWindow{Limit: 5, Window: 10 * s, Bucket: s}
	e := func(fields ...string) string { return rwEnc(10*s, s, fields...) }
	vectors := []vector{{
		name: "bucket boundaries, n=0, n>limit, exactly at the limit",
		s:    rw,
		steps: []step{
			{at: 0, op: peek, want: yes(5, 5, 0), enc: e()},
			// Usage at 500ms lands in the bucket [0, 1s), which counts
			// until 10s.
			{at: 500 * ms, op: allow, n: 2, want: yes(5, 3, 9500*ms), enc: e(ns(0), "2")},
			{at: 3200 * ms, op: allow, n: 3, want: yes(5, 0, 9800*ms), enc: e(ns(0), "2", "3", "3")},
			// Exactly at the limit: Peek and AllowN(0) are still allowed.
			{at: 3200 * ms, op: peek, want: yes(5, 0, 9800*ms)},
			{at: 3200 * ms, op: allow, n: 0, want: yes(5, 0, 9800*ms)},
			// One more fits once the bucket [0, 1s) holding 2 has expired.
			{at: 3200 * ms, op: allow, n: 1, want: no(5, 0, 9800*ms, 6800*ms)},
			{at: 3200 * ms, op: dry, n: 1, want: no(5, 0, 9800*ms, 6800*ms)},
			{at: 3200 * ms, op: allow, n: 6, want: no(5, 0, 9800*ms, -1)},
			{at: 10*s - 1, op: allow, n: 1, want: no(5, 0, 3*s+1, 1)},
			// A bucket exactly Window old no longer counts.
			{at: 10 * s, op: peek, want: yes(5, 2, 3*s), enc: e(ns(0), "2", "3", "3")},
			{at: 10 * s, op: allow, n: 1, want: yes(5, 1, 10*s), enc: e(ns(3*s), "3", "7", "1")},
			// 3 more need 2 freed: the bucket at 3s, which holds 3.
			{at: 10 * s, op: allow, n: 3, want: no(5, 1, 10*s, 3*s)},
			{at: 10 * s, op: dry, n: 1, want: yes(5, 0, 10*s), enc: e(ns(3*s), "3", "7", "1")},
			{at: 13 * s, op: peek, want: yes(5, 4, 7*s)},
			{at: 13 * s, op: allow, n: 4, want: yes(5, 0, 10*s), enc: e(ns(10*s), "1", "3", "4")},
			{at: 23 * s, op: peek, want: yes(5, 5, 0)},
		},
	}, {
		name: "record past the limit, then recovery",
		s:    rw,
		steps: []step{
			{at: 0, op: record, n: 3, want: yes(5, 2, 10*s), enc: e(ns(0), "3")},
			{at: 2 * s, op: record, n: 4, want: no(5, 0, 10*s, 8*s), enc: e(ns(0), "3", "2", "4")},
			{at: 2 * s, op: peek, want: no(5, 0, 10*s, 8*s)},
			{at: 2 * s, op: allow, n: 0, want: no(5, 0, 10*s, 8*s)},
			{at: 10*s - 1, op: peek, want: no(5, 0, 2*s+1, 1)},
			{at: 10 * s, op: peek, want: yes(5, 1, 2*s)},
			{at: 10 * s, op: allow, n: 2, want: no(5, 1, 2*s, 2*s)},
			{at: 12 * s, op: peek, want: yes(5, 5, 0)},
			// A Record of more than Limit: RetryAfter is not -1, but
			// until it has expired.
			{at: 20 * s, op: record, n: 12, want: no(5, 0, 10*s, 10*s), enc: e(ns(20*s), "12")},
			{at: 29 * s, op: allow, n: 1, want: no(5, 0, s, s)},
			{at: 30 * s, op: allow, n: 5, want: yes(5, 0, 10*s), enc: e(ns(30*s), "5")},
		},
	}, {
		name: "clock backwards: nothing expires early, nothing is lost",
		s:    rw,
		steps: []step{
			{at: 5 * s, op: allow, n: 2, want: yes(5, 3, 10*s), enc: e(ns(5*s), "2")},
			// 4s back, the usage goes to the newest bucket, at 5s, which
			// expires 14s after the call.
			{at: s, op: allow, n: 1, want: yes(5, 2, 14*s), enc: e(ns(5*s), "3")},
			{at: s, op: allow, n: 3, want: no(5, 2, 14*s, 14*s)},
			{at: 5 * s, op: peek, want: yes(5, 2, 10*s)},
			{at: 12 * s, op: allow, n: 1, want: yes(5, 1, 10*s), enc: e(ns(5*s), "3", "7", "1")},
			// Back again: the bucket at 12s counts, from 4s it expires in 18s.
			{at: 4 * s, op: peek, want: yes(5, 1, 18*s)},
			{at: 4 * s, op: allow, n: 2, want: no(5, 1, 18*s, 11*s)},
			{at: 15 * s, op: peek, want: yes(5, 4, 7*s)},
		},
	}, {
		name: "huge counts saturate",
		s:    rw,
		steps: []step{
			{at: 0, op: record, n: math.MaxInt64, want: no(5, 0, 10*s, 10*s)},
			{at: 0, op: record, n: math.MaxInt64, want: no(5, 0, 10*s, 10*s), enc: e(ns(0), "9223372036854775807")},
			{at: s, op: record, n: 1, want: no(5, 0, 9*s, 9*s), enc: e(ns(0), "9223372036854775807")},
			{at: 0, op: allow, n: math.MaxInt64, want: no(5, 0, 10*s, -1)},
			{at: 10 * s, op: allow, n: math.MaxInt64, want: no(5, 5, 0, -1)},
		},
	}, {
		name: "the key store's window: 5 hours in 5-minute buckets",
		s:    RollingWindow{Limit: 100000, Window: 5 * time.Hour, Bucket: 5 * time.Minute},
		steps: []step{
			{at: 0, op: record, n: 60000, want: yes(100000, 40000, 5*time.Hour)},
			{at: 4*time.Hour + 59*time.Minute, op: record, n: 50000, want: no(100000, 0, 4*time.Hour+56*time.Minute, time.Minute),
				enc: rwEnc(5*time.Hour, 5*time.Minute, ns(0), "60000", "59", "50000")},
			{at: 5 * time.Hour, op: peek, want: yes(100000, 50000, 4*time.Hour+55*time.Minute)},
		},
	}, {
		name:  "starts from a stored state",
		s:     rw,
		start: e(ns(0), "1", "9", "1"),
		steps: []step{
			{at: 9 * s, op: peek, want: yes(5, 3, 10*s)},
			{at: 10 * s, op: peek, want: yes(5, 4, 9*s), enc: e(ns(0), "1", "9", "1")},
			{at: 10 * s, op: allow, n: 4, want: yes(5, 0, 10*s), enc: e(ns(9*s), "1", "1", "4")},
		},
	}}
	for _, v := range vectors {
		v.run(t)
	}
}

func TestRollingWindowInComposite(t *testing.T) {
	const s = time.Second
	c := Composite{Primary: TokenBucket{Rate: 1, Burst: 2}, Secondary: RollingWindow{Limit: 3, Window: 10 * s, Bucket: s}}
	e := func(fields ...string) string { return rwEnc(10*s, s, fields...) }
	vector{name: "composite with a rolling window", s: c, steps: []step{
		{at: 0, op: peek, want: yes(2, 2, 0), enc: "51|12|2|0$" + e()},
		{at: 0, op: allow, n: 2, want: yes(2, 0, 10*s), enc: "51|12|0|" + ns(0) + "$" + e(ns(0), "2")},
		// The bucket denies; the window takes nothing.
		{at: 0, op: allow, n: 1, want: no(2, 0, 10*s, s)},
		{at: 5 * s, op: allow, n: 2, want: no(3, 1, 5*s, 5*s), enc: "51|12|0|" + ns(0) + "$" + e(ns(0), "2")},
		{at: 5 * s, op: allow, n: 1, want: yes(3, 0, 10*s), enc: "51|12|1|" + ns(5*s) + "$" + e(ns(0), "2", "5", "1")},
		{at: 15 * s, op: peek, want: yes(2, 2, 0)},
	}}.run(t)
}

func TestRollingWindowEncoding(t *testing.T) {
	rw := RollingWindow{Limit: 10, Window: 10 * time.Second, Bucket: time.Second}
	st := newState(rw)
	if got, want := enc(st), "72|10000000000|1000000000"; got != want {
		t.Errorf("fresh state: %s, want %s", got, want)
	}
	for _, c := range []Call{{Now: at(0), N: 2}, {Now: at(3500 * time.Millisecond), N: 1}, {Now: at(3900 * time.Millisecond), N: 4}, {Now: at(9 * time.Second), N: 1}} {
		mustApply(t, rw, st, c)
	}
	if got, want := enc(st), "72|10000000000|1000000000|"+ns(0)+"|2|3|5|6|1"; got != want {
		t.Errorf("encoding: %s, want %s", got, want)
	}
	// Decoding reads every encoding a State can hold, written under any
	// Window and Bucket, and writes it back byte for byte; leading zeros
	// are made canonical.
	for _, c := range []struct{ in, want string }{
		{"72|10000000000|1000000000|" + ns(0) + "|2|3|5|6|1", ""},
		{"72|18000000000000|300000000000|" + ns(0) + "|60000|59|50000", ""},
		{"72|1|1|-9223372036854775808|9223372036854775807", ""},
		{"72|65536|1|9223372036854710272|1|65535|1", ""},
		{"72|3153600000000000000|3153600000000000000|6307200000000000000|1", ""},
		{"72|010|05|0010|007|01|1", "72|10|5|10|7|1|1"},
		// Expired buckets are fine: they are dropped at the next call that
		// takes something.
		{"72|10|5|0|1", ""},
	} {
		want := c.want
		if want == "" {
			want = c.in
		}
		if got := enc(mustDecode(t, rw, c.in)); got != want {
			t.Errorf("Decode(%q) encodes as %q, want %q", c.in, got, want)
		}
	}
	if got := enc(clone(t, rw, mustDecode(t, rw, "72|10|5|0|1"))); got != "72|10|5|0|1" {
		t.Errorf("clone: %s", got)
	}
}

// TestRollingWindowConfigChange checks that a changed Limit applies to the
// stored usage as it is, and a changed Window or Bucket moves the buckets
// (rollingwindow.State.Reconfigure), the state keeping its encoding until
// a call takes something.
func TestRollingWindowConfigChange(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	stored := rwEnc(10*s, s, ns(0), "2", "3", "3") // 2 at 0s, 3 at 3s
	vector{name: "limit lowered", s: RollingWindow{Limit: 4, Window: 10 * s, Bucket: s}, start: stored, steps: []step{
		{at: 3200 * ms, op: peek, want: no(4, 0, 9800*ms, 6800*ms), enc: stored},
		{at: 10 * s, op: allow, n: 1, want: yes(4, 0, 10*s), enc: rwEnc(10*s, s, ns(3*s), "3", "7", "1")},
	}}.run(t)
	vector{name: "limit raised", s: RollingWindow{Limit: 8, Window: 10 * s, Bucket: s}, start: stored, steps: []step{
		{at: 3200 * ms, op: allow, n: 3, want: yes(8, 0, 9800*ms), enc: rwEnc(10*s, s, ns(0), "2", "3", "6")},
	}}.run(t)
	// Under 20s in 2s buckets the bucket at 3s moves to 4s: it counts
	// until 24s, the one at 0s until 20s.
	vector{name: "window and bucket changed", s: RollingWindow{Limit: 5, Window: 20 * s, Bucket: 2 * s}, start: stored, steps: []step{
		{at: 3200 * ms, op: peek, want: yes(5, 0, 20800*ms), enc: stored},
		{at: 3200 * ms, op: allow, n: 1, want: no(5, 0, 20800*ms, 16800*ms), enc: stored},
		{at: 3200 * ms, op: dry, n: 0, want: yes(5, 0, 20800*ms), enc: stored},
		{at: 21 * s, op: allow, n: 1, want: yes(5, 1, 19*s), enc: rwEnc(20*s, 2*s, ns(4*s), "3", "8", "1")},
	}}.run(t)
	// A shorter window, 2s in buckets of 500ms: the bucket at 0s lies a
	// whole window before the newest, at 3s, and moves up to the oldest
	// bucket a window holds, 1.5s: it expires later, never earlier.
	vector{name: "window shortened", s: RollingWindow{Limit: 5, Window: 2 * s, Bucket: 500 * ms}, start: stored, steps: []step{
		{at: 3200 * ms, op: peek, want: yes(5, 0, 1800*ms), enc: stored},
		{at: 3200 * ms, op: allow, n: 3, want: no(5, 0, 1800*ms, 1800*ms), enc: stored},
		{at: 3200 * ms, op: allow, n: 2, want: no(5, 0, 1800*ms, 300*ms), enc: stored},
		{at: 3500 * ms, op: allow, n: 2, want: yes(5, 0, 2*s), enc: rwEnc(2*s, 500*ms, ns(3*s), "3", "1", "2")},
	}}.run(t)
	// A Record of 0 takes nothing: the state keeps its configuration.
	st := mustDecode(t, RollingWindow{Limit: 5, Window: 20 * s, Bucket: 2 * s}, stored)
	mustApply(t, RollingWindow{Limit: 5, Window: 20 * s, Bucket: 2 * s}, st, Call{Now: at(3 * s), N: 0, Record: true})
	if got := enc(st); got != stored {
		t.Errorf("a Record of 0 changed the state: %s", got)
	}

	// An invalid configuration whose Window or Bucket differ reports its
	// Validate error, and changes nothing.
	bad := RollingWindow{Limit: 5, Window: 10 * s, Bucket: 3 * s}
	st = mustDecode(t, RollingWindow{Limit: 5, Window: 20 * s, Bucket: 2 * s}, stored)
	_, err := apply(bad, st, Call{Now: at(0), N: 1})
	wantErr(t, "Apply under an invalid configuration", err, ErrInvalid)
	if err == nil || err.Error() != bad.Validate().Error() {
		t.Errorf("Apply under an invalid configuration: %v, want %v", err, bad.Validate())
	}
	if got := enc(st); got != stored {
		t.Errorf("a failed Apply changed the state: %s", got)
	}
}

// TestRollingWindowPeekForgetsNothing checks that a call that takes
// nothing leaves the buckets that have expired at its instant in the
// state: a later call at an earlier instant (a clock gone back) still
// counts them, as it would have without the peek.
func TestRollingWindowPeekForgetsNothing(t *testing.T) {
	rw := RollingWindow{Limit: 5, Window: 10 * time.Second, Bucket: time.Second}
	s := rw
	st := newState(s)
	mustApply(t, s, st, Call{Now: at(0), N: 3})
	mustApply(t, s, st, Call{Now: at(2 * time.Second), N: 1})
	before := enc(st)
	for _, c := range []Call{{Now: at(time.Minute)}, {Now: at(time.Minute), N: 9}, {Now: at(time.Minute), N: 2, DryRun: true}, {Now: at(time.Minute), N: 7, Record: true, DryRun: true}} {
		if r := mustApply(t, s, st, c); r.ResetAfter != 0 && !c.DryRun {
			t.Errorf("%+v: %+v", c, r)
		}
	}
	if used, err := rw.Used(st, at(time.Minute)); used != 0 || err != nil {
		t.Errorf("Used a minute later: %d, %v", used, err)
	}
	if got := enc(st); got != before {
		t.Errorf("calls that took nothing changed the state:\n%s\n%s", before, got)
	}
	if r := mustApply(t, s, st, Call{Now: at(5 * time.Second), N: 2}); r.Allowed || r.RetryAfter != 5*time.Second {
		t.Errorf("back at 5s: %+v", r)
	}
}

// TestRollingWindowDryRun checks that a DryRun of a call that takes
// something answers exactly what the call answers, on random states,
// through saturated counts and a clock going backwards, and changes
// nothing.
func TestRollingWindowDryRun(t *testing.T) {
	r := rand.New(rand.NewPCG(72, 72))
	runs := 300
	if testing.Short() {
		runs = 60
	}
	for range runs {
		rw := randRollingWindow(r)
		s := rw
		st := newState(s)
		now := t0 + r.Int64N(int64(time.Hour))
		for range 40 {
			now += randStep(r, true)
			if r.IntN(10) == 0 {
				now -= r.Int64N(int64(rw.Window) * 2) // back, past bucket boundaries
			}
			c := randCall(r, now)
			c.DryRun = false
			if r.IntN(8) == 0 {
				c.N, c.Record = math.MaxInt64-r.Int64N(3), true
			}
			before := enc(st)
			d := c
			d.DryRun = true
			got := mustApply(t, s, st, d)
			if enc(st) != before {
				t.Fatalf("%#v: state %s: DryRun %+v changed it to %s", rw, before, d, enc(st))
			}
			want := mustApply(t, s, st, c)
			if got != want {
				t.Fatalf("%#v: state %s: %+v\ndry run %+v\ncall    %+v", rw, before, c, got, want)
			}
		}
	}
}

func TestRollingWindowUsed(t *testing.T) {
	const s = time.Second
	rw := RollingWindow{Limit: 5, Window: 10 * s, Bucket: s}
	st := newState(rw)
	if used, err := rw.Used(st, at(0)); used != 0 || err != nil {
		t.Errorf("Used of a fresh state: %d, %v", used, err)
	}
	mustApply(t, rw, st, Call{Now: at(0), N: 2})
	mustApply(t, rw, st, Call{Now: at(4 * s), N: 7, Record: true})
	before := enc(st)
	for _, c := range []struct {
		at   time.Duration
		used int64
	}{{0, 9}, {4 * s, 9}, {10*s - 1, 9}, {10 * s, 7}, {14*s - 1, 7}, {14 * s, 0}, {-s, 9}} {
		if used, err := rw.Used(st, at(c.at)); used != c.used || err != nil {
			t.Errorf("Used at %v: %d, %v; want %d", c.at, used, err, c.used)
		}
	}
	if got := enc(st); got != before {
		t.Errorf("Used changed the state:\n%s\n%s", before, got)
	}
	// Under another Window, as Apply would count.
	longer := RollingWindow{Limit: 5, Window: 20 * s, Bucket: 2 * s}
	if used, err := longer.Used(st, at(15*s)); used != 9 || err != nil {
		t.Errorf("Used under a longer window: %d, %v", used, err)
	}
	if used, err := (RollingWindow{Limit: 5, Window: 4 * s, Bucket: s}).Used(st, at(5*s)); used != 7 || err != nil {
		t.Errorf("Used under a shorter window: %d, %v", used, err)
	}
	_, err := (RollingWindow{Limit: 5, Window: 20 * s, Bucket: 3 * s}).Used(st, at(0))
	wantErr(t, "Used under an invalid configuration", err, ErrInvalid)
	for _, other := range []State{nil, newState(SlidingWindow{Limit: 1, Window: s}), newState(TokenBucket{Rate: 1, Burst: 1})} {
		_, err := rw.Used(other, at(0))
		wantErr(t, "Used of another state", err, ErrMismatch)
	}
	if got := enc(st); got != before {
		t.Errorf("Used changed the state:\n%s\n%s", before, got)
	}
}

func TestRollingWindowMerge(t *testing.T) {
	const m = time.Minute
	rw := RollingWindow{Limit: 100000, Window: 5 * time.Hour, Bucket: 5 * m}
	e := func(fields ...string) string { return rwEnc(5*time.Hour, 5*m, fields...) }
	now := at(6 * time.Hour)
	st := newState(rw)
	mustApply(t, rw, st, Call{Now: now, N: 100, Record: true})

	// Legacy windows: one started 3h12m ago, one 4h58m ago (in the bucket
	// of 1h, over at 6h: it adds nothing), one 4h53m ago, one "in the
	// future" (counted as now).
	for _, c := range []struct {
		at   time.Duration
		n    int64
		want string
	}{
		{6*time.Hour - 3*time.Hour - 12*m, 3000, e(ns(2*time.Hour+45*m), "3000", "39", "100")},
		{time.Hour + 2*m, 5000, e(ns(2*time.Hour+45*m), "3000", "39", "100")},
		{time.Hour + 7*m, 7000, e(ns(time.Hour+5*m), "7000", "20", "3000", "39", "100")},
		{7 * time.Hour, 1, e(ns(time.Hour+5*m), "7000", "20", "3000", "39", "101")},
		{3 * time.Hour, 0, e(ns(time.Hour+5*m), "7000", "20", "3000", "39", "101")},
	} {
		if err := rw.Merge(st, now, at(c.at), c.n); err != nil {
			t.Fatalf("Merge(%v, %d): %v", c.at, c.n, err)
		}
		if got := enc(st); got != c.want {
			t.Errorf("Merge(%v, %d):\n got %s\nwant %s", c.at, c.n, got, c.want)
		}
	}
	if used, _ := rw.Used(st, now); used != 10101 {
		t.Errorf("Used after the merges: %d", used)
	}
	// The merged usage counts, and expires with its legacy window.
	for _, c := range []struct {
		at   time.Duration
		n    int64
		want Result
	}{
		{6 * time.Hour, 89899, yes(100000, 0, 5*time.Hour)},
		{6 * time.Hour, 1, no(100000, 0, 5*time.Hour, 5*m)},
		{6*time.Hour + 5*m, 7000, yes(100000, 0, 5*time.Hour)},
		{6*time.Hour + 5*m, 1, no(100000, 0, 5*time.Hour, time.Hour+40*m)},
	} {
		if r := mustApply(t, rw, st, Call{Now: at(c.at), N: c.n}); r != c.want {
			t.Errorf("%d at %v: %+v, want %+v", c.n, c.at, r, c.want)
		}
	}

	before := enc(st)
	wantErr(t, "Merge of a negative n", rw.Merge(st, now, now, -1), ErrInvalid)
	wantErr(t, "Merge into another state", rw.Merge(newState(GCRA{Rate: 1, Burst: 1}), now, now, 1), ErrMismatch)
	wantErr(t, "Merge into nil", rw.Merge(nil, now, now, 1), ErrMismatch)
	if got := enc(st); got != before {
		t.Errorf("a failed Merge changed the state: %s", got)
	}

	// A state written under another configuration is moved first.
	st = mustDecode(t, rw, rwEnc(time.Hour, time.Minute, ns(5*time.Hour+3*m), "5"))
	if err := rw.Merge(st, now, at(5*time.Hour+41*m), 6); err != nil {
		t.Fatal(err)
	}
	if got, want := enc(st), e(ns(5*time.Hour+5*m), "5", "7", "6"); got != want {
		t.Errorf("Merge under a changed configuration: %s, want %s", got, want)
	}
}

// TestRollingWindowApplyAllocs checks that Apply allocates nothing at all
// once a state's ring has reached its working size, with windows of a few
// buckets up to MaxBuckets, in either form: counted exactly, where
// testing.AllocsPerRun would round a rare allocation down to 0.
func TestRollingWindowApplyAllocs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, rw := range []RollingWindow{
		{Limit: 70, Window: time.Second, Bucket: 100 * time.Millisecond},
		{Limit: 5000, Window: 5 * time.Hour, Bucket: 5 * time.Minute},
		{Limit: 500, Window: 65536 * time.Millisecond, Bucket: time.Millisecond},
		{Limit: hotRate, Window: time.Second, Bucket: 10 * time.Millisecond},
	} {
		// Calls about a window's 1/1000th apart, so that the windows fill
		// up and turn over.
		step := int64(rw.Window) / 1000
		call := func(i int) Call {
			c := workload(i)
			c.Now = t0 + int64(i)*step + int64(i*7919)%step
			return c
		}
		d := rw.Prepare()
		st := d.NewState()
		i := 0
		for ; i < 3000; i++ { // three windows
			mustApply(t, rw, st, call(i))
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 3000 {
			if _, err := d.Decide(st, call(i)); err != nil {
				t.Fatal(err)
			}
			i++
		}
		runtime.ReadMemStats(&after)
		if n := after.Mallocs - before.Mallocs; n != 0 {
			t.Errorf("%#v: %d allocations in 3000 calls", rw, n)
		}
	}
}

// TestRollingWindowRefund gives back usage bucket by bucket: only from
// the bucket of at, never below zero, an emptied bucket leaving the
// encoding, and nothing from a bucket that has expired, was never used or
// is later than the newest.
func TestRollingWindowRefund(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	rw := RollingWindow{Limit: 100, Window: 10 * s, Bucket: s}
	e := func(fields ...string) string { return rwEnc(10*s, s, fields...) }
	endOfTime := time.Duration(math.MaxInt64 - t0) // at(endOfTime) is math.MaxInt64
	st := newState(rw)
	mustApply(t, rw, st, Call{Now: at(0), N: 30, Record: true})
	mustApply(t, rw, st, Call{Now: at(3500 * ms), N: 20})
	require.NoError(t, rw.Merge(st, at(4*s), at(1200*ms), 5))
	require.Equal(t, e(ns(0), "30", "1", "5", "2", "20"), enc(st))
	for i, c := range []struct {
		now, at time.Duration
		n       int64
		removed int64
		used    int64 // at now, after
		enc     string
	}{
		{4 * s, 3999 * ms, 5, 5, 50, e(ns(0), "30", "1", "5", "2", "15")},
		{4 * s, s, 6, 5, 45, e(ns(0), "30", "3", "15")},         // the merge undone, and no more
		{4 * s, 1500 * ms, 1, 0, 45, e(ns(0), "30", "3", "15")}, // the bucket just emptied
		{4 * s, 2 * s, 1, 0, 45, e(ns(0), "30", "3", "15")},     // never used
		{4 * s, 5 * s, 1, 0, 45, e(ns(0), "30", "3", "15")},     // later than the newest
		{4 * s, 0, 0, 0, 45, e(ns(0), "30", "3", "15")},         // nothing asked
		{10*s - 1, 0, 100, 30, 15, e(ns(3*s), "15")},            // all, a ns before it expires
		{13*s - 1, 3 * s, 14, 14, 1, e(ns(3*s), "1")},           // all but one
		{13 * s, 3 * s, 1, 0, 0, e()},                           // expired: dropped, as a call that takes drops it
		{13 * s, 13 * s, math.MaxInt64, 0, 0, e()},              // empty
		{-time.Hour, -time.Hour, math.MaxInt64, 0, 0, e()},      // a clock gone back, empty
		{-time.Hour, 13 * s, math.MaxInt64, 0, 0, e()},          // in the future
		{14 * s, 14 * s, 0, 0, 0, e()},                          // n = 0
		{endOfTime, endOfTime, 1, 0, 0, e()},
	} {
		removed, err := rw.Refund(st, at(c.now), at(c.at), c.n)
		require.NoError(t, err, "refund %d", i)
		require.Equal(t, c.removed, removed, "refund %d", i)
		require.Equal(t, c.enc, enc(st), "refund %d", i)
		used, err := rw.Used(st, at(c.now))
		require.NoError(t, err)
		require.Equal(t, c.used, used, "refund %d", i)
		require.Equal(t, c.enc, enc(clone(t, rw, st)), "refund %d: round trip", i)
	}
}

// TestRollingWindowRefundRestores takes usage with Merge, Record and
// AllowN, then refunds all of it: Used, a Peek's Result and the encoding
// are what they were before it was taken.
func TestRollingWindowRefundRestores(t *testing.T) {
	const m = time.Minute
	h := time.Hour
	rw := RollingWindow{Limit: 1000, Window: 5 * h, Bucket: 5 * m}
	stored := rwEnc(5*h, 5*m, ns(0), "100", "12", "200", "24", "300") // t0, t0+1h, t0+3h
	now := at(3*h + 2*m)
	for _, c := range []struct {
		name string
		take func(st State) error
		at   int64 // the instant of the refund's bucket
		n    int64
	}{
		{"Merge into a bucket held", func(st State) error { return rw.Merge(st, now, at(h+4*m), 50) }, at(h + 4*m), 50},
		{"Merge into a new bucket", func(st State) error { return rw.Merge(st, now, at(2*h), 50) }, at(2 * h), 50},
		{"Merge into the oldest", func(st State) error { return rw.Merge(st, now, at(m), 7) }, at(m), 7},
		{"Record into the newest", func(st State) error {
			_, err := apply(rw, st, Call{Now: now, N: 400, Record: true})
			return err
		}, now, 400},
		{"Record past the limit", func(st State) error {
			_, err := apply(rw, st, Call{Now: now, N: 5000, Record: true})
			return err
		}, now, 5000},
		{"AllowN into a new bucket", func(st State) error {
			_, err := apply(rw, st, Call{Now: at(3*h + 7*m), N: 399})
			return err
		}, at(3*h + 5*m), 399},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := mustDecode(t, rw, stored)
			peekAt := func(now int64) Result { return mustApply(t, rw, st, Call{Now: now}) }
			usedBefore, err := rw.Used(st, now)
			require.NoError(t, err)
			later := at(3*h + 9*m) // the request ends
			peekBefore, peekLater := peekAt(now), peekAt(later)

			require.NoError(t, c.take(st))
			used, err := rw.Used(st, now)
			require.NoError(t, err)
			require.Equal(t, usedBefore+c.n, used)

			removed, err := rw.Refund(st, later, c.at, c.n)
			require.NoError(t, err)
			require.Equal(t, c.n, removed)
			used, err = rw.Used(st, now)
			require.NoError(t, err)
			require.Equal(t, usedBefore, used)
			require.Equal(t, stored, enc(st))
			require.Equal(t, peekBefore, peekAt(now))
			require.Equal(t, peekLater, peekAt(later))
			require.Equal(t, peekLater, mustApply(t, rw, clone(t, rw, st), Call{Now: later}))
		})
	}
}

// TestRollingWindowReserveRefund plays a key store's reservations on
// random states: an AllowN or a Record of a reservation when a request
// starts, and when it ends, a Refund of what it did not use. From then on
// the key counts exactly as if only the real usage had been recorded when
// the request started: the same Used until all has expired, the same
// Result of a Peek, before and after a round trip through the encoding; a
// refund of everything leaves it as if nothing had been reserved.
func TestRollingWindowReserveRefund(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2))
	runs := 300
	if testing.Short() {
		runs = 60
	}
	reservations, all, expired := 0, 0, 0
	for range runs {
		rw := randRollingWindow(r)
		s := rw
		st := newState(s)
		peek := func(st State, now int64) Result { return mustApply(t, s, st, Call{Now: now}) }
		now := t0 + r.Int64N(int64(time.Hour))
		for range 40 {
			// Other usage, forward in time: with a clock gone back,
			// Add records in the newest bucket, not in the bucket of
			// the reservation's instant, where Refund looks.
			now += randStep(r, false)
			c := randCall(r, now)
			c.N = min(c.N, 1000) // no saturated totals
			mustApply(t, s, st, c)
			if r.IntN(3) != 0 {
				continue
			}

			start := now + r.Int64N(int64(rw.Bucket)*2) // the request starts
			end := start + r.Int64N(int64(rw.Window)+1) // and ends, mostly while its bucket counts
			if r.IntN(5) == 0 {
				end += int64(rw.Window) // after its reservation has expired
			}
			now = end
			reserve, record := 1+r.Int64N(rw.Limit), r.IntN(3) == 0
			before := clone(t, s, st)
			if res := mustApply(t, s, st, Call{Now: start, N: reserve, Record: record}); !record && !res.Allowed {
				continue // denied: nothing reserved, and the request does not run
			}
			real := r.Int64N(reserve + 1)
			if r.IntN(3) == 0 {
				real = 0
			}
			onlyReal := clone(t, s, before)
			if real > 0 {
				mustApply(t, s, onlyReal, Call{Now: start, N: real, Record: true})
			}

			removed, err := rw.Refund(st, end, start, reserve-real)
			require.NoError(t, err)
			reservations++
			want := reserve - real
			if rw.config().BucketStart(start) <= end-int64(rw.Window) {
				want = 0 // the reservation's bucket has expired: nothing counts to give back
				expired++
			}
			require.Equal(t, want, removed, "%#v: reserved %d at %d, used %d, refund at %d", rw, reserve, start, real, end)
			if real == 0 {
				all++
				require.Equal(t, peek(before, end), peek(st, end), "%#v: reserved %d at %d, refund of all at %d", rw, reserve, start, end)
			}
			require.Equal(t, peek(onlyReal, end), peek(st, end), "%#v: reserved %d at %d, used %d, refund at %d", rw, reserve, start, real, end)
			require.Equal(t, peek(st, end), peek(clone(t, s, st), end), "round trip")
			for k := range int64(rw.config().Buckets() + 2) {
				when := end + k*int64(rw.Bucket)
				a, err := rw.Used(st, when)
				require.NoError(t, err)
				b, err := rw.Used(onlyReal, when)
				require.NoError(t, err)
				require.Equal(t, b, a, "%#v: reserved %d at %d, used %d, refund at %d: Used at %d", rw, reserve, start, real, end, when)
			}
		}
	}
	// The runs must have covered refunds of everything, and of expired
	// reservations.
	require.Greater(t, all, reservations/10, "%d refunds of everything in %d", all, reservations)
	require.Greater(t, expired, reservations/20, "%d expired of %d", expired, reservations)
	require.Less(t, expired, reservations/2, "%d expired of %d", expired, reservations)
}

// TestRollingWindowRefundErrors checks the errors of Refund, which change
// nothing, and that it moves a state written under another Window or
// Bucket to rw's first, as Merge does.
func TestRollingWindowRefundErrors(t *testing.T) {
	const m = time.Minute
	h := time.Hour
	rw := RollingWindow{Limit: 100000, Window: 5 * h, Bucket: 5 * m}
	now := at(6 * h)
	st := newState(rw)
	mustApply(t, rw, st, Call{Now: now, N: 100, Record: true})
	before := enc(st)

	for _, c := range []struct {
		name   string
		rw     RollingWindow
		st     State
		n      int64
		target error
	}{
		{"a negative n", rw, st, -1, ErrInvalid},
		{"MinInt64", rw, st, math.MinInt64, ErrInvalid},
		{"nil", rw, nil, 1, ErrMismatch},
		{"a GCRA state", rw, newState(GCRA{Rate: 1, Burst: 1}), 1, ErrMismatch},
		{"a sliding window state", rw, newState(SlidingWindow{Limit: 1, Window: h}), 1, ErrMismatch},
		{"a composite state with a rolling window", rw, newState(Composite{Primary: TokenBucket{Rate: 1, Burst: 1}, Secondary: rw}), 1, ErrMismatch},
		{"an invalid configuration, another Bucket", RollingWindow{Limit: 5, Window: 5 * h, Bucket: 7 * m}, st, 1, ErrInvalid},
		{"an invalid Limit, another Window", RollingWindow{Limit: 0, Window: h, Bucket: 5 * m}, st, 1, ErrInvalid},
	} {
		removed, err := c.rw.Refund(c.st, now, now, c.n)
		require.ErrorIs(t, err, c.target, c.name)
		require.Zero(t, removed, c.name)
		require.Equal(t, before, enc(st), "%s: a failed Refund changed the state", c.name)
	}
	removed, err := rw.Refund(st, now, now, 100)
	require.NoError(t, err)
	require.Equal(t, int64(100), removed)

	// A state written under another configuration is moved first; a
	// refund of nothing leaves it as it is.
	stored := rwEnc(h, m, ns(5*h+3*m), "5", "2", "7") // buckets at 5h3m and 5h5m of a 1h window in 1m buckets
	st = mustDecode(t, rw, stored)
	removed, err = rw.Refund(st, now, at(5*h+5*m), 0)
	require.NoError(t, err)
	require.Zero(t, removed)
	require.Equal(t, stored, enc(st))
	removed, err = rw.Refund(st, now, at(5*h+5*m+time.Second), 4) // both moved to rw's bucket at 5h5m
	require.NoError(t, err)
	require.Equal(t, int64(4), removed)
	require.Equal(t, rwEnc(5*h, 5*m, ns(5*h+5*m), "8"), enc(st))
	removed, err = rw.Refund(st, now, at(5*h+3*m), 4) // the 1m bucket at 5h3m is gone: not one of rw's
	require.NoError(t, err)
	require.Zero(t, removed)
}

// TestRollingWindowFirstTouchAllocs checks that a new state and its first
// call, which uses one bucket, allocate one 64-byte object: the State with
// its bucket inside it (the most common state of a large population of
// keys, an API key's end users).
func TestRollingWindowFirstTouchAllocs(t *testing.T) {
	d := RollingWindow{Limit: 20000, Window: 24 * time.Hour, Bucket: 24 * time.Minute}.Prepare()
	var st State
	allocs := testing.AllocsPerRun(100, func() {
		st = d.NewState()
		if _, err := d.Decide(st, Call{Now: t0, N: 1}); err != nil {
			t.Fatal(err)
		}
	})
	require.Equal(t, 1.0, allocs)
	require.Equal(t, "72|86400000000000|1440000000000|"+strconv.FormatInt(t0-t0%int64(24*time.Minute), 10)+"|1", string(st.AppendEncode(nil)))
}
