package strategies

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// configs is one valid configuration of every strategy, for the tests that
// run over all of them.
var configs = []struct {
	name string
	s    Strategy
}{
	{"TokenBucket", TokenBucket{Rate: 10, Burst: 5}},
	{"GCRA", GCRA{Rate: 10, Burst: 5}},
	{"LeakyBucket", LeakyBucket{Rate: 10, Capacity: 5}},
	{"FixedWindow", FixedWindow{Quotas: []Quota{{"second", 2, time.Second}, {"minute", 3, time.Minute}}}},
	{"SlidingWindow", SlidingWindow{Limit: 10, Window: 10 * time.Second}},
	{"RollingWindow", RollingWindow{Limit: 10, Window: 10 * time.Second, Bucket: time.Second}},
	{"SlidingLog", SlidingLog{Limit: 10, Window: 10 * time.Second}},
	{"Calendar", Calendar{Limit: 10, Period: Day, Location: paris}},
	{"Composite", Composite{Primary: TokenBucket{Rate: 1, Burst: 2}, Secondary: FixedWindow{Quotas: []Quota{{"day", 3, 24 * time.Hour}}}}},
}

func TestDecodeCorrupt(t *testing.T) {
	tb := TokenBucket{Rate: 10, Burst: 5}
	lb := LeakyBucket{Rate: 10, Capacity: 5}
	g := GCRA{Rate: 10, Burst: 5}
	fw := FixedWindow{Quotas: []Quota{{"a", 2, time.Second}}}
	sw := SlidingWindow{Limit: 10, Window: time.Second}
	cs := Composite{Primary: tb, Secondary: g}
	rw := RollingWindow{Limit: 10, Window: time.Second, Bucket: 100 * time.Millisecond}
	for _, c := range []struct {
		s   Strategy
		in  string
		why string // in the message
	}{
		// Shared by every decoder.
		{tb, "", "unknown header"},
		{tb, "|", "unknown header"},
		{tb, "1", "unknown header"},
		{tb, "12", "field 2 (tokens) is missing"},
		{tb, "12|", "not a finite decimal number"},
		{tb, "13|1|1", "unsupported format version"},
		{tb, "1f|1|1", "unsupported format version"},
		{tb, "12 |1|1", "unknown header"},
		{tb, "12|1", "field 3 (last) is missing"},
		{tb, "12|1|", "not a decimal integer"},
		{tb, "12|1|2|", "trailing data"},
		{tb, "12|1|2|3", "trailing data"},
		{tb, "12|1|2\n", "not a decimal integer"},
		{tb, "12|NaN|1", "not a finite decimal number"},
		{tb, "12|nan|1", "not a finite decimal number"},
		{tb, "12|Inf|1", "not a finite decimal number"},
		{tb, "12|-Inf|1", "not a finite decimal number"},
		{tb, "12|+Inf|1", "not a finite decimal number"},
		{tb, "12|infinity|1", "not a finite decimal number"},
		{tb, "12|1e999|1", "not a finite decimal number"},
		{tb, "12|1e19|1", "out of range"},
		{tb, "12|-1e19|1", "out of range"},
		{tb, "12|0x1p3|1", "not a finite decimal number"},
		{tb, "12|1_0|1", "not a finite decimal number"},
		{tb, "12| 1|1", "not a finite decimal number"},
		{tb, "12|1|9223372036854775808", "out of range"},
		{tb, "12|1|-9223372036854775809", "out of range"},
		{tb, "12|1|+5", "not a decimal integer"},
		{tb, "12|1|0x10", "not a decimal integer"},
		{tb, "12|1|1.5", "not a decimal integer"},
		{tb, "12|1|-", "not a decimal integer"},
		{tb, "v1|1|2", "field 4 (capacity) is missing"},
		{tb, "v1|1|2|3", "field 5 (rate) is missing"},
		{tb, "v1|1|2|3|NaN", "not a finite"},
		{tb, "v1|1|2|-3|1", "out of range"},
		{tb, "v1|1|2|3|4|", "trailing data"},
		{tb, "v2|1|2", "field 4 (end) is missing"},
		{tb, "v2|1|2|x", "must be empty"},
		{tb, "v2|1|2||", "trailing data"},
		{tb, "v3|1|2|", "unknown header"},
		{tb, "V1|1|2|3|4", "unknown header"},
		{lb, "32|-1|0", "out of range"},
		{lb, "32|-0|0", "out of range"},
		{lb, "v2|-1|0|", "out of range"},
		{lb, "32|1e19|0", "out of range"},
		{g, "42|", "not a decimal integer"},
		{g, "42|1.0", "not a decimal integer"},
		{g, "42|1|2", "trailing data"},
		{g, "v1|1|-1|2", "out of range"},
		{g, "v1|1|2", "field 4 (limit) is missing"},
		{g, "v2|1", "missing"},
		{fw, "23", "field 2 (quotas) is missing"},
		{fw, "23|0", "out of range"},
		{fw, "23|-1", "out of range"},
		{fw, "23|1", "1 quotas declared, at most 0 encoded"},
		{fw, "23|2|a|1|2", "2 quotas declared, at most 1 encoded"},
		{fw, "23|99999999999999|a|1|2", "quotas declared"},
		{fw, "23|1|a|1|2|b|1|2", "trailing data"},
		{fw, "23|1|a|1|2|", "trailing data"},
		{fw, "23|1||1|2", "not a valid, unique quota name"},
		{fw, "23|1|a b|1|2", "not a valid, unique quota name"},
		{fw, "23|1|" + strings.Repeat("a", 33) + "|1|2", "not a valid"},
		{fw, "23|2|a|1|2|a|1|2", "not a valid, unique quota name"},
		{fw, "23|1|a|-1|2", "out of range"},
		{fw, "23|1|a|1|x", "not a decimal integer"},
		{fw, "v1|1|2", "field 4 (duration) is missing"},
		{fw, "v1|-1|2|3", "out of range"},
		{fw, "v2|1|2|3", "must be empty"},
		{sw, "62|1|2", "field 4 (start) is missing"},
		{sw, "62|-1|0|0", "out of range"},
		{sw, "62|0|-1|0", "out of range"},
		{sw, "62|0|0|0|0", "trailing data"},
		{sw, "v1|1|2|3", "no legacy encoding"},
		{sw, "v2|1|2|", "no legacy encoding"},
		{rw, "72", "field 2 (window) is missing"},
		{rw, "72|", "not a decimal integer"},
		{rw, "72|1000000000", "field 3 (bucket) is missing"},
		{rw, "72|NaN|1", "not a decimal integer"},
		{rw, "72|1000000000|1e8", "not a decimal integer"},
		{rw, "72|0|1", "out of range"},
		{rw, "72|-1000000000|100000000", "out of range"},
		{rw, "72|3153600000000000001|1", "out of range"},
		{rw, "72|1000000000|0", "out of range"},
		{rw, "72|1000000000|300000000", "fields 2-3 (window, bucket): rollingwindow: Window 1s is not a multiple of Bucket 300ms"},
		{rw, "72|1000000000|2000000000", "not a multiple"},
		{rw, "72|1000000000|1", "more than MaxBuckets"},
		{rw, "72|1|2|3|4|5|6|7|8", "not a multiple"},
		{rw, "72|1000000000|100000000|", "field 4 (start) \"\" is not a decimal integer"},
		{rw, "72|1000000000|100000000|0", "field 5 (count) is missing"},
		{rw, "72|1000000000|100000000|0|", "field 5 (count) \"\" is not a decimal integer"},
		{rw, "72|1000000000|100000000|0|0", "out of range"},
		{rw, "72|1000000000|100000000|0|-3", "out of range"},
		{rw, "72|1000000000|100000000|0|NaN", "not a decimal integer"},
		{rw, "72|1000000000|100000000|0|+3", "not a decimal integer"},
		{rw, "72|1000000000|100000000|0|9223372036854775808", "out of range"},
		{rw, "72|1000000000|100000000|50000000|1", "start is not a multiple of Bucket 100ms"},
		{rw, "72|1000000000|100000000|-50000000|1", "start is not a multiple"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|1|0|1", "field 6 (gap) \"0\" is out of range"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|1|-1|1", "out of range"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|1|1", "field 7 (count) is missing"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|1|10|1", "start is Window 1s or more after the oldest bucket's"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|1|9|1|1|1", "or more after the oldest"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|1|9|1|1", "field 9 (count) is missing"},
		{rw, "72|1000000000|100000000|9223372036800000000|1|1|1", "passes the int64 range"},
		{rw, "72|1000000000|100000000|-9223372036800000000|1|92233720368547758|1", "passes the int64 range"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|1|9223372036854775807|1", "passes the int64 range"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|9223372036854775807|1|1", "the total passes math.MaxInt64"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|1|1|2|", "field 8 (gap) \"\" is not a decimal integer"},
		{rw, "72|1000000000|100000000|" + ns(0) + "|1\n", "not a decimal integer"},
		{rw, "71|1000000000|100000000", "unsupported format version"},
		{rw, "v1|1|2|3", "no legacy encoding"},
		{rw, "v2|x|", "no legacy encoding"},
		{cs, "51", "field 2 (parts) is missing"},
		{cs, "51|", "exactly one '$'"},
		{cs, "51|$", "composite: primary: strategies: token bucket: unknown header"},
		{cs, "51|12|1|2", "exactly one '$'"},
		{cs, "51|12|1|2$42|1$42|1", "exactly one '$'"},
		{cs, "51|12|1|2$", "secondary: strategies: gcra: unknown header"},
		{cs, "51|12|1|2$42|x", "secondary"},
		{cs, "cmp1|12|1|2", "exactly one '$'"},
		{cs, "cmp2|12|1|2$42|1", "unknown header"},
		{cs, "v1|12|1|2$42|1", "unknown header"},
		{cs, "52|12|1|2$42|1", "unsupported format version"},
	} {
		st, err := decode(c.s, []byte(c.in))
		if !errors.Is(err, ErrCorrupt) || st != nil {
			t.Errorf("%T.Decode(%q) = %v, %v; want ErrCorrupt", c.s, c.in, st, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "strategies: ") || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%T.Decode(%q): %q does not say %q", c.s, c.in, err, c.why)
		}
	}
}

func TestDecodeMismatch(t *testing.T) {
	tb := TokenBucket{Rate: 10, Burst: 5}
	g := GCRA{Rate: 10, Burst: 5}
	for _, c := range []struct {
		s  Strategy
		in string
	}{
		{tb, "42|5"},
		{tb, "42|garbage"}, // the header decides
		{tb, "23|1|a|1|2"},
		{tb, "32|1|2"},
		{tb, "51|12|1|2$42|1"},
		{tb, "cmp1|12|1|2$42|1"},
		{tb, "62|0|0|0"},
		{tb, "72|0"}, // the header decides
		{RollingWindow{Limit: 1, Window: 1, Bucket: 1}, "62|0|0|0"},
		{RollingWindow{Limit: 1, Window: 1, Bucket: 1}, "12|1|2"},
		{RollingWindow{Limit: 1, Window: 1, Bucket: 1}, "cmp1|12|1|2$42|1"},
		{SlidingWindow{Limit: 1, Window: 1}, "72|1|1"},
		{Composite{Primary: tb, Secondary: g}, "51|12|1|2$72|1|1"},
		{tb, "41|5"}, // another kind, whatever its version
		{g, "12|1|2"},
		{LeakyBucket{Rate: 1, Capacity: 1}, "12|1|2"},
		{FixedWindow{Quotas: []Quota{{"a", 1, 1}}}, "62|0|0|0"},
		{SlidingWindow{Limit: 1, Window: 1}, "23|1|a|1|2"},
		{Composite{Primary: tb, Secondary: g}, "12|1|2"},
		{Composite{Primary: tb, Secondary: g}, "51|42|1$12|1|2"},
	} {
		st, err := decode(c.s, []byte(c.in))
		if !errors.Is(err, ErrMismatch) || st != nil {
			t.Errorf("%T.Decode(%q) = %v, %v; want ErrMismatch", c.s, c.in, st, err)
		}
	}
}

func TestApplyMismatch(t *testing.T) {
	for _, a := range configs {
		for _, b := range configs {
			if a.name == b.name {
				continue
			}
			st := newState(b.s)
			before := enc(st)
			if _, err := apply(a.s, st, Call{Now: t0, N: 1}); !errors.Is(err, ErrMismatch) || !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: Decide(state of %s) = %v, want ErrMismatch", a.name, b.name, err)
			}
			if enc(st) != before {
				t.Errorf("%s: Decide(state of %s) changed it", a.name, b.name)
			}
		}
		if _, err := apply(a.s, nil, Call{Now: t0, N: 1}); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: Decide(nil) = %v, want ErrMismatch", a.name, err)
		}
	}
}

// TestFreshStateRoundTrips checks that every new state encodes in the
// current format and decodes back to the same bytes.
func TestFreshStateRoundTrips(t *testing.T) {
	for _, c := range configs {
		st := newState(c.s)
		clone(t, c.s, st)
		if r := mustApply(t, c.s, st, Call{Now: t0}); r.ResetAfter != 0 || !r.Allowed || r.Remaining != r.Limit {
			t.Errorf("%s: a fresh state peeks %+v", c.name, r)
		}
	}
}
