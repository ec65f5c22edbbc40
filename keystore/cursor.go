package keystore

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// A cursor is a position in the order of a list (Keys, Teams): the sort
// value of the item a page ended at, as the index holds it, and that
// item's id. The next page begins after that position, so keys added or
// deleted meanwhile shift nothing: none comes twice, and none that
// existed throughout is skipped, as an offset would. A key whose sort
// value changed between pages (renamed, used, charged) may come twice,
// or not at all, in that walk. It is opaque to callers, base64url
// (unpadded) of:
//
//	byte          version 1
//	byte          the list: 'k' keys, 't' teams
//	byte          the sort, by its index in the list's sorts
//	uvarint+bytes the value, for a sort by name (case-folded); or
//	varint        the value, for the others (the last use's second, the spend's code)
//	uvarint+bytes the id
type cursor struct {
	list, sort byte
	text       string // the value of a sort by name
	n          int64  // the value of the others
	id         string
}

// Cursor formats.
const (
	cursorVersion = 1
	listKeys      = 'k'
	listTeams     = 't'
	// maxCursor is the longest cursor, in characters: a name of MaxName
	// bytes, case-folded (which may lengthen it), and an id, with room.
	maxCursor = 2048
)

// encode returns c as a caller sees it. text says whether c's sort is by
// name.
func (c cursor) encode(text bool) string {
	b := []byte{cursorVersion, c.list, c.sort}
	if text {
		b = appendBytes(b, c.text)
	} else {
		b = binary.AppendVarint(b, c.n)
	}
	b = appendBytes(b, c.id)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads s, a cursor of list made for the sort of index sort
// (named name, by name when text). Anything else is a *FieldError of the
// field "cursor", for op.
func decodeCursor(op, s string, list, sort byte, name string, text bool) (cursor, error) {
	bad := func(why string) (cursor, error) { return cursor{}, fieldError(op, "cursor", "%s", why) }
	if len(s) > maxCursor {
		return bad(fmt.Sprintf("%d characters is longer than any cursor (%d)", len(s), maxCursor))
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 3 || raw[0] != cursorVersion || raw[1] != list {
		return bad("not a cursor of this list")
	}
	if raw[2] != sort {
		return bad("made for another sort than " + name + ": start again without it")
	}
	c := cursor{list: list, sort: sort}
	d := decoder{id: "cursor", what: "cursor", b: raw[3:]}
	if text {
		c.text = string(d.bytes("value", maxCursor))
	} else {
		c.n = d.varint("value")
	}
	c.id = string(d.bytes("id", maxCursor))
	if d.done() != nil {
		return bad("not a cursor of this list")
	}
	return c, nil
}
