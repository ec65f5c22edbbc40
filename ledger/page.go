package ledger

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"
)

// Requests returns a page of the entries matching q, newest first.
//
// Entries are stored in the order their writers wrote them, and a scan
// reads forward, so a page is chosen in two passes. The first reads the
// heads of a day's entries (time, seq, references to the block's table,
// status: a few varints each, no string decoded), skipping the blocks
// whose table lacks the key, team or model asked for, and keeps the
// Limit+1 newest that match, with the records they are in. Older days
// are read only while the page is not full. The second decodes those
// entries whole.
func (l *Ledger) Requests(ctx context.Context, q RequestQuery) (Page, error) {
	q, after, err := l.normalizeRequests(q)
	if err != nil {
		return Page{}, err
	}
	sel := &selection{q: q, after: after, top: &candidates{}}
	for i, s := range []string{q.Key, q.Team, q.Model} {
		if s != "" {
			sel.want[i] = appendString(nil, s)
		}
	}
	for _, d := range days(dayOf(q.From), dayOf(q.To.Add(-time.Millisecond)), true) {
		if err := l.selectDay(ctx, d, sel); err != nil {
			return Page{}, err
		}
		if sel.top.Len() > q.Limit {
			break // an older day holds no newer entry
		}
	}
	return sel.page()
}

// selection is the first pass of Requests: the newest candidates so far.
type selection struct {
	q     RequestQuery
	after *position
	want  [3][]byte   // the key, team and model asked for, encoded; nil: any
	top   *candidates // a min-heap: the oldest first, at most Limit+1
}

// candidate is an entry of the page, and the record it is in.
type candidate struct {
	position
	rec   *record
	index int // in the heap
}

// record is an entry record's value, copied, with what its entries'
// seqs start from.
type record struct {
	v     []byte
	first uint32
	kind  byte
}

// selectDay offers the entries of day d to sel.
func (l *Ledger) selectDay(ctx context.Context, d day, sel *selection) error {
	var writer string
	var covered uint32 // the current writer's seqs below are in a block read
	return l.st.scan(ctx, appendKey(nil, entryPrefix, d, ""), func(k, v []byte) error {
		w, seq, kind, ok := entryKey(k)
		if !ok {
			return fmt.Errorf("%w: entry key %q", errCorrupt, k)
		}
		if w != writer {
			writer, covered = w, 0
		}
		if kind == 'c' && seq < covered {
			return nil // compacted while the scan ran (on a store without snapshots)
		}
		if kind == 'b' {
			covered = seq + blockSize
		}
		rec := &record{first: seq, kind: kind}
		err := eachBlock(v, seq, kind, func(br *blockReader, first uint32) error { return sel.offer(br, first, writer, rec, v) })
		if err != nil {
			return fmt.Errorf("ledger: entries %s: %w", k, err)
		}
		return nil
	})
}

// eachBlock calls fn with each block of an entry record: the record, or
// each entry of a chunk, with its first seq.
func eachBlock(v []byte, first uint32, kind byte, fn func(br *blockReader, first uint32) error) error {
	if kind == 'b' {
		br, err := openBlock(v, nil)
		if err != nil {
			return err
		}
		return fn(br, first)
	}
	r := reader{b: v}
	for seq := first; len(r.b) > 0 && r.err == nil; seq++ {
		one := r.bytes(r.count(len(r.b)))
		if r.err != nil {
			break
		}
		br, err := openBlock(one, nil)
		if err != nil {
			return err
		}
		if err := fn(br, seq); err != nil {
			return err
		}
	}
	return r.err
}

// offer offers the entries of br to sel; v is its record's value, which
// rec keeps a copy of once one of them is a candidate.
func (sel *selection) offer(br *blockReader, first uint32, writer string, rec *record, v []byte) error {
	var refs [3]int64 // the filters' references in br's table; -1: not there
	for i, s := range sel.want {
		refs[i] = -2 // no filter
		if s != nil {
			bias := uint64(0)
			if i == 1 {
				bias = 1 // a team's reference is its index + 1
			}
			if refs[i] = br.index(s, bias); refs[i] < 0 {
				return nil // no entry of br matches
			}
		}
	}
	q := &sel.q
	return br.walk(first, func(h *head) bool {
		for i, ref := range refs {
			if ref >= 0 && h.refs[i] != uint64(ref) {
				return false
			}
		}
		t := time.UnixMilli(h.ms)
		p := position{ms: h.ms, writer: writer, seq: h.seq}
		if q.Status != 0 && h.status != q.Status || t.Before(q.From) || !t.Before(q.To) ||
			sel.after != nil && !p.before(*sel.after) || sel.top.Len() > q.Limit && !(*sel.top)[0].before(p) {
			return false
		}
		if rec.v == nil {
			rec.v = bytes.Clone(v)
		}
		heap.Push(sel.top, &candidate{position: p, rec: rec})
		if sel.top.Len() > q.Limit+1 {
			heap.Pop(sel.top)
		}
		return false
	}, nil)
}

// page decodes the candidates whole, newest first, and the cursor after
// the page when there are more.
func (sel *selection) page() (Page, error) {
	cands := slices.Clone(*sel.top)
	slices.SortFunc(cands, func(a, b *candidate) int { return b.compare(a.position) })
	want := map[*record]map[uint32]*candidate{}
	for _, c := range cands {
		if want[c.rec] == nil {
			want[c.rec] = map[uint32]*candidate{}
		}
		want[c.rec][c.seq] = c
	}
	in := newInterner()
	for rec, seqs := range want {
		err := eachBlock(rec.v, rec.first, rec.kind, func(br *blockReader, first uint32) error {
			br.in = in
			return br.walk(first, func(h *head) bool { return seqs[h.seq] != nil }, func(h *head, e *Entry) { seqs[h.seq].e = *e })
		})
		if err != nil {
			return Page{}, err
		}
	}
	var p Page
	for i := range min(len(cands), sel.q.Limit) {
		p.Entries = append(p.Entries, cands[i].e)
	}
	if len(cands) > sel.q.Limit {
		p.Next = cands[sel.q.Limit-1].cursor()
	}
	return p, nil
}

// candidates is a min-heap of candidates: the oldest first.
type candidates []*candidate

func (c candidates) Len() int           { return len(c) }
func (c candidates) Less(i, j int) bool { return c[i].before(c[j].position) }
func (c candidates) Swap(i, j int)      { c[i], c[j] = c[j], c[i]; c[i].index, c[j].index = i, j }
func (c *candidates) Push(x any)        { x.(*candidate).index = len(*c); *c = append(*c, x.(*candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}
