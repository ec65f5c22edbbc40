package ledger

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"
)

// group is a row of a report: the values of its grouped dimensions, as
// the numbers of the aggregator's interner, or the row of the groups
// past the query's Limit (other).
type group struct {
	key, team, model uint32
	at               int64 // Unix seconds of its day or hour
	other            bool
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
	in               *interner
	names            map[string]uint32 // the numbers of rollups' names, plain bytes in their keys
	// top are the groups (key, team, model) kept as rows of their own,
	// the others adding up to one per time (see Spend); nil: all.
	top    map[[3]string]bool
	topIDs map[[3]uint32]bool
	// needs: which of key, team and model the query groups or filters
	// by; a row's others are not looked up (addSummary).
	needs [3]bool
	// grouped and timed mask a row's key, team, model and time into its
	// group: all ones for a dimension grouped by, zero for another.
	grouped [3]uint32
	timed   int64
	// endUsers: the query is of end users, held where the model would be
	// (see endUserQuery).
	endUsers bool
}

// modelOf is what an entry or a refusal counts as its model: its end
// user in a query of end users.
func (a *aggregator) modelOf(model, endUser string) string {
	if a.endUsers {
		return endUser
	}
	return model
}

func newAggregator(q SpendQuery, top map[[3]string]bool) *aggregator {
	a := &aggregator{q: q, groups: make(map[group]*Totals), in: newInterner(), names: map[string]uint32{}, top: top}
	a.key, a.team, a.model = a.in.idOf(q.Key), a.in.idOf(q.Team), a.in.idOf(q.Model)
	if len(q.GroupBy) == 1 {
		a.one = 1 + slices.Index([]string{ByKey, ByTeam, ByModel}, q.GroupBy[0])
	}
	for i, by := range []string{ByKey, ByTeam, ByModel} {
		a.needs[i] = slices.Contains(q.GroupBy, by) || [...]string{q.Key, q.Team, q.Model}[i] != ""
		if slices.Contains(q.GroupBy, by) {
			a.grouped[i] = ^uint32(0)
		}
	}
	if timed(q) {
		a.timed = -1
	}
	if top != nil {
		a.one = 0
		a.topIDs = make(map[[3]uint32]bool, len(top))
		for g := range top {
			a.topIDs[[3]uint32{a.in.idOf(g[0]), a.in.idOf(g[1]), a.in.idOf(g[2])}] = true
		}
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

// addSummary adds a row of a summary, its strings encoded, at instant
// at: it numbers only the strings the query needs, a summary having
// hundreds of thousands of rows.
func (a *aggregator) addSummary(key, team, model []byte, at int64, t *Totals) {
	a.add(a.idIf(0, key), a.idIf(1, team), a.idIf(2, model), at, t)
}

// idIf returns the number of raw, a string encoded, when the query needs
// dimension i (key, team, model), and 0 when it does not.
func (a *aggregator) idIf(i int, raw []byte) uint32 {
	if !a.needs[i] {
		return 0
	}
	return a.in.id(raw)
}

// add adds t, of key, team and model at instant at (Unix seconds), if q
// selects it. The total is added up from the groups, by result.
func (a *aggregator) add(key, team, model uint32, at int64, t *Totals) {
	if !a.selects(key, team, model) {
		return
	}
	if a.one > 0 {
		a.addByID([...]uint32{key, team, model}[a.one-1], t)
		return
	}
	g := group{key: key & a.grouped[0], team: team & a.grouped[1], model: model & a.grouped[2], at: at & a.timed}
	a.addGroup(g, t)
}

// selects reports whether q's filters select a row of key, team and
// model.
func (a *aggregator) selects(key, team, model uint32) bool {
	return (a.key == 0 || key == a.key) && (a.team == 0 || team == a.team) && (a.model == 0 || model == a.model)
}

// addGroup adds t to the group g, or to its time's other group when g
// is not among the top ones.
func (a *aggregator) addGroup(g group, t *Totals) {
	if a.topIDs != nil && !g.other && !a.topIDs[[3]uint32{g.key, g.team, g.model}] {
		g = group{at: g.at, other: true}
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

// absorb adds the groups of o, an aggregator of the same query, to a's:
// selected by o already, renumbered by a's interner.
func (a *aggregator) absorb(o *aggregator) {
	o.fold()
	for g, t := range o.groups {
		if !g.other {
			g.key, g.team, g.model = a.in.idRaw(o.in.raws[g.key]), a.in.idRaw(o.in.raws[g.team]), a.in.idRaw(o.in.raws[g.model])
		}
		if a.one > 0 {
			a.addByID([...]uint32{g.key, g.team, g.model}[a.one-1], t)
		} else {
			a.addGroup(g, t)
		}
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

// ranked returns the q.Limit groups of the highest cost, then requests,
// then lowest values (key, team, model), of an aggregator grouped by
// dimensions other than time; nil when there are no more than that.
func (a *aggregator) ranked() []group {
	a.fold()
	if len(a.groups) <= a.q.Limit {
		return nil
	}
	type sum struct {
		g group
		t *Totals
	}
	all := make([]sum, 0, len(a.groups))
	for g, t := range a.groups {
		all = append(all, sum{g, t})
	}
	str := a.in.strs
	slices.SortFunc(all, func(x, y sum) int {
		if c := cmp.Or(cmp.Compare(y.t.Cost, x.t.Cost), cmp.Compare(y.t.Requests, x.t.Requests)); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(str[x.g.key], str[y.g.key]), strings.Compare(str[x.g.team], str[y.g.team]),
			strings.Compare(str[x.g.model], str[y.g.model]))
	})
	top := make([]group, a.q.Limit)
	for i := range top {
		top[i] = all[i].g
	}
	return top
}

// rankedUntimed is ranked, of a query not grouped by time (timed false);
// nil for one that is, whose groups add did rank.
func (a *aggregator) rankedUntimed(timed bool) []group {
	if timed {
		return nil
	}
	return a.ranked()
}

// ranking is ranked as strings, for the aggregator that adds up the
// same query by time: every group when there are no more than Limit, so
// that the rollups read by group (spendOfTotals) are those of every row.
func (a *aggregator) ranking() map[[3]string]bool {
	top := a.ranked()
	if top == nil {
		top = slices.Collect(maps.Keys(a.groups))
	}
	out := make(map[[3]string]bool, len(top))
	for _, g := range top {
		out[[3]string{a.in.strs[g.key], a.in.strs[g.team], a.in.strs[g.model]}] = true
	}
	return out
}

// result returns the report, its rows ordered by time, key, team, model,
// the other row last. Not grouped by time, the groups past the top
// Limit are added up into the other row here; grouped by time, add did,
// and a time's other row that counts nothing is left out: a day read
// from its total (spendOfTotals) has one only when its rest is not zero.
func (a *aggregator) result() Spend {
	s := Spend{From: a.q.From, To: a.q.To, GroupBy: a.q.GroupBy, query: a.q}
	timed := timed(a.q)
	a.fold()
	for _, t := range a.groups {
		s.Total.add(t)
	}
	if top := a.rankedUntimed(timed); top != nil {
		kept := make(map[group]*Totals, len(top)+1)
		for _, g := range top {
			kept[g] = a.groups[g]
		}
		other := &Totals{}
		for g, t := range a.groups {
			if kept[g] == nil {
				other.add(t)
			}
		}
		kept[group{other: true}] = other
		a.groups = kept
	}
	for g, t := range a.groups {
		if g.other && timed && t.zero() {
			continue
		}
		r := Row{Key: a.in.strs[g.key], Team: a.in.strs[g.team], Model: a.in.strs[g.model], Other: g.other, Totals: *t}
		if g.other {
			r.Key, r.Team, r.Model = a.otherValue(ByKey), a.otherValue(ByTeam), a.otherValue(ByModel)
		}
		if timed {
			r.Day = time.Unix(g.at, 0).UTC()
		}
		s.Rows = append(s.Rows, r)
	}
	slices.SortFunc(s.Rows, compareRows)
	return s
}

// otherValue is what the other row reads in dimension by: OtherModel
// when grouped by it, "" otherwise.
func (a *aggregator) otherValue(by string) string {
	if slices.Contains(a.q.GroupBy, by) {
		return OtherModel
	}
	return ""
}

// compareRows orders rows by time, key, team and model, the other row
// last of its time.
func compareRows(a, b Row) int {
	if c := a.Day.Compare(b.Day); c != 0 {
		return c
	}
	if a.Other != b.Other {
		if a.Other {
			return 1
		}
		return -1
	}
	return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Team, b.Team), strings.Compare(a.Model, b.Model))
}
