package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ratestore/ratestore/pricing"
)

// Tokens are a request's tokens by type. The types are disjoint: Input
// excludes the cached prompt (CacheRead, CacheWrite), Output excludes
// Reasoning. Their sum is what the request's windows were charged,
// before Options.Weights.
type Tokens struct {
	Input, Output, CacheRead, CacheWrite, Reasoning int64
}

// Entry is one finished request, as the ledger keeps it. It holds no
// prompt and no output: only what metering needs.
type Entry struct {
	Time      time.Time // when it finished; the ledger's clock, in UTC
	RequestID string    // the gateway's X-Request-Id
	Key, Team string    // the key's id and its team's ("": none)
	Model     string    // the model asked for
	Route     string    // the endpoint's path, ids as "*": "/v1/chat/completions", "/v1beta/models/{model}:generateContent"
	Upstream  string    // the name of the upstream that answered it ("azure-east"); "": none did (refused), or a gateway of an earlier version
	EndUser   string    // the key's own customer the request named ("u-17"): at most 256 bytes of printable UTF-8; "": none (the key's own traffic)
	Tokens    Tokens
	Cost      pricing.USD
	Status    int           // the HTTP status the caller got
	Latency   time.Duration // from the request's arrival to its end, in whole milliseconds
	Estimated bool          // no usage was reported: Tokens are the gateway's estimate
}

// entryJSON is an Entry's JSON shape, that of GET /admin/requests and of
// the export (package ledger/export): snake_case fields, the time in RFC 3339 with
// milliseconds, the latency in milliseconds, money as a decimal number
// of USD. The team, the upstream and the end user are left out when "".
type entryJSON struct {
	Time       string      `json:"time"`
	RequestID  string      `json:"request_id"`
	Key        string      `json:"key"`
	Team       string      `json:"team,omitempty"`
	Model      string      `json:"model"`
	Route      string      `json:"route"`
	Upstream   string      `json:"upstream,omitempty"`
	Status     int         `json:"status"`
	LatencyMS  int64       `json:"latency_ms"`
	Input      int64       `json:"input_tokens"`
	Output     int64       `json:"output_tokens"`
	CacheRead  int64       `json:"cache_read_tokens"`
	CacheWrite int64       `json:"cache_write_tokens"`
	Reasoning  int64       `json:"reasoning_tokens"`
	Cost       pricing.USD `json:"cost_usd"`
	Estimated  bool        `json:"estimated"`
	// EndUser is last: the CSV of GET /admin/requests, whose columns are
	// these fields in this order, keeps the places of the columns it had
	// before entries named end users.
	EndUser string `json:"end_user,omitempty"`
}

// TimeFormat is the layout of an Entry's time in JSON and CSV.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON encodes e in the shape of GET /admin/requests.
func (e Entry) MarshalJSON() ([]byte, error) {
	t := e.Tokens
	return json.Marshal(entryJSON{
		Time: e.Time.UTC().Format(TimeFormat), RequestID: e.RequestID, Key: e.Key, Team: e.Team,
		Model: e.Model, Route: e.Route, Upstream: e.Upstream, EndUser: e.EndUser, Status: e.Status, LatencyMS: e.Latency.Milliseconds(),
		Input: t.Input, Output: t.Output, CacheRead: t.CacheRead, CacheWrite: t.CacheWrite, Reasoning: t.Reasoning,
		Cost: e.Cost, Estimated: e.Estimated,
	})
}

// UnmarshalJSON decodes the shape MarshalJSON writes.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var j entryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, j.Time)
	if err != nil {
		return fmt.Errorf("ledger: entry time: %w", err)
	}
	*e = Entry{
		Time: t.UTC(), RequestID: j.RequestID, Key: j.Key, Team: j.Team, Model: j.Model, Route: j.Route, Upstream: j.Upstream, EndUser: j.EndUser,
		Tokens: Tokens{Input: j.Input, Output: j.Output, CacheRead: j.CacheRead, CacheWrite: j.CacheWrite, Reasoning: j.Reasoning},
		Cost:   j.Cost, Status: j.Status, Latency: time.Duration(j.LatencyMS) * time.Millisecond, Estimated: j.Estimated,
	}
	return nil
}

// An Exporter takes each entry once its commit returned (Options.Export),
// to send it outside the database: package ledger/export writes them to a
// file as JSON lines. Write is called on the request's path, so it must
// not block.
type Exporter interface {
	Write(e Entry)
}
