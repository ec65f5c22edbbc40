package keystore

import (
	"cmp"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tidwall/btree"
	"golang.org/x/text/cases"
)

// The Store keeps, beside its maps (byID, teams), ordered indexes of its
// keys and teams, so that a page of them (Keys, Teams), searched, filtered
// and sorted, costs O(page + log n) rather than a pass over every key.
// Each is a B-tree of pointers (github.com/tidwall/btree: generic, with
// iterators that seek and step both ways, and bulk loading of sorted
// items), ordered by a value of the key and then by id, so that every
// position is unique and a cursor can name it:
//
//	id       every key, by id
//	name     every key, by its name case-folded (caseFold)
//	used     every key, by its last use to the second (never used first)
//	spend    every key, by its lifetime spend, coarse (spendCode)
//	team…    the keys of a team, by team id and then by name, last use
//	         or spend (three trees)
//	expiry   the keys that expire, by ExpiresAt
//	disabled the disabled keys
//
// and the teams by id and by name case-folded, each with its key count.
//
// Last use and spend change on every request. Were the indexes ordered by
// their exact values, every request would move its key in two trees,
// under the indexes' one lock: a global lock on the request path. They
// are ordered by coarse values instead, which a request moves only now
// and then: last use to the second (at most one move a second for a busy
// key), and spend in cents, to 1/1024 of its value (a move per cent
// over a key's first $20.48, then one per 0.1% of growth: a key that
// spends $0.0002 a request moves once in 50 requests at most). Keys whose
// values fall in one step are in id order among themselves.
//
// The indexes have a lock of their own, taken after every other (an
// entry's, a team's, the Store's mu): a page holds it to read while it
// plans and walks, and never takes another lock under it. A key's indexed
// values (entry.ix) change only with both the entry's lock and this one
// held, so the request path compares them under the entry's lock alone,
// and takes the indexes' lock only when a value moved.

// ixed is what the indexes hold of a key: the values they order and filter
// it by, as last indexed. in tells whether the key is in the indexes; the
// indexes' lock alone guards it.
type ixed struct {
	name     string // the name, case-folded (caseFold)
	team     string
	used     int64 // the last use to the second (usedSecond)
	expires  int64 // ExpiresAt in Unix ns; never when none
	spend    uint16
	disabled bool
	in       bool
}

// never is ixed.expires for a key without an expiry: no instant reaches it.
const never = math.MaxInt64

// ixOf returns the indexed values of r.
func ixOf(r *record) ixed {
	x := ixed{name: caseFold(r.name), team: r.team, used: usedSecond(r), expires: never, spend: spendCode(r.spent), disabled: r.disabled}
	if r.hasExpiry {
		x.expires = r.expiresAt
	}
	return x
}

// differs reports whether o orders or filters a key otherwise than x.
func (x *ixed) differs(o *ixed) bool {
	return x.name != o.name || x.team != o.team || x.used != o.used || x.expires != o.expires ||
		x.spend != o.spend || x.disabled != o.disabled
}

// usedSecond is r's last use in whole Unix seconds (rounded down), or
// math.MinInt64 when it was never used.
func usedSecond(r *record) int64 {
	if !r.hasUsed {
		return math.MinInt64
	}
	s := r.lastUsed / 1e9
	if r.lastUsed%1e9 < 0 {
		s--
	}
	return s
}

// spendCode is the order of a lifetime spend of nanos nano-dollars, coarse:
// in cents m, written as a float with a 10-bit mantissa, the exponent
// (bits.Len64(m), at most 40) above it. It is exact up to 2047 cents and
// within 1/1024 of m above, and m <= n implies spendCode(m) <=
// spendCode(n).
func spendCode(nanos int64) uint16 {
	m := uint64(max(nanos, 0)) / 1e7
	if m == 0 {
		return 0
	}
	e := bits.Len64(m)
	var mant uint64
	if e > 11 {
		mant = m >> (e - 11)
	} else {
		mant = m << (11 - e)
	}
	return uint16(e<<10 | int(mant&0x3ff))
}

// caseFold returns s case-folded (Unicode full case folding, as
// golang.org/x/text/cases.Fold), the form names are searched and sorted
// in: "Prod", "PROD" and "prod" fold alike, so do "Straße" and "STRASSE".
// A name of ASCII without capitals is its own fold, and costs nothing.
func caseFold(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return cases.Fold().String(s)
		}
	}
	return s
}

// tree is an index: a B-tree of pointers under the indexes' lock.
type tree[T any] = btree.BTreeG[T]

// newTree returns an empty index ordered by c.
func newTree[T any](c func(a, b T) int) *tree[T] {
	return btree.NewBTreeGOptions(func(a, b T) bool { return c(a, b) < 0 }, btree.Options{NoLocks: true})
}

