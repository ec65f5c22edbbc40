package strategies

import (
	"errors"
	"math"
	"testing"
	"time"
)

// The fuzzers feed arbitrary bytes to each decoder. Decode must never
// panic; it either fails with ErrCorrupt or ErrMismatch (and no state), or
// returns a state whose encoding decodes to the same encoding again, and
// on which calls at any instant, for any n, keep the results in range and
// the state decodable. The general Decider (shortcuts off, see general)
// must answer every decode and call exactly alike, on a twin state. Plain `go test`
// runs the seeds below.

// nasty are inputs every decoder gets as seeds.
var nasty = []string{
	"", "|", "||", "$", "|$|", "12", "12|", "v1", "v1|", "v2|||", "cmp1|", "cmp1|$", "51|$", "zz|1|2",
	"12|NaN|0", "12|Inf|0", "12|-Inf|0", "12|1e308|0", "12|4.9e-324|0", "12|-0|0", "12|0x1p-2|0",
	"12|1|9223372036854775807", "12|1|-9223372036854775808", "12|1|99999999999999999999",
	"42|-9223372036854775808", "42|9223372036854775807", "42|00000000000000000000001",
	"23|9223372036854775807|a|1|1", "23|1|a|9223372036854775807|9223372036854775807",
	"62|9223372036854775807|9223372036854775807|-9223372036854775808",
	"32|9.223372036854776e+18|9223372036854775807",
	"51|12|1|2$23|1|a|1|2", "51|42|1$42|1", "72|0|0", "\x00", "12|1|2\x00",
}

func fuzzDecode(f *testing.F, s Strategy, seeds ...string) {
	for _, b := range append(seeds, nasty...) {
		f.Add([]byte(b))
	}
	d, ref := s.Prepare(), general(s)
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := d.Decode(b)
		twin, perr := ref.Decode(b)
		if !sameErr(err, perr) || (twin == nil) != (st == nil) {
			t.Fatalf("Decode(%q): %v, general: %v", b, err, perr)
		}
		if err != nil {
			if st != nil {
				t.Fatalf("Decode(%q) returned a state with error %v", b, err)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrMismatch) {
				t.Fatalf("Decode(%q): error %v matches neither ErrCorrupt nor ErrMismatch", b, err)
			}
			return
		}
		clone(t, s, st) // the encoding is stable
		for _, c := range []Call{
			{Now: t0},
			{Now: t0, N: 1},
			{Now: t0 + int64(time.Second), N: 3, Record: true},
			{Now: t0 + int64(time.Second), N: 2, DryRun: true},
			{Now: math.MinInt64, N: math.MaxInt64},
			{Now: math.MaxInt64, N: 1},
			{Now: 0, N: math.MaxInt64, Record: true},
			{Now: math.MaxInt64, N: math.MaxInt64, Record: true},
			{Now: math.MinInt64},
		} {
			r, err := d.Decide(st, c)
			if err != nil {
				t.Fatalf("Decode(%q) then Decide(%+v): %v", b, c, err)
			}
			if pr, perr := ref.Decide(twin, c); pr != r || perr != nil || enc(twin) != enc(st) {
				t.Fatalf("Decode(%q) then Decide(%+v) = %+v, %s; general: %+v, %v, %s", b, c, r, enc(st), pr, perr, enc(twin))
			}
			if r.Remaining < 0 || r.Remaining > r.Limit || r.ResetAfter < 0 || r.RetryAfter < -1 || r.Allowed != (r.RetryAfter == 0) {
				t.Fatalf("Decode(%q) then Decide(%+v) = %+v: out of range", b, c, r)
			}
			clone(t, s, st)
		}
	})
}

func FuzzDecodeTokenBucket(f *testing.F) {
	fuzzDecode(f, TokenBucket{Rate: 10, Burst: 5},
		"12|4.5|"+ns(0), "12|-10|"+ns(0), "12|5|0", "12|1e-300|1",
		"v1|3.5|"+ns(0)+"|10|2", "v2|3|"+ns(0)+"|", "v1|1|2|3|4|", "v2|1|2")
}

func FuzzDecodeGCRA(f *testing.F) {
	fuzzDecode(f, GCRA{Rate: 10, Burst: 5},
		"42|"+ns(0), "42|0", "v1|"+ns(0)+"|100000000|500000000", "v2|"+ns(0)+"|", "v1|1|2", "v2|1")
}

