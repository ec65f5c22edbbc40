package ledger

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
)

// A day total is a writer's key rollups of one closed day added up, in
// one small record: the totals of every key, those of the keys without a
// team, and a row per model. A spend grouped by day whose groups are
// ranked (the top Limit kept, the rest one other row a day) reads each
// day and writer as the rollups of its top keys (or teams) and the day's
// total: the other row is the total less what the top groups' rollups
// hold. That is Limit+1 records a day and writer, where the day's summary
// is a row per key active that day.
//
// It is written with the day's summaries, from the same rows, and costs
// a row per model: about 30 bytes each, a few kB a day and writer. A day
// and writer without one (the writer crashed, the day is today, or its
// summaries are older than day totals) is read as before, from its
// summary or its key rollups, and so is one whose top groups' rollups
// hold more than its total (a rollup that changed after its summary was
// written). Once the writer has left a day, a batch that adds to its
// rollups deletes its total (a refusal counted before midnight and
// written after, an entry of a batch whose clock was behind another's),
// which the day's summaries, written again, write again.
//
//	L/T/day/writer  version flags totals(all) totals(no team) nmodels (model totals)*
const totalPrefix = "L/T/"

// totalCut flags a day total of more than maxRows models, which lists
// none: the queries that need its rows by model read the summary.
const totalCut = 1

// totalReads bounds the records a spend reads at once for its day
// totals (see spendOfTotals): their values are held until added up.
const totalReads = 4096

// dayTotal is a day total.
type dayTotal struct {
	all, noTeam Totals
	models      []modelTotal // nil when cut
	cut         bool
}

// modelTotal is a day total's row of one model, its name encoded.
type modelTotal struct {
	model []byte
	Totals
}

// totalOf adds up rows, a writer's rows of one day by key, team and
// model, into its day total.
func totalOf(rows []summary) *dayTotal {
	t := &dayTotal{}
	byModel := map[string]*Totals{}
	for i := range rows {
		r := &rows[i]
		t.all.add(&r.Totals)
		if r.team == "" {
			t.noTeam.add(&r.Totals)
		}
		m := byModel[r.model]
		if m == nil {
			m = &Totals{}
			byModel[r.model] = m
		}
		m.add(&r.Totals)
	}
	if len(byModel) > maxRows {
		t.cut = true
		return t
	}
	for _, m := range slices.Sorted(maps.Keys(byModel)) {
		t.models = append(t.models, modelTotal{appendString(nil, m), *byModel[m]})
	}
	return t
}

func appendDayTotal(b []byte, t *dayTotal) []byte {
	var flags byte
	if t.cut {
		flags |= totalCut
	}
	b = append(b, codecVersion, flags)
	b = appendTotals(b, &t.all)
	b = appendTotals(b, &t.noTeam)
	b = binary.AppendUvarint(b, uint64(len(t.models)))
	for i := range t.models {
		b = append(b, t.models[i].model...)
		b = appendTotals(b, &t.models[i].Totals)
	}
	return b
}

// decodeDayTotal decodes v, whose model names it keeps encoded, slices
// of v.
func decodeDayTotal(v []byte) (*dayTotal, error) {
	r := reader{b: v}
	if r.byte() != codecVersion {
		return nil, fmt.Errorf("%w: day total version", errCorrupt)
	}
	flags := r.byte()
	t := &dayTotal{cut: flags&totalCut != 0}
	t.all = r.totals()
	t.noTeam = r.totals()
	n := r.count(maxRows)
	for i := 0; i < n && r.err == nil; i++ {
		m := modelTotal{model: r.rawString()}
		m.Totals = r.totals()
		t.models = append(t.models, m)
	}
	switch {
	case r.err != nil:
	case flags&^totalCut != 0:
		r.fail("day total flags")
	case len(r.b) != 0:
		r.fail("trailing bytes")
	}
	return t, r.err
}

// totalPlan is how a spend reads a day and writer from its day total:
// which rollups hold the top groups' rows, and what the rest is of.
type totalPlan struct {
	prefix string   // keyPrefix or teamPrefix: the top groups' rollups; "": none, the total's rows
	names  []string // the top keys or teams, but the team ""
	noTeam bool     // the team "" is a top group: its row is the total of the keys without a team
	models bool     // the day total's rows by model are read
	// team is the team asked for, grouped by key: the rest is what the
	// team's rollup holds, not the day total.
	team string
}

