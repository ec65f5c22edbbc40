package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxDays bounds a Spend query's range: ten years of days.
const maxDays = 3660

// maxHours bounds the range of a Spend query grouped by hour, which reads
// every entry of its range (the rollups are by day): a day of hours.
// Longer ranges are grouped by day.
const maxHours = 24

// Spend answers q from the rollups, or from the entries when grouped by
// hour. Reading a range costs its days' rollups: one record per key (and
// writer) and day; with a key or team asked for, one read per day and
// writer. Grouped by time and another dimension, it reads them twice: to
// rank the groups over the range (see SpendQuery), then to add up the
// top ones, and the rest as one, by day (hour), so that what it holds is
// at most Limit+1 groups per day.
func (l *Ledger) Spend(ctx context.Context, q SpendQuery) (Spend, error) {
	q, err := l.normalizeSpend(q)
	if err != nil {
		return Spend{}, err
	}
	inner, endUsers, err := endUserQuery(q)
	if err != nil {
		return Spend{}, err
	}
	var top map[[3]string]bool
	if ranked := withoutTime(inner); timed(inner) && len(ranked.GroupBy) > 0 {
		r := newAggregator(ranked, nil)
		r.endUsers = endUsers
		if err := l.read(ctx, r, slices.Contains(q.GroupBy, ByHour)); err != nil {
			return Spend{}, err
		}
		top = r.ranking()
	}
	a := newAggregator(inner, top)
	a.endUsers = endUsers
	if err := l.read(ctx, a, slices.Contains(q.GroupBy, ByHour)); err != nil {
		return Spend{}, err
	}
	s := a.result()
	if endUsers {
		s = asEndUsers(s, q)
	}
	return s, nil
}

// endUserQuery returns q as the aggregator reads it, and true, when q
// groups or filters by end user: the end user in the place of the model,
// which the rollups of end users do not have (a QueryError when q asks
// for it). Otherwise it returns q and false.
func endUserQuery(q SpendQuery) (SpendQuery, bool, error) {
	if !slices.Contains(q.GroupBy, ByEndUser) && q.EndUser == "" {
		return q, false, nil
	}
	switch {
	case q.Model != "":
		return q, false, &QueryError{Param: "model", Msg: fmt.Sprintf("%.40q with end_user: want one of them (spend by end user is kept per key and team, not per model)", q.Model)}
	case slices.Contains(q.GroupBy, ByModel):
		return q, false, &QueryError{Param: "group_by", Msg: "model with end_user: want one of them (spend by end user is kept per key and team, not per model)"}
	}
	q.GroupBy = slices.Clone(q.GroupBy)
	if i := slices.Index(q.GroupBy, ByEndUser); i >= 0 {
		q.GroupBy[i] = ByModel
	}
	q.Model, q.EndUser = q.EndUser, ""
	return q, true, nil
}

// asEndUsers is s, the answer to endUserQuery(q), as the answer to q:
// the end users its rows hold as models are their end users.
func asEndUsers(s Spend, q SpendQuery) Spend {
	for i := range s.Rows {
		s.Rows[i].EndUser, s.Rows[i].Model = s.Rows[i].Model, ""
	}
	s.GroupBy, s.query = q.GroupBy, q
	return s
}

// read adds up into a the entries (hourly) or the rollups of its query,
// and the refusals waiting.
func (l *Ledger) read(ctx context.Context, a *aggregator, hourly bool) error {
	if hourly {
		return l.spendFromEntries(ctx, a)
	}
	read := l.spendFromRollups
	if a.endUsers {
		read = l.spendOfEndUsers
	}
	if err := read(ctx, a); err != nil {
		return err
	}
	l.addWaiting(a) // after the reads: a count written meanwhile is missed once, never added twice
	return nil
}

// timed reports whether q groups by day or hour.
func timed(q SpendQuery) bool {
	return slices.Contains(q.GroupBy, ByDay) || slices.Contains(q.GroupBy, ByHour)
}

