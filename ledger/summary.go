package ledger

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/ratestore/ratestore/backend"
)

// A summary is a writer's (day, key) rollups of one closed day in a few
// large records rather than a record per key: a query over a month reads
// 30 summaries, not 300,000 records. Each day has two: a row per key and
// team (for queries that need no model), and a row per key, team and
// model, three times as many rows on keys using three models each. A writer writes the summary of a day once it has moved to the
// next (or closes), from the rollups it holds in memory: its own, which
// no other writer changes. A day some writer of which left no summary (it
// crashed, or it is today) is read from its key rollups instead.
//
//	L/s/day/writer/chunk  rows (key team totals)*, sorted, at most summaryRows a record
//	L/m/day/writer/chunk  rows (key team model totals)*, likewise
const (
	summaryPrefix      = "L/s/"
	modelSummaryPrefix = "L/m/"
	summaryRows        = 4096
)

// summary is one row of a summary.
type summary struct {
	key, team, model string
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
	return l.summarizeMonths(ctx, days)
}

// summarizeDay writes the summary of day d, and its day total, from the
// rollups in memory, or on a shared store from the stored ones. A day
// whose rollups left the cache (a compactor failing for two days) gets
// none: queries read its key rollups.
func (l *Ledger) summarizeDay(ctx context.Context, d day) error {
	var byModel []summary
	if l.shared {
		var err error
		if byModel, err = l.storedRows(ctx, d); err != nil {
			return err
		}
	} else {
		byModel = l.summaryRows(d)
	}
	if byModel == nil {
		return nil
	}
	byKey := sumModels(byModel)
	total := appendDayTotal(nil, totalOf(byModel))
	return l.db.Update(ctx, nil, func(w backend.Batch) error {
		if err := l.putSummary(w, appendKey(nil, modelSummaryPrefix, d, l.writer), byModel); err != nil {
			return err
		}
		if err := l.putSummary(w, appendKey(nil, summaryPrefix, d, l.writer), byKey); err != nil {
			return err
		}
		return w.Put(appendKey(nil, totalPrefix, d, l.writer), total)
	})
}

// putSummary puts rows as the summary whose records' keys start with
// prefix (the kind, period and writer): a record per summaryRows rows.
func (l *Ledger) putSummary(w batch, prefix []byte, rows []summary) error {
	for i, chunk := 0, 0; i < len(rows); i, chunk = i+summaryRows, chunk+1 {
		key := fmt.Appendf(bytes.Clone(prefix), "/%04x", chunk)
		if err := w.Put(key, appendSummary(nil, rows[i:min(i+summaryRows, len(rows))])); err != nil {
			return err
		}
	}
	return nil
}

// sumModels adds up rows, sorted by key, team and model, per key and
// team.
func sumModels(rows []summary) []summary {
	var out []summary
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].key == r.key && out[n-1].team == r.team {
			out[n-1].add(&r.Totals)
			continue
		}
		r.model = ""
		r.Reasons = maps.Clone(r.Reasons)
		out = append(out, r)
	}
	return out
}

// summaryRows returns the rows of the key rollups of day d in the
// cache; nil when the cache has none of that day.
func (l *Ledger) summaryRows(d day) []summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rows []summary
	for id, r := range l.rollups {
		if id.team || id.endUsers || id.d != d {
			continue
		}
		for i := range r.rows {
			rows = append(rows, summary{key: id.name, team: r.rows[i].k.team, model: r.rows[i].k.model, Totals: r.rows[i].Totals})
		}
	}
	slices.SortFunc(rows, func(a, b summary) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.team, b.team), cmp.Compare(a.model, b.model))
	})
	return rows
}

// storedRows returns the rows of the writer's key rollups of day d as
// stored: on a shared store, where they are not cached (see
// Ledger.shared).
func (l *Ledger) storedRows(ctx context.Context, d day) ([]summary, error) {
	var rows []summary
	prefix := appendKey(nil, keyPrefix, d, "")
	err := l.db.Scan(ctx, prefix, func(k, v []byte) error {
		key, writer, ok := bytes.Cut(k[len(prefix):], []byte{'/'})
		if !ok || string(writer) != l.writer {
			return nil
		}
		return decodeRollup(v, func(team, model []byte, t *Totals) {
			rows = append(rows, summary{key: string(key), team: decodeString(team), model: decodeString(model), Totals: *t})
		})
	})
	// Scan gives them in key order; a key's rows are in team and model
	// order: the summary's.
	return rows, err
}

func appendSummary(b []byte, rows []summary) []byte {
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, uint64(len(rows)))
	for i := range rows {
		b = appendString(b, rows[i].key)
		b = appendString(b, rows[i].team)
		b = appendString(b, rows[i].model)
		b = appendTotals(b, &rows[i].Totals)
	}
	return b
}

// decodeSummary calls fn with each row of v, its key, team and model
// encoded.
func decodeSummary(v []byte, fn func(key, team, model []byte, t *Totals)) error {
	r := reader{b: v}
	if r.byte() != codecVersion {
		return fmt.Errorf("%w: summary version", errCorrupt)
	}
	n := r.count(len(v))
	var t Totals // one for every row: fn's pointer escapes once
	for i := 0; i < n && r.err == nil; i++ {
		key, team, model := r.rawString(), r.rawString(), r.rawString()
		t = r.totals()
		if r.err == nil {
			fn(key, team, model, &t)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

// summaryWriter returns the writer in a summary's key.
func summaryWriter(k []byte) (string, bool) {
	if len(k) != len(summaryPrefix)+8+1+16+1+4 { // both prefixes are 4 bytes
		return "", false
	}
	rest := k[len(summaryPrefix):] // day/writer/chunk
	_, err := strconv.ParseUint(string(rest[len(rest)-4:]), 16, 16)
	return string(rest[9:25]), err == nil
}
