package strategies

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

// t0 is the base instant of the test vectors: 2026-01-18T08:00:00Z, aligned
// to the hour, so to every window up to an hour.
const t0 = int64(1768723200) * int64(time.Second)

// at returns the instant d after t0.
func at(d time.Duration) int64 { return t0 + int64(d) }

// ns formats an instant after t0 as it appears in an encoding.
func ns(d time.Duration) string { return strconv.FormatInt(at(d), 10) }

// op is the kind of a call in a test step.
type op int

const (
	allow  op = iota // AllowN(n)
	peek             // AllowN(0), as Peek does
	record           // Record(n)
	dry              // AllowN(n) with DryRun
)

func (o op) String() string { return [...]string{"allow", "peek", "record", "dry"}[o] }

func (o op) call(now, n int64) Call {
	switch o {
	case peek:
		return Call{Now: now}
	case record:
		return Call{Now: now, N: n, Record: true}
	case dry:
		return Call{Now: now, N: n, DryRun: true}
	}
	return Call{Now: now, N: n}
}

// step is one call of a vector and what it must answer.
type step struct {
	at   time.Duration // after t0
	op   op
	n    int64
	want Result
	enc  string // the encoding after the call; "" to skip the check
}

// yes and no build expected results.
func yes(limit, remaining int64, reset time.Duration) Result {
	return Result{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func no(limit, remaining int64, reset, retry time.Duration) Result {
	return Result{Limit: limit, Remaining: remaining, ResetAfter: reset, RetryAfter: retry}
}

// apply decides c on st with s's Decider, as an engine does.
func apply(s Strategy, st State, c Call) (Result, error) { return s.Prepare().Decide(st, c) }

// newState returns a fresh state of s.
func newState(s Strategy) State { return s.Prepare().NewState() }

// decode decodes b with s's Decider.
func decode(s Strategy, b []byte) (State, error) { return s.Prepare().Decode(b) }

// vector is a named sequence of steps on one key.
type vector struct {
	name  string
	s     Strategy
	start string // an encoding to start from; "" for a fresh state
	steps []step
}

// run plays v, checking every result and encoding, and that a denied
// call, a peek or a dry run leaves the encoding as it was.
func (v vector) run(t *testing.T) {
	t.Helper()
	if err := v.s.Validate(); err != nil {
		t.Fatalf("%s: Validate: %v", v.name, err)
	}
	st := newState(v.s)
	if v.start != "" {
		st = mustDecode(t, v.s, v.start)
	}
	for i, s := range v.steps {
		before := enc(st)
		c := s.op.call(at(s.at), s.n)
		got, err := apply(v.s, st, c)
		if err != nil {
			t.Fatalf("%s: step %d (%v %d at %v): %v", v.name, i, s.op, s.n, s.at, err)
		}
		if got != s.want {
			t.Errorf("%s: step %d (%v %d at %v):\n got %+v\nwant %+v", v.name, i, s.op, s.n, s.at, got, s.want)
		}
		after := enc(st)
		if !c.Taken(got.Allowed) && after != before {
			t.Errorf("%s: step %d (%v %d at %v) took nothing but changed the state:\n%s\n%s", v.name, i, s.op, s.n, s.at, before, after)
		}
		if s.enc != "" && after != s.enc {
			t.Errorf("%s: step %d (%v %d at %v): encoding\n got %s\nwant %s", v.name, i, s.op, s.n, s.at, after, s.enc)
		}
	}
}

func enc(st State) string { return string(st.AppendEncode(nil)) }

func mustDecode(t testing.TB, s Strategy, b string) State {
	t.Helper()
	st, err := decode(s, []byte(b))
	if err != nil {
		t.Fatalf("Decode(%q): %v", b, err)
	}
	return st
}

// clone copies a state through its encoding, which also checks that the
// encoding round-trips byte for byte.
func clone(t testing.TB, s Strategy, st State) State {
	t.Helper()
	b := enc(st)
	c := mustDecode(t, s, b)
	if got := enc(c); got != b {
		t.Fatalf("encoding does not round-trip:\n%s\n%s", b, got)
	}
	return c
}

// mustApply applies c, failing the test on an error.
func mustApply(t testing.TB, s Strategy, st State, c Call) Result {
	t.Helper()
	r, err := apply(s, st, c)
	if err != nil {
		t.Fatalf("Apply(%+v): %v", c, err)
	}
	return r
}

// wantErr checks that err matches target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want one matching %v", what, err, target)
	}
}
