package rollingwindow

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// reference is the naive model State is checked against: a list of
// (bucket start, n) events, unsorted, summed by the counting rule in
// arbitrary-precision arithmetic. It keeps the rules of the package doc
// as they are written, with none of the ring's tricks.
type reference struct {
	c      Config
	events []bk
}

func big64(x int64) *big.Int { return big.NewInt(x) }

// clampDuration turns an exact duration into what State reports.
func clampDuration(d *big.Int) time.Duration {
	if !d.IsInt64() {
		return math.MaxInt64
	}
	return time.Duration(d.Int64())
}

// bucketOf is floor(t/Bucket)*Bucket, or the first whole bucket of the
// int64 range when that does not fit.
func (r *reference) bucketOf(t int64) int64 {
	b := big64(int64(r.c.Bucket))
	s := new(big.Int).Div(big64(t), b) // Euclidean: the floor, b > 0
	s.Mul(s, b)
	if !s.IsInt64() {
		s.Add(s, b)
	}
	return s.Int64()
}

// expiredAt reports whether a bucket at start no longer counts at now:
// start <= now - Window.
func (r *reference) expiredAt(start, now int64) bool {
	return big64(start).Cmp(new(big.Int).Sub(big64(now), big64(int64(r.c.Window)))) <= 0
}

// end returns start + Window, exactly.
func (r *reference) end(start int64) *big.Int {
	return new(big.Int).Add(big64(start), big64(int64(r.c.Window)))
}

func (r *reference) expire(now int64) {
	r.events = slices.DeleteFunc(r.events, func(e bk) bool { return r.expiredAt(e.start, now) })
}

func (r *reference) total() int64 {
	sum := new(big.Int)
	for _, e := range r.events {
		sum.Add(sum, big64(e.n))
	}
	if !sum.IsInt64() {
		panic("reference: the total overflows")
	}
	return sum.Int64()
}

func (r *reference) newest() (int64, bool) {
	if len(r.events) == 0 {
		return 0, false
	}
	return slices.MaxFunc(r.events, func(a, b bk) int { return cmp.Compare(a.start, b.start) }).start, true
}

// record appends n at start, cut to what keeps the total within int64.
func (r *reference) record(start, n int64) {
	if n = min(n, math.MaxInt64-r.total()); n > 0 {
		r.events = append(r.events, bk{start, n})
	}
}

func (r *reference) add(now, n int64) {
	r.expire(now)
	start := r.bucketOf(now)
	if newest, ok := r.newest(); ok && start < newest {
		start = newest // a clock gone backwards
	}
	r.record(start, n)
}

func (r *reference) addAt(now, t, n int64) {
	r.expire(now)
	start := r.bucketOf(min(t, now))
	if r.expiredAt(start, now) {
		return
	}
	if newest, ok := r.newest(); ok && r.expiredAt(start, newest) {
		start = newest - int64(r.c.Window) + int64(r.c.Bucket)
	}
	r.record(start, n)
}

func (r *reference) used(now int64) int64 {
	r.expire(now)
	return r.total()
}

// retryAfter tries, in order, every instant at which some usage stops
// counting, and returns the first at which the call fits.
func (r *reference) retryAfter(now, limit, n int64) time.Duration {
	r.expire(now)
	n = max(n, 0)
	if n > limit {
		return -1
	}
	fits := func(at *big.Int) bool {
		sum := big64(n)
		for _, e := range r.events {
			if new(big.Int).Sub(at, big64(int64(r.c.Window))).Cmp(big64(e.start)) < 0 {
				sum.Add(sum, big64(e.n))
			}
		}
		return sum.Cmp(big64(limit)) <= 0
	}
	if fits(big64(now)) {
		return 0
	}
	var ends []*big.Int
	for _, e := range r.events {
		ends = append(ends, r.end(e.start))
	}
	slices.SortFunc(ends, (*big.Int).Cmp)
	ends = slices.CompactFunc(ends, func(a, b *big.Int) bool { return a.Cmp(b) == 0 })
	for _, at := range ends {
		if fits(at) {
			return clampDuration(at.Sub(at, big64(now)))
		}
	}
	panic("reference: nothing fits once all has expired")
}

func (r *reference) resetAfter(now int64) time.Duration {
	r.expire(now)
	newest, ok := r.newest()
	if !ok {
		return 0
	}
	return clampDuration(new(big.Int).Sub(r.end(newest), big64(now)))
}

// buckets returns the events summed by bucket, oldest first.
func (r *reference) buckets() []bk {
	sums := map[int64]int64{}
	for _, e := range r.events {
		sums[e.start] += e.n
	}
	var out []bk
	for start, n := range sums {
		out = append(out, bk{start, n})
	}
	slices.SortFunc(out, func(a, b bk) int { return cmp.Compare(a.start, b.start) })
	return out
}

