package ledger

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
)

// A summary is a writer's (day, key) rollups of one closed day, added up
// per key and team, in a few large records rather than a record per key:
// a query by key or team over a month reads 30 summaries, not 300,000
// records. A writer writes the summary of a day once it has moved to the
// next (or closes), from the rollups it holds in memory: its own, which
// no other writer changes. A day some writer of which left no summary (it
// crashed, or it is today) is read from its key rollups instead.
//
//	L/s/day/writer/chunk  rows (key team totals)*, sorted by key, at most summaryRows a record
const (
	summaryPrefix = "L/s/"
	summaryRows   = 4096
)

// summary is one row of a summary.
type summary struct {
	key, team string
	Totals
}

// summarize writes the summaries of the days in l.closed.
func (l *Ledger) summarize(ctx context.Context) error {
	l.mu.Lock()
	days := l.closed
	l.closed = nil
	l.mu.Unlock()
	for i, d := range days {
		if err := l.summarizeDay(ctx, d); err != nil {
			l.mu.Lock()
			l.closed = append(days[i:], l.closed...)
			l.mu.Unlock()
			return err
		}
	}
	return nil
}

// summarizeDay writes the summary of day d from the rollups in memory.
// A day whose rollups left the cache (a compactor failing for two days)
// gets none: queries read its key rollups.
func (l *Ledger) summarizeDay(ctx context.Context, d day) error {
	rows := l.summaryRows(d)
	if rows == nil {
		return nil
	}
	return l.st.update(ctx, nil, func(w batch) error {
		for i, chunk := 0, 0; i < len(rows); i, chunk = i+summaryRows, chunk+1 {
			key := appendKey(nil, summaryPrefix, d, l.writer, fmt.Sprintf("%04x", chunk))
			if err := w.Put(key, appendSummary(nil, rows[i:min(i+summaryRows, len(rows))])); err != nil {
				return err
			}
		}
		return nil
	})
}

// summaryRows adds up the key rollups of day d in the cache; nil when the
// cache has none of that day.
func (l *Ledger) summaryRows(d day) []summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	sums := map[[2]string]*Totals{}
	for id, r := range l.rollups {
		if id.team || id.d != d {
			continue
		}
		for i := range r.rows {
			k := [2]string{id.name, r.rows[i].k.team}
			if sums[k] == nil {
				sums[k] = &Totals{}
			}
			sums[k].add(&r.rows[i].Totals)
		}
	}
	if len(sums) == 0 {
		return nil
	}
	rows := make([]summary, 0, len(sums))
	for k, t := range sums {
		rows = append(rows, summary{key: k[0], team: k[1], Totals: *t})
	}
	slices.SortFunc(rows, func(a, b summary) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.team, b.team)) })
	return rows
}

func appendSummary(b []byte, rows []summary) []byte {
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, uint64(len(rows)))
	for i := range rows {
		b = appendString(b, rows[i].key)
		b = appendString(b, rows[i].team)
		b = appendTotals(b, &rows[i].Totals)
	}
	return b
}

// decodeSummary calls fn with each row of v, its key and team encoded.
func decodeSummary(v []byte, fn func(key, team []byte, t *Totals)) error {
	r := reader{b: v}
	if r.byte() != codecVersion {
		return fmt.Errorf("%w: summary version", errCorrupt)
	}
	n := r.count(len(v))
	var t Totals // one for every row: fn's pointer escapes once
	for i := 0; i < n && r.err == nil; i++ {
		key, team := r.rawString(), r.rawString()
		t = r.totals()
		if r.err == nil {
			fn(key, team, &t)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

// summaryWriter returns the writer in a summary's key.
func summaryWriter(k []byte) (string, bool) {
	if len(k) != len(summaryPrefix)+8+1+16+1+4 {
		return "", false
	}
	rest := k[len(summaryPrefix):] // day/writer/chunk
	_, err := strconv.ParseUint(string(rest[len(rest)-4:]), 16, 16)
	return string(rest[9:25]), err == nil
}
