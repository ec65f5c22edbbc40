package strategies

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clampCases are the strategies TestClamp runs, each with the most one
// call may take.
var clampCases = []struct {
	name  string
	s     Strategy
	limit int64
}{
	{"gcra", GCRA{Rate: 10, Burst: 5}, 5},
	{"token-bucket", TokenBucket{Rate: 10, Burst: 5}, 5},
	{"leaky-bucket", LeakyBucket{Rate: 10, Capacity: 5}, 5},
	{"fixed-window", FixedWindow{Quotas: []Quota{{Name: "s", Limit: 5, Window: time.Second}, {Name: "m", Limit: 50, Window: time.Minute}}}, 5},
	{"fixed-window-3", FixedWindow{Quotas: []Quota{{Name: "a", Limit: 5, Window: time.Second}, {Name: "b", Limit: 6, Window: time.Second}, {Name: "c", Limit: 7, Window: time.Minute}}}, 5},
	{"sliding-window", SlidingWindow{Limit: 5, Window: time.Second}, 5},
	{"rolling-window", RollingWindow{Limit: 5, Window: time.Second, Bucket: 100 * time.Millisecond}, 5},
	{"sliding-log", SlidingLog{Limit: 5, Window: time.Second}, 5},
	{"calendar-day", Calendar{Limit: 5, Period: Day, Location: paris}, 5},
	{"calendar-month", Calendar{Limit: 5, Period: Month, Location: losAngeles}, 5},
	{"composite", Composite{Primary: GCRA{Rate: 10, Burst: 5}, Secondary: RollingWindow{Limit: 5, Window: time.Minute, Bucket: time.Second}}, 5},
}

// TestClamp: a state used up 100 years ahead of now is clamped, and then
// allows a call within its strategy's Horizon of now; a state written at
// or before now is left exactly as it is.
func TestClamp(t *testing.T) {
	const jump = 100 * 365 * 24 * time.Hour
	for _, c := range clampCases {
		s := c.s
		t.Run(c.name, func(t *testing.T) {
			h := s.Prepare().Horizon()
			require.Equal(t, c.s.Prepare().Horizon(), h)
			require.Positive(t, h)
			require.Less(t, h, jump/1000, "far shorter than the jump")

			// Within bounds: untouched, whatever was taken.
			for _, d := range []time.Duration{0, -h / 2, -jump} {
				st := newState(s)
				mustApply(t, s, st, Call{Now: at(d), N: c.limit})
				before := enc(st)
				require.False(t, s.Prepare().Clamp(st, at(0)), "written %v from now", d)
				require.Equal(t, before, enc(st))
			}

			// Ahead: clamped, usable within the horizon.
			st := newState(s)
			mustApply(t, s, st, Call{Now: at(jump), N: c.limit})
			require.False(t, mustApply(t, s, st, Call{Now: at(h), N: 1}).Allowed, "locked out for 100 years")
			require.True(t, s.Prepare().Clamp(st, at(0)))
			st2 := mustDecode(t, s, enc(st))
			require.False(t, s.Prepare().Clamp(st2, at(0)), "clamped once")
			r := mustApply(t, s, st, Call{Now: at(0), DryRun: true})
			require.LessOrEqual(t, r.ResetAfter, h)
			require.True(t, mustApply(t, s, st, Call{Now: at(h), N: 1}).Allowed)
		})
	}
}

// TestClampKeepsUsage: only instants move; what buckets and windows count
// stays (a GCRA, which cannot tell a Record's excess from a clock's, caps
// it at one burst).
func TestClampKeepsUsage(t *testing.T) {
	const ahead = time.Hour
	rw := RollingWindow{Limit: 100, Window: time.Minute, Bucket: time.Second}
	st := newState(rw)
	mustApply(t, rw, st, Call{Now: at(ahead - 30*time.Second), N: 10})
	mustApply(t, rw, st, Call{Now: at(ahead), N: 20})
	mustApply(t, rw, st, Call{Now: at(ahead + time.Second), N: 30})
	require.True(t, rw.Prepare().Clamp(st, at(0)))
	used, err := rw.Used(st, at(0))
	require.NoError(t, err)
	require.EqualValues(t, 60, used, "nothing lost")
	used, err = rw.Used(st, at(time.Minute))
	require.NoError(t, err)
	require.Zero(t, used, "all of it expired one window after now")

	tb := TokenBucket{Rate: 1, Burst: 10}
	st = newState(tb)
	mustApply(t, tb, st, Call{Now: at(ahead), N: 15, Record: true}) // 5 in debt
	require.True(t, tb.Prepare().Clamp(st, at(0)))
	r := mustApply(t, tb, st, Call{Now: at(0), DryRun: true})
	require.Equal(t, 15*time.Second, r.ResetAfter, "the debt is kept")

	g := GCRA{Rate: 1, Burst: 10}
	st = newState(g)
	mustApply(t, g, st, Call{Now: at(ahead), N: 15, Record: true})
	require.True(t, g.Prepare().Clamp(st, at(0)))
	r = mustApply(t, g, st, Call{Now: at(0), DryRun: true})
	require.Equal(t, 10*time.Second, r.ResetAfter, "capped at one burst")
}
