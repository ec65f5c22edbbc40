package rollingwindow

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSubAt covers SubAt one call at a time: what it removes, from which
// bucket, and what Used, ResetAfter and All say afterwards.
func TestSubAt(t *testing.T) {
	h, m := time.Hour, time.Minute
	tiny := Config{Window: 10, Bucket: 2}
	three := []ev{{t0, 10}, {at(h + 3*m), 20}, {at(2 * h), 30}} // buckets t0, t0+1h, t0+2h
	for _, tc := range []struct {
		name    string
		c       Config
		evs     []ev
		now     int64
		at, n   int64
		removed int64
		want    []bk
		reset   time.Duration // ResetAfter at now
	}{
		{"part of the newest", legacy, three, at(2 * h), at(2*h + m), 12, 12,
			[]bk{{t0, 10}, {at(h), 20}, {at(2 * h), 18}}, 5 * h},
		{"part of a middle bucket", legacy, three, at(2 * h), at(h + 4*m + 59*time.Second), 5, 5,
			[]bk{{t0, 10}, {at(h), 15}, {at(2 * h), 30}}, 5 * h},
		{"all of a middle bucket: dropped", legacy, three, at(2 * h), at(h), 20, 20,
			[]bk{{t0, 10}, {at(2 * h), 30}}, 5 * h},
		{"more than a middle bucket holds", legacy, three, at(2 * h), at(h), 1000, 20,
			[]bk{{t0, 10}, {at(2 * h), 30}}, 5 * h},
		{"all of the oldest", legacy, three, at(2 * h), at(4 * m), 10, 10,
			[]bk{{at(h), 20}, {at(2 * h), 30}}, 5 * h},
		{"all of the newest: the next newest decides ResetAfter", legacy, three, at(2 * h), at(2 * h), math.MaxInt64, 30,
			[]bk{{t0, 10}, {at(h), 20}}, 4 * h},
		{"the only bucket: a fresh state", legacy, []ev{{t0, 7}}, at(m), at(m), 7, 7, nil, 0},
		{"expired", legacy, three, at(5 * h), t0, 5, 0,
			[]bk{{at(h), 20}, {at(2 * h), 30}}, 2 * h},
		{"a ns before it expires", legacy, three, at(5*h - 1), t0, 5, 5,
			[]bk{{t0, 5}, {at(h), 20}, {at(2 * h), 30}}, 2*h + 1},
		{"never used, between two buckets", legacy, three, at(2 * h), at(30 * m), 5, 0,
			[]bk{{t0, 10}, {at(h), 20}, {at(2 * h), 30}}, 5 * h},
		{"never used, before the oldest", legacy, three, at(2 * h), at(-m), 5, 0,
			[]bk{{t0, 10}, {at(h), 20}, {at(2 * h), 30}}, 5 * h},
		{"later than the newest", legacy, three, at(2 * h), at(2*h + 5*m), 5, 0,
			[]bk{{t0, 10}, {at(h), 20}, {at(2 * h), 30}}, 5 * h},
		{"the end of time", legacy, three, at(2 * h), math.MaxInt64, 5, 0,
			[]bk{{t0, 10}, {at(h), 20}, {at(2 * h), 30}}, 5 * h},
		{"n = 0", legacy, three, at(2 * h), at(h), 0, 0,
			[]bk{{t0, 10}, {at(h), 20}, {at(2 * h), 30}}, 5 * h},
		{"n < 0", legacy, three, at(2 * h), at(h), -20, 0,
			[]bk{{t0, 10}, {at(h), 20}, {at(2 * h), 30}}, 5 * h},
		{"n = MinInt64", legacy, three, at(2 * h), at(h), math.MinInt64, 0,
			[]bk{{t0, 10}, {at(h), 20}, {at(2 * h), 30}}, 5 * h},
		{"empty", legacy, nil, t0, t0, 5, 0, nil, 0},
		{"a clock gone back: the bucket still counts", legacy, three, at(-h), t0, 3, 3,
			[]bk{{t0, 7}, {at(h), 20}, {at(2 * h), 30}}, 8 * h},
		{"a clock gone back, to before every bucket", legacy, three, at(-3 * h), at(-3 * h), 3, 0,
			[]bk{{t0, 10}, {at(h), 20}, {at(2 * h), 30}}, 10 * h},
		{"negative instants", tiny, []ev{{-3, 4}, {-1, 2}}, -1, -4, 1, 1,
			[]bk{{-4, 3}, {-2, 2}}, 9},
		{"the last bucket of the int64 range", tiny, []ev{{math.MaxInt64, 5}}, math.MaxInt64, math.MaxInt64 - 1, 2, 2,
			[]bk{{math.MaxInt64 - 1, 3}}, 9},
		{"the first bucket of the int64 range", tiny, []ev{{math.MinInt64, 5}}, math.MinInt64 + 1, math.MinInt64 + 1, 9, 5, nil, 0},
		{"a saturated total", legacy, []ev{{t0, math.MaxInt64 - 1}, {at(m * 5), 1}}, at(m * 5), t0, math.MaxInt64, math.MaxInt64 - 1,
			[]bk{{at(5 * m), 1}}, 5 * h},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(t, tc.c, tc.evs...)
			before := clone(t, s)
			usedBefore := before.Used(tc.now) // expired as SubAt will

			require.Equal(t, tc.removed, s.SubAt(tc.now, tc.at, tc.n), "removed")
			checkState(t, s)
			require.Equal(t, tc.want, bucketsOf(s), "buckets")
			require.Equal(t, usedBefore-tc.removed, s.Used(tc.now), "Used drops by what was removed")
			require.Equal(t, tc.reset, s.ResetAfter(tc.now), "ResetAfter")
			require.Equal(t, len(tc.want), s.Len())
			if s.Len() == 0 {
				require.Zero(t, s.base, "an empty state keeps no base")
			}
			// The codec path reads back what SubAt left.
			c := clone(t, s)
			require.Equal(t, bucketsOf(s), bucketsOf(c), "round trip")
			for _, limit := range []int64{0, 7, 29, 45, 60} {
				require.Equal(t, s.RetryAfter(tc.now, limit, 3), c.RetryAfter(tc.now, limit, 3), "RetryAfter, limit %d", limit)
			}
		})
	}

	var zero State
	require.Zero(t, zero.SubAt(t0, t0, 5), "the zero State")
}