// withoutTime is q grouped by its dimensions other than time.
func withoutTime(q SpendQuery) SpendQuery {
	q.GroupBy = slices.DeleteFunc(slices.Clone(q.GroupBy), func(by string) bool { return by == ByDay || by == ByHour })
	return q
}

// normalizeSpend checks q and rounds its range out to whole days (hours):
// at most maxDays long (maxHours by hour), reaching at most a day past
// now. Without a From, by hour it is the last maxHours.
func (l *Ledger) normalizeSpend(q SpendQuery) (SpendQuery, error) {
	seen, err := checkGroupBy(q.GroupBy)
	if err != nil {
		return q, err
	}
	unit := 24 * time.Hour
	if seen[ByHour] {
		unit = time.Hour
	}
	now := l.db.Now()
	if q.To.IsZero() {
		q.To = now.Add(time.Nanosecond) // now included
	}
	if err := checkTo(q.To, now); err != nil {
		return q, err
	}
	given := !q.From.IsZero()
	if given {
		if err := checkOrder(q.From, q.To); err != nil {
			return q, err
		}
	} else {
		q.From = q.To.Add(-30 * 24 * time.Hour)
	}
	if to := q.To.UTC().Truncate(unit); to.Equal(q.To) {
		q.To = to
	} else {
		q.To = to.Add(unit)
	}
	if seen[ByHour] && !given {
		q.From = q.To.Add(-maxHours * time.Hour) // the last 24 hours
	}
	q.From = q.From.UTC().Truncate(unit)
	switch {
	case q.Limit == 0:
		q.Limit = 100
	case q.Limit < 0 || q.Limit > MaxLimit:
		return q, &QueryError{Param: "limit", Msg: fmt.Sprintf("%d: want 1 to %d groups", q.Limit, MaxLimit)}
	}
	if seen[ByHour] && q.To.Sub(q.From) > maxHours*time.Hour {
		return q, &QueryError{Param: "from", Msg: fmt.Sprintf("%s: a range of %d hours to %s grouped by hour: want at most %d hours (hours are added up from the entries; group a longer range by day)",
			q.From.Format(time.RFC3339), q.To.Sub(q.From)/time.Hour, q.To.Format(time.RFC3339), maxHours)}
	}
	if q.To.Sub(q.From) > maxDays*24*time.Hour {
		return q, &QueryError{Param: "from", Msg: fmt.Sprintf("%s: a range of %d days to %s: want at most %d days",
			q.From.Format(time.RFC3339), q.To.Sub(q.From)/(24*time.Hour), q.To.Format(time.RFC3339), maxDays)}
	}
	return q, nil
}

// checkGroupBy checks the dimensions of a Spend query, and returns them
// as a set.
func checkGroupBy(groupBy []string) (map[string]bool, error) {
	seen := map[string]bool{}
	for _, by := range groupBy {
		switch {
		case !slices.Contains([]string{ByKey, ByTeam, ByModel, ByEndUser, ByDay, ByHour}, by):
			return nil, &QueryError{Param: "group_by", Msg: fmt.Sprintf("%.40q: want key, team, model, end_user, day or hour", by)}
		case seen[by]:
			return nil, &QueryError{Param: "group_by", Msg: fmt.Sprintf("%q given twice", by)}
		}
		seen[by] = true
	}
	if seen[ByDay] && seen[ByHour] {
		return nil, &QueryError{Param: "group_by", Msg: "day and hour: choose one"}
	}
	return seen, nil
}

