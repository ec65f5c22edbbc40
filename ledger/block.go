package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// blockSize is how many sequence numbers a block covers: a writer's
// entries are first written in chunks, and every blockSize of them
// rewritten as one block (see compact). It is 16^spanHex, so the chunks
// of a block share the key prefix of their first 8-spanHex hex digits.
// 4096 entries make a block of ~130 KB: bbolt's overflow pages waste at
// most one page of it, and its table holds a key seen twice once.
const (
	spanHex   = 3
	blockSize = 1 << (4 * spanHex)
)

// An item is an entry with its sequence number in its writer.
type item struct {
	seq uint32
	e   Entry
}

// encodeBlock encodes items, whose seqs are at or after first and below
// first+blockSize, as one block.
func encodeBlock(first uint32, items []item) []byte {
	base := int64(0)
	if len(items) > 0 {
		base = millis(items[0].e.Time)
	}
	index := make(map[string]uint64)
	var table []string
	ref := func(s string) uint64 {
		i, ok := index[s]
		if !ok {
			i = uint64(len(table))
			index[s] = i
			table = append(table, s)
		}
		return i
	}
	opt := func(s string) uint64 { // an optional string: 0 for none
		if s == "" {
			return 0
		}
		return ref(s) + 1
	}
	var body []byte
	seq, ms := first, base
	for _, it := range items {
		e := &it.e
		body = binary.AppendUvarint(body, uint64(it.seq-seq))
		body = binary.AppendVarint(body, millis(e.Time)-ms)
		seq, ms = it.seq, millis(e.Time)
		body = appendString(body, e.RequestID)
		for _, v := range [...]uint64{ref(e.Key), opt(e.Team), ref(e.Model), ref(e.Route), opt(e.Upstream), opt(e.EndUser)} {
			body = binary.AppendUvarint(body, v)
		}
		body = appendEntryCounts(body, e)
	}
	last := base
	for _, it := range items {
		last = max(last, millis(it.e.Time))
	}
	b := []byte{blockVersion}
	b = binary.AppendVarint(b, base)
	b = binary.AppendUvarint(b, uint64(last-base))
	b = binary.AppendUvarint(b, uint64(len(table)))
	for _, s := range table {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(items)))
	return append(b, body...)
}

func appendEntryCounts(b []byte, e *Entry) []byte {
	flags := uint64(0)
	if e.Estimated {
		flags = 1
	}
	b = binary.AppendVarint(b, int64(e.Status)-200) // 200 in a byte
	t := e.Tokens
	for _, v := range [...]int64{e.Latency.Milliseconds(), int64(flags),
		t.Input, t.Output, t.CacheRead, t.CacheWrite, t.Reasoning, int64(e.Cost)} {
		b = binary.AppendUvarint(b, uint64(max(v, 0)))
	}
	return b
}

// blockReader decodes a block. Its table's strings are decoded when an
// entry refers to them, through an interner: a query that skips a block
// (index) allocates nothing for it, and one string is one allocation per
// query, not one per block.
type blockReader struct {
	r      reader
	nrefs  int      // the table references of an entry: 6; 5 in a block of version 2 (no end user), 4 in one of version 1 (nor upstream)
	base   int64    // the first entry's time, Unix ms
	last   int64    // the latest entry's
	raw    []byte   // the string table, encoded
	nTable int      // its strings
	table  [][]byte // the strings, encoded: made by the first str, not by a query that skips the block
	strs   []string // decoded, or "" until they are
	in     *interner
	n      int
}

// openBlock reads v's header and finds the end of its string table,
// allocating nothing for it. in may be nil.
func openBlock(v []byte, in *interner) (*blockReader, error) {
	br := &blockReader{r: reader{b: v}, in: in}
	r := &br.r
	switch r.byte() {
	case blockVersion:
		br.nrefs = len(head{}.refs)
	case 2: // before end users
		br.nrefs = len(head{}.refs) - 1
	case 1: // before upstreams
		br.nrefs = len(head{}.refs) - 2
	default:
		return nil, fmt.Errorf("%w: block version", errCorrupt)
	}
	br.base = r.varint()
	br.last = br.base + r.int()
	br.nTable = r.count(len(v))
	start := r.b
	for range br.nTable {
		r.rawString()
	}
	br.raw = start[:len(start)-len(r.b)]
	br.n = r.count(blockSize)
	return br, r.err
}

// head is what a light reading of an entry decodes: where it is, when,
// its strings as references to the block's table, and its status.
type head struct {
	seq    uint32
	ms     int64
	reqID  []byte    // encoded
	refs   [6]uint64 // key, team+1 (0: none), model, route, upstream+1, end-user+1 (0: none; always in blocks of the versions without them)
	status int
}

// each calls fn with every entry of the block and its seq, first being
// the block's first.
func (br *blockReader) each(first uint32, fn func(seq uint32, e *Entry)) error {
	return br.walk(first, nil, func(h *head, e *Entry) { fn(h.seq, e) })
}