// planTotals returns how a spend of q, whose top groups are top (every
// group, when there are no more than its Limit), reads day totals; false
// when it reads none: not grouped by day (by hour it reads the entries),
// of a key (its rollups are read directly), grouped without a ranking
// (top nil), or a question whose rest no total tells: by team and model,
// since a team's rollup folds models past maxRows on its own, and by key
// of a team and a model.
func planTotals(q SpendQuery, top map[[3]string]bool) (totalPlan, bool) {
	grouped := func(by string) bool { return slices.Contains(q.GroupBy, by) }
	key, team, model := grouped(ByKey), grouped(ByTeam), grouped(ByModel)
	switch {
	case !grouped(ByDay) || q.Key != "" || (key || team || model) && top == nil:
		return totalPlan{}, false
	case key && q.Team != "" && q.Model != "", !key && team && (model || q.Model != ""):
		return totalPlan{}, false
	}
	p := totalPlan{models: q.Model != "" || model && !key && !team}
	names := map[string]bool{}
	switch {
	case key:
		p.prefix, p.team = keyPrefix, q.Team
		for g := range top {
			names[g[0]] = true
		}
	case team:
		p.prefix = teamPrefix
		for g := range top {
			names[g[1]] = true
		}
		p.noTeam = names[""]
		delete(names, "")
	}
	p.names = slices.Sorted(maps.Keys(names))
	return p, true
}

// dayWriter is a day and one of its writers.
type dayWriter struct {
	d day
	w string
}

// spendOfTotals adds up into a the days ds and writers that a day total
// answers (see planTotals): each from its top groups' rollups, and the
// rest of its total as the other row. It returns the writers so read,
// by day; the others are read from their summaries or rollups. It reads
// totalReads records at a time, on every core.
func (l *Ledger) spendOfTotals(ctx context.Context, a *aggregator, ds []day, writers map[day][]string) (map[day]map[string]bool, error) {
	p, ok := planTotals(a.q, a.top)
	if !ok {
		return nil, nil
	}
	var dws []dayWriter
	for _, d := range ds {
		for _, w := range writers[d] {
			dws = append(dws, dayWriter{d, w})
		}
	}
	per := max(1, totalReads/(1+len(p.names)))
	units := (len(dws) + per - 1) / per
	read := make([][]bool, units)
	err := l.inParallel(a, units, func(part *aggregator, i int) (err error) {
		read[i], err = l.addTotals(ctx, part, &p, dws[i*per:min((i+1)*per, len(dws))])
		return err
	})
	if err != nil {
		return nil, err
	}
	done := map[day]map[string]bool{}
	for i, ok := range slices.Concat(read...) {
		if !ok {
			continue
		}
		if done[dws[i].d] == nil {
			done[dws[i].d] = map[string]bool{}
		}
		done[dws[i].d][dws[i].w] = true
	}
	return done, nil
}

// addTotals adds up into a the days and writers dws that their totals
// answer, reading the totals and the top groups' rollups of all at once,
// and reports which it added up.
func (l *Ledger) addTotals(ctx context.Context, a *aggregator, p *totalPlan, dws []dayWriter) ([]bool, error) {
	recs := make([][]byte, len(dws))
	for i, dw := range dws {
		recs[i] = appendKey(nil, totalPrefix, dw.d, dw.w)
		if p.team != "" {
			recs[i] = appendKey(nil, teamPrefix, dw.d, p.team, dw.w)
		}
	}
	vals, err := getAll(ctx, l.db, recs)
	if err != nil {
		return nil, err
	}
	totals := make([]*dayTotal, len(dws))
	var reads [][]byte
	for i, v := range vals {
		if totals[i], err = p.total(v); err != nil {
			return nil, err
		}
		for j := 0; totals[i] != nil && j < len(p.names); j++ {
			reads = append(reads, appendKey(nil, p.prefix, dws[i].d, p.names[j], dws[i].w))
		}
	}
	rollups, err := getAll(ctx, l.db, reads)
	if err != nil {
		return nil, err
	}
	ids := make([]uint32, len(p.names))
	for i, name := range p.names {
		ids[i] = a.in.idOf(name)
	}
	added := make([]bool, len(dws))
	for i, t := range totals {
		if t == nil {
			continue
		}
		if added[i], err = a.addTotal(p, ids, dws[i].d, t, rollups[:len(ids)]); err != nil {
			return nil, err
		}
		rollups = rollups[len(ids):]
	}
	return added, nil
}

// total decodes the record a day and writer's rest is of, v: its day
// total, or the team's rollup (nil: the team spent nothing). It returns
// nil when there is none to read: no day total, or one without the rows
// by model that p reads.
func (p *totalPlan) total(v []byte) (*dayTotal, error) {
	if p.team != "" {
		t := &dayTotal{}
		if v == nil {
			return t, nil
		}
		return t, decodeRollup(v, func(_, _ []byte, r *Totals) { t.all.add(r) })
	}
	if v == nil {
		return nil, nil
	}
	t, err := decodeDayTotal(v)
	if err != nil || t.cut && p.models {
		return nil, err
	}
	return t, nil
}