// TestSubAtMiddle takes from every bucket of a full legacy window in
// turn, a little, all but one, all and more than all: the other buckets
// keep their usage, Used drops by exactly what was removed, and RetryAfter
// agrees with the reference.
func TestSubAtMiddle(t *testing.T) {
	m := time.Minute
	full := newState(t, legacy)
	for i := range int64(60) {
		full.Add(at(time.Duration(i)*5*m+time.Duration(i)*time.Second), 3+i%7)
	}
	now := at(5*time.Hour - m)
	orig := bucketsOf(full)
	require.Len(t, orig, 60)
	for i, b := range orig {
		for _, n := range []int64{1, b.n - 1, b.n, b.n + 1, math.MaxInt64} {
			s := clone(t, full)
			removed := s.SubAt(now, b.start+int64(i)*int64(time.Second), n)
			require.Equal(t, min(n, b.n), removed, "bucket %d, n %d", i, n)
			checkState(t, s)

			want := slices.Clone(orig)
			if want[i].n -= removed; want[i].n == 0 {
				want = slices.Delete(want, i, i+1)
			}
			require.Equal(t, want, bucketsOf(s), "bucket %d, n %d", i, n)
			require.Equal(t, full.Used(now)-removed, s.Used(now), "bucket %d, n %d", i, n)

			ref := &reference{c: legacy, events: want}
			for _, limit := range []int64{0, 100, 250, 300} {
				require.Equal(t, ref.retryAfter(now, limit, 5), s.RetryAfter(now, limit, 5), "bucket %d, n %d, limit %d", i, n, limit)
			}
			require.Equal(t, ref.resetAfter(now), s.ResetAfter(now), "bucket %d, n %d", i, n)
		}
	}
}

