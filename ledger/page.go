package ledger

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
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
	ds, err := l.entryDays(ctx, dayOf(q.From), dayOf(q.To.Add(-time.Millisecond)), true)
	if err == nil {
		ds, err = l.daysOf(ctx, ds, q)
	}
	if err != nil {
		return Page{}, err
	}
	for try := 0; ; try++ {
		sel := &selection{q: q, after: after}
		for i, s := range []string{q.Key, q.Team, q.Model, q.EndUser} {
			if s != "" {
				sel.want[i] = appendString(nil, s)
			}
		}
		if err := l.choose(ctx, sel, ds); err != nil {
			return Page{}, err
		}
		p, err := l.page(ctx, sel)
		if !errors.Is(err, errMoved) || try == 2 {
			return p, err
		}
	}
}

// daysOf returns the days of ds on which q's key (or team) has entries
// that may match q: those whose rollups of some writer count requests of
// q's team and model, or of OtherModel, which holds the models past a
// rollup's rows. The rollups are read at once (a round trip on Redis), so
// that a key with no entries in the range reads no entry. Without a key
// or team asked for, it returns ds.
func (l *Ledger) daysOf(ctx context.Context, ds []day, q RequestQuery) ([]day, error) {
	prefix, name := keyPrefix, q.Key
	if q.Key == "" {
		prefix, name = teamPrefix, q.Team
	}
	if name == "" || len(ds) == 0 {
		return ds, nil
	}
	writers, err := l.writers(ctx, slices.Min(ds), slices.Max(ds))
	if err != nil {
		return nil, err
	}
	recs, vals, at, err := l.rollupsOf(ctx, prefix, name, ds, writers)
	if err != nil {
		return nil, err
	}
	team, model, other := encodeAll(q.Team), encodeAll(q.Model), appendString(nil, OtherModel)
	var out []day
	for i, v := range vals {
		if v == nil || len(out) > 0 && out[len(out)-1] == at[i] {
			continue
		}
		match := false
		err := decodeRollup(v, func(rowTeam, rowModel []byte, t *Totals) {
			match = match || t.Requests > 0 && (q.Key == "" || len(team) == 0 || bytes.Equal(rowTeam, team[0])) &&
				(len(model) == 0 || bytes.Equal(rowModel, model[0]) || bytes.Equal(rowModel, other))
		})
		if err != nil {
			return nil, fmt.Errorf("ledger: rollup %s: %w", recs[i], err)
		}
		if match {
			out = append(out, at[i])
		}
	}
	return out, nil
}

// readBudget bounds the bytes of entry records a page reads, a day at a
// time: a filter few entries match (a model, a status) would otherwise
// read the whole retention for one page. Past it, the page ends with the
// entries found so far, maybe none, and a cursor to go on from the day
// before the last one read.
var readBudget = 64 << 20

// choose offers the entries of the days ds, newest first, to sel, until
// its page is full (an older day holds no newer entry), or readBudget
// bytes have been read: sel.stop is then where the next page starts.
func (l *Ledger) choose(ctx context.Context, sel *selection, ds []day) error {
	for i, d := range ds {
		if sel.after != nil && d.time().UnixMilli() > sel.after.ms {
			continue // paged through already
		}
		if err := l.selectDay(ctx, d, sel); err != nil {
			return err
		}
		if len(sel.top) > sel.q.Limit {
			return nil
		}
		if sel.read >= readBudget && i+1 < len(ds) {
			sel.stop = &position{ms: d.time().UnixMilli() - 1, writer: "ffffffffffffffff", seq: math.MaxUint32}
			return nil
		}
	}
	return nil
}

// errMoved is the error of a second pass that found a record of the first
// gone: its chunk was compacted meanwhile, and the page is chosen again.
var errMoved = errors.New("ledger: entries compacted while read")

// selection is the first pass of Requests: the newest candidates so far,
// kept in a min-heap of at most Limit+1 (the oldest first), without an
// allocation per entry: a candidate is four numbers.
type selection struct {
	q       RequestQuery
	after   *position
	want    [4][]byte // the key, team, model and end user asked for, encoded; nil: any
	top     []candidate
	writers []string  // candidate.writer's
	recs    []*record // candidate.rec's
	read    int       // bytes of records read
	stop    *position // where the next page starts, when the read budget ran out
}

// candidate is an entry that may be on the page, and the record it is in.
type candidate struct {
	ms          int64
	seq         uint32
	writer, rec int32
}

// record is an entry record that may hold entries of the page: its key,
// what its entries' seqs start from, their writer (in
// selection.writers), and the time of its latest entry that may.
type record struct {
	key    []byte
	first  uint32
	kind   byte
	writer int32
	last   int64
	index  int32 // in selection.recs, once it has a candidate; -1 before
}

// selectDay offers the entries of day d to sel. It lists the day's
// records first, with the time of their latest entry (in a block's
// header), leaving out those that hold no entry of the key, team or
// model asked for; then reads them again latest first, until the page is
// full and the next record holds nothing newer than the page's oldest.
func (l *Ledger) selectDay(ctx context.Context, d day, sel *selection) error {
	recs, err := l.dayRecords(ctx, d, sel)
	if err != nil {
		return err
	}
	slices.SortFunc(recs, func(a, b *record) int { return cmp.Compare(b.last, a.last) })
	for _, rec := range recs {
		if len(sel.top) > sel.q.Limit && rec.last < sel.top[0].ms {
			return nil
		}
		v, err := l.db.Get(ctx, rec.key)
		if err != nil {
			return err
		}
		if v == nil {
			return errMoved
		}
		sel.read += len(v)
		err = eachBlock(v, rec.first, rec.kind, func(br *blockReader, first uint32) error { return sel.offer(br, first, rec) })
		if err != nil {
			return fmt.Errorf("ledger: entries %s: %w", rec.key, err)
		}
	}
	return nil
}

