package keystore

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
)

// Page limits (KeyQuery.Limit, TeamQuery.Limit).
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// KeyStatus is what Authenticate would say of a key now: its first
// refusal, disabled before expired, or none. The statuses divide the keys.
type KeyStatus string

// Key statuses (KeyQuery.Status); "" is any.
const (
	StatusActive   KeyStatus = "active"   // neither disabled nor expired
	StatusDisabled KeyStatus = "disabled" // disabled, expired or not
	StatusExpired  KeyStatus = "expired"  // expired (now >= ExpiresAt), not disabled
)

// KeyQuery asks Keys for a page of keys. Its fields are the admin API's
// parameters, which an error names as it does ("limit", "cursor", "sort",
// "status", "q", "team").
type KeyQuery struct {
	Limit  int    // 1 to MaxPageLimit; 0: DefaultPageLimit
	Cursor string // a KeyPage.Next, made for the same Sort; "": the first page
	// Q keeps the keys whose name or id, or whose team's name, starts with
	// it, compared case-folded (Unicode full case folding): "prod" finds
	// "Prod-EU" and "PRODUCTION". "": every key.
	Q      string
	Team   string    // the id of a team: only its keys; "": any
	Status KeyStatus // "": any
	// Sort is "name" (the default), "last_used" or "spend", each then by
	// id; a leading "-" reverses it. Last use sorts to the second and spend
	// in cents to 1/1024 (see index.go): keys within one
	// step come in id order.
	Sort string
}

// KeyPage is a page of keys and where the next one starts.
type KeyPage struct {
	Keys []KeyUsage
	// Next is the cursor of the next page (KeyQuery.Cursor); "" on the
	// last. A page may hold fewer keys than its limit, even none, and still
	// have a Next: one whose filters refused as many keys as a page may
	// walk (see plan.go).
	Next string
}

// KeyUsage is a key and its usage, as Get and Usage report them.
type KeyUsage struct {
	Key   Key
	Usage Usage
}

// keySort is an order of a page of keys (KeyQuery.Sort).
type keySort struct {
	name  string
	desc  bool
	text  bool // by name, whose value is a string; else an integer
	index func(x *indexes) *tree[*entry]
	team  func(x *indexes) *tree[*entry] // the index of each team's keys in the order
	cmp   func(a, b *entry) int          // the index's order, ascending
	value func(e *entry) int64           // the integer value of e in the order
	set   func(e *entry, n int64) bool
}

var keySorts = func() []keySort {
	byName := keySort{name: "name", text: true, cmp: cmpName,
		index: func(x *indexes) *tree[*entry] { return x.name }, team: func(x *indexes) *tree[*entry] { return x.teamName }}
	byUsed := keySort{name: "last_used", cmp: cmpUsed,
		index: func(x *indexes) *tree[*entry] { return x.used }, team: func(x *indexes) *tree[*entry] { return x.teamUsed },
		value: func(e *entry) int64 { return e.ix.used },
		set:   func(e *entry, n int64) bool { e.ix.used = n; return true }}
	bySpend := keySort{name: "spend", cmp: cmpSpend,
		index: func(x *indexes) *tree[*entry] { return x.spend }, team: func(x *indexes) *tree[*entry] { return x.teamSpend },
		value: func(e *entry) int64 { return int64(e.ix.spend) },
		set:   func(e *entry, n int64) bool { e.ix.spend = uint16(n); return n >= 0 && n <= math.MaxUint16 }}
	var sorts []keySort
	for _, s := range []keySort{byName, byUsed, bySpend} {
		desc := s
		desc.name, desc.desc = "-"+s.name, true
		sorts = append(sorts, s, desc)
	}
	return sorts
}()

// keyPlan is a page of keys to plan on the indexes: a KeyQuery checked.
type keyPlan struct {
	sort    *keySort
	sortIdx byte
	order   func(a, b *entry) int // the page's: the sort's, or its reverse
	limit   int
	from    *entry // the cursor's position (an id and its indexed values); nil: none
	q, team string // q case-folded
	status  KeyStatus
	now     int64
	pivot   team // for looking teams up by id
}

// Keys returns a page of keys, with their usage, as q asks: searched,
// filtered and sorted on the Store's indexes (see plan.go), at a cost
// that does not grow with the key count beyond O(log n). Where other
// processes change the keys, it first reads what they changed (see
// catchUp), and reads the page's records and usage again in one round
// trip. A page's keys are read as Get and Usage read them, legacy usage
// pending merged. A query that is not valid gives a *FieldError naming the
// parameter (see KeyQuery), matching ErrInvalid.
func (s *Store) Keys(ctx context.Context, q KeyQuery) (KeyPage, error) {
	if err := ctx.Err(); err != nil {
		return KeyPage{}, err
	}
	p, err := planKeys(q)
	if err != nil {
		return KeyPage{}, err
	}
	if err := s.catchUp(ctx); err != nil {
		return KeyPage{}, err
	}
	p.now = s.now()
	s.ix.mu.RLock()
	pg := p.run(s.ix)
	var next string
	if pg.more {
		next = p.cursor(pg.resume)
	}
	s.ix.mu.RUnlock()
	keys, err := s.keyUsages(ctx, pg.items)
	if err != nil {
		return KeyPage{}, err
	}
	return KeyPage{Keys: keys, Next: next}, nil
}

