package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratestore/ratestore/backend"
)

// Query selects events, newest first. The zero value is the newest
// DefaultLimit events of the whole log.
type Query struct {
	// Target keeps the events of this key, team or other target only;
	// "" keeps all.
	Target string
	// From and To bound the events' times, [From, To). A zero From is the
	// retention's start, a zero To no bound. From must not be before the
	// retention's start, nor To past now + 1 day.
	From, To time.Time
	// Limit is the most events a page holds, 1 to MaxLimit; 0:
	// DefaultLimit.
	Limit int
	// Cursor is a Page's Next: the page after that one.
	Cursor string
}

// Bounds of a page.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// MaxPageBytes ends a page early once its events take this many
	// bytes as stored, so that a page of the largest events (a key's
	// create with every list at its bound) is megabytes, not a gigabyte;
	// a page holds one event at least.
	MaxPageBytes = 4 << 20
)

// ahead is how far past now a query's range may reach: a client's clock a
// little ahead of the store's, or a day asked for whole.
const ahead = 24 * time.Hour

// Page is a page of events, newest first, and the cursor of the next page
// ("" when there is none: no event of the query is older).
type Page struct {
	Events []Event
	Next   string
}

// QueryError is a parameter of a Query out of its range: Param names it
// as the admin API's query does ("from", "to", "limit", "target",
// "cursor"). It matches backend.ErrInvalid.
type QueryError struct {
	Param string
	Msg   string
}

func (e *QueryError) Error() string { return "audit: " + e.Param + " " + e.Msg }

func (e *QueryError) Unwrap() error { return backend.ErrInvalid }

// errFull stops a page's scan once it has read past the page.
var errFull = errors.New("audit: page full")

// Events returns a page of the events q selects, newest first. A page is
// one ScanFrom of an ordered range (the whole log's, or q.Target's), from
// the later of q.To and the cursor, that stops at the first event before
// q.From or past the page: it reads the page and one record more, in
// O(page + log n) on every backend. Events recorded while pages are read
// are newer than the cursor, and never shift a later page: no event is
// read twice, and none that existed throughout is skipped.
func (l *Log) Events(ctx context.Context, q Query) (Page, error) {
	prefix, start, stop, err := l.bounds(&q)
	if err != nil {
		return Page{}, err
	}
	p := Page{Events: []Event{}}
	size, last := 0, position{}
	err = l.db.ScanFrom(ctx, []byte(prefix), start, func(k, v []byte) error {
		pos, ok := parsePosition(k[len(prefix):])
		if !ok {
			return fmt.Errorf("audit: record key %q: not an event's: %w", k, backend.ErrCorrupt)
		}
		if bytes.Compare(k[len(prefix):len(prefix)+16], stop) > 0 {
			return errFull // before From: so is every later record
		}
		if len(p.Events) == q.Limit || size >= MaxPageBytes {
			p.Next = string(last.text())
			return errFull
		}
		e, err := decode(k, pos, v)
		if err != nil {
			return err
		}
		p.Events, size, last = append(p.Events, e), size+len(v), pos
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return Page{}, err
	}
	return p, nil
}

// bounds checks q, fills in its defaults, and returns the range a page of
// it reads: the records under prefix from start on, until the first whose
// time, as a key has it (16 hex digits), sorts after stop.
func (l *Log) bounds(q *Query) (prefix string, start, stop []byte, err error) {
	now := l.db.Now()
	oldest := now.Add(-l.opts.Retention)
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 0 || q.Limit > MaxLimit:
		return "", nil, nil, &QueryError{Param: "limit", Msg: fmt.Sprintf("%d: want 1 to %d", q.Limit, MaxLimit)}
	}
	if err := checkRange(q, now, oldest); err != nil {
		return "", nil, nil, err
	}
	if q.From.IsZero() {
		q.From = oldest
	}
	prefix = eventPrefix
	if q.Target != "" {
		if !isName(q.Target) {
			return "", nil, nil, &QueryError{Param: "target", Msg: fmt.Sprintf("%.40q: want a key's or team's id (key_..., team_...)", q.Target)}
		}
		prefix = targetPrefix(q.Target)
	}
	start = []byte(prefix)
	if !q.To.IsZero() {
		start = timeKey(prefix, q.To)
	}
	if q.Cursor != "" {
		if _, ok := parsePosition([]byte(q.Cursor)); !ok {
			return "", nil, nil, &QueryError{Param: "cursor", Msg: fmt.Sprintf("%.50q: not one this log gave", q.Cursor)}
		}
		after := append([]byte(prefix+q.Cursor), 0) // the first key after the cursor's
		if bytes.Compare(after, start) > 0 {
			start = after
		}
	}
	stop = appendHex(nil, ^uint64(max(q.From.UnixNano(), 0)), 16) // From's time in a key: later keys are older

	return prefix, start, stop, nil
}

// checkRange refuses a range that reaches past now + ahead, or before
// oldest, the retention's start, or whose From is not before its To.
func checkRange(q *Query, now, oldest time.Time) error {
	f := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	switch {
	case !q.To.IsZero() && q.To.After(now.Add(ahead)):
		return &QueryError{Param: "to", Msg: fmt.Sprintf("%s is past now + 1 day (%s): want at most that", f(q.To), f(now.Add(ahead)))}
	case !q.To.IsZero() && !q.To.After(oldest):
		return &QueryError{Param: "to", Msg: fmt.Sprintf("%s is before the retention's start: want after %s (events are kept %v)", f(q.To), f(oldest), days(now.Sub(oldest)))}
	case !q.From.IsZero() && q.From.Before(oldest):
		return &QueryError{Param: "from", Msg: fmt.Sprintf("%s is before the retention's start: want %s or later (events are kept %v)", f(q.From), f(oldest), days(now.Sub(oldest)))}
	case !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To):
		return &QueryError{Param: "from", Msg: fmt.Sprintf("%s is not before to %s: want from before to (the range is [from, to))", f(q.From), f(q.To))}
	}
	return nil
}

// days is d as whole days and the rest: "400 days", "36h0m0s".
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}
