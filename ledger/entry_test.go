package ledger_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// TestEntryJSON: an entry's JSON names its upstream after its route and
// its end user last, and leaves them out when "", as it does the team;
// all read back.
func TestEntryJSON(t *testing.T) {
	en := ledger.Entry{Time: t0.Add(1234 * time.Millisecond), RequestID: "req_1", Key: "key_1", Model: "gpt-4o",
		Route: "/v1/chat/completions", Upstream: "azure-east", Status: 200, Latency: 1500 * time.Millisecond,
		Tokens: ledger.Tokens{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4, Reasoning: 5}, Cost: 1250 * pricing.Micro}
	const head, tail = `{"time":"2026-03-01T22:00:01.234Z","request_id":"req_1","key":"key_1","model":"gpt-4o","route":"/v1/chat/completions",`,
		`"status":200,"latency_ms":1500,"input_tokens":1,"output_tokens":2,"cache_read_tokens":3,"cache_write_tokens":4,` +
			`"reasoning_tokens":5,"cost_usd":0.00125,"estimated":false}`
	for _, c := range []struct{ upstream, endUser, json string }{
		{"azure-east", "", head + `"upstream":"azure-east",` + tail},
		{"", "", head + tail},
		{"azure-east", "u-17", head + `"upstream":"azure-east",` + strings.TrimSuffix(tail, "}") + `,"end_user":"u-17"}`},
		{"", "u-17", head + strings.TrimSuffix(tail, "}") + `,"end_user":"u-17"}`},
	} {
		en.Upstream, en.EndUser = c.upstream, c.endUser
		b, err := json.Marshal(en)
		require.NoError(t, err)
		require.Equal(t, c.json, string(b))
		var back ledger.Entry
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, en, back)
	}
}

// TestEntriesNameTheirUpstream: an entry's upstream, or none, reads back
// from Requests, from its chunk and from its block, on every backend; an
// upstream named as the entry's model leaves a filter on the model
// finding it.
func TestEntriesNameTheirUpstream(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		var entries []ledger.Entry
		for i, up := range []string{"openai-a", "", "azure-east", models[0], strings.Repeat("é", 128)} {
			k := keys[i%2]
			entries = append(entries, e.record(ledger.Entry{RequestID: fmt.Sprintf("req_%016x", i), Key: k, Team: teamOf[k],
				Model: models[0], Route: "/v1/chat/completions", Upstream: up, Status: 200, Tokens: ledger.Tokens{Input: 10}}))
			e.clock.Advance(time.Second)
		}
		all := newestFirst(entries, func(ledger.Entry) bool { return true })
		ofKey := newestFirst(entries, func(en ledger.Entry) bool { return en.Key == keys[0] })
		for _, stage := range []string{"chunks", "blocks"} {
			require.Equal(t, all, pages(t, e, ledger.RequestQuery{Limit: 2}), stage)
			require.Equal(t, all, pages(t, e, ledger.RequestQuery{Model: models[0], Limit: 2}), stage)
			require.Equal(t, ofKey, pages(t, e, ledger.RequestQuery{Key: keys[0], Limit: 2}), stage)
			e.reopen() // Close compacts the open span
			chunks, blocks := e.records()
			require.Equal(t, [2]int{0, 1}, [2]int{chunks, blocks})
		}
	})
}

// TestNoteEndUser: an end user of more than 256 bytes, or not printable
// UTF-8, is refused as invalid; one of 256 is kept.
func TestNoteEndUser(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		for _, bad := range []string{strings.Repeat("u", 257), "u\x00", "u\n17", "\xff"} {
			_, err := e.led.Note(ledger.Entry{Key: keys[0], EndUser: bad})
			require.ErrorIs(t, err, ledger.ErrInvalid, "%q", bad)
			require.ErrorIs(t, e.led.Refused(ctx, ledger.Refusal{Key: keys[0], EndUser: bad}), ledger.ErrInvalid, "%q", bad)
		}
		long := strings.Repeat("é", 128)
		en := e.record(ledger.Entry{RequestID: "req_1", Key: keys[0], Model: models[0], Route: "/r", EndUser: long, Status: 200})
		require.Equal(t, []ledger.Entry{en}, pages(t, e, ledger.RequestQuery{Limit: 10}))
	})
}