// walk reads every entry of the block, first being its first seq: its
// head, then, unless keep says not to, the rest, to call full with.
// Entries kept are decoded whole; the others cost a few varints.
func (br *blockReader) walk(first uint32, keep func(h *head) bool, full func(h *head, e *Entry)) error {
	r := &br.r
	var h head
	var e Entry
	seq, ms := first, br.base
	for i := 0; i < br.n && r.err == nil; i++ {
		seq += uint32(min(r.uvarint(), blockSize))
		if seq-first >= blockSize {
			r.fail("seq offset")
		}
		ms += r.varint()
		h.seq, h.ms, h.reqID = seq, ms, r.rawString()
		for j := range br.nrefs {
			h.refs[j] = r.uvarint()
		}
		h.status = int(min(max(r.varint()+200, 0), 999))
		if r.err != nil || keep != nil && !keep(&h) {
			for range 8 { // latency, flags, five token counts, cost
				r.uvarint()
			}
			continue
		}
		e.Time, e.RequestID, e.Status = time.UnixMilli(ms).UTC(), decodeString(h.reqID), h.status
		e.Key, e.Team, e.Model, e.Route = br.str(h.refs[0], 0), br.str(h.refs[1], 1), br.str(h.refs[2], 0), br.str(h.refs[3], 0)
		e.Upstream, e.EndUser = br.str(h.refs[4], 1), br.str(h.refs[5], 1)
		br.counts(&e)
		if r.err == nil {
			full(&h, &e)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

// index returns the reference to s, encoded, in the block's table (bias
// added), or -1 if s is not there.
func (br *blockReader) index(s []byte, bias uint64) int64 {
	r := reader{b: br.raw}
	for i := range br.nTable {
		if bytes.Equal(r.rawString(), s) {
			return int64(i) + int64(bias)
		}
	}
	return -1
}

// str returns the string of reference i to the table, minus bias (1 for
// an optional string, whose 0 is "").
func (br *blockReader) str(i, bias uint64) string {
	if bias == 1 && i == 0 {
		return ""
	}
	i -= bias
	if br.table == nil {
		r := reader{b: br.raw}
		br.table, br.strs = make([][]byte, br.nTable), make([]string, br.nTable)
		for j := range br.table {
			br.table[j] = r.rawString()
		}
	}
	if i >= uint64(len(br.table)) {
		br.r.fail("string reference")
		return ""
	}
	if br.strs[i] == "" && len(br.table[i]) > 1 {
		br.strs[i] = br.in.get(br.table[i])
	}
	return br.strs[i]
}

// counts reads the rest of an entry after its head.
func (br *blockReader) counts(e *Entry) {
	r := &br.r
	e.Latency = time.Duration(min(r.int(), int64(1<<63-1)/int64(time.Millisecond))) * time.Millisecond
	e.Estimated = r.int()&1 != 0
	t := &e.Tokens
	for _, p := range [...]*int64{&t.Input, &t.Output, &t.CacheRead, &t.CacheWrite, &t.Reasoning} {
		*p = r.int()
	}
	e.Cost = usd(r.int())
}

// appendSingle appends the block of one entry, e with seq first, as
// encodeBlock would with a table in the order key, model, route, team,
// upstream, end user (the last three when not "", the end user only when
// no string before it is the same). The upstream and the end user come
// last: a query's filter finds a key, team or model at its first place in
// the table, which an upstream of the same name must not take; and a
// filter on the end user finds the first place of its name, which must be
// the one the entry refers to, as in a block's table, where each string
// is once.
func appendSingle(b []byte, e *Entry) []byte {
	b = append(b, blockVersion)
	b = binary.AppendVarint(b, millis(e.Time))
	b = append(b, 0) // its last entry is its first
	strs := [6]string{e.Key, e.Model, e.Route}
	n := byte(3)
	opt := func(s string) byte { // its index + 1, 0 for none
		if s == "" {
			return 0
		}
		n++
		strs[n-1] = s
		return n
	}
	team, upstream := opt(e.Team), opt(e.Upstream)
	endUser := byte(0)
	if e.EndUser != "" {
		if i := slices.Index(strs[:n], e.EndUser); i >= 0 {
			endUser = byte(i + 1)
		} else {
			endUser = opt(e.EndUser)
		}
	}
	b = append(b, n)
	for _, s := range strs[:n] {
		b = appendString(b, s)
	}
	b = append(b, 1, 0, 0) // one entry, at offset 0, at the base time
	b = appendString(b, e.RequestID)
	b = append(b, 0, team, 1, 2, upstream, endUser)
	return appendEntryCounts(b, e)
}

// eachBlock calls fn with each block of an entry record of kind, whose
// first seq is first: the record itself, a block, or each entry of a
// chunk, a block of one. The blocks decode with no interner; fn may set
// one.
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
