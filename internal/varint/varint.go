// Package varint reads the varints of the stored records strictly: a
// record decodes only from the bytes its encoder writes, so that damage is
// found rather than read as another value, and a decoded record encodes
// back to the same bytes.
package varint

import (
	"encoding/binary"
	"math/bits"
)

// Read reads the minimal unsigned varint at the start of b and returns it
// and its length; why is "" then, else what is wrong ("is cut short",
// "overflows 64 bits", "is not a minimal varint") and n is 0.
func Read(b []byte) (v uint64, n int, why string) {
	v, n = binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, 0, "is cut short"
	case n < 0:
		return 0, 0, "overflows 64 bits"
	case n != (bits.Len64(v|1)+6)/7:
		return 0, 0, "is not a minimal varint"
	}
	return v, n, ""
}

// Unzigzag is the signed value of u, a zigzag varint's
// (binary.AppendVarint).
func Unzigzag(u uint64) int64 {
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}
