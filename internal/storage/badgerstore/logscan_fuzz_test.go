package badgerstore

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"
)

// appendLogEntry appends an entry in badger's log format (see logscan.go)
// for key at commit timestamp ts.
func appendLogEntry(b []byte, meta byte, key, value []byte, ts uint64) []byte {
	start := len(b)
	b = append(b, meta, 0)
	b = binary.AppendUvarint(b, uint64(len(key)+8))
	b = binary.AppendUvarint(b, uint64(len(value)))
	b = binary.AppendUvarint(b, 0)
	b = append(b, key...)
	b = binary.BigEndian.AppendUint64(b, math.MaxUint64-ts)
	b = append(b, value...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// sampleLog is a log of n commits (an entry and its end-of-transaction
// entry each), followed by zeros.
func sampleLog(n int) []byte {
	b := make([]byte, logHeaderSize)
	for i := range n {
		ts := uint64(i + 1)
		b = appendLogEntry(b, bitTxn, []byte{'k', byte('a' + i)}, []byte("value"), ts)
		b = appendLogEntry(b, bitFinTxn, []byte("!badger!txn"), []byte("1"), ts)
	}
	return append(b, make([]byte, 64)...)
}

// FuzzScanLog: scanLog never panics; what it reports lies within the file;
// a whole log reports nothing, and one damaged before later commits is
// caught.
func FuzzScanLog(f *testing.F) {
	f.Add(sampleLog(3), 0, byte(0))
	f.Add(sampleLog(5), 40, byte(1))
	f.Add([]byte{}, 0, byte(0))
	f.Fuzz(func(t *testing.T, b []byte, at int, flip byte) {
		d := scanLog(b)
		if d.Offset < 0 || d.Offset > int64(len(b)) || d.Next < 0 || d.Next > int64(len(b)) || d.End > int64(len(b)) {
			t.Fatalf("%+v out of a %d-byte file", d, len(b))
		}
		if d.Next > 0 && (d.Next <= d.Offset || d.End <= d.Next || d.Cut) || d.Unended && d != (logDamage{Unended: true}) {
			t.Fatalf("%+v: inconsistent", d)
		}

		log := sampleLog(4)
		if d := scanLog(log); d != (logDamage{}) {
			t.Fatalf("a whole log: %+v", d)
		}
		// Damage inside the first commit's entry: three commits follow.
		first := logHeaderSize + 2 + 3 + int(uint(at)%10)
		log[first] ^= flip | 1
		if d := scanLog(log); d.Next == 0 || d.Txns < 3 {
			t.Fatalf("damage at %d: %+v", first, d)
		}
		// The file cut inside the last commit's end entry.
		whole := sampleLog(4)
		cutAt := len(whole) - 64 - 1 - int(uint(at)%8)
		if d := scanLog(whole[:cutAt]); !d.Cut {
			t.Fatalf("cut at %d: %+v", cutAt, d)
		}
		// The file cut at the end of its last entry: whole, unended.
		if d := scanLog(whole[:len(whole)-64]); d != (logDamage{Unended: true}) {
			t.Fatalf("cut after the last entry: %+v", d)
		}
	})
}
