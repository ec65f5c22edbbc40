package ledger

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scanDay calls fn with each entry record of day d, in the order of
// their writers and seqs, leaving out the chunks of a block already read
// (compacted while the scan ran, on a store without snapshots).
func (l *Ledger) scanDay(ctx context.Context, d day, fn func(writer string, seq uint32, kind byte, k, v []byte) error) error {
	var writer string
	var covered uint32 // the current writer's seqs below are in a block read
	return l.db.Scan(ctx, appendKey(nil, entryPrefix, d, ""), func(k, v []byte) error {
		w, seq, kind, ok := entryKey(k)
		if !ok {
			return fmt.Errorf("%w: entry key %q", errCorrupt, k)
		}
		if w != writer {
			writer, covered = w, 0
		}
		if kind == 'c' && seq < covered {
			return nil
		}
		if kind == 'b' {
			covered = seq + blockSize
		}
		return fn(writer, seq, kind, k, v)
	})
}

// dayEntries calls fn with every entry of day d, in the order of their
// writers and seqs. A block whose table lacks one of f's strings holds no
// entry that fn wants, and is not decoded further.
func (l *Ledger) dayEntries(ctx context.Context, d day, f filter, fn func(writer string, seq uint32, e *Entry)) error {
	return l.scanDay(ctx, d, func(w string, seq uint32, kind byte, k, v []byte) error {
		err := eachBlock(v, seq, kind, func(br *blockReader, first uint32) error {
			br.in = f.in
			if !f.wants(br) {
				return nil
			}
			return br.each(first, func(seq uint32, e *Entry) { fn(w, seq, e) })
		})
		if err != nil {
			return fmt.Errorf("ledger: entries %s: %w", k, err)
		}
		return nil
	})
}

// entryDays returns the days from first to last that hold entries (their
// L/x marks), newest first if desc. Only the days of the retention can,
// and one more ahead for a clock a little ahead of the store's: the marks
// of those at most keep+2 days are read at once (a round trip on Redis),
// whatever the range, so that a query never walks day by day through
// empty time.
func (l *Ledger) entryDays(ctx context.Context, first, last day, desc bool) ([]day, error) {
	today := dayOf(l.db.Now())
	first, last = max(first, today-day(l.keep)), min(last, today+1)
	var marks [][]byte
	for d := first; d <= last; d++ {
		marks = append(marks, appendKey(nil, dayPrefix, d))
	}
	vals, err := getAll(ctx, l.db, marks)
	if err != nil {
		return nil, err
	}
	var ds []day
	for i, v := range vals {
		if v != nil {
			ds = append(ds, first+day(i))
		}
	}
	if desc {
		slices.Reverse(ds)
	}
	return ds, nil
}

// position is where an entry is in the newest-first order: by time, then
// writer, then seq, each descending.
type position struct {
	ms     int64
	writer string
	seq    uint32
}

func (p position) compare(o position) int {
	return cmp.Or(cmp.Compare(p.ms, o.ms), cmp.Compare(p.writer, o.writer), cmp.Compare(p.seq, o.seq))
}

// before reports whether p comes after o in the newest-first order.
func (p position) before(o position) bool { return p.compare(o) < 0 }

func (p position) cursor() string {
	return strconv.FormatInt(p.ms, 10) + "." + p.writer + "." + strconv.FormatUint(uint64(p.seq), 10)
}

func parseCursor(s string) (*position, error) {
	parts := strings.Split(s, ".")
	bad := &QueryError{Param: "cursor", Msg: fmt.Sprintf("%.40q: not one this ledger gave", s)}
	if len(parts) != 3 || len(parts[1]) != 16 {
		return nil, bad
	}
	ms, err1 := strconv.ParseInt(parts[0], 10, 64)
	seq, err2 := strconv.ParseUint(parts[2], 10, 32)
	if err := errors.Join(err1, err2); err != nil || !isLowerHex(parts[1]) {
		return nil, bad
	}
	return &position{ms: ms, writer: parts[1], seq: uint32(seq)}, nil
}

// QueryError is a parameter of a query that is out of its range: Param
// names it as the admin API does ("from", "to", "limit", "group_by",
// "status", "cursor"), and Msg, which follows it in Error, says what is
// wrong and what is allowed. It matches
// ErrInvalid, so that a caller answers it as a bad request.
type QueryError struct {
	Param string
	Msg   string
}

func (e *QueryError) Error() string { return "ledger: " + e.Param + " " + e.Msg }

func (e *QueryError) Unwrap() error { return ErrInvalid }

// ahead is how far past now a query's range may reach: a client's clock
// a little ahead of the store's, or a day asked for whole.
const ahead = 24 * time.Hour

// checkTo refuses a range's end past now + ahead.
func checkTo(to, now time.Time) error {
	if limit := now.Add(ahead); to.After(limit) {
		return &QueryError{Param: "to", Msg: fmt.Sprintf("%s is past now + 1 day (%s): want at most that",
			to.UTC().Format(time.RFC3339), limit.UTC().Format(time.RFC3339))}
	}
	return nil
}

// checkOrder refuses a range whose from is not before its to.
func checkOrder(from, to time.Time) error {
	if !from.Before(to) {
		return &QueryError{Param: "from", Msg: fmt.Sprintf("%s is not before to %s: want from before to (the range is [from, to))",
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))}
	}
	return nil
}

// retentionStart is the start of the oldest day whose entries may be
// kept: the day the next sweep drops, and the days after it.
func (l *Ledger) retentionStart(now time.Time) time.Time {
	return (dayOf(now) - day(l.keep)).time()
}

// normalizeRequests checks q and fills in its defaults: its range within
// the retention and at most a day past now, so that what a query reads is
// bounded by the retention's days, whatever it asks.
func (l *Ledger) normalizeRequests(q RequestQuery) (RequestQuery, *position, error) {
	now := l.db.Now()
	start := l.retentionStart(now)
	if q.To.IsZero() {
		q.To = now.Add(time.Millisecond)
	}
	if q.From.IsZero() {
		q.From = start
	}
	switch {
	case q.Limit == 0:
		q.Limit = 100
	case q.Limit < 0 || q.Limit > MaxLimit:
		return q, nil, &QueryError{Param: "limit", Msg: fmt.Sprintf("%d: want 1 to %d", q.Limit, MaxLimit)}
	}
	if q.From.Before(start) {
		return q, nil, &QueryError{Param: "from", Msg: fmt.Sprintf("%s is before the retention's start: want %s or later (entries are kept %d days)",
			q.From.UTC().Format(time.RFC3339), start.Format(time.RFC3339), l.keep)}
	}
	if err := cmp.Or(checkTo(q.To, now), checkOrder(q.From, q.To)); err != nil {
		return q, nil, err
	}
	if q.Status < 0 || q.Status > 999 {
		return q, nil, &QueryError{Param: "status", Msg: fmt.Sprintf("%d: want an HTTP status", q.Status)}
	}
	if q.Cursor == "" {
		return q, nil, nil
	}
	after, err := parseCursor(q.Cursor)
	return q, after, err
}

// rollupName returns the name (a key's or team's id) in a rollup's key:
// prefix, day, name, writer.
func rollupName(k []byte, prefix string) ([]byte, bool) {
	if len(k) < len(prefix)+8+1+1+1+16 {
		return nil, false
	}
	rest := k[len(prefix):]
	if rest[8] != '/' || rest[len(rest)-17] != '/' {
		return nil, false
	}
	name := rest[9 : len(rest)-17]
	return name, !bytes.ContainsRune(name, '/')
}
