package strategies

import (
	"bytes"
	"fmt"
	"time"
)

// Description is a stored state decoded for display, without its
// configuration: what Describe returns. It marshals to JSON.
type Description struct {
	// Kind names the strategy that wrote the state: "token bucket",
	// "fixed window", "leaky bucket", "gcra", "composite", "sliding
	// window", "rolling window", "sliding log" or "calendar"; "legacy"
	// for a v1 or v2 state, which does not say its strategy (only the
	// configuration in force does).
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
	//	sliding log     entries: []map[string]any of at, count, oldest first
	//	calendar        start, used
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

// describe lays out the fields of st, a state that byHeader decoded.
func describe(st State) Description {
	if k, ok := st.(kinded); ok {
		return k.describe()
	}
	return Description{Kind: fmt.Sprintf("%T", st)} // not reached: byHeader decodes states of this package
}

// describeAs is the Description of a current encoding of kind k.
func describeAs(k *kind, fields map[string]any) Description {
	return Description{Kind: k.name, Header: string(k.appendHeader(nil)), Fields: fields}
}

// byHeader is a Decider that only decodes: it reads a state with the
// Decider that its header names (kind.blank). As a part of a composite it
// refuses another composite, since they do not nest.
type byHeader struct{ part bool }

func (byHeader) NewState() State         { return nil }
func (byHeader) Horizon() time.Duration  { return 0 }
func (byHeader) Clamp(State, int64) bool { return false }

// Decide implements Decider: a byHeader decides nothing.
func (byHeader) Decide(State, Call) (Result, error) {
	return Result{}, fmt.Errorf("strategies: describe: a state read without its configuration cannot be decided: %w", ErrInvalid)
}

// Decode implements Decider.
func (h byHeader) Decode(b []byte) (State, error) {
	head, _, _ := bytes.Cut(b, []byte{'|'})
	var k *kind
	switch string(head) {
	case "v1", "v2":
		return &legacyState{header: string(head), raw: string(b)}, nil
	case "cmp1":
		k = kindComposite
	}
	if len(head) == 2 && k == nil {
		k = kinds[head[0]]
	}
	if k == nil {
		return nil, fmt.Errorf("strategies: unknown header %s: %w", quote(head), ErrCorrupt)
	}
	if k == kindComposite && h.part {
		return nil, corrupt(kindComposite, "a part %s is a composite: composites do not nest", quote(head))
	}
	return k.blank().Decode(b)
}

// legacyState is a v1 or v2 state as stored: which strategy it belongs to,
// only a configuration says.
type legacyState struct{ header, raw string }

// AppendEncode implements State: the bytes as they were read.
func (s *legacyState) AppendEncode(dst []byte) []byte { return append(dst, s.raw...) }

func (s *legacyState) kind() *kind { return nil }

func (s *legacyState) describe() Description {
	return Description{Kind: "legacy", Header: s.header, Legacy: true, Fields: map[string]any{"raw": s.raw}}
}

// instant is a Unix nanosecond instant as a time in UTC.
func instant(ns int64) time.Time { return time.Unix(0, ns).UTC() }
