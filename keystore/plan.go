package keystore

import (
	"slices"

	"github.com/tidwall/btree"
)

// A page of keys or teams (Keys, Teams) is planned on the indexes, under
// their read lock, whatever its filters, in one of two ways:
//
//   - Each filter is a source of candidates whose size the indexes tell, or
//     count up to collectBound: a team's keys, the disabled keys, the
//     expired ones, and the three prefix ranges of a search (names, ids,
//     teams' names). When the smallest has at most collectBound items, they
//     are collected, filtered by every other filter, and sorted: O(b log b)
//     for b <= collectBound, whatever the key count.
//   - Otherwise every filter is dense, and the sort's own index is walked
//     from the cursor, in order, keeping the keys that pass the filters,
//     until the page is full. A team's keys are walked in their own index
//     in that order (by team, then the sort); a search sorted by name walks
//     its name range, merged with its (small) id and team ranges.
//
// A walk stops once the filters have refused scanBudget items of the
// index, even when the page is not full: the page then holds fewer than
// its limit, maybe none, and its cursor resumes the walk where it stopped.
// So a page costs at most O(log n + collectBound log collectBound + limit
// + scanBudget) comparisons and predicates, at any key count: the worst
// case, reached by filters that each match many keys and together few, or
// whose keys lie far apart in the sort's order. A page with no filter, or
// a team's alone, is never short: it walks an index in its order.

// The bounds of a page's plan. They are variables so that the tests can
// make them small, and reach every way a page is planned with few keys.
var (
	// collectBound is the most candidates a page collects and sorts.
	collectBound = 10_000
	// scanBudget is the most index items a page walks that its filters
	// refuse.
	scanBudget = 100_000
)

// stream yields items in a page's order.
type stream[T any] interface {
	next() (T, bool)
}

// treeStream yields the items of an index after a position, in order or
// in reverse, while in holds.
type treeStream[T any] struct {
	it   btree.IterG[T]
	ok   bool
	desc bool
	in   func(T) bool // nil: to the end
}

// walkTree returns the stream of t's items after from (strictly; every
// item when hasFrom is false), ascending or, when desc, descending, while
// in holds.
func walkTree[T any](t *tree[T], desc bool, from T, hasFrom bool, in func(T) bool) *treeStream[T] {
	s := &treeStream[T]{it: t.Iter(), desc: desc, in: in}
	switch {
	case !hasFrom && !desc:
		s.ok = s.it.First()
	case !hasFrom:
		s.ok = s.it.Last()
	case !desc:
		s.ok = s.it.Seek(from)
		if s.ok && !t.Less(from, s.it.Item()) {
			s.ok = s.it.Next() // the item at from itself
		}
	case s.it.Seek(from):
		s.ok = s.it.Prev()
	default:
		s.ok = s.it.Last() // every item comes before from
	}
	return s
}

func (s *treeStream[T]) next() (T, bool) {
	var zero T
	if !s.ok {
		return zero, false
	}
	v := s.it.Item()
	if s.in != nil && !s.in(v) {
		s.ok = false
		return zero, false
	}
	if s.desc {
		s.ok = s.it.Prev()
	} else {
		s.ok = s.it.Next()
	}
	return v, true
}

// sliceStream yields items already in a page's order.
type sliceStream[T any] []T

func (s *sliceStream[T]) next() (T, bool) {
	var zero T
	if len(*s) == 0 {
		return zero, false
	}
	v := (*s)[0]
	*s = (*s)[1:]
	return v, true
}

// mergeStream yields the items of several streams, each in a page's
// order, in that order, once each: an item several of them yield comes at
// one position in all, so its copies come one after the other.
type mergeStream[T comparable] struct {
	srcs  []stream[T]
	heads []T
	oks   []bool
	order func(a, b T) int
	last  T
}

func merge[T comparable](order func(a, b T) int, srcs ...stream[T]) *mergeStream[T] {
	m := &mergeStream[T]{srcs: srcs, heads: make([]T, len(srcs)), oks: make([]bool, len(srcs)), order: order}
	for i, s := range srcs {
		m.heads[i], m.oks[i] = s.next()
	}
	return m
}

func (m *mergeStream[T]) next() (T, bool) {
	for {
		best := -1
		for i, ok := range m.oks {
			if ok && (best < 0 || m.order(m.heads[i], m.heads[best]) < 0) {
				best = i
			}
		}
		if best < 0 {
			var zero T
			return zero, false
		}
		v := m.heads[best]
		m.heads[best], m.oks[best] = m.srcs[best].next()
		if v != m.last {
			m.last = v
			return v, true
		}
	}
}

// pageOf is a page as planned: its items, and where the next page
// resumes (more: there may be one).
type pageOf[T any] struct {
	items  []T
	resume T
	more   bool
}

// walk takes from st the items keep accepts until it has limit of them
// and knows whether more follow, or st ends, or keep has refused budget
// items (see scanBudget): the page then resumes after the last item taken.
func walk[T any](st stream[T], keep func(T) bool, limit, budget int) pageOf[T] {
	var p pageOf[T]
	for refused := 0; ; {
		if refused == budget {
			p.more = true
			return p
		}
		v, ok := st.next()
		if !ok {
			return p
		}
		p.resume = v
		if !keep(v) {
			refused++
			continue
		}
		if len(p.items) == limit {
			p.resume, p.more = p.items[limit-1], true
			return p
		}
		p.items = append(p.items, v)
	}
}

// collect makes a page of items, candidates in any order, some maybe
// more than once: those keep accepts and that come after the cursor
// (after), in order, limit at most.
func collect[T comparable](items []T, keep, after func(T) bool, order func(a, b T) int, limit int) pageOf[T] {
	items = slices.DeleteFunc(items, func(v T) bool { return !after(v) || !keep(v) })
	slices.SortFunc(items, order)
	items = slices.Compact(items)
	if len(items) > limit {
		return pageOf[T]{items: items[:limit], resume: items[limit-1], more: true}
	}
	return pageOf[T]{items: items}
}

// count counts the items of t from from on while in holds, up to max.
func count[T any](t *tree[T], from T, in func(T) bool, max int) int {
	n := 0
	t.Ascend(from, func(v T) bool {
		if !in(v) {
			return false
		}
		n++
		return n < max
	})
	return n
}

// gather appends to items those of t from from on while in holds.
func gather[T any](items []T, t *tree[T], from T, in func(T) bool) []T {
	t.Ascend(from, func(v T) bool {
		if !in(v) {
			return false
		}
		items = append(items, v)
		return true
	})
	return items
}

// reverse returns the reverse of the order c.
func reverse[T any](c func(a, b T) int) func(a, b T) int {
	return func(a, b T) int { return c(b, a) }
}
