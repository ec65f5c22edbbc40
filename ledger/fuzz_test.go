package ledger

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/ratestore/ratestore/pricing"
)

// seedEntries are the entries of the seeds' blocks, without upstreams:
// e with a team, f without.
func seedEntries() (e, f Entry) {
	e = Entry{Time: time.UnixMilli(1_700_000_000_123).UTC(), RequestID: "req_0123456789abcdef", Key: "key_0123456789abcdef",
		Team: "team_0123456789abcdef", Model: "gpt-4o", Route: "chat completions", Tokens: Tokens{1, 2, 3, 4, 5},
		Cost: pricing.USD(123456789), Status: 200, Latency: 1500 * time.Millisecond, Estimated: true}
	f = e
	f.Team, f.Model, f.Time = "", "claude", e.Time.Add(-time.Second)
	return e, f
}

// seeds are values the ledger writes, for the fuzzers to mutate: blocks
// of version 3, e's naming its upstream and end user and f's neither, and
// of versions 1 and 2.
func seeds() [][]byte {
	e, f := seedEntries()
	e.Upstream, e.EndUser = "openai-a", "u-17"
	rows := []row{{k: rowKey{"team_0123456789abcdef", "gpt-4o"}, Totals: Totals{Requests: 3, Cost: 9, Refused: 2, Reasons: map[string]int64{"window": 2}}}}
	total := totalOf([]summary{{key: e.Key, team: e.Team, model: e.Model, Totals: rows[0].Totals}, {key: f.Key, model: f.Model, Totals: Totals{Requests: 1}}})
	v1single, _ := hex.DecodeString(v1Single)
	v1block, _ := hex.DecodeString(v1Block)
	v2single, _ := hex.DecodeString(v2Single)
	v2block, _ := hex.DecodeString(v2Block)
	return [][]byte{appendSingle(nil, &e), encodeBlock(256, []item{{256, e}, {300, f}}), appendRows(nil, rows), appendDayTotal(nil, total),
		appendSingle(nil, &f), v1single, v1block, v2single, v2block}
}

// FuzzDecode feeds corrupt values to every decoder: each returns an
// error or values, never panics, and a block reads back what it encoded.
func FuzzDecode(f *testing.F) {
	for _, s := range seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if br, err := openBlock(v, newInterner()); err == nil {
			br.index(appendString(nil, "gpt-4o"), 0)
			var items []item
			if br.each(256, func(seq uint32, e *Entry) { items = append(items, item{seq, *e}) }) == nil && len(items) > 0 {
				again, err := openBlock(encodeBlock(256, items), nil)
				if err != nil {
					t.Fatalf("re-encoding a decoded block: %v", err)
				}
				n := 0
				if err := again.each(256, func(uint32, *Entry) { n++ }); err != nil || n != len(items) {
					t.Fatalf("re-encoded block: %d of %d entries, %v", n, len(items), err)
				}
			}
		}
		_ = decodeRollup(v, func(_, _ []byte, _ *Totals) {})
		_ = decodeSummary(v, func(_, _, _ []byte, _ *Totals) {})
		if dt, err := decodeDayTotal(v); err == nil {
			again, err := decodeDayTotal(appendDayTotal(nil, dt))
			if err != nil || len(again.models) != len(dt.models) {
				t.Fatalf("re-encoding a decoded day total: %v", err)
			}
			rest := dt.all.clone()
			for i := range dt.models {
				rest.sub(&dt.models[i].Totals)
			}
		}
		_, _ = summaryWriter(v)
		_, _ = parseCursor(string(v))
		_, _, _, _ = entryKey(v)
		_, _ = rollupName(v, keyPrefix)
	})
}

func TestCodecRoundTrip(t *testing.T) {
	s := seeds()
	var got []Entry
	br, err := openBlock(s[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := br.each(256, func(seq uint32, e *Entry) { got = append(got, *e) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].RequestID != "req_0123456789abcdef" || got[1].Team != "" || got[0].Cost != 123456789 ||
		got[0].Latency != 1500*time.Millisecond || !got[0].Estimated || got[1].Time != got[0].Time.Add(-time.Second) ||
		got[0].Upstream != "openai-a" || got[1].Upstream != "" || got[0].EndUser != "u-17" || got[1].EndUser != "" {
		t.Fatalf("round trip: %+v", got)
	}
}