// spendFromRollups adds up the rollups of q's days that have writers: a
// key's (or team's) by direct reads of each writer's, all keys' from the
// days' summaries (spendOfDays).
func (l *Ledger) spendFromRollups(ctx context.Context, a *aggregator) error {
	q := a.q
	first, last := dayOf(q.From), dayOf(q.To.Add(-time.Nanosecond))
	byTeam := q.Team != "" && q.Key == "" && !slices.Contains(q.GroupBy, ByKey)
	writers, err := l.writers(ctx, first, last)
	if err != nil {
		return err
	}
	ds := slices.Sorted(maps.Keys(writers))
	if q.Key == "" && !byTeam {
		return l.spendOfPeriods(ctx, a, first, last, ds, writers)
	}
	prefix, name := keyPrefix, q.Key
	if byTeam {
		prefix, name = teamPrefix, q.Team
	}
	_, vals, at, err := l.rollupsOf(ctx, prefix, name, ds, writers)
	if err != nil {
		return err
	}
	for i, v := range vals {
		if byTeam {
			err = a.addRollup(v, 0, a.team, at[i])
		} else {
			err = a.addRollup(v, a.key, 0, at[i])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rollupsOf reads the rollups of name (a key's or a team's: prefix) of
// every writer of the days ds, at once (a round trip of a thousand on
// Redis): their record keys, values (nil: none) and days.
func (l *Ledger) rollupsOf(ctx context.Context, prefix, name string, ds []day, writers map[day][]string) (recs, vals [][]byte, at []day, err error) {
	for _, d := range ds {
		for _, w := range writers[d] {
			recs, at = append(recs, appendKey(nil, prefix, d, name, w)), append(at, d)
		}
	}
	vals, err = getAll(ctx, l.db, recs)
	return recs, vals, at, err
}

// writers returns the writers of each day from first to last that has
// any, reading their marks from the first day's on.
func (l *Ledger) writers(ctx context.Context, first, last day) (map[day][]string, error) {
	ws := make(map[day][]string)
	err := l.db.ScanFrom(ctx, []byte(writerPrefix), appendKey(nil, writerPrefix, first), func(k, _ []byte) error {
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
	f := newFilter(q.Key, q.Team, q.Model)
	ds, err := l.entryDays(ctx, dayOf(q.From), dayOf(q.To.Add(-time.Nanosecond)), false)
	if err != nil {
		return err
	}
	for _, d := range ds {
		err := l.dayEntries(ctx, d, f, func(_ string, _ uint32, e *Entry) {
			if e.Time.Before(q.From) || !e.Time.Before(q.To) {
				return
			}
			t := Totals{Requests: 1, Tokens: e.Tokens, Cost: e.Cost}
			a.add(a.in.idOf(e.Key), a.in.idOf(e.Team), a.in.idOf(a.modelOf(e.Model, e.EndUser)), e.Time.Truncate(time.Hour).Unix(), &t)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// spendOfDay adds up the key rollups of day d, whose writers are ws,
// but those of skip (read already, from their day totals or month
// summaries): from their summaries where they wrote one (see summary),
// and from the rollups of the others.
func (l *Ledger) spendOfDay(ctx context.Context, a *aggregator, d day, ws []string, skip map[string]bool) error {
	left := len(ws)
	for _, w := range ws {
		if skip[w] {
			left--
		}
	}
	if left == 0 {
		return nil
	}
	summarized := map[string]bool{}
	at := d.time().Unix()
	prefix := summaryPrefix
	if byModel(a.q) {
		prefix = modelSummaryPrefix
	}
	err := l.db.Scan(ctx, appendKey(nil, prefix, d, ""), func(k, v []byte) error {
		w, ok := summaryWriter(k)
		if !ok {
			return fmt.Errorf("%w: summary key %q", errCorrupt, k)
		}
		if skip[w] {
			return nil
		}
		summarized[w] = true
		return decodeSummary(v, func(key, team, model []byte, t *Totals) { a.addSummary(key, team, model, at, t) })
	})
	if err != nil || len(summarized) == left {
		return err
	}
	return l.db.Scan(ctx, appendKey(nil, keyPrefix, d, ""), func(k, v []byte) error {
		name, ok := rollupName(k, keyPrefix)
		if !ok {
			return fmt.Errorf("%w: rollup key %q", errCorrupt, k)
		}
		if w := k[len(k)-16:]; summarized[string(w)] || skip[string(w)] {
			return nil
		}
		return a.addRollup(v, a.name(name), 0, d)
	})
}

// spendOfPeriods adds up the key rollups of ds, the days from first to
// last that have writers: grouped by day, those a day total answers from
// it (spendOfTotals); not grouped by time, the months the range holds
// whole from their writers' month summaries; the rest by day.
func (l *Ledger) spendOfPeriods(ctx context.Context, a *aggregator, first, last day, ds []day, writers map[day][]string) error {
	var done map[day]map[string]bool // by day: the writers read already
	var err error
	if timed(a.q) {
		done, err = l.spendOfTotals(ctx, a, ds, writers)
	} else {
		done, err = l.spendOfMonths(ctx, a, wholeMonths(first, last, ds), ds)
	}
	if err != nil {
		return err
	}
	return l.inParallel(a, len(ds), func(p *aggregator, i int) error {
		return l.spendOfDay(ctx, p, ds[i], writers[ds[i]], done[ds[i]])
	})
}

// spendOfMonths adds up into a the month summaries of ms, and returns,
// for each day of ds, the writers read from them: those that wrote one
// of its month.
func (l *Ledger) spendOfMonths(ctx context.Context, a *aggregator, ms []month, ds []day) (map[day]map[string]bool, error) {
	read := make([]map[string]bool, len(ms))
	err := l.inParallel(a, len(ms), func(p *aggregator, i int) (err error) {
		read[i], err = l.spendOfMonth(ctx, p, ms[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	done := make(map[day]map[string]bool)
	for _, d := range ds {
		if i := slices.Index(ms, monthOf(d)); i >= 0 {
			done[d] = read[i]
		}
	}
	return done, nil
}

// inParallel calls fn with each of n units of work, shared between
// GOMAXPROCS goroutines, each adding up into an aggregator of its own,
// then merged into a: a month of spend by key is 300,000 rows to decode
// on 10k keys.
func (l *Ledger) inParallel(a *aggregator, n int, fn func(p *aggregator, i int) error) error {
	k := min(runtime.GOMAXPROCS(0), n)
	parts := make([]*aggregator, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		parts[i] = newAggregator(a.q, a.top)
		parts[i].endUsers = a.endUsers
		wg.Go(func() {
			for j := i; j < n && errs[i] == nil; j += k {
				errs[i] = fn(parts[i], j)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, p := range parts {
		a.absorb(p)
	}
	return nil
}

// spendOfEndUsers adds up the rollups of end users of a's days that have
// writers: a key's by direct reads of each writer's, all keys' by a scan
// of each day's.
func (l *Ledger) spendOfEndUsers(ctx context.Context, a *aggregator) error {
	q := a.q
	writers, err := l.writers(ctx, dayOf(q.From), dayOf(q.To.Add(-time.Nanosecond)))
	if err != nil {
		return err
	}
	ds := slices.Sorted(maps.Keys(writers))
	if q.Key != "" {
		_, vals, at, err := l.rollupsOf(ctx, endUserPrefix, q.Key, ds, writers)
		for i := 0; i < len(vals) && err == nil; i++ {
			err = a.addRollup(vals[i], a.key, 0, at[i])
		}
		return err
	}
	return l.inParallel(a, len(ds), func(p *aggregator, i int) error {
		d := ds[i]
		return l.db.Scan(ctx, appendKey(nil, endUserPrefix, d, ""), func(k, v []byte) error {
			name, ok := rollupName(k, endUserPrefix)
			if !ok {
				return fmt.Errorf("%w: rollup key %q", errCorrupt, k)
			}
			return p.addRollup(v, p.name(name), 0, d)
		})
	})
}
