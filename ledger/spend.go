package ledger

import (
	"cmp"
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

// Spend answers q from the rollups, or from the entries when grouped by
// hour. Reading a range costs its days' rollups: one record per key (and
// writer) and day; with a key or team asked for, one read per day and
// writer.
func (l *Ledger) Spend(ctx context.Context, q SpendQuery) (Spend, error) {
	q, err := l.normalizeSpend(q)
	if err != nil {
		return Spend{}, err
	}
	a := newAggregator(q)
	if slices.Contains(q.GroupBy, ByHour) {
		err = l.spendFromEntries(ctx, a)
	} else if err = l.spendFromRollups(ctx, a); err == nil {
		l.addWaiting(a) // after the reads: a count written meanwhile is missed once, never added twice
	}
	if err != nil {
		return Spend{}, err
	}
	return a.result(), nil
}

// normalizeSpend checks q and rounds its range out to whole days (hours):
// at most maxDays long, reaching at most a day past now.
func (l *Ledger) normalizeSpend(q SpendQuery) (SpendQuery, error) {
	unit := 24 * time.Hour
	seen := map[string]bool{}
	for _, by := range q.GroupBy {
		switch {
		case !slices.Contains([]string{ByKey, ByTeam, ByModel, ByDay, ByHour}, by):
			return q, &QueryError{Param: "group_by", Msg: fmt.Sprintf("%.40q: want key, team, model, day or hour", by)}
		case seen[by]:
			return q, &QueryError{Param: "group_by", Msg: fmt.Sprintf("%q given twice", by)}
		}
		seen[by] = true
	}
	if seen[ByDay] && seen[ByHour] {
		return q, &QueryError{Param: "group_by", Msg: "day and hour: choose one"}
	}
	if seen[ByHour] {
		unit = time.Hour
	}
	now := l.st.now()
	if q.To.IsZero() {
		q.To = now.Add(time.Nanosecond) // now included
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-30 * 24 * time.Hour)
	}
	if err := cmp.Or(checkTo(q.To, now), checkOrder(q.From, q.To)); err != nil {
		return q, err
	}
	q.From = q.From.UTC().Truncate(unit)
	if to := q.To.UTC().Truncate(unit); to.Equal(q.To) {
		q.To = to
	} else {
		q.To = to.Add(unit)
	}
	if q.To.Sub(q.From) > maxDays*24*time.Hour {
		return q, &QueryError{Param: "from", Msg: fmt.Sprintf("%s: a range of %d days to %s: want at most %d days",
			q.From.Format(time.RFC3339), q.To.Sub(q.From)/(24*time.Hour), q.To.Format(time.RFC3339), maxDays)}
	}
	return q, nil
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
		return l.spendOfDays(ctx, a, ds, writers)
	}
	prefix, name := keyPrefix, q.Key
	if byTeam {
		prefix, name = teamPrefix, q.Team
	}
	var recs [][]byte
	var at []day
	for _, d := range ds {
		for _, w := range writers[d] {
			recs, at = append(recs, appendKey(nil, prefix, d, name, w)), append(at, d)
		}
	}
	vals, err := l.st.getAll(ctx, recs)
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

