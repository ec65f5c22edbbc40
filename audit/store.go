package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/ratestore/ratestore/backend"
)

// The log's records, all under "A/". P is an event's position, 40 hex
// digits that sort newest first (see position):
//
//	A/e/P           an event
//	A/t/target/P    the same event, under its target (none without one)
//
// An event is stored twice so that a page of the whole log and a page of
// one target's events are each one ordered range, read by one ScanFrom
// from the cursor, never by reading others' events.
const (
	eventPrefix = "A/e/"
	byTarget    = "A/t/"
)

// targetPrefix is the prefix of the records of target's events. A
// target holds no "/" (isName), so no target's records are under
// another's.
func targetPrefix(target string) string { return byTarget + target + "/" }

// position is where an event is in the log: its time, in Unix ns, the
// writer (Log) that recorded it and its number among the writer's
// events, which make two events of one instant two places.
type position struct {
	ns     int64
	writer string // 16 hex digits
	seq    uint32
}

// posLen is the length of a position as text.
const posLen = 16 + 16 + 8

// text is p as 40 hex digits that sort as the log reads, newest first:
// the time and the seq complemented, so that later sorts first, the writer
// as it is between them. It is a record key's end and a page's cursor.
func (p position) text() []byte {
	b := make([]byte, 0, posLen)
	b = appendHex(b, ^uint64(max(p.ns, 0)), 16)
	b = append(b, p.writer...)
	return appendHex(b, uint64(^p.seq), 8)
}

// key is the record key of p under prefix.
func (p position) key(prefix string) []byte { return append([]byte(prefix), p.text()...) }

// appendHex appends the n low hex digits of v.
func appendHex(b []byte, v uint64, n int) []byte {
	const digits = "0123456789abcdef"
	for shift := 4 * (n - 1); shift >= 0; shift -= 4 {
		b = append(b, digits[v>>uint(shift)&15])
	}
	return b
}

// parsePosition reads a position's text, as position.text writes it.
func parsePosition(s []byte) (position, bool) {
	if len(s) != posLen || !isLowerHex(s) {
		return position{}, false
	}
	inv, _ := strconv.ParseUint(string(s[:16]), 16, 64)
	seq, _ := strconv.ParseUint(string(s[32:]), 16, 32)
	ns := ^inv
	if ns > 1<<63-1 {
		return position{}, false
	}
	return position{ns: int64(ns), writer: string(s[16:32]), seq: ^uint32(seq)}, true
}

// isLowerHex reports whether s is all lower-case hex digits.
func isLowerHex(s []byte) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// timeKey is the first key under prefix of the events made before t:
// ScanFrom from it reads those events, newest first.
func timeKey(prefix string, t time.Time) []byte {
	ns := max(t.UnixNano()-1, 0)
	return appendHex([]byte(prefix), ^uint64(ns), 16)
}

// stored is an event as a record holds it: JSON, without its time,
// which its key holds.
type stored struct {
	Actor   string            `json:"actor"`
	Action  string            `json:"action"`
	Target  string            `json:"target,omitempty"`
	Changes map[string]Change `json:"changes,omitempty"`
	Address string            `json:"address,omitempty"`
}

// encode is e as a record's value.
func encode(e Event) ([]byte, error) {
	for name, c := range e.Changes {
		if !json.Valid(orNull(c.From)) || !json.Valid(orNull(c.To)) {
			return nil, fmt.Errorf("audit: event: field %.40q: from or to is not JSON: %w", name, backend.ErrInvalid)
		}
	}
	v, err := json.Marshal(stored{Actor: e.Actor, Action: e.Action, Target: e.Target, Changes: e.Changes, Address: e.Address})
	if err != nil {
		return nil, fmt.Errorf("audit: event: %v: %w", err, backend.ErrInvalid)
	}
	return v, nil
}

// orNull is v, or null for none.
func orNull(v json.RawMessage) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	return v
}

// decode is the event of the record at key, whose position is p, with
// value v. A value that is not one Record wrote is ErrCorrupt.
func decode(key []byte, p position, v []byte) (Event, error) {
	var s stored
	d := json.NewDecoder(bytes.NewReader(v))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil || d.More() {
		return Event{}, fmt.Errorf("audit: record %q: not an event: %v: %w", key, err, backend.ErrCorrupt)
	}
	e := Event{Time: time.Unix(0, p.ns).UTC(), Actor: s.Actor, Action: s.Action, Target: s.Target, Changes: s.Changes, Address: s.Address}
	if e.Changes == nil {
		e.Changes = map[string]Change{}
	}
	for name, c := range e.Changes {
		e.Changes[name] = Change{From: orNull(c.From), To: orNull(c.To)}
	}
	if err := check(e); err != nil {
		return Event{}, fmt.Errorf("audit: record %q: %v: %w", key, err, backend.ErrCorrupt)
	}
	return e, nil
}