// thenID compares two keys by x and y, their values in one index, and
// then by id.
func thenID[V cmp.Ordered](x, y V, a, b *entry) int {
	if c := cmp.Compare(x, y); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// The orders of the indexes, and which keys each holds.
func cmpID(a, b *entry) int     { return strings.Compare(a.id, b.id) }
func cmpName(a, b *entry) int   { return thenID(a.ix.name, b.ix.name, a, b) }
func cmpUsed(a, b *entry) int   { return thenID(a.ix.used, b.ix.used, a, b) }
func cmpSpend(a, b *entry) int  { return thenID(a.ix.spend, b.ix.spend, a, b) }
func cmpExpiry(a, b *entry) int { return thenID(a.ix.expires, b.ix.expires, a, b) }
func cmpTeamID(a, b *team) int  { return strings.Compare(a.id, b.id) }
func cmpTeamName(a, b *team) int {
	return cmp.Or(strings.Compare(a.ixName, b.ixName), strings.Compare(a.id, b.id))
}
func inTeam(e *entry) bool     { return e.ix.team != "" }
func expiring(e *entry) bool   { return e.ix.expires != never }
func isDisabled(e *entry) bool { return e.ix.disabled }
func everyKey(*entry) bool     { return true }

// teamThen orders keys by team, then by c.
func teamThen(c func(a, b *entry) int) func(a, b *entry) int {
	return func(a, b *entry) int { return cmp.Or(strings.Compare(a.ix.team, b.ix.team), c(a, b)) }
}

// indexes are the Store's ordered indexes of its keys and teams (see
// above). Every field is guarded by mu.
type indexes struct {
	mu                    sync.RWMutex
	id, name, used, spend *tree[*entry]
	expiry, disabled      *tree[*entry]
	teamName, teamUsed    *tree[*entry]  // the keys of each team, by name, by last use
	teamSpend             *tree[*entry]  // and by spend
	teamKeys              map[string]int // the key count of each team id that has keys
	teamID, teamByName    *tree[*team]
	all                   []keyTree        // every key index
	use                   [4]*tree[*entry] // those by last use and spend: used, spend, teamUsed, teamSpend
}

// keyTree is a key index, its order and which keys it holds.
type keyTree struct {
	t   *tree[*entry]
	cmp func(a, b *entry) int
	in  func(*entry) bool
}

func newIndexes() *indexes {
	x := &indexes{teamKeys: map[string]int{}, teamID: newTree(cmpTeamID), teamByName: newTree(cmpTeamName)}
	add := func(t **tree[*entry], c func(a, b *entry) int, in func(*entry) bool) {
		*t = newTree(c)
		x.all = append(x.all, keyTree{*t, c, in})
	}
	add(&x.used, cmpUsed, everyKey)
	add(&x.spend, cmpSpend, everyKey)
	add(&x.id, cmpID, everyKey)
	add(&x.name, cmpName, everyKey)
	add(&x.teamName, teamThen(cmpName), inTeam)
	add(&x.teamUsed, teamThen(cmpUsed), inTeam)
	add(&x.teamSpend, teamThen(cmpSpend), inTeam)
	add(&x.expiry, cmpExpiry, expiring)
	add(&x.disabled, cmpID, isDisabled)
	x.use = [4]*tree[*entry]{x.used, x.spend, x.teamUsed, x.teamSpend}
	return x
}

// insert adds e, whose ix is set, to the indexes. The caller holds mu.
func (x *indexes) insert(e *entry) {
	for _, t := range x.all {
		if t.in(e) {
			t.t.Set(e)
		}
	}
	if e.ix.team != "" {
		x.teamKeys[e.ix.team]++
	}
	e.ix.in = true
}

// remove takes e out of the indexes, if it is in them. The caller holds
// mu.
func (x *indexes) remove(e *entry) {
	if !e.ix.in {
		return
	}
	for _, t := range x.all {
		if t.in(e) {
			t.t.Delete(e)
		}
	}
	if t := e.ix.team; t != "" {
		if x.teamKeys[t]--; x.teamKeys[t] <= 0 {
			delete(x.teamKeys, t)
		}
	}
	e.ix.in = false
}

// build fills the empty indexes with keys and teams, setting each key's
// ix: each tree is loaded in order (Load appends to its last leaf), so
// that building costs the sorts, where inserting key by key would cost as
// many comparisons again, each between keys scattered in memory.
func (x *indexes) build(keys []*entry, teams []*team) {
	for _, e := range keys {
		e.ix = ixOf(&e.rec)
		e.ix.in = true
		if e.ix.team != "" {
			x.teamKeys[e.ix.team]++
		}
	}
	for _, t := range teams {
		t.ixName, t.ixIn = caseFold(t.name), true
	}
	// The trees are built GOMAXPROCS at a time: the sorts, most of the
	// cost, share the cores, and at most that many copies of keys exist.
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	build := func(f func()) {
		slots <- struct{}{}
		wg.Go(func() {
			f()
			<-slots
		})
	}
	for _, t := range x.all {
		build(func() {
			load(t.t, slices.DeleteFunc(slices.Clone(keys), func(e *entry) bool { return !t.in(e) }), t.cmp)
		})
	}
	build(func() { load(x.teamID, slices.Clone(teams), cmpTeamID) })
	build(func() { load(x.teamByName, slices.Clone(teams), cmpTeamName) })
	wg.Wait()
}

// load sorts items by c and loads them into the empty tree t.
func load[T any](t *tree[T], items []T, c func(a, b T) int) {
	slices.SortFunc(items, c)
	for _, it := range items {
		t.Load(it)
	}
}

// buildIndexes indexes every key and team the Store holds, once Open has
// loaded them.
func (s *Store) buildIndexes() {
	s.mu.RLock()
	keys := make([]*entry, 0, len(s.byID))
	for _, e := range s.byID {
		keys = append(keys, e)
	}
	teams := make([]*team, 0, len(s.teams))
	for _, t := range s.teams {
		teams = append(teams, t)
	}
	s.mu.RUnlock()
	x := newIndexes()
	x.mu.Lock()
	x.build(keys, teams)
	x.mu.Unlock()
	s.ix = x
}

// indexKey adds e, a key new to the Store, to the indexes.
func (s *Store) indexKey(e *entry) {
	x := s.ix
	x.mu.Lock()
	e.ix = ixOf(&e.rec)
	x.insert(e)
	x.mu.Unlock()
}

// unindexKey takes e, a key gone from the Store, out of the indexes.
func (s *Store) unindexKey(e *entry) {
	x := s.ix
	x.mu.Lock()
	x.remove(e)
	x.mu.Unlock()
}

// reindex moves e in the indexes when its record no longer has the values
// they hold, and reports whether it did. The caller holds e.mu.
func (s *Store) reindex(e *entry) bool {
	nx := ixOf(&e.rec)
	if !nx.differs(&e.ix) {
		return false
	}
	x := s.ix
	x.mu.Lock()
	if e.ix.in {
		x.remove(e)
		e.ix = nx
		x.insert(e)
	} else {
		e.ix = nx
	}
	x.mu.Unlock()
	return true
}

// reindexUse is reindex after a request, which changes only a key's last
// use and spend: it moves e in those two indexes when their coarse values
// moved, and reports whether they had. It compares two integers under
// e.mu, which the caller holds, and locks nothing when they did not move.
func (s *Store) reindexUse(e *entry) bool {
	nx := e.ix
	nx.used, nx.spend = usedSecond(&e.rec), spendCode(e.rec.spent)
	if nx.used == e.ix.used && nx.spend == e.ix.spend {
		return false
	}
	x := s.ix
	x.mu.Lock()
	trees := x.useTrees(e)
	if e.ix.in {
		for _, t := range trees {
			t.Delete(e)
		}
	}
	e.ix.used, e.ix.spend = nx.used, nx.spend
	if e.ix.in {
		for _, t := range trees {
			t.Set(e)
		}
	}
	x.mu.Unlock()
	return true
}

// useTrees returns the indexes e's last use and spend order it in: two,
// and two more for a key of a team. The caller holds x.mu.
func (x *indexes) useTrees(e *entry) []*tree[*entry] {
	if e.ix.team == "" {
		return x.use[:2]
	}
	return x.use[:]
}

// indexTeam adds t, a team new to the Store, to the indexes. The caller
// holds t.mu, or t is not shared yet.
func (s *Store) indexTeam(t *team) {
	x := s.ix
	x.mu.Lock()
	if !t.ixIn {
		t.ixName, t.ixIn = caseFold(t.name), true
		x.teamID.Set(t)
		x.teamByName.Set(t)
	}
	x.mu.Unlock()
}

// unindexTeam takes t, a team gone from the Store, out of the indexes.
func (s *Store) unindexTeam(t *team) {
	x := s.ix
	x.mu.Lock()
	if t.ixIn {
		x.teamID.Delete(t)
		x.teamByName.Delete(t)
		t.ixIn = false
	}
	x.mu.Unlock()
}

// reindexTeam moves t in the index of names when its name changed. The
// caller holds t.mu.
func (s *Store) reindexTeam(t *team) {
	name := caseFold(t.name)
	if name == t.ixName {
		return
	}
	x := s.ix
	x.mu.Lock()
	if t.ixIn {
		x.teamByName.Delete(t)
		t.ixName = name
		x.teamByName.Set(t)
	} else {
		t.ixName = name
	}
	x.mu.Unlock()
}