// TestSubAtThenAdd removes usage and records more in the same bucket:
// a bucket that SubAt emptied and dropped is made again, in time order.
func TestSubAtThenAdd(t *testing.T) {
	h, m := time.Hour, time.Minute
	type op struct {
		sub   bool // SubAt, else Add (t == 0) or AddAt
		now   int64
		t, n  int64
		wantN int64 // what SubAt removes
	}
	for _, tc := range []struct {
		name  string
		evs   []ev
		ops   []op
		want  []bk
		reset time.Duration // ResetAfter at the last op's now
	}{
		{"part, then Add", []ev{{t0, 10}},
			[]op{{true, at(m), t0, 4, 4}, {false, at(2 * m), 0, 3, 0}},
			[]bk{{t0, 9}}, 5*h - 2*m},
		{"all, then Add", []ev{{t0, 10}},
			[]op{{true, at(m), t0, 10, 10}, {false, at(2 * m), 0, 3, 0}},
			[]bk{{t0, 3}}, 5*h - 2*m},
		{"all, then more than all", []ev{{t0, 10}},
			[]op{{true, at(m), t0, 10, 10}, {true, at(m), t0, 10, 0}, {false, at(m), 0, 1, 0}, {true, at(m), t0, 10, 1}},
			nil, 0},
		{"all of a middle bucket, then AddAt into it", []ev{{t0, 10}, {at(h), 20}, {at(2 * h), 30}},
			[]op{{true, at(2 * h), at(h), 20, 20}, {false, at(2 * h), at(h + m), 5, 0}},
			[]bk{{t0, 10}, {at(h), 5}, {at(2 * h), 30}}, 5 * h},
		{"all of the newest, then Add in it", []ev{{t0, 1}, {at(h), 2}},
			[]op{{true, at(h), at(h), 2, 2}, {false, at(h + m), 0, 4, 0}},
			[]bk{{t0, 1}, {at(h), 4}}, 5*h - m},
		{"all of the newest, then a clock gone back", []ev{{t0, 1}, {at(h), 2}},
			[]op{{true, at(h), at(h), 2, 2}, {false, at(30 * m), 0, 4, 0}},
			[]bk{{t0, 1}, {at(30 * m), 4}}, 5 * h},
		{"a reservation charged at its real count", []ev{{t0, 10}},
			[]op{{false, at(h), 0, 100, 0}, {false, at(h + m), 0, 7, 0}, {true, at(h + 2*m), at(h), 100 - 30, 70}},
			[]bk{{t0, 10}, {at(h), 37}}, 5*h - 2*m},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(t, legacy, tc.evs...)
			var now int64
			for i, o := range tc.ops {
				switch {
				case o.sub:
					require.Equal(t, o.wantN, s.SubAt(o.now, o.t, o.n), "op %d", i)
				case o.t == 0:
					s.Add(o.now, o.n)
				default:
					s.AddAt(o.now, o.t, o.n)
				}
				checkState(t, s)
				now = o.now
			}
			require.Equal(t, tc.want, bucketsOf(s))
			require.Equal(t, tc.reset, s.ResetAfter(now))
		})
	}
}

// TestSubAtRing removes buckets from a ring that wraps around its end,
// then fills it until it grows.
func TestSubAtRing(t *testing.T) {
	// 4 slots, full; Expire drops 0 and 1, so the ring starts at slot 2;
	// 17 goes to slot 0; 18 to slot 1, and drops 2.
	s := newState(t, Config{Window: 16, Bucket: 1}, ev{0, 1}, ev{1, 1}, ev{2, 1}, ev{3, 1})
	s.Expire(17)
	s.Add(17, 2)
	s.Add(18, 3)
	require.Equal(t, []bk{{3, 1}, {17, 2}, {18, 3}}, bucketsOf(s))
	require.Equal(t, 3, int(s.head))

	require.Equal(t, int64(1), s.SubAt(18, 3, 5)) // the oldest goes: 17 and 18 shift across the end
	checkState(t, s)
	require.Equal(t, []bk{{17, 2}, {18, 3}}, bucketsOf(s))
	require.Equal(t, int64(2), s.SubAt(18, 17, 2))
	require.Equal(t, []bk{{18, 3}}, bucketsOf(s))
	for i := range int64(6) {
		s.Add(19+i, 1+i)
	}
	checkState(t, s)
	require.Equal(t, 8, len(s.ring), "grown once")
	require.Equal(t, int64(4), s.SubAt(24, 22, 5))
	require.Equal(t, []bk{{18, 3}, {19, 1}, {20, 2}, {21, 3}, {23, 5}, {24, 6}}, bucketsOf(s))
	require.Equal(t, int64(20), s.Used(24))
	checkState(t, s)
}