func FuzzDecodeLeakyBucket(f *testing.F) {
	fuzzDecode(f, LeakyBucket{Rate: 10, Capacity: 5},
		"32|4.5|"+ns(0), "32|15|"+ns(0), "32|0|0", "32|-1|0",
		"v1|2.25|"+ns(0)+"|10|2", "v2|4|"+ns(0)+"|")
}

func FuzzDecodeFixedWindow(f *testing.F) {
	fuzzDecode(f, FixedWindow{Quotas: []Quota{{"second", 2, time.Second}, {"minute", 3, time.Minute}}},
		"23|2|second|1|"+ns(0)+"|minute|1|"+ns(0), "23|1|minute|7|"+ns(0), "23|1|other|1|2",
		"23|2|a|1|2|a|1|2", "23|3|a|1|2|b|1|2", "v1|3|"+ns(0)+"|60000000000", "v2|3|"+ns(0)+"|")
}

func FuzzDecodeSlidingWindow(f *testing.F) {
	fuzzDecode(f, SlidingWindow{Limit: 10, Window: 10 * time.Second},
		"62|6|5|"+ns(0), "62|0|0|0", "62|1|1|3", "62|0|25|-7", "v1|1|2|3")
}

func FuzzDecodeRollingWindow(f *testing.F) {
	const w, b = "|10000000000|1000000000|", "|10000000000|3000000000|"
	fuzzDecode(f, RollingWindow{Limit: 10, Window: 10 * time.Second, Bucket: time.Second},
		"72"+w[:len(w)-1], "72"+w+ns(0)+"|3", "72"+w+ns(0)+"|3|2|4|7|3", "72"+w+ns(0)+"|6|9|5",
		"72"+w+ns(0)+"|3|10|4", "72"+w+"0|1|1|1", "72"+w+"-9223372036000000000|1", "72"+w+"9223372036000000000|2",
		"72"+w+ns(0)+"|9223372036854775807", "72"+w+ns(0)+"|9223372036854775806|1|1",
		"72"+w+ns(0)+"|1|0|1", "72"+w+ns(500*time.Millisecond)+"|1", "72"+w+ns(0)+"|1|", "72"+w+ns(0),
		"72"+b+ns(0)+"|4|1|5|1|6", "72|18000000000000|300000000000|"+ns(0)+"|40000|59|60000",
		"72|1|1|5|1", "72|65536|1|0|1|65535|1", "72|1|2|3|4|5|6|7|8", "72|NaN|1", "72|", "72|0|0")
}

func FuzzDecodeComposite(f *testing.F) {
	fuzzDecode(f, Composite{Primary: TokenBucket{Rate: 1, Burst: 2}, Secondary: FixedWindow{Quotas: []Quota{{"day", 3, 24 * time.Hour}}}},
		"51|12|1|"+ns(0)+"$23|1|day|1|"+ns(0), "51|12|2|0$23|1|day|0|0",
		"cmp1|v2|1|"+ns(0)+"|$v1|2|"+ns(0)+"|86400000000000", "cmp1|12|1|2$v2|1|2|",
		"51|12|1|2$42|1", "51|12|1|2$23|1|day|1|2$")
}

func FuzzDecodeCalendar(f *testing.F) {
	fuzzDecode(f, Calendar{Limit: 10, Period: Week, Location: paris},
		"91|0|0", "91|"+ns(0)+"|3", "91|"+ns(0)+"|10", "91|"+ns(0)+"|11", "91|-9223372036854775808|9223372036854775807",
		"91|9223372036854775807|1", "91|1|-1", "91|1", "91|1|2|", "92|1|2", "v1|1|2|3", "51|91|1|2$12|1|2")
}

func FuzzDecodeSlidingLog(f *testing.F) {
	fuzzDecode(f, SlidingLog{Limit: 10, Window: time.Second},
		"81", "81|"+ns(0)+"|3", "81|"+ns(0)+"|3|1|2|500000000|1", "81|1|1|0|1", "81|9223372036854775807|1|1|1",
		"81|-9223372036854775808|1|9223372036854775807|1|1|1", "81|1|0", "81|1")
}