// dayRecords lists the entry records of day d that hold an entry sel
// may want.
func (l *Ledger) dayRecords(ctx context.Context, d day, sel *selection) ([]*record, error) {
	var recs []*record
	err := l.scanDay(ctx, d, func(w string, seq uint32, kind byte, k, v []byte) error {
		sel.read += len(v)
		if n := len(sel.writers); n == 0 || sel.writers[n-1] != w {
			sel.writers = append(sel.writers, w)
		}
		rec := &record{first: seq, kind: kind, last: math.MinInt64, writer: int32(len(sel.writers) - 1), index: -1}
		err := eachBlock(v, seq, kind, func(br *blockReader, _ uint32) error {
			if _, ok := sel.refs(br); ok {
				rec.last = max(rec.last, br.last)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("ledger: entries %s: %w", k, err)
		}
		if rec.last != math.MinInt64 {
			rec.key = bytes.Clone(k)
			recs = append(recs, rec)
		}
		return nil
	})
	return recs, err
}

// offer offers the entries of br, in record rec, to sel.
func (sel *selection) offer(br *blockReader, first uint32, rec *record) error {
	refs, ok := sel.refs(br)
	if !ok {
		return nil // no entry of br matches
	}
	q := &sel.q
	w := rec.writer
	return br.walk(first, func(h *head) bool {
		for i, ref := range refs {
			if ref >= 0 && h.refs[wantRef[i]] != uint64(ref) {
				return false
			}
		}
		t := time.UnixMilli(h.ms)
		c := candidate{ms: h.ms, seq: h.seq, writer: w}
		if q.Status != 0 && h.status != q.Status || t.Before(q.From) || !t.Before(q.To) ||
			sel.after != nil && !sel.position(c).before(*sel.after) || len(sel.top) > q.Limit && !sel.older(sel.top[0], c) {
			return false
		}
		if rec.index < 0 {
			rec.index = int32(len(sel.recs))
			sel.recs = append(sel.recs, rec)
		}
		c.rec = rec.index
		sel.push(c)
		return false
	}, nil)
}

// wantRef is the place in an entry's head.refs of each string of
// selection.want: key, team, model, end user.
var wantRef = [4]int{0, 1, 2, 5}

// refs returns the references in br's table of the key, team, model and
// end user asked for (-2: none asked), and false when one is not there.
func (sel *selection) refs(br *blockReader) ([4]int64, bool) {
	var refs [4]int64
	for i, s := range sel.want {
		refs[i] = -2
		if s == nil {
			continue
		}
		bias := uint64(0)
		if i == 1 || i == 3 {
			bias = 1 // a team's and an end user's reference is its index + 1
		}
		if refs[i] = br.index(s, bias); refs[i] < 0 {
			return refs, false
		}
	}
	return refs, true
}

func (sel *selection) position(c candidate) position {
	return position{ms: c.ms, writer: sel.writers[c.writer], seq: c.seq}
}

// older reports whether a comes after b in the newest-first order.
func (sel *selection) older(a, b candidate) bool {
	switch {
	case a.ms != b.ms:
		return a.ms < b.ms
	case a.writer != b.writer && sel.writers[a.writer] != sel.writers[b.writer]:
		return sel.writers[a.writer] < sel.writers[b.writer]
	}
	return a.seq < b.seq
}

// push adds c to the heap, dropping the oldest beyond Limit+1.
func (sel *selection) push(c candidate) {
	h := append(sel.top, c)
	for i := len(h) - 1; i > 0; { // up
		p := (i - 1) / 2
		if !sel.older(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	if len(h) > sel.q.Limit+1 { // drop the root, the oldest
		h[0] = h[len(h)-1]
		h = h[:len(h)-1]
		sel.down(h)
	}
	sel.top = h
}

// down restores the heap from its root.
func (sel *selection) down(h []candidate) {
	for i := 0; ; {
		m, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && sel.older(h[l], h[m]) {
			m = l
		}
		if r < len(h) && sel.older(h[r], h[m]) {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// page reads the candidates' records again and decodes the candidates
// whole, newest first, with the cursor after the page when there are
// more.
func (l *Ledger) page(ctx context.Context, sel *selection) (Page, error) {
	cands := slices.Clone(sel.top)
	slices.SortFunc(cands, func(a, b candidate) int { return sel.position(b).compare(sel.position(a)) })
	want := map[int32]map[uint32]*Entry{}
	entries := make([]Entry, len(cands))
	for i, c := range cands {
		if want[c.rec] == nil {
			want[c.rec] = map[uint32]*Entry{}
		}
		want[c.rec][c.seq] = &entries[i]
	}
	in := newInterner()
	for ri, seqs := range want {
		rec := sel.recs[ri]
		v, err := l.db.Get(ctx, rec.key)
		if err != nil {
			return Page{}, err
		}
		if v == nil {
			return Page{}, errMoved
		}
		err = eachBlock(v, rec.first, rec.kind, func(br *blockReader, first uint32) error {
			br.in = in
			return br.walk(first, func(h *head) bool { return seqs[h.seq] != nil }, func(h *head, e *Entry) { *seqs[h.seq] = *e })
		})
		if err != nil {
			return Page{}, err
		}
	}
	p := Page{Entries: entries[:min(len(entries), sel.q.Limit)]}
	if len(cands) > sel.q.Limit {
		p.Next = sel.position(cands[sel.q.Limit-1]).cursor()
	} else if sel.stop != nil {
		p.Next = sel.stop.cursor()
	}
	if len(p.Entries) == 0 {
		p.Entries = nil
	}
	return p, nil
}
