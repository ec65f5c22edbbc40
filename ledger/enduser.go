package ledger

import (
	"cmp"
)

// End users are a key's own customers, named by its requests: a key may
// have millions, most seen once. The ledger keeps them in three places:
// each entry names its own (Entry.EndUser); a (day, key) rollup of end
// users, bounded as a key's rollup of models is (see addToEndUsers); and
// the directory, a record per (key, end user) with its all-time totals
// (see EndUsers).
//
//	L/u/day/key/writer   a key's day: a row per team and end user, at most maxEndUserRows
const endUserPrefix = "L/u/"

// maxEndUserRows bounds the rows of a (day, key) rollup of end users,
// as maxRows bounds a rollup's models: what a day of a key with a
// million end users costs is one record of at most 256 rows, rewritten
// with each entry (about 8 KB at its largest), not a record per end user.
const maxEndUserRows = maxRows

// addToEndUsers adds t to the row k (team, end user) of r, the end-user
// rollup id, and puts it. A new end user in a full rollup takes the room
// of the end user of least cost, then requests, whose totals move into
// its team's OtherModel row: the rows kept are the day's top end users by
// cost as the day goes, the other row adds up the rest, and the rows add
// up to the key's day exactly. An end user moved into the other row and
// seen again starts a row again, which counts it from then on. The key's
// own traffic (end user "") is never moved: its row says what of the key
// named no end user.
func (l *Ledger) addToEndUsers(w batch, id rollupID, r *rollup, k rowKey, t *Totals) error {
	return l.addAt(w, id, r, r.endUserRow(k), t)
}

// endUserRow returns the index of the row of k in r, an end-user
// rollup, making one if there is none (see addToEndUsers). In a full
// rollup whose end user of least cost has its team's other row already,
// the new row takes its place with one shift of the rows between the
// two, not two shifts of the rows after each: a day of a key with many
// end users makes room with nearly every entry.
func (r *rollup) endUserRow(k rowKey) int {
	i, ok := r.find(k)
	if ok {
		return i
	}
	if len(r.rows) == maxEndUserRows {
		if v := r.least(); v >= 0 {
			if o, ok := r.find(rowKey{r.rows[v].k.team, OtherModel}); ok {
				r.addTo(o, &r.rows[v].Totals)
				if i > v {
					i-- // its place once v is out
				}
				r.replace(v, i, k)
				return i
			}
		}
	}
	r.makeRoom(maxEndUserRows - 1)
	if i, ok = r.find(k); !ok {
		r.insert(i, k)
	}
	return i
}

// makeRoom moves the end users of least cost into their teams' other
// rows until r has at most n rows, or only rows that do not move (the
// other rows, the key's own).
func (r *rollup) makeRoom(n int) {
	for len(r.rows) > n {
		v := r.least()
		if v < 0 {
			return
		}
		moved := r.rows[v]
		r.remove(v)
		o, ok := r.find(rowKey{moved.k.team, OtherModel})
		if !ok {
			r.insert(o, rowKey{moved.k.team, OtherModel})
		}
		r.addTo(o, &moved.Totals)
	}
}

// least returns the index of the row of least cost, then requests, that
// may move into the other row; -1 if none may.
func (r *rollup) least() int {
	v := -1
	for i := range r.rows {
		if e := r.rows[i].k.model; e == "" || e == OtherModel {
			continue
		}
		if v < 0 || cmp.Or(cmp.Compare(r.rows[i].Cost, r.rows[v].Cost), cmp.Compare(r.rows[i].Requests, r.rows[v].Requests)) < 0 {
			v = i
		}
	}
	return v
}

// addEndUser adds t, of key's team and end user, to the writer's rollup
// of key's end users of day d.
func (l *Ledger) addEndUser(w batch, d day, key, team, endUser string, t *Totals) error {
	id := rollupID{endUsers: true, d: d, name: key}
	r, err := l.rollupIn(w, id)
	if err != nil {
		return err
	}
	return l.addToEndUsers(w, id, r, rowKey{team, endUser}, t)
}

// uncountEndUser adds back, a negative count, to the cached rollup of
// key's end users of day d: to the end user's row, or its team's other
// row when it moved there meanwhile.
func (l *Ledger) uncountEndUser(d day, key, team, endUser string, back *Totals) {
	r := l.rollups[rollupID{endUsers: true, d: d, name: key}]
	if r == nil {
		return
	}
	i, ok := r.find(rowKey{team, endUser})
	if !ok {
		i, ok = r.find(rowKey{team, OtherModel})
	}
	if ok {
		r.addTo(i, back)
	}
}
