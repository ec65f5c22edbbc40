package strategies

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDescribe(t *testing.T) {
	tt := instant(t0)
	for _, c := range []struct {
		in   string
		want Description
	}{
		{"12|4.5|" + ns(0), Description{Kind: "token bucket", Header: "12",
			Fields: map[string]any{"tokens": 4.5, "last": tt}}},
		{"12|-3|" + ns(0), Description{Kind: "token bucket", Header: "12",
			Fields: map[string]any{"tokens": -3.0, "last": tt}}},
		{"32|15|" + ns(0), Description{Kind: "leaky bucket", Header: "32",
			Fields: map[string]any{"level": 15.0, "last": tt}}},
		{"42|" + ns(500*time.Millisecond), Description{Kind: "gcra", Header: "42",
			Fields: map[string]any{"tat": tt.Add(500 * time.Millisecond)}}},
		{"42|-9223372036854775808", Description{Kind: "gcra", Header: "42",
			Fields: map[string]any{"tat": instant(math.MinInt64)}}},
		{"23|2|second|1|" + ns(time.Second) + "|minute|3|" + ns(0), Description{Kind: "fixed window", Header: "23",
			Fields: map[string]any{"quotas": []map[string]any{
				{"name": "second", "count": int64(1), "start": tt.Add(time.Second)},
				{"name": "minute", "count": int64(3), "start": tt},
			}}}},
		{"62|6|5|" + ns(10*time.Second), Description{Kind: "sliding window", Header: "62",
			Fields: map[string]any{"prev": int64(6), "curr": int64(5), "start": tt.Add(10 * time.Second)}}},
		{"72|18000000000000|300000000000|" + ns(0) + "|60000|59|50000", Description{Kind: "rolling window", Header: "72",
			Fields: map[string]any{"window": 5 * time.Hour, "bucket": 5 * time.Minute, "total": int64(110000),
				"buckets": []map[string]any{
					{"start": tt, "count": int64(60000)},
					{"start": tt.Add(59 * 5 * time.Minute), "count": int64(50000)},
				}}}},
		{"72|10000000000|1000000000", Description{Kind: "rolling window", Header: "72",
			Fields: map[string]any{"window": 10 * time.Second, "bucket": time.Second, "total": int64(0),
				"buckets": []map[string]any{}}}},
		{"91|" + ns(0) + "|123450000000", Description{Kind: "calendar", Header: "91",
			Fields: map[string]any{"start": tt, "used": int64(123450000000)}}},
		{"51|12|2|0$23|1|day|0|0", Description{Kind: "composite", Header: "51", Fields: map[string]any{
			"primary": Description{Kind: "token bucket", Header: "12",
				Fields: map[string]any{"tokens": 2.0, "last": instant(0)}},
			"secondary": Description{Kind: "fixed window", Header: "23", Fields: map[string]any{
				"quotas": []map[string]any{{"name": "day", "count": int64(0), "start": instant(0)}}}},
		}}},
		// Legacy: v1 and v2 do not say their strategy; cmp1 does.
		{"v1|3.5|" + ns(0) + "|10|2", Description{Kind: "legacy", Header: "v1", Legacy: true,
			Fields: map[string]any{"raw": "v1|3.5|" + ns(0) + "|10|2"}}},
		{"v2|3|" + ns(0) + "|", Description{Kind: "legacy", Header: "v2", Legacy: true,
			Fields: map[string]any{"raw": "v2|3|" + ns(0) + "|"}}},
		{"cmp1|v2|3|" + ns(0) + "|$42|" + ns(0), Description{Kind: "composite", Header: "cmp1", Legacy: true, Fields: map[string]any{
			"primary": Description{Kind: "legacy", Header: "v2", Legacy: true,
				Fields: map[string]any{"raw": "v2|3|" + ns(0) + "|"}},
			"secondary": Description{Kind: "gcra", Header: "42", Fields: map[string]any{"tat": tt}},
		}}},
	} {
		got, err := Describe([]byte(c.in))
		if err != nil {
			t.Errorf("Describe(%q): %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Describe(%q)\n got %#v\nwant %#v", c.in, got, c.want)
		}
		if _, err := json.Marshal(got); err != nil {
			t.Errorf("Describe(%q): json: %v", c.in, err)
		}
	}
}

// TestDescribeEveryStrategy describes what every strategy writes after a
// call that takes something.
func TestDescribeEveryStrategy(t *testing.T) {
	for _, c := range configs {
		st := newState(c.s)
		if _, err := apply(c.s, st, Call{Now: t0, N: 1, Record: true}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		enc := st.AppendEncode(nil)
		d, err := Describe(enc)
		if err != nil {
			t.Errorf("%s: Describe(%q): %v", c.name, enc, err)
			continue
		}
		if d.Header != string(enc[:2]) || d.Legacy || len(d.Fields) == 0 {
			t.Errorf("%s: Describe(%q) = %+v", c.name, enc, d)
		}
	}
}

func TestDescribeCorrupt(t *testing.T) {
	for _, c := range []struct{ in, why string }{
		{"", "unknown header"},
		{"|", "unknown header"},
		{"x", "unknown header"},
		{"e2|1", "unknown header"},
		{"v3|1", "unknown header"},
		{"13|1|2", "unsupported format version"},
		{"12|NaN|0", "not a finite decimal number"},
		{"12|1|2|", "trailing data"},
		{"23|2|a|1|2", "2 quotas declared"},
		{"72|10|3", "window, bucket"},
		{"91|1|-1", "out of range"},
		{"51|12|1|2", "exactly one '$'"},
		{"51|51|12|1|2$42|0", "composites do not nest"},
		{"51|cmp1|12|1|2$42|0", "composites do not nest"},
		{"51|12|1|2$42|x", "secondary"},
	} {
		_, err := Describe([]byte(c.in))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Describe(%q) = %v, want ErrCorrupt about %q", c.in, err, c.why)
		}
	}
}

func TestByHeaderDecidesNothing(t *testing.T) {
	if _, err := (byHeader{}).Decide(nil, Call{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Decide = %v, want ErrInvalid", err)
	}
	if (byHeader{}).NewState() != nil {
		t.Error("NewState")
	}
}