// reconfigure moves every event to the first bucket of c at or after its
// start (the last one of the int64 range if none fits), then up to the
// oldest bucket a window of c holds before the newest.
func (r *reference) reconfigure(c Config) {
	r.c = c
	b := big64(int64(c.Bucket))
	for i, e := range r.events {
		s := new(big.Int).Add(big64(e.start), new(big.Int).Sub(b, big64(1)))
		s.Div(s, b).Mul(s, b)
		if !s.IsInt64() {
			s.Sub(s, b)
		}
		r.events[i].start = s.Int64()
	}
	if newest, ok := r.newest(); ok {
		for i, e := range r.events {
			if r.expiredAt(e.start, newest) {
				r.events[i].start = newest - int64(c.Window) + int64(c.Bucket)
			}
		}
	}
}

// chooser draws the choices of a random run: from a PRNG in the property
// test, from the fuzzer's bytes (zeros once they run out) in the fuzz test.
type chooser struct {
	rng *rand.Rand
	b   []byte
}

func (c *chooser) byte() byte {
	if c.rng != nil {
		return byte(c.rng.Uint32())
	}
	if len(c.b) == 0 {
		return 0
	}
	x := c.b[0]
	c.b = c.b[1:]
	return x
}

// intn returns a choice in [0, n), n <= 256.
func (c *chooser) intn(n int) int { return int(c.byte()) % n }

func (c *chooser) uint64() uint64 {
	var x uint64
	for range 8 {
		x = x<<8 | uint64(c.byte())
	}
	return x
}

func (c *chooser) done() bool { return c.rng == nil && len(c.b) == 0 }

// runConfigs are the configurations of the random runs: windows of a few
// buckets hit every boundary often; the legacy one checks real sizes.
var runConfigs = []Config{
	{Window: 10, Bucket: 1},
	{Window: 12, Bucket: 3},
	{Window: 7, Bucket: 7},
	{Window: 64, Bucket: 4},
	{Window: 30, Bucket: 5},
	{Window: time.Second, Bucket: 100 * time.Millisecond},
	legacy,
}

// runStarts are the first instants of the random runs.
var runStarts = []int64{t0, 0, -1, -t0, 7, math.MinInt64, math.MinInt64 + 5, math.MaxInt64 - 100, math.MaxInt64}

// pickAmount draws an n: mostly small, sometimes 0, negative or huge.
func pickAmount(c *chooser) int64 {
	switch c.intn(16) {
	case 0:
		return 0
	case 1:
		return -1 - int64(c.intn(5))
	case 2:
		return math.MaxInt64
	case 3:
		return math.MaxInt64/2 + int64(c.intn(3))
	}
	return 1 + int64(c.intn(20))
}

// pickInstant draws the next instant from now: small and bucket-sized
// steps, forward and back, the exact end of a live bucket and a ns either
// side of it, and jumps to the ends of the int64 range.
func pickInstant(c *chooser, s *State, now int64) int64 {
	w, b := int64(s.Config().Window), int64(s.Config().Bucket)
	step := func(d int64) int64 { // now + d, saturated
		if d > 0 && now > math.MaxInt64-d || d < 0 && now < math.MinInt64-d {
			return now
		}
		return now + d
	}
	switch c.intn(14) {
	case 0:
		return now
	case 1:
		return step(1)
	case 2:
		return step(-1)
	case 3:
		return step(b)
	case 4:
		return step(w)
	case 5:
		return step(w - 1)
	case 6:
		return step(-w)
	case 7:
		return step(int64(c.uint64() % uint64(2*w)))
	case 8:
		return step(-int64(c.uint64() % uint64(3*w)))
	case 9, 10: // the end of a live bucket, or a ns either side of it
		if s.Len() == 0 {
			return step(b / 2)
		}
		i := c.intn(s.Len())
		end := s.at(i).start
		if end > math.MaxInt64-w {
			return now
		}
		end += w
		return end + int64(c.intn(3)) - 1 // end+1 never passes: end <= MaxInt64 - 1 as b >= 1
	case 11:
		return int64(c.uint64())
	case 12:
		return runStarts[c.intn(len(runStarts))]
	}
	return step(int64(c.intn(int(min(b, 200)))))
}

