package ledger

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/ratestore/ratestore/backend"
)

// Compact rewrites the chunks of every sealed span as one block per day,
// and writes the summaries of the days the writer left, now, as the
// Ledger does on its own a few seconds after a span fills or a day ends.
// A block of 256 entries costs its values and one key, where its chunks
// cost a key each and their B-tree's overhead. A read-only Ledger fails
// with ErrReadOnly.
func (l *Ledger) Compact(ctx context.Context) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := l.compactSpans(ctx); err != nil {
		return err
	}
	return l.summarize(ctx)
}

func (l *Ledger) compactSpans(ctx context.Context) error {
	l.mu.Lock()
	spans := l.pending
	l.pending = nil
	l.mu.Unlock()
	for i, sp := range spans {
		for _, d := range sp.days {
			if err := l.compact(ctx, sp.first, d); err != nil {
				l.mu.Lock()
				l.pending = append(spans[i:], l.pending...)
				l.mu.Unlock()
				return err
			}
		}
	}
	return nil
}

// compact rewrites the singles of the span first of day d, and its
// block if it has one (a compaction retried), as one block, in one
// batch: a reader sees the singles or the block.
func (l *Ledger) compact(ctx context.Context, first uint32, d day) error {
	prefix := appendSeq(appendKey(nil, entryPrefix, d, l.writer, ""), first, 0)
	prefix = prefix[:len(prefix)-spanHex-1] // the hex digits the span's seqs share
	var items []item
	var singles [][]byte
	err := l.db.Scan(ctx, prefix, func(k, v []byte) error {
		_, seq, kind, ok := entryKey(k)
		if !ok {
			return nil
		}
		if kind == 'c' {
			singles = append(singles, bytes.Clone(k))
		}
		return eachInRecord(v, seq, kind, func(seq uint32, e *Entry) { items = append(items, item{seq, *e}) })
	})
	if err != nil || len(singles) == 0 {
		return err
	}
	slices.SortStableFunc(items, func(a, b item) int { return int(int64(a.seq) - int64(b.seq)) })
	items = slices.CompactFunc(items, func(a, b item) bool { return a.seq == b.seq })
	block := encodeBlock(first, items)
	return l.db.Update(ctx, nil, func(w backend.Batch) error {
		if err := w.Put(appendSeq(bytes.Clone(prefix[:len(prefix)-(8-spanHex)]), first, 'b'), block); err != nil {
			return err
		}
		for _, k := range singles {
			if err := w.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// eachInRecord calls fn with the entries of an entry record's value, of
// kind 'b' or 'c', first being the seq in its key.
func eachInRecord(v []byte, first uint32, kind byte, fn func(seq uint32, e *Entry)) error {
	return eachBlock(v, first, kind, func(br *blockReader, first uint32) error { return br.each(first, fn) })
}

// filter is what a read of entries wants: entries of the strings want
// (a key, team or model, encoded), decoded through in.
type filter struct {
	want [][]byte
	in   *interner
}

func newFilter(ss ...string) filter { return filter{want: encodeAll(ss...), in: newInterner()} }

// wants reports whether br's table has every string f wants: when it
// lacks one, none of its entries is wanted.
func (f filter) wants(br *blockReader) bool {
	for _, s := range f.want {
		if br.index(s, 0) < 0 {
			return false
		}
	}
	return true
}

// errStop ends a scan early.
var errStop = errors.New("ledger: stop")

// DropExpired deletes the entries of the days past the retention,
// a day at a time: its records are found under one prefix (one block
// per 256 entries), not by reading entries. The rollups stay.
func (l *Ledger) DropExpired(ctx context.Context) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	last := dayOf(l.db.Now()) - day(l.keep) // the newest day to drop
	var days []day
	err := l.db.Scan(ctx, []byte(dayPrefix), func(k, _ []byte) error {
		d, ok := parseDay(string(k[len(dayPrefix):]))
		if ok && d > last {
			return errStop
		}
		if ok {
			days = append(days, d)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	for _, d := range days {
		if err := l.dropDay(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// dropDay deletes the entries of day d, then its mark.
func (l *Ledger) dropDay(ctx context.Context, d day) error {
	var keys [][]byte
	err := l.db.Scan(ctx, appendKey(nil, entryPrefix, d, ""), func(k, _ []byte) error {
		keys = append(keys, bytes.Clone(k))
		return nil
	})
	if err != nil {
		return err
	}
	keys = append(keys, appendKey(nil, dayPrefix, d))
	for chunk := range slices.Chunk(keys, 512) {
		err := l.db.Update(ctx, nil, func(w backend.Batch) error {
			for _, k := range chunk {
				if err := w.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