// TestSubAtNoAllocs checks that SubAt allocates nothing, whether it
// finds its bucket or not.
func TestSubAtNoAllocs(t *testing.T) {
	s := newState(t, legacy)
	now := t0
	step := func() {
		now += int64(37 * time.Second)
		s.Add(now, 3)
		s.SubAt(now, now-int64(time.Hour), 2)
		s.SubAt(now, now, 1)
	}
	for range 2000 { // past its working size
		step()
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Errorf("%v allocations per call", a)
	}
}

// subModel is the model SubAt is checked against: a map from bucket start
// to units, with the rules of Add, AddAt and SubAt as their docs state
// them, and the exact arithmetic of reference.
type subModel struct {
	ref reference // for its bucketOf and expiredAt: events unused
	m   map[int64]int64
}

func (md *subModel) expire(now int64) {
	maps.DeleteFunc(md.m, func(start, _ int64) bool { return md.ref.expiredAt(start, now) })
}

func (md *subModel) used(now int64) int64 {
	md.expire(now)
	var sum int64
	for _, n := range md.m {
		if n > math.MaxInt64-sum {
			panic("subModel: the total overflows")
		}
		sum += n
	}
	return sum
}

func (md *subModel) newest() (int64, bool) {
	if len(md.m) == 0 {
		return 0, false
	}
	return slices.Max(slices.Collect(maps.Keys(md.m))), true
}

// record adds n at start, cut to what keeps the total within int64.
func (md *subModel) record(now, start, n int64) {
	if n = min(n, math.MaxInt64-md.used(now)); n > 0 {
		md.m[start] += n
	}
}

func (md *subModel) add(now, n int64) {
	md.expire(now)
	start := md.ref.bucketOf(now)
	if newest, ok := md.newest(); ok && start < newest {
		start = newest
	}
	md.record(now, start, n)
}

func (md *subModel) addAt(now, t, n int64) {
	md.expire(now)
	start := md.ref.bucketOf(min(t, now))
	if md.ref.expiredAt(start, now) {
		return
	}
	if newest, ok := md.newest(); ok && md.ref.expiredAt(start, newest) {
		start = newest - int64(md.ref.c.Window) + int64(md.ref.c.Bucket)
	}
	md.record(now, start, n)
}

func (md *subModel) subAt(now, at, n int64) int64 {
	md.expire(now)
	start := md.ref.bucketOf(at)
	k := min(max(n, 0), md.m[start])
	if md.m[start] -= k; md.m[start] == 0 {
		delete(md.m, start)
	}
	return k
}

// buckets returns the model's buckets, all non-zero, oldest first.
func (md *subModel) buckets() []bk {
	var out []bk
	for start, n := range md.m {
		out = append(out, bk{start, n})
	}
	slices.SortFunc(out, func(a, b bk) int { return cmp.Compare(a.start, b.start) })
	return out
}

// pickSubAt draws the instant of a SubAt: mostly one inside a bucket s
// holds, else near now, before or after it.
func pickSubAt(c *chooser, s *State, now int64) int64 {
	b := int64(s.Config().Bucket)
	if s.Len() > 0 && c.intn(4) != 0 {
		start := s.at(c.intn(s.Len())).start
		off := int64(c.uint64() % uint64(b))
		if start > math.MaxInt64-off {
			off = 0
		}
		return start + off
	}
	return pickInstant(c, s, now)
}

