package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// maxDays bounds a Spend query's range: ten years of days.
const maxDays = 3660

// Spend answers q from the rollups, or from the entries when grouped by
// hour. Reading a range costs its days' rollups: one record per key (and
// writer) and day; with a key or team asked for, one read per day and
// writer.
func (l *Ledger) Spend(ctx context.Context, q SpendQuery) (Spend, error) {
	q, err := l.normalizeSpend(q)
	if err != nil {
		return Spend{}, err
	}
	a := aggregator{q: q, groups: make(map[group]*Totals)}
	if slices.Contains(q.GroupBy, ByHour) {
		err = l.spendFromEntries(ctx, &a)
	} else {
		err = l.spendFromRollups(ctx, &a)
	}
	if err != nil {
		return Spend{}, err
	}
	return a.result(), nil
}

// normalizeSpend checks q and rounds its range out to whole days (hours).
func (l *Ledger) normalizeSpend(q SpendQuery) (SpendQuery, error) {
	unit := 24 * time.Hour
	seen := map[string]bool{}
	for _, by := range q.GroupBy {
		switch {
		case !slices.Contains([]string{ByKey, ByTeam, ByModel, ByDay, ByHour}, by):
			return q, fmt.Errorf("ledger: group by %.40q: want key, team, model, day or hour: %w", by, ErrInvalid)
		case seen[by]:
			return q, fmt.Errorf("ledger: group by %q twice: %w", by, ErrInvalid)
		}
		seen[by] = true
	}
	if seen[ByDay] && seen[ByHour] {
		return q, fmt.Errorf("ledger: group by day and hour: choose one: %w", ErrInvalid)
	}
	if seen[ByHour] {
		unit = time.Hour
	}
	if q.To.IsZero() {
		q.To = l.st.now()
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-30 * 24 * time.Hour)
	}
	if !q.From.Before(q.To) {
		return q, fmt.Errorf("ledger: from %s is not before to %s: %w", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339), ErrInvalid)
	}
	q.From = q.From.UTC().Truncate(unit)
	if to := q.To.UTC().Truncate(unit); to.Equal(q.To) {
		q.To = to
	} else {
		q.To = to.Add(unit)
	}
	if q.To.Sub(q.From) > maxDays*24*time.Hour {
		return q, fmt.Errorf("ledger: a range of %v: want at most %d days: %w", q.To.Sub(q.From), maxDays, ErrInvalid)
	}
	return q, nil
}

// spendFromRollups adds up the rollups of q's days: a key's (or team's)
// by direct reads of each writer's, all keys' by a scan of the day.
func (l *Ledger) spendFromRollups(ctx context.Context, a *aggregator) error {
	q := a.q
	first, last := dayOf(q.From), dayOf(q.To.Add(-time.Nanosecond))
	byTeam := q.Team != "" && q.Key == "" && !slices.Contains(q.GroupBy, ByKey)
	if q.Key == "" && !byTeam {
		for _, d := range days(first, last, false) {
			err := l.st.scan(ctx, appendKey(nil, keyPrefix, d, ""), func(k, v []byte) error {
				_, key, ok := splitRollupKey(k, keyPrefix)
				if !ok {
					return fmt.Errorf("%w: rollup key %q", errCorrupt, k)
				}
				return a.addRollup(v, key, "", d)
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	writers, err := l.writers(ctx, first, last)
	if err != nil {
		return err
	}
	prefix, name := keyPrefix, q.Key
	if byTeam {
		prefix, name = teamPrefix, q.Team
	}
	for _, d := range days(first, last, false) {
		for _, w := range writers[d] {
			v, err := l.st.get(ctx, appendKey(nil, prefix, d, name, w))
			if err != nil {
				return err
			}
			if byTeam {
				err = a.addRollup(v, "", q.Team, d)
			} else {
				err = a.addRollup(v, q.Key, "", d)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// writers returns the writers of each day from first to last.
func (l *Ledger) writers(ctx context.Context, first, last day) (map[day][]string, error) {
	ws := make(map[day][]string)
	err := l.st.scan(ctx, []byte(writerPrefix), func(k, _ []byte) error {
		rest := string(k[len(writerPrefix):])
		ds, w, ok := strings.Cut(rest, "/")
		d, dok := parseDay(ds)
		switch {
		case !ok || !dok || len(w) != 16:
			return fmt.Errorf("%w: writer key %q", errCorrupt, k)
		case d > last:
			return errStop
		case d >= first:
			ws[d] = append(ws[d], w)
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return ws, err
}

// spendFromEntries adds up the entries of q's range, by hour.
func (l *Ledger) spendFromEntries(ctx context.Context, a *aggregator) error {
	q := a.q
	for _, d := range days(dayOf(q.From), dayOf(q.To.Add(-time.Nanosecond)), false) {
		err := l.dayEntries(ctx, d, []string{q.Key, q.Team, q.Model}, func(_ string, _ uint32, e *Entry) {
			if e.Time.Before(q.From) || !e.Time.Before(q.To) {
				return
			}
			t := Totals{Requests: 1, Tokens: e.Tokens, Cost: e.Cost}
			a.add(e.Key, e.Team, e.Model, e.Time.Truncate(time.Hour), &t)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// group is a row of a report: the values of its grouped dimensions.
type group struct {
	key, team, model string
	at               int64 // Unix seconds of its day or hour
}

// aggregator adds rows up into the groups of a query.
type aggregator struct {
	q      SpendQuery
	groups map[group]*Totals
	total  Totals
}

// addRollup adds the rows of a rollup value, of key (a key's) or of
// team (a team's), on day d. A missing value (nil) adds nothing.
func (a *aggregator) addRollup(v []byte, key, team string, d day) error {
	if v == nil {
		return nil
	}
	at := d.time()
	return decodeRollup(v, func(k rowKey, t *Totals) {
		if team == "" {
			a.add(key, k.team, k.model, at, t)
		} else {
			a.add("", team, k.model, at, t)
		}
	})
}

// add adds t, of key, team and model at instant at, if q selects it.
func (a *aggregator) add(key, team, model string, at time.Time, t *Totals) {
	q := &a.q
	if q.Key != "" && key != q.Key || q.Team != "" && team != q.Team || q.Model != "" && model != q.Model {
		return
	}
	var g group
	for _, by := range q.GroupBy {
		switch by {
		case ByKey:
			g.key = key
		case ByTeam:
			g.team = team
		case ByModel:
			g.model = model
		case ByDay, ByHour:
			g.at = at.Unix()
		}
	}
	sum := a.groups[g]
	if sum == nil {
		sum = &Totals{}
		a.groups[g] = sum
	}
	sum.add(t)
	a.total.add(t)
}

// result returns the report, its rows ordered by time, key, team, model.
func (a *aggregator) result() Spend {
	s := Spend{From: a.q.From, To: a.q.To, GroupBy: a.q.GroupBy, Total: a.total, query: a.q}
	timed := slices.Contains(a.q.GroupBy, ByDay) || slices.Contains(a.q.GroupBy, ByHour)
	for g, t := range a.groups {
		r := Row{Key: g.key, Team: g.team, Model: g.model, Totals: *t}
		if timed {
			r.Day = time.Unix(g.at, 0).UTC()
		}
		s.Rows = append(s.Rows, r)
	}
	slices.SortFunc(s.Rows, func(a, b Row) int {
		return cmp.Or(a.Day.Compare(b.Day), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Team, b.Team), cmp.Compare(a.Model, b.Model))
	})
	return s
}
