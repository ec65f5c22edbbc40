package strategies

import (
	"bytes"
	"fmt"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// Description is a stored state decoded for display, without its
// configuration: what Describe returns. It marshals to JSON.
type Description struct {
	// Kind names the strategy that wrote the state: "token bucket",
	// "fixed window", "leaky bucket", "gcra", "composite", "sliding window"
	// or "rolling window"; "legacy" for a v1 or v2 state, which does not say
	// its strategy (only the configuration in force does).
	Kind string `json:"kind"`
	// Header is the encoding's header: "12", "42", "51", "v1", "cmp1", ...
	Header string `json:"header"`
	// Legacy reports an older encoding, rewritten in the current one by
	// the next write.
	Legacy bool `json:"legacy,omitempty"`
	// Fields holds the decoded fields by name, as DATA_FORMAT.md names
	// them. Instants are time.Time in UTC, durations time.Duration
	// (nanoseconds in JSON), counts int64 and amounts float64:
	//
	//	token bucket    tokens, last
	//	leaky bucket    level, last
	//	gcra            tat
	//	fixed window    quotas: []map[string]any of name, count, start
	//	sliding window  prev, curr, start
	//	rolling window  window, bucket, total (the sum of the counts, expired
	//	                buckets included), buckets: []map[string]any of
	//	                start, count, oldest first
	//	composite       primary, secondary: Description
	//	legacy          raw: the encoding as stored
	Fields map[string]any `json:"fields"`
}

// Describe decodes a stored state in any encoding for display, without
// knowing the configuration it was written under: the header of a current
// encoding names the strategy, and none of their fields depend on the
// configuration. The v1 and v2 encodings do not name their strategy, so
// they are described as legacy with their raw text, whole or as a part of a
// composite. Bytes that no strategy reads give an error matching
// ErrCorrupt, as Decode's would.
func Describe(b []byte) (Description, error) {
	st, err := byHeader{}.Decode(b)
	if err != nil {
		return Description{}, err
	}
	d := describe(st)
	if head, _, _ := bytes.Cut(b, []byte{'|'}); string(head) == "cmp1" {
		d.Header, d.Legacy = "cmp1", true
	}
	return d, nil
}

// byHeader is a Strategy that only decodes: it reads a state with the
// Decode of the strategy its header names, in a zero configuration. As a
// part of a composite it refuses another composite, since they do not nest.
type byHeader struct{ part bool }

// Validate implements Strategy.
func (byHeader) Validate() error { return nil }

// NewState implements Strategy; a byHeader has no state of its own.
func (byHeader) NewState() State { return nil }

// Apply implements Strategy: a byHeader decides nothing.
func (byHeader) Apply(State, Call) (Result, error) {
	return Result{}, fmt.Errorf("strategies: describe: a state read without its configuration cannot be applied: %w", ErrInvalid)
}

// Decode implements Strategy.
func (h byHeader) Decode(b []byte) (State, error) {
	head, _, _ := bytes.Cut(b, []byte{'|'})
	var s Strategy
	switch string(head) {
	case "v1", "v2":
		return &legacyState{header: string(head), raw: string(b)}, nil
	case "cmp1":
		s = Composite{byHeader{part: true}, byHeader{part: true}}
	}
	if len(head) == 2 {
		switch kind(head[0]) {
		case kindTokenBucket:
			s = TokenBucket{}
		case kindFixedWindow:
			s = FixedWindow{}
		case kindLeakyBucket:
			s = LeakyBucket{}
		case kindGCRA:
			s = GCRA{}
		case kindComposite:
			s = Composite{byHeader{part: true}, byHeader{part: true}}
		case kindSlidingWindow:
			s = SlidingWindow{}
		case kindRollingWindow:
			s = RollingWindow{}
		}
	}
	if _, nested := s.(Composite); nested && h.part {
		return nil, corrupt(kindComposite, "a part %s is a composite: composites do not nest", quote(head))
	}
	if s == nil {
		return nil, fmt.Errorf("strategies: unknown header %s: %w", quote(head), ErrCorrupt)
	}
	return s.Decode(b)
}

// legacyState is a v1 or v2 state as stored: which strategy it belongs to,
// only a configuration says.
type legacyState struct{ header, raw string }

// AppendEncode implements State: the bytes as they were read.
func (s *legacyState) AppendEncode(dst []byte) []byte { return append(dst, s.raw...) }

// describe lays out a decoded state's fields.
func describe(st State) Description {
	d := func(k kind, fields map[string]any) Description {
		return Description{Kind: k.String(), Header: string(k.appendHeader(nil)), Fields: fields}
	}
	switch s := st.(type) {
	case *tokenBucketState:
		return d(kindTokenBucket, map[string]any{"tokens": s.amount, "last": instant(s.last)})
	case *leakyBucketState:
		return d(kindLeakyBucket, map[string]any{"level": s.amount, "last": instant(s.last)})
	case *gcraState:
		return d(kindGCRA, map[string]any{"tat": instant(s.tat)})
	case *fixedWindowState:
		names := *s.names
		ws := s.windows(len(names))
		quotas := make([]map[string]any, len(names))
		for i, w := range ws {
			quotas[i] = map[string]any{"name": names[i], "count": w.count, "start": instant(w.start)}
		}
		return d(kindFixedWindow, map[string]any{"quotas": quotas})
	case *slidingWindowState:
		return d(kindSlidingWindow, map[string]any{"prev": s.prev, "curr": s.curr, "start": instant(s.start)})
	case *rollingWindowState:
		cfg := s.win.Config()
		buckets, total := []map[string]any{}, int64(0)
		for start, n := range s.win.All() {
			buckets = append(buckets, map[string]any{"start": instant(start), "count": n})
			total = sat.Add(total, n)
		}
		return d(kindRollingWindow, map[string]any{
			"window": cfg.Window, "bucket": cfg.Bucket, "total": total, "buckets": buckets,
		})
	case compositeState:
		p, q := s.parts()
		return d(kindComposite, map[string]any{"primary": describe(p), "secondary": describe(q)})
	case *legacyState:
		return Description{Kind: "legacy", Header: s.header, Legacy: true, Fields: map[string]any{"raw": s.raw}}
	}
	panic(fmt.Sprintf("strategies: describe: unexpected state %T", st)) // byHeader decodes no other
}

// instant is a Unix nanosecond instant as a time in UTC.
func instant(ns int64) time.Time { return time.Unix(0, ns).UTC() }