// pickSubAmount draws the n of a SubAt: often exactly what the bucket of
// at holds, or one off, else what pickAmount draws.
func pickSubAmount(c *chooser, s *State, at int64) int64 {
	if c.intn(3) == 0 {
		start := s.Config().BucketStart(at)
		for st, n := range s.All() {
			if st == start {
				return n + int64(c.intn(3)) - 1
			}
		}
	}
	return pickAmount(c)
}

// TestSubAtAgainstModel plays random Add, AddAt, SubAt and Expire calls,
// with a round trip through All and Rebuild now and then, on a State and
// on subModel: after every call, Used equals the sum of the model's live
// buckets and All yields exactly its non-zero buckets; RetryAfter and
// ResetAfter agree with the reference built from them.
func TestSubAtAgainstModel(t *testing.T) {
	steps, seeds := 3000, uint64(3)
	if testing.Short() {
		steps, seeds = 500, 1
	}
	for ci, cfg := range runConfigs {
		for seed := range seeds {
			t.Run(fmt.Sprintf("%v/%v/%d", cfg.Window, cfg.Bucket, seed), func(t *testing.T) {
				c := &chooser{rng: rand.New(rand.NewPCG(seed, 0x5ab+uint64(ci)))}
				s, err := New(cfg)
				require.NoError(t, err)
				md := &subModel{ref: reference{c: cfg}, m: map[int64]int64{}}
				now := runStarts[c.intn(len(runStarts))]
				var log []string
				subs, hits := 0, 0
				for i := range steps {
					now = pickInstant(c, s, now)
					switch op := c.intn(20); {
					case op < 6:
						n := pickAmount(c)
						log = append(log, fmt.Sprintf("Add(%d, %d)", now, n))
						s.Add(now, n)
						md.add(now, n)
					case op < 9:
						back := int64(c.uint64() % uint64(2*int64(cfg.Window)))
						when := now - back
						if when > now {
							when = math.MinInt64 + back // wrapped: the start of time
						}
						n := pickAmount(c)
						log = append(log, fmt.Sprintf("AddAt(%d, %d, %d)", now, when, n))
						s.AddAt(now, when, n)
						md.addAt(now, when, n)
					case op < 17:
						s.Expire(now) // what SubAt does first: so that the pick sees the live buckets
						at := pickSubAt(c, s, now)
						n := pickSubAmount(c, s, at)
						log = append(log, fmt.Sprintf("SubAt(%d, %d, %d)", now, at, n))
						got, want := s.SubAt(now, at, n), md.subAt(now, at, n)
						require.Equal(t, want, got, "step %d: SubAt(%d, %d, %d)\n%s", i, now, at, n, tail(log))
						subs++
						if got > 0 {
							hits++
						}
					case op < 19:
						log = append(log, fmt.Sprintf("Expire(%d)", now))
						s.Expire(now)
						md.expire(now)
					default:
						log = append(log, "Rebuild(All())")
						s = clone(t, s)
					}
					require.NoError(t, checkInvariants(s), "step %d: %v\n%s", i, bucketsOf(s), tail(log))
					want := md.buckets()
					require.Equal(t, want, bucketsOf(s), "step %d: All\n%s", i, tail(log))
					require.Equal(t, md.used(now), s.Used(now), "step %d: Used(%d)\n%s", i, now, tail(log))
					if i%4 == 0 {
						ref := &reference{c: cfg, events: md.buckets()}
						limit := int64(c.intn(60))
						n := pickAmount(c)
						require.Equal(t, ref.resetAfter(now), s.ResetAfter(now), "step %d: ResetAfter(%d)\n%s", i, now, tail(log))
						require.Equal(t, ref.retryAfter(now, limit, n), s.RetryAfter(now, limit, n),
							"step %d: RetryAfter(%d, %d, %d)\n%s", i, now, limit, n, tail(log))
					}
				}
				// The run must have exercised SubAt, hitting and missing.
				require.Greater(t, hits, subs/10, "%d of %d SubAt calls removed something", hits, subs)
				require.Less(t, hits, subs, "every SubAt call removed something")
			})
		}
	}
}

// tail returns the last 40 calls of a run's log.
func tail(log []string) string {
	return strings.Join(log[max(0, len(log)-40):], "\n")
}