// part is a row a day total's query reads: its numbers and totals.
type part struct {
	key, team, model uint32
	Totals
}

// addTotal adds up one writer's day d from its total t: the rows of the
// top groups' rollups vals (those of p.names, numbered ids), and the
// rest of t as the day's other row. It reports false, adding nothing,
// when they hold more than t, or t reached the largest count: the day is
// then read from its summary or rollups.
func (a *aggregator) addTotal(p *totalPlan, ids []uint32, d day, t *dayTotal, vals [][]byte) (bool, error) {
	rest, ok := t.of(a)
	if !ok {
		return false, nil
	}
	rows, err := a.totalRows(p, ids, t, vals, &rest)
	if err != nil {
		return false, err
	}
	for i := range rows {
		if !rest.sub(&rows[i].Totals) {
			return false, nil
		}
	}
	at := d.time().Unix()
	for i := range rows {
		a.add(rows[i].key, rows[i].team, rows[i].model, at, &rows[i].Totals)
	}
	if !rest.zero() {
		a.addGroup(group{at: at, other: true}, &rest)
	}
	return true, nil
}

// totalRows returns the rows a spend reads of a day and writer whose
// total is t, and of which of is what q selects: the rows of the top
// groups' rollups, vals, that q selects, or the total's own rows.
func (a *aggregator) totalRows(p *totalPlan, ids []uint32, t *dayTotal, vals [][]byte, of *Totals) ([]part, error) {
	var rows []part
	for i, v := range vals {
		if v == nil {
			continue
		}
		err := decodeRollup(v, func(team, model []byte, r *Totals) {
			row := part{key: ids[i], Totals: *r}
			if p.prefix == teamPrefix {
				row = part{team: ids[i], Totals: *r}
			} else if row.team, row.model = a.idIf(1, team), a.idIf(2, model); !a.selects(row.key, row.team, row.model) {
				return
			}
			rows = append(rows, row)
		})
		if err != nil {
			return nil, err
		}
	}
	switch {
	case p.noTeam && !t.noTeam.zero(): // a row only when some key without a team counts something
		rows = append(rows, part{Totals: t.noTeam})
	case p.prefix == "" && p.models && a.grouped[2] != 0:
		for i := range t.models {
			if row := (part{model: a.in.id(t.models[i].model), Totals: t.models[i].Totals}); a.selects(0, 0, row.model) {
				rows = append(rows, row)
			}
		}
	case p.prefix == "":
		rows = append(rows, part{model: a.model, Totals: of.clone()})
	}
	return rows, nil
}

// of returns a copy of what q selects of t: all of it, or with a model
// asked for its row; false when it reached the largest count, where a
// difference would not be exact.
func (t *dayTotal) of(a *aggregator) (Totals, bool) {
	of := t.all
	if a.model != 0 {
		of = Totals{}
		for i := range t.models {
			if a.in.id(t.models[i].model) == a.model {
				of = t.models[i].Totals
			}
		}
	}
	of = of.clone()
	return of, !of.saturated()
}

// clone is t with a map of reasons of its own.
func (t Totals) clone() Totals {
	t.Reasons = maps.Clone(t.Reasons)
	return t
}

// sub takes o from t, which holds it: each of o's counts at most t's. It
// reports false, having taken part of o, when t does not hold it.
func (t *Totals) sub(o *Totals) bool {
	tc, oc := t.counters(), o.counters()
	for i := range tc {
		if *oc[i] < 0 || *oc[i] > *tc[i] {
			return false
		}
		*tc[i] -= *oc[i]
	}
	for reason, n := range o.Reasons {
		switch have := t.Reasons[reason]; {
		case n < 0 || n > have:
			return false
		case n == have:
			delete(t.Reasons, reason)
		case n > 0:
			t.Reasons[reason] = have - n
		}
	}
	if len(t.Reasons) == 0 {
		t.Reasons = nil
	}
	return true
}

// saturated reports whether one of t's counts is the largest: a sum
// that may have stopped there, of which a difference is not exact.
func (t *Totals) saturated() bool {
	for _, c := range t.counters() {
		if *c == math.MaxInt64 {
			return true
		}
	}
	for _, n := range t.Reasons {
		if n == math.MaxInt64 {
			return true
		}
	}
	return false
}

// zero reports whether t counts nothing.
func (t *Totals) zero() bool {
	for _, c := range t.counters() {
		if *c != 0 {
			return false
		}
	}
	return len(t.Reasons) == 0
}
