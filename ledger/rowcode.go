package ledger

import (
	"encoding/binary"
	"slices"
)

// A cached rollup keeps its stored value encoded beside its rows, and a
// change re-encodes only the rows it changes. Why: a key's rollup of end
// users has up to 256 rows, about 8 KB, and is put with each entry that
// names an end user; encoding all of its rows again for each entry
// (appendRows) was most of what a request with a new end user cost the
// ledger (about 10 of its 18 µs). Kept encoded, an entry re-encodes its
// one or two rows and splices them in, and the value put is a copy.
//
// The rows of a rollup change only through addTo, insert, remove and
// replace, which keep the encoding; a rollup built otherwise
// (decodeRows) is encoded whole by its first value.

// rowCode is a rollup's rows encoded: enc holds each row as appendRow
// encodes it, back to back, sizes their lengths; kept is false until
// enc holds every row.
type rowCode struct {
	enc   []byte
	sizes []int32
	kept  bool
}

// appendRow appends one row of a rollup's value.
func appendRow(b []byte, r *row) []byte {
	b = appendString(b, r.k.team)
	b = appendString(b, r.k.model)
	return appendTotals(b, &r.Totals)
}

// value appends the rollup's stored value to b: what appendRows appends.
func (r *rollup) value(b []byte) []byte {
	if !r.code.kept {
		r.encodeAll()
	}
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, uint64(len(r.rows)))
	return append(b, r.code.enc...)
}

// encodeAll encodes every row of r.
func (r *rollup) encodeAll() {
	c := &r.code
	c.enc, c.sizes = c.enc[:0], c.sizes[:0]
	for i := range r.rows {
		n := len(c.enc)
		c.enc = appendRow(c.enc, &r.rows[i])
		c.sizes = append(c.sizes, int32(len(c.enc)-n))
	}
	c.kept = true
}

// offset is where row i starts in the encoding.
func (c *rowCode) offset(i int) int {
	off := 0
	for _, n := range c.sizes[:i] {
		off += int(n)
	}
	return off
}

// addTo adds t to row i, and re-encodes it.
func (r *rollup) addTo(i int, t *Totals) {
	r.rows[i].add(t)
	if c := &r.code; c.kept {
		var a [64]byte
		e := appendRow(a[:0], &r.rows[i])
		off := c.offset(i)
		c.enc = slices.Replace(c.enc, off, off+int(c.sizes[i]), e...)
		c.sizes[i] = int32(len(e))
	}
}

// insert inserts an empty row of k at i.
func (r *rollup) insert(i int, k rowKey) {
	r.rows = slices.Insert(r.rows, i, row{k: k})
	r.code.inserted(r, i)
}

// remove removes row i.
func (r *rollup) remove(i int) {
	r.code.removed(i)
	r.rows = slices.Delete(r.rows, i, i+1)
}

// replace removes row v and inserts an empty row of k at i, its index
// once v is out, shifting only the rows between the two: rows hold
// pointers, and a shift of them costs a write barrier each while the
// collector runs, where the encoding's bytes cost none.
func (r *rollup) replace(v, i int, k rowKey) {
	r.code.removed(v)
	if v < i {
		copy(r.rows[v:i], r.rows[v+1:i+1])
	} else {
		copy(r.rows[i+1:v+1], r.rows[i:v])
	}
	r.rows[i] = row{k: k}
	r.code.inserted(r, i)
}

// inserted encodes row i of r, just inserted.
func (c *rowCode) inserted(r *rollup, i int) {
	if c.kept {
		var a [64]byte
		e := appendRow(a[:0], &r.rows[i])
		c.enc = slices.Insert(c.enc, c.offset(i), e...)
		c.sizes = slices.Insert(c.sizes, i, int32(len(e)))
	}
}

// removed drops the encoding of row i, being removed.
func (c *rowCode) removed(i int) {
	if c.kept {
		off := c.offset(i)
		c.enc = slices.Delete(c.enc, off, off+int(c.sizes[i]))
		c.sizes = slices.Delete(c.sizes, i, i+1)
	}
}
