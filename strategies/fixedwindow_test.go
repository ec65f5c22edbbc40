package strategies

import (
	"math"
	"testing"
	"time"
	"unsafe"
)

// TestFixedWindowStateSize checks that the state of one or two quotas,
// windows included, is one cache line, as its Decider allocates it (see
// lineOfFixedWindow): a decision on a key not in the CPU caches
// then waits for one line from memory.
func TestFixedWindowStateSize(t *testing.T) {
	if size := unsafe.Sizeof(lineOfFixedWindow{}); size != 64 {
		t.Errorf("a lineOfFixedWindow is %d bytes, want 64", size)
	}
	d := FixedWindow{Quotas: []Quota{{"second", 70, time.Second}, {"minute", 4000, time.Minute}}}.Prepare()
	if allocs := testing.AllocsPerRun(20, func() { d.NewState() }); allocs != 1 {
		t.Errorf("a FixedWindow's NewState allocates %v times, want 1", allocs)
	}
}

func TestFixedWindowVectors(t *testing.T) {
	fw := FixedWindow{Quotas: []Quota{{"second", 2, time.Second}, {"minute", 3, time.Minute}}}
	const ms = time.Millisecond
	one := FixedWindow{Quotas: []Quota{{"q", 10, time.Minute}}}
	vectors := []vector{{
		name: "two quotas: the binding one speaks",
		s:    fw,
		steps: []step{
			{at: 0, op: peek, want: yes(2, 2, 0), enc: "23|2|second|0|0|minute|0|0"}, // a peek starts no window
			{at: 0, op: allow, n: 1, want: yes(2, 1, time.Minute), enc: "23|2|second|1|" + ns(0) + "|minute|1|" + ns(0)},
			{at: 500 * ms, op: allow, n: 1, want: yes(2, 0, 59500*ms), enc: "23|2|second|2|" + ns(0) + "|minute|2|" + ns(0)},
			{at: 600 * ms, op: allow, n: 1, want: no(2, 0, 59400*ms, 400*ms)},
			{at: 600 * ms, op: dry, n: 1, want: no(2, 0, 59400*ms, 400*ms)},
			{at: time.Second, op: allow, n: 1, want: yes(3, 0, 59*time.Second), enc: "23|2|second|1|" + ns(time.Second) + "|minute|3|" + ns(0)},
			{at: 2 * time.Second, op: allow, n: 1, want: no(3, 0, 58*time.Second, 58*time.Second)},
			{at: 2 * time.Second, op: peek, want: yes(3, 0, 58*time.Second)},
			{at: 2 * time.Second, op: allow, n: 3, want: no(3, 0, 58*time.Second, -1)}, // 3 > second's limit
			{at: time.Minute, op: peek, want: yes(2, 2, 0)},
			{at: time.Minute, op: dry, n: 2, want: yes(2, 0, time.Minute)},
			{at: time.Minute, op: allow, n: 2, want: yes(2, 0, time.Minute), enc: "23|2|second|2|" + ns(time.Minute) + "|minute|2|" + ns(time.Minute)},
		},
	}, {
		name: "record past the limit, then denied until the window ends",
		s:    one,
		steps: []step{
			{at: 0, op: record, n: 15, want: no(10, 0, time.Minute, time.Minute), enc: "23|1|q|15|" + ns(0)},
			{at: 59 * time.Second, op: peek, want: no(10, 0, time.Second, time.Second)},
			{at: 59 * time.Second, op: allow, n: 1, want: no(10, 0, time.Second, time.Second)},
			{at: 59 * time.Second, op: record, n: 1, want: no(10, 0, time.Second, time.Second), enc: "23|1|q|16|" + ns(0)},
			{at: time.Minute, op: peek, want: yes(10, 10, 0)},
			{at: time.Minute, op: allow, n: 10, want: yes(10, 0, time.Minute)},
		},
	}, {
		name: "clock backwards: still inside the window",
		s:    one,
		steps: []step{
			{at: 10 * time.Second, op: allow, n: 4, want: yes(10, 6, time.Minute), enc: "23|1|q|4|" + ns(10*time.Second)},
			{at: 0, op: allow, n: 1, want: yes(10, 5, 70*time.Second), enc: "23|1|q|5|" + ns(10*time.Second)},
			{at: 70 * time.Second, op: peek, want: yes(10, 10, 0)},
		},
	}, {
		name: "huge counts saturate",
		s:    one,
		steps: []step{
			{at: 0, op: record, n: math.MaxInt64, want: no(10, 0, time.Minute, time.Minute)},
			{at: 0, op: record, n: math.MaxInt64, want: no(10, 0, time.Minute, time.Minute), enc: "23|1|q|9223372036854775807|" + ns(0)},
			{at: 0, op: allow, n: math.MaxInt64, want: no(10, 0, time.Minute, -1)},
		},
	}}
	for _, v := range vectors {
		v.run(t)
	}
}

func TestFixedWindowQuotaChange(t *testing.T) {
	stored := "23|2|a|3|" + ns(0) + "|b|5|" + ns(0)
	// b kept (now with limit 6), a dropped, c added fresh.
	changed := FixedWindow{Quotas: []Quota{{"c", 4, time.Hour}, {"b", 6, time.Minute}}}
	vector{name: "quota added and removed", s: changed, start: stored, steps: []step{
		{at: time.Second, op: peek, want: yes(6, 1, 59*time.Second), enc: stored}, // a peek rewrites nothing
		{at: time.Second, op: allow, n: 2, want: no(6, 1, 59*time.Second, 59*time.Second), enc: stored},
		{at: time.Second, op: allow, n: 1, want: yes(6, 0, time.Hour), enc: "23|2|c|1|" + ns(time.Second) + "|b|6|" + ns(0)},
	}}.run(t)

	// Legacy single-quota states map to the first configured quota.
	two := FixedWindow{Quotas: []Quota{{"min", 5, time.Minute}, {"day", 100, 24 * time.Hour}}}
	for _, c := range []struct{ in, want string }{
		{"v1|3|" + ns(0) + "|60000000000", "23|1|min|3|" + ns(0)},
		{"v2|3|" + ns(0) + "|", "23|1|min|3|" + ns(0)},
	} {
		if got := enc(mustDecode(t, two, c.in)); got != c.want {
			t.Errorf("Decode(%q) encodes as %q, want %q", c.in, got, c.want)
		}
		vector{name: "legacy " + c.in, s: two, start: c.in, steps: []step{
			{at: time.Second, op: allow, n: 1, want: yes(5, 1, 24*time.Hour), enc: "23|2|min|4|" + ns(0) + "|day|1|" + ns(time.Second)},
		}}.run(t)
	}
}