// planKeys checks q and returns its plan.
func planKeys(q KeyQuery) (*keyPlan, error) {
	const op = "list keys"
	limit, err := pageLimit(op, q.Limit)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(keySorts, func(k keySort) bool { return k.name == cmp.Or(q.Sort, "name") })
	if i < 0 {
		return nil, fieldError(op, "sort", "%.40q is not one of name, -name, last_used, -last_used, spend, -spend", q.Sort)
	}
	switch q.Status {
	case "", StatusActive, StatusDisabled, StatusExpired:
	default:
		return nil, fieldError(op, "status", "%.40q is not one of active, disabled, expired", q.Status)
	}
	if err := searchable(op, q.Q, q.Team); err != nil {
		return nil, err
	}
	p := &keyPlan{sort: &keySorts[i], sortIdx: byte(i), limit: limit, q: caseFold(q.Q), team: q.Team, status: q.Status}
	p.order = p.sort.cmp
	if p.sort.desc {
		p.order = reverse(p.sort.cmp)
	}
	if q.Cursor != "" {
		if p.from, err = p.position(op, q.Cursor); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// pageLimit checks a page's limit and applies its default.
func pageLimit(op string, limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageLimit, nil
	case limit < 1 || limit > MaxPageLimit:
		return 0, fieldError(op, "limit", "%d is out of range [1, %d]", limit, MaxPageLimit)
	}
	return limit, nil
}

// searchable checks a search (q) and a team filter: no longer than
// anything they can match.
func searchable(op, q, team string) error {
	if len(q) > MaxName {
		return fieldError(op, "q", "%d bytes is longer than a name may be (%d)", len(q), MaxName)
	}
	if len(team) > MaxName {
		return fieldError(op, "team", "%d bytes is longer than a team id", len(team))
	}
	return nil
}

// position reads the cursor s of p's sort as a position: an entry with
// the cursor's id and sort value.
func (p *keyPlan) position(op, s string) (*entry, error) {
	c, err := decodeCursor(op, s, listKeys, p.sortIdx, p.sort.name, p.sort.text)
	if err != nil {
		return nil, err
	}
	e := &entry{id: c.id, ix: ixed{name: c.text}}
	if !p.sort.text && !p.sort.set(e, c.n) {
		return nil, fieldError(op, "cursor", "not a cursor of this list")
	}
	return e, nil
}

// cursor returns the cursor of the position of e. The caller holds the
// indexes' lock.
func (p *keyPlan) cursor(e *entry) string {
	c := cursor{list: listKeys, sort: p.sortIdx, id: e.id}
	if p.sort.text {
		c.text = e.ix.name
	} else {
		c.n = p.sort.value(e)
	}
	return c.encode(p.sort.text)
}

// run plans the page on x (see plan.go). The caller holds x.mu.
func (p *keyPlan) run(x *indexes) pageOf[*entry] {
	keep := func(e *entry) bool { return p.keeps(x, e) }
	if src, ok := p.smallest(x); ok && src.n <= collectBound {
		return collect(src.gather(nil), keep, p.after, p.order, p.limit)
	}
	return walk(p.stream(x), keep, p.limit, scanBudget)
}

// after reports whether e comes after the cursor.
func (p *keyPlan) after(e *entry) bool { return p.from == nil || p.order(p.from, e) < 0 }

// keeps reports whether e passes the page's filters. The caller holds
// x.mu.
func (p *keyPlan) keeps(x *indexes, e *entry) bool {
	if p.team != "" && e.ix.team != p.team || !p.hasStatus(e) {
		return false
	}
	return p.q == "" || strings.HasPrefix(e.ix.name, p.q) || strings.HasPrefix(e.id, p.q) || p.teamMatches(x, e.ix.team)
}

// hasStatus reports whether e has the page's status at p.now.
func (p *keyPlan) hasStatus(e *entry) bool {
	switch p.status {
	case StatusActive:
		return !e.ix.disabled && p.now < e.ix.expires
	case StatusDisabled:
		return e.ix.disabled
	case StatusExpired:
		return !e.ix.disabled && p.now >= e.ix.expires
	}
	return true
}

// teamMatches reports whether the name of team id starts with the search.
func (p *keyPlan) teamMatches(x *indexes, id string) bool {
	if id == "" {
		return false
	}
	p.pivot.id = id
	t, ok := x.teamID.Get(&p.pivot)
	return ok && strings.HasPrefix(t.ixName, p.q)
}

// keySource is a filter of a page as a source of candidates: how many it
// has, counted up to collectBound + 1, and a function that gathers them.
type keySource struct {
	n      int
	gather func(items []*entry) []*entry
}

// smallest returns the source of the page's filters with the fewest
// candidates, if it has any filter that is one.
func (p *keyPlan) smallest(x *indexes) (keySource, bool) {
	var srcs []keySource
	most := collectBound + 1
	if p.team != "" {
		srcs = append(srcs, keySource{min(x.teamKeys[p.team], most), func(items []*entry) []*entry {
			return gather(items, x.teamName, &entry{ix: ixed{team: p.team}}, p.inTeam)
		}})
	}
	switch p.status {
	case StatusDisabled:
		srcs = append(srcs, keySource{min(x.disabled.Len(), most), func(items []*entry) []*entry {
			return gather(items, x.disabled, &entry{}, everyKey)
		}})
	case StatusExpired:
		from := &entry{ix: ixed{expires: math.MinInt64}}
		expired := func(e *entry) bool { return e.ix.expires <= p.now }
		srcs = append(srcs, keySource{count(x.expiry, from, expired, most), func(items []*entry) []*entry {
			return gather(items, x.expiry, from, expired)
		}})
	}
	if p.q != "" {
		srcs = append(srcs, p.search(x))
	}
	if len(srcs) == 0 {
		return keySource{}, false
	}
	return slices.MinFunc(srcs, func(a, b keySource) int { return a.n - b.n }), true
}

// inTeam reports whether e is of the page's team.
func (p *keyPlan) inTeam(e *entry) bool { return e.ix.team == p.team }

// search is the page's search as a source: the keys whose name starts
// with it, those whose id does, and the keys of the teams whose name does.
func (p *keyPlan) search(x *indexes) keySource {
	most := collectBound + 1
	n := count(x.name, p.nameFrom(), p.named, most)
	if n < most {
		n += count(x.id, &entry{id: p.q}, p.identified, most-n)
	}
	if n < most {
		n += p.teamKeyCount(x, most-n)
	}
	return keySource{n, func(items []*entry) []*entry {
		items = gather(items, x.name, p.nameFrom(), p.named)
		items = gather(items, x.id, &entry{id: p.q}, p.identified)
		return p.gatherTeams(x, items)
	}}
}

func (p *keyPlan) nameFrom() *entry         { return &entry{ix: ixed{name: p.q}} }
func (p *keyPlan) named(e *entry) bool      { return strings.HasPrefix(e.ix.name, p.q) }
func (p *keyPlan) identified(e *entry) bool { return strings.HasPrefix(e.id, p.q) }
func (p *keyPlan) teamNamed(t *team) bool   { return strings.HasPrefix(t.ixName, p.q) }

// teamKeyCount counts the keys of the teams whose name starts with the
// search, up to most; as many when over most teams match.
func (p *keyPlan) teamKeyCount(x *indexes, most int) int {
	n, teams := 0, 0
	x.teamByName.Ascend(&team{ixName: p.q}, func(t *team) bool {
		if !p.teamNamed(t) {
			return false
		}
		n, teams = n+x.teamKeys[t.id], teams+1
		return n < most && teams < most
	})
	if teams >= most {
		return most
	}
	return min(n, most)
}

// gatherTeams appends to items the keys of the teams whose name starts
// with the search.
func (p *keyPlan) gatherTeams(x *indexes, items []*entry) []*entry {
	x.teamByName.Ascend(&team{ixName: p.q}, func(t *team) bool {
		if !p.teamNamed(t) {
			return false
		}
		items = gather(items, x.teamName, &entry{ix: ixed{team: t.id}}, func(e *entry) bool { return e.ix.team == t.id })
		return true
	})
	return items
}

// stream is the order the page walks when no filter is small: the sort's
// index from the cursor on; for a team, that team's range of its index by
// team and the sort; for a search sorted by name, its range of names
// merged with its (small) ranges of ids and teams.
func (p *keyPlan) stream(x *indexes) stream[*entry] {
	if p.team != "" {
		return p.teamStream(x)
	}
	whole := walkTree(p.sort.index(x), p.sort.desc, p.from, p.from != nil, nil)
	if p.q == "" || !p.sort.text {
		return whole
	}
	most := collectBound + 1
	if count(x.id, &entry{id: p.q}, p.identified, most) == most || p.teamKeyCount(x, most) == most {
		return whole
	}
	rest := gather(nil, x.id, &entry{id: p.q}, p.identified)
	rest = slices.DeleteFunc(p.gatherTeams(x, rest), func(e *entry) bool { return !p.after(e) })
	slices.SortFunc(rest, p.order)
	others := sliceStream[*entry](rest)
	// The range of names, from the later of its bound and the cursor.
	from := p.nameFrom()
	if p.sort.desc {
		from = &entry{ix: ixed{name: p.q + "\xff"}} // after every name that starts with q: no UTF-8 has 0xff
	}
	if p.from != nil && p.order(from, p.from) < 0 {
		from = p.from
	}
	names := walkTree(x.name, p.sort.desc, from, true, p.named)
	return merge(p.order, stream[*entry](names), &others)
}

// teamStream is the page's team's keys in the page's order: its range of
// the index of keys by team and the sort, from the cursor or the range's
// end.
func (p *keyPlan) teamStream(x *indexes) stream[*entry] {
	var from *entry
	switch {
	case p.from != nil:
		from = &entry{id: p.from.id, ix: p.from.ix}
		from.ix.team = p.team
	case p.sort.desc:
		from = &entry{ix: ixed{team: p.team + "\x00"}} // after every key of the team
	default:
		from = &entry{ix: ixed{team: p.team, used: math.MinInt64}} // before every key of the team
	}
	return walkTree(p.sort.team(x), p.sort.desc, from, true, p.inTeam)
}

// keyUsages returns the keys es with their usage, as Get and Usage read
// them, leaving out those deleted since they were planned: where other
// processes change the keys, the records and usage of all in one round
// trip.
func (s *Store) keyUsages(ctx context.Context, es []*entry) ([]KeyUsage, error) {
	if err := s.settleAll(ctx, es); err != nil {
		return nil, err
	}
	c := s.newCall(ctx, nil)
	defer c.free()
	var out []KeyUsage
	if !s.shared {
		err := s.readKeys(c, &c.direct, es, nil, &out)
		return out, err
	}
	err := s.update(ctx, nil, func(b batch) error {
		recs := make([][]byte, len(es))
		for i, e := range es {
			e.mu.Lock()
			recs[i] = recordKey(e.id)
			err := b.Prefetch(recs[i:i+1], e.id, e.rec.pol.all...)
			e.mu.Unlock()
			if err != nil {
				return err
			}
		}
		vals, err := b.Reread(recs)
		if err != nil {
			return err
		}
		return s.readKeys(c, b, es, vals, &out)
	})
	return out, err
}

// readKeys sets *out to the keys es, each with its usage read through r,
// after making vals[i] (when there are vals) the record of es[i].
func (s *Store) readKeys(c *call, r reader, es []*entry, vals [][]byte, out *[]KeyUsage) error {
	*out = make([]KeyUsage, 0, len(es))
	for i, e := range es {
		e.mu.Lock()
		err := s.readKey(c, r, e, vals, i, out)
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// readKey appends es[i], e, to *out with its usage (see readKeys), unless
// it was deleted. The caller holds e.mu.
func (s *Store) readKey(c *call, r reader, e *entry, vals [][]byte, i int, out *[]KeyUsage) error {
	if i < len(vals) && !e.rec.gone {
		err := s.reload(e, vals[i])
		if errors.Is(err, ErrCorrupt) {
			s.forget(e, err) // as catchUp does: every call naming it reports it
		} else if err != nil {
			return err
		}
	}
	if e.rec.gone {
		return nil
	}
	c.e = e
	r, err := s.unwritten(c.ctx, e, r)
	if err != nil {
		return err
	}
	if err := s.usageOf(c, r); err != nil {
		return err
	}
	*out = append(*out, KeyUsage{Key: e.key(), Usage: c.u})
	return nil
}

// settleAll merges the pending legacy usage of the keys es that have any,
// all in one commit, as Usage merges a key's. A read-only Store merges
// nothing: readKey shows the merge instead (see unwritten).
func (s *Store) settleAll(ctx context.Context, es []*entry) error {
	if s.readOnly {
		return nil
	}
	var pending []*entry
	var ids []string
	for _, e := range es {
		e.mu.Lock()
		if e.rec.legacy && !e.rec.gone {
			pending, ids = append(pending, e), append(ids, e.id)
		}
		e.mu.Unlock()
	}
	if len(pending) == 0 {
		return nil
	}
	return s.update(ctx, ids, func(b batch) error {
		for _, e := range pending {
			e.mu.Lock()
			err := b.Prefetch(e.records(), e.id, e.rec.pol.all...)
			e.mu.Unlock()
			if err != nil {
				return err
			}
		}
		for _, e := range pending {
			if err := s.settleIn(ctx, b, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// settleIn merges e's pending legacy usage in b, as settle does.
func (s *Store) settleIn(ctx context.Context, b batch, e *entry) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.refresh(b, e); err != nil || e.rec.gone {
		return err
	}
	return s.mergePending(ctx, b, e)
}
