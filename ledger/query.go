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
	return l.st.scan(ctx, appendKey(nil, entryPrefix, d, ""), func(k, v []byte) error {
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

// days returns the days from first to last, newest first if desc.
func days(first, last day, desc bool) []day {
	var ds []day
	for d := first; d <= last; d++ {
		ds = append(ds, d)
	}
	if desc {
		slices.Reverse(ds)
	}
	return ds
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
	bad := fmt.Errorf("ledger: cursor %.40q: not one this ledger gave: %w", s, ErrInvalid)
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

// normalizeRequests checks q and fills in its defaults.
func (l *Ledger) normalizeRequests(q RequestQuery) (RequestQuery, *position, error) {
	now := l.st.now()
	if q.To.IsZero() {
		q.To = now.Add(time.Millisecond)
	}
	if q.From.IsZero() {
		q.From = (dayOf(now) - day(l.keep)).time()
	}
	switch {
	case q.Limit == 0:
		q.Limit = 100
	case q.Limit < 0 || q.Limit > MaxLimit:
		return q, nil, fmt.Errorf("ledger: limit %d: want 1 to %d: %w", q.Limit, MaxLimit, ErrInvalid)
	}
	if !q.From.Before(q.To) {
		return q, nil, fmt.Errorf("ledger: from %s is not before to %s: %w", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339), ErrInvalid)
	}
	if q.Status < 0 || q.Status > 999 {
		return q, nil, fmt.Errorf("ledger: status %d: want an HTTP status: %w", q.Status, ErrInvalid)
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