// run plays a random sequence of calls on a State and on the reference,
// failing at the first difference: in a result, in the buckets, or in the
// invariants. steps < 0 runs until the chooser's bytes run out (at most
// 300 calls).
func run(t testing.TB, c *chooser, steps int) {
	cfg := runConfigs[c.intn(len(runConfigs))]
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref := &reference{c: cfg}
	now := runStarts[c.intn(len(runStarts))]
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nconfig %+v, after (the last 40 calls):\n%s", fmt.Sprintf(format, args...), cfg,
			strings.Join(log[max(0, len(log)-40):], "\n"))
	}
	for i := 0; steps < 0 && !c.done() && i < 300 || i < steps; i++ {
		now = pickInstant(c, s, now)
		limit := int64(c.intn(60))
		if c.intn(8) == 0 {
			limit = math.MaxInt64 - int64(c.intn(3))
		}
		n := pickAmount(c)
		switch op := c.intn(16); {
		case op < 5:
			log = append(log, fmt.Sprintf("Add(%d, %d)", now, n))
			s.Add(now, n)
			ref.add(now, n)
		case op < 7:
			log = append(log, fmt.Sprintf("Used(%d)", now))
			if got, want := s.Used(now), ref.used(now); got != want {
				fail("Used(%d) = %d, want %d", now, got, want)
			}
		case op < 10:
			log = append(log, fmt.Sprintf("RetryAfter(%d, %d, %d)", now, limit, n))
			got, want := s.RetryAfter(now, limit, n), ref.retryAfter(now, limit, n)
			if got != want {
				fail("RetryAfter(%d, %d, %d) = %v, want %v", now, limit, n, got, want)
			}
			checkRetryExact(t, s, now, limit, n, got, fail)
		case op < 11:
			log = append(log, fmt.Sprintf("ResetAfter(%d)", now))
			if got, want := s.ResetAfter(now), ref.resetAfter(now); got != want {
				fail("ResetAfter(%d) = %v, want %v", now, got, want)
			}
		case op < 13:
			back := int64(c.uint64() % uint64(2*int64(cfg.Window)))
			at := now - back
			if at > now {
				at = math.MinInt64 + back // wrapped: the start of time
			}
			log = append(log, fmt.Sprintf("AddAt(%d, %d, %d)", now, at, n))
			s.AddAt(now, at, n)
			ref.addAt(now, at, n)
		case op < 14:
			log = append(log, fmt.Sprintf("Expire(%d)", now))
			s.Expire(now)
			ref.expire(now)
		case op < 15:
			log = append(log, "Rebuild(All())")
			s = clone(t, s)
		default:
			to := runConfigs[c.intn(len(runConfigs))]
			log = append(log, fmt.Sprintf("Reconfigure(%+v)", to))
			if err := s.Reconfigure(to); err != nil {
				fail("Reconfigure(%+v): %v", to, err)
			}
			ref.reconfigure(to)
			cfg = to
		}
		if err := checkInvariants(s); err != nil {
			fail("%v: %v", bucketsOf(s), err)
		}
		if got, want := bucketsOf(s), ref.buckets(); !equalBuckets(got, want) {
			fail("buckets %v, want %v", got, want)
		}
	}
}

// checkRetryExact checks a RetryAfter d > 0 on copies of s: the call fits
// at now + d and not a nanosecond before.
func checkRetryExact(t testing.TB, s *State, now, limit, n int64, d time.Duration, fail func(string, ...any)) {
	if d <= 0 || d == math.MaxInt64 || int64(d) > math.MaxInt64-now {
		return // nothing to wait for, or saturated: the instant does not fit in int64
	}
	n = max(n, 0)
	if used := clone(t, s).Used(now + int64(d) - 1); used <= limit-n {
		fail("RetryAfter(%d, %d, %d) = %v: fits a ns earlier, used %d", now, limit, n, d, used)
	}
	if used := clone(t, s).Used(now + int64(d)); used > limit-n {
		fail("RetryAfter(%d, %d, %d) = %v: does not fit then, used %d", now, limit, n, d, used)
	}
}

// TestAgainstReference plays random calls against the reference.
func TestAgainstReference(t *testing.T) {
	runs := 2000
	if testing.Short() {
		runs = 200
	}
	for seed := range uint64(runs) {
		c := &chooser{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { run(t, c, 200) })
	}
}

// FuzzOperations plays the calls the fuzzer's bytes choose, against the
// reference: nothing may panic, and everything must agree.
func FuzzOperations(f *testing.F) {
	for _, seed := range []string{
		"",
		"\x00\x00\x00",
		"\x06\x00\x03\x00\x00\x05",
		"\x00\x05\x01\x00\x07\x09\x02\x01\x0c\x09\x00\x00",
		"\x01\x02\x0b\xff\xff\xff\xff\xff\xff\xff\xff\x00\x02\x00\x01\x0c\x07\x03\x08\x00",
		"\x03\x06\x0a\x00\x0a\x05\x00\x0a\x01\x05\x0f\x00\x0e\x09\x00\x09\x02\x07\x0c\x03\x04\x05\x06",
		"\x06\x07\x04\x01\x01\x02\x0b\x10\x00\x00\x00\x00\x00\x00\x00\x00\x0f\x02\x03\x08",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		run(t, &chooser{b: b}, -1)
	})
}