// writers returns the writers of each day from first to last that has
// any, reading their marks from the first day's on.
func (l *Ledger) writers(ctx context.Context, first, last day) (map[day][]string, error) {
	ws := make(map[day][]string)
	err := l.st.scanFrom(ctx, []byte(writerPrefix), appendKey(nil, writerPrefix, first), func(k, _ []byte) error {
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
			a.add(a.in.idOf(e.Key), a.in.idOf(e.Team), a.in.idOf(e.Model), e.Time.Truncate(time.Hour).Unix(), &t)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// group is a row of a report: the values of its grouped dimensions, as
// the numbers of the aggregator's interner.
type group struct {
	key, team, model uint32
	at               int64 // Unix seconds of its day or hour
}

// aggregator adds rows up into the groups of a query. Strings are
// numbered as they are read (interner): a row is grouped by hashing a
// few integers.
type aggregator struct {
	q                SpendQuery
	key, team, model uint32 // q's filters' numbers; 0 (""): none
	groups           map[group]*Totals
	byID             []*Totals // the groups by number, when grouped by one of key, team or model alone
	one              int       // which: 1 key, 2 team, 3 model; 0 none
	total            Totals
	in               *interner
	names            map[string]uint32 // the numbers of rollups' names, plain bytes in their keys
}

func newAggregator(q SpendQuery) *aggregator {
	a := &aggregator{q: q, groups: make(map[group]*Totals), in: newInterner(), names: map[string]uint32{}}
	a.key, a.team, a.model = a.in.idOf(q.Key), a.in.idOf(q.Team), a.in.idOf(q.Model)
	if len(q.GroupBy) == 1 {
		a.one = 1 + slices.Index([]string{ByKey, ByTeam, ByModel}, q.GroupBy[0])
	}
	return a
}

// name returns the number of a name read from a rollup's key.
func (a *aggregator) name(b []byte) uint32 {
	if id, ok := a.names[string(b)]; ok {
		return id
	}
	id := a.in.idOf(string(b))
	a.names[string(b)] = id
	return id
}

// addRollup adds the rows of a rollup value, of key (a key's) or of
// team (a team's), on day d. A missing value (nil) adds nothing.
func (a *aggregator) addRollup(v []byte, key, team uint32, d day) error {
	if v == nil {
		return nil
	}
	at := d.time().Unix()
	return decodeRollup(v, func(rowTeam, model []byte, t *Totals) {
		tm := team
		if tm == 0 {
			tm = a.in.id(rowTeam)
		}
		a.add(key, tm, a.in.id(model), at, t)
	})
}

// add adds t, of key, team and model at instant at (Unix seconds), if q
// selects it.
func (a *aggregator) add(key, team, model uint32, at int64, t *Totals) {
	if a.key != 0 && key != a.key || a.team != 0 && team != a.team || a.model != 0 && model != a.model {
		return
	}
	a.total.add(t)
	if a.one > 0 {
		a.addByID([...]uint32{key, team, model}[a.one-1], t)
		return
	}
	var g group
	for _, by := range a.q.GroupBy {
		switch by {
		case ByKey:
			g.key = key
		case ByTeam:
			g.team = team
		case ByModel:
			g.model = model
		case ByDay, ByHour:
			g.at = at
		}
	}
	sum := a.groups[g]
	if sum == nil {
		sum = &Totals{}
		a.groups[g] = sum
	}
	sum.add(t)
}

// addByID adds t to the group of number id, grouped by one dimension:
// a slice indexed by the interner's numbers, where a map would hash.
func (a *aggregator) addByID(id uint32, t *Totals) {
	if int(id) >= len(a.byID) {
		a.byID = append(a.byID, make([]*Totals, int(id)+1-len(a.byID))...)
	}
	sum := a.byID[id]
	if sum == nil {
		sum = &Totals{}
		a.byID[id] = sum
	}
	sum.add(t)
}

// result returns the report, its rows ordered by time, key, team, model.
func (a *aggregator) result() Spend {
	s := Spend{From: a.q.From, To: a.q.To, GroupBy: a.q.GroupBy, Total: a.total, query: a.q}
	timed := slices.Contains(a.q.GroupBy, ByDay) || slices.Contains(a.q.GroupBy, ByHour)
	a.fold()
	for g, t := range a.groups {
		r := Row{Key: a.in.strs[g.key], Team: a.in.strs[g.team], Model: a.in.strs[g.model], Totals: *t}
		if timed {
			r.Day = time.Unix(g.at, 0).UTC()
		}
		s.Rows = append(s.Rows, r)
	}
	slices.SortFunc(s.Rows, compareRows)
	return s
}

// compareRows orders rows by time, key, team and model.
func compareRows(a, b Row) int {
	if c := a.Day.Compare(b.Day); c != 0 {
		return c
	}
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := strings.Compare(a.Team, b.Team); c != 0 {
		return c
	}
	return strings.Compare(a.Model, b.Model)
}

// spendOfDay adds up the key rollups of day d, whose writers are ws:
// from their summaries where they wrote one (see summary), and from the
// rollups of the others.
func (l *Ledger) spendOfDay(ctx context.Context, a *aggregator, d day, ws []string) error {
	summarized := map[string]bool{}
	at := d.time().Unix()
	prefix := summaryPrefix
	if a.q.Model != "" || slices.Contains(a.q.GroupBy, ByModel) {
		prefix = modelSummaryPrefix
	}
	err := l.st.scan(ctx, appendKey(nil, prefix, d, ""), func(k, v []byte) error {
		w, ok := summaryWriter(k)
		if !ok {
			return fmt.Errorf("%w: summary key %q", errCorrupt, k)
		}
		summarized[w] = true
		return decodeSummary(v, func(key, team, model []byte, t *Totals) { a.add(a.in.id(key), a.in.id(team), a.in.id(model), at, t) })
	})
	if err != nil || len(summarized) == len(ws) {
		return err
	}
	return l.st.scan(ctx, appendKey(nil, keyPrefix, d, ""), func(k, v []byte) error {
		name, ok := rollupName(k, keyPrefix)
		if !ok {
			return fmt.Errorf("%w: rollup key %q", errCorrupt, k)
		}
		if summarized[string(k[len(k)-16:])] {
			return nil
		}
		return a.addRollup(v, a.name(name), 0, d)
	})
}

// spendOfDays adds up the key rollups of ds into a, the days shared
// between GOMAXPROCS goroutines, each with an aggregator of its own, then
// merged: a month of spend by key is 300,000 rows to decode on 10k keys.
func (l *Ledger) spendOfDays(ctx context.Context, a *aggregator, ds []day, writers map[day][]string) error {
	n := min(runtime.GOMAXPROCS(0), len(ds))
	parts := make([]*aggregator, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		parts[i] = newAggregator(a.q)
		wg.Go(func() {
			for j := i; j < len(ds) && errs[i] == nil; j += n {
				errs[i] = l.spendOfDay(ctx, parts[i], ds[j], writers[ds[j]])
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

// absorb adds the groups of o, an aggregator of the same query, to a's:
// selected by o already, renumbered by a's interner.
func (a *aggregator) absorb(o *aggregator) {
	o.fold()
	for g, t := range o.groups {
		g.key, g.team, g.model = a.in.idOf(o.in.strs[g.key]), a.in.idOf(o.in.strs[g.team]), a.in.idOf(o.in.strs[g.model])
		if a.one > 0 {
			a.addByID([...]uint32{g.key, g.team, g.model}[a.one-1], t)
		} else if sum := a.groups[g]; sum != nil {
			sum.add(t)
		} else {
			a.groups[g] = t
		}
		a.total.add(t)
	}
}

// fold moves the groups counted by number (byID) into groups.
func (a *aggregator) fold() {
	for id, t := range a.byID {
		if t != nil {
			var g group
			*[...]*uint32{&g.key, &g.team, &g.model}[a.one-1] = uint32(id)
			a.groups[g] = t
		}
	}
	a.byID = nil
}
