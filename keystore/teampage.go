package keystore

import (
	"cmp"
	"context"
	"strings"
)

// TeamQuery asks Teams for a page of teams, as KeyQuery does for keys.
type TeamQuery struct {
	Limit  int    // 1 to MaxPageLimit; 0: DefaultPageLimit
	Cursor string // a TeamPage.Next, made for the same Sort; "": the first page
	Q      string // keeps the teams whose name or id starts with it, case-folded; "": all
	Sort   string // "name" (the default), then by id; "-name" reverses it
}

// TeamPage is a page of teams and where the next one starts (see
// KeyPage.Next).
type TeamPage struct {
	Teams []TeamUsage
	Next  string
}

// TeamUsage is a team, its usage (TeamUsage) and how many keys it has.
type TeamUsage struct {
	Team     Team
	Usage    Usage
	KeyCount int
}

// teamSorts are the orders of a page of teams (TeamQuery.Sort).
var teamSorts = []string{"name", "-name"}

// teamPlan is a page of teams to plan on the indexes: a TeamQuery
// checked.
type teamPlan struct {
	sortIdx byte
	order   func(a, b *team) int // the page's: by name, or its reverse
	limit   int
	from    *team  // the cursor's position: an id and a name case-folded; nil: none
	q       string // case-folded
}

// Teams returns a page of teams, each with its usage and key count, as q
// asks, planned on the Store's indexes as Keys plans a page of keys (see
// plan.go). Where other processes change the teams, it first reads what
// they changed (see catchUp), and reads the page's records and usage
// again in one round trip. A query that is not valid gives a *FieldError
// naming the parameter ("limit", "cursor", "sort", "q").
func (s *Store) Teams(ctx context.Context, q TeamQuery) (TeamPage, error) {
	if err := ctx.Err(); err != nil {
		return TeamPage{}, err
	}
	p, err := planTeams(q)
	if err != nil {
		return TeamPage{}, err
	}
	if err := s.catchUp(ctx); err != nil {
		return TeamPage{}, err
	}
	s.ix.mu.RLock()
	pg := p.run(s.ix)
	counts := make([]int, len(pg.items))
	for i, t := range pg.items {
		counts[i] = s.ix.teamKeys[t.id]
	}
	var next string
	if pg.more {
		next = cursor{list: listTeams, sort: p.sortIdx, text: pg.resume.ixName, id: pg.resume.id}.encode(true)
	}
	s.ix.mu.RUnlock()
	teams, err := s.teamUsages(ctx, pg.items, counts)
	if err != nil {
		return TeamPage{}, err
	}
	return TeamPage{Teams: teams, Next: next}, nil
}

// planTeams checks q and returns its plan.
func planTeams(q TeamQuery) (*teamPlan, error) {
	const op = "list teams"
	limit, err := pageLimit(op, q.Limit)
	if err != nil {
		return nil, err
	}
	p := &teamPlan{limit: limit, q: caseFold(q.Q), order: cmpTeamName}
	switch cmp.Or(q.Sort, "name") {
	case "name":
	case "-name":
		p.sortIdx, p.order = 1, reverse(cmpTeamName)
	default:
		return nil, fieldError(op, "sort", "%.40q is not one of name, -name", q.Sort)
	}
	if err := searchable(op, q.Q, ""); err != nil {
		return nil, err
	}
	if q.Cursor != "" {
		c, err := decodeCursor(op, q.Cursor, listTeams, p.sortIdx, teamSorts[p.sortIdx], true)
		if err != nil {
			return nil, err
		}
		p.from = &team{id: c.id, ixName: c.text}
	}
	return p, nil
}

