package ledger

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ratestore/ratestore/backend"
)

// A month summary is a writer's day summaries of one UTC month added up:
// a spend over ten years by key reads 120 summaries a writer, not 3,660,
// and a key active on many days of a month is one row, not one a day.
// A writer writes those of a month once it has moved to the next (or
// closes), from its day summaries as stored (its key rollups, for a day
// that has none). A month some writer of which left no summary (it
// crashed, or it is this month) is read by day for that writer. A spend
// reads them for the months its range holds whole, when it does not
// group by time.
//
//	L/S/month/writer/chunk  rows (key team totals)*, sorted, at most summaryRows a record
//	L/M/month/writer/chunk  rows (key team model totals)*, likewise
const (
	monthSummaryPrefix      = "L/S/"
	monthModelSummaryPrefix = "L/M/"
)

// A month is a UTC month, as 12*year + month - 1.
type month int32

func monthOf(d day) month {
	y, m, _ := d.time().Date()
	return month(12*y + int(m) - 1)
}

// first is the month's first day.
func (m month) first() day {
	return dayOf(time.Date(int(m)/12, time.Month(int(m)%12+1), 1, 0, 0, 0, 0, time.UTC))
}

// last is the month's last day.
func (m month) last() day { return (m + 1).first() - 1 }

// appendKey appends prefix, m as YYYYMM and the parts, as the day's
// appendKey does.
func (m month) appendKey(b []byte, prefix string, parts ...string) []byte {
	b = append(b, prefix...)
	b = fmt.Appendf(b, "%04d%02d", int(m)/12, int(m)%12+1)
	for _, p := range parts {
		b = append(b, '/')
		b = append(b, p...)
	}
	return b
}

// summarizeMonths writes the month summaries of the months of days that
// the writer has left: before today's month, or every one when closing.
// The caller does not hold l.mu.
func (l *Ledger) summarizeMonths(ctx context.Context, days []day) error {
	l.mu.Lock()
	now, closing := monthOf(l.w.today), l.closing
	l.mu.Unlock()
	var ms []month
	for _, d := range days {
		if m := monthOf(d); (m < now || closing) && !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
	}
	for _, m := range ms {
		if err := l.summarizeMonth(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// summarizeMonth writes the writer's summaries of month m, from its day
// summaries, or its key rollups of a day that has none.
func (l *Ledger) summarizeMonth(ctx context.Context, m month) error {
	writers, err := l.writers(ctx, m.first(), m.last())
	if err != nil {
		return err
	}
	sums := map[[3]string]*Totals{}
	for _, d := range slices.Sorted(maps.Keys(writers)) {
		if !slices.Contains(writers[d], l.writer) {
			continue
		}
		rows, err := l.daySummary(ctx, d)
		if err != nil {
			return err
		}
		for _, r := range rows {
			k := [3]string{r.key, r.team, r.model}
			if sums[k] == nil {
				sums[k] = &Totals{}
			}
			sums[k].add(&r.Totals)
		}
	}
	if len(sums) == 0 {
		return nil
	}
	byModel := make([]summary, 0, len(sums))
	for k, t := range sums {
		byModel = append(byModel, summary{key: k[0], team: k[1], model: k[2], Totals: *t})
	}
	slices.SortFunc(byModel, func(a, b summary) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.team, b.team), cmp.Compare(a.model, b.model))
	})
	byKey := sumModels(byModel)
	return l.db.Update(ctx, nil, func(w backend.Batch) error {
		if err := l.putSummary(w, m.appendKey(nil, monthModelSummaryPrefix, l.writer), byModel); err != nil {
			return err
		}
		return l.putSummary(w, m.appendKey(nil, monthSummaryPrefix, l.writer), byKey)
	})
}

// daySummary returns the writer's rows of day d by key, team and model:
// its summary, or its stored key rollups when it wrote none.
func (l *Ledger) daySummary(ctx context.Context, d day) ([]summary, error) {
	var rows []summary
	err := l.db.Scan(ctx, appendKey(nil, modelSummaryPrefix, d, l.writer, ""), func(_, v []byte) error {
		return decodeSummary(v, func(key, team, model []byte, t *Totals) {
			rows = append(rows, summary{key: decodeString(key), team: decodeString(team), model: decodeString(model), Totals: *t})
		})
	})
	if err != nil || rows != nil {
		return rows, err
	}
	return l.storedRows(ctx, d)
}

// wholeMonths returns the months whose days from first to last are all
// in [first, last] and that hold one of ds.
func wholeMonths(first, last day, ds []day) []month {
	var ms []month
	for _, d := range ds {
		if m := monthOf(d); m.first() >= first && m.last() <= last && !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
	}
	return ms
}

// spendOfMonth adds up into a the month summaries of m, and returns the
// writers that wrote one: their days of m are not to be read.
func (l *Ledger) spendOfMonth(ctx context.Context, a *aggregator, m month) (map[string]bool, error) {
	prefix := monthSummaryPrefix
	if byModel(a.q) {
		prefix = monthModelSummaryPrefix
	}
	at := m.first().time().Unix()
	start := m.appendKey(nil, prefix, "")
	done := map[string]bool{}
	err := l.db.Scan(ctx, start, func(k, v []byte) error {
		w, _, ok := bytes.Cut(k[len(start):], []byte{'/'})
		if !ok || len(w) != 16 {
			return fmt.Errorf("%w: month summary key %q", errCorrupt, k)
		}
		done[string(w)] = true
		return decodeSummary(v, func(key, team, model []byte, t *Totals) { a.addSummary(key, team, model, at, t) })
	})
	return done, err
}

// byModel reports whether q needs the rows by model: grouped or
// filtered by it.
func byModel(q SpendQuery) bool { return q.Model != "" || slices.Contains(q.GroupBy, ByModel) }