// run plans the page on x (see plan.go): a search's ranges of names and
// ids collected when small, else its range of names walked and merged
// with its range of ids, else every team walked by name and searched.
// The caller holds x.mu.
func (p *teamPlan) run(x *indexes) pageOf[*team] {
	desc := p.sortIdx == 1
	whole := walkTree(x.teamByName, desc, p.from, p.from != nil, nil)
	if p.q == "" {
		return walk(stream[*team](whole), func(*team) bool { return true }, p.limit, scanBudget)
	}
	most := collectBound + 1
	idFrom, nameFrom := &team{id: p.q}, &team{ixName: p.q}
	ids := count(x.teamID, idFrom, p.identified, most)
	if ids+count(x.teamByName, nameFrom, p.named, most) <= collectBound {
		items := gather(gather(nil, x.teamID, idFrom, p.identified), x.teamByName, nameFrom, p.named)
		return collect(items, p.matches, p.after, p.order, p.limit)
	}
	if ids == most {
		return walk(stream[*team](whole), p.matches, p.limit, scanBudget)
	}
	rest := gather(nil, x.teamID, idFrom, p.identified)
	rest = collect(rest, p.matches, p.after, p.order, len(rest)).items
	others := sliceStream[*team](rest)
	from := nameFrom
	if desc {
		from = &team{ixName: p.q + "\xff"} // after every name that starts with q
	}
	if p.from != nil && p.order(from, p.from) < 0 {
		from = p.from
	}
	names := walkTree(x.teamByName, desc, from, true, p.named)
	return walk(stream[*team](merge(p.order, stream[*team](names), &others)), p.matches, p.limit, scanBudget)
}

func (p *teamPlan) named(t *team) bool      { return strings.HasPrefix(t.ixName, p.q) }
func (p *teamPlan) identified(t *team) bool { return strings.HasPrefix(t.id, p.q) }
func (p *teamPlan) matches(t *team) bool    { return p.named(t) || p.identified(t) }
func (p *teamPlan) after(t *team) bool      { return p.from == nil || p.order(p.from, t) < 0 }

// teamUsages returns the teams ts, with their usage and counts[i] keys,
// as GetTeam and TeamUsage read them, leaving out those deleted since:
// where other processes change the teams, their records and usage in one
// round trip.
func (s *Store) teamUsages(ctx context.Context, ts []*team, counts []int) ([]TeamUsage, error) {
	c := s.newCall(ctx, nil)
	defer c.free()
	var out []TeamUsage
	if !s.shared {
		err := s.readTeams(c, &c.direct, ts, counts, nil, &out)
		return out, err
	}
	err := s.update(ctx, nil, func(b batch) error {
		recs := make([][]byte, len(ts))
		for i, t := range ts {
			t.mu.Lock()
			recs[i] = t.key
			err := b.Prefetch(recs[i:i+1], t.id, t.pol.all...)
			t.mu.Unlock()
			if err != nil {
				return err
			}
		}
		vals, err := b.Reread(recs)
		if err != nil {
			return err
		}
		return s.readTeams(c, b, ts, counts, vals, &out)
	})
	return out, err
}

// readTeams sets *out to the teams ts, each with its usage read through r,
// after making vals[i] (when there are vals) the record of ts[i].
func (s *Store) readTeams(c *call, r reader, ts []*team, counts []int, vals [][]byte, out *[]TeamUsage) error {
	*out = make([]TeamUsage, 0, len(ts))
	for i, t := range ts {
		t.mu.Lock()
		err := s.readTeam(c, r, t, vals, i)
		if err == nil && !t.gone {
			*out = append(*out, TeamUsage{Team: t.public(), Usage: c.u, KeyCount: counts[i]})
		}
		t.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// readTeam sets c.u to the usage of ts[i], t, read through r, after making
// vals[i] its record (see readTeams). The caller holds t.mu.
func (s *Store) readTeam(c *call, r reader, t *team, vals [][]byte, i int) error {
	if i < len(vals) && !t.gone {
		if err := s.reloadTeam(t, vals[i]); err != nil {
			return err
		}
	}
	if t.gone {
		return nil
	}
	return s.usageFor(c, r, t.id, t.pol)
}
