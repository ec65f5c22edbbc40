package badgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ratestore/ratestore/internal/storage"
)

// badger's logs, the memtable log (NNNNN.mem, replayed into the memtable at
// Open) and the value log (NNNNNN.vlog), share one format, as read from
// badger v4's source (structs.go, value.go, memtable.go):
//
//	file header, 20 bytes: a key id and an IV, for encryption (unused here)
//	entries, back to back:
//	  meta      byte      bit 6: part of a transaction, bit 7: its end
//	  userMeta  byte
//	  klen      uvarint   below 1<<16
//	  vlen      uvarint
//	  expiresAt uvarint
//	  key       klen bytes: the user's key, then 8 bytes of version
//	            (math.MaxUint64 minus the commit timestamp, big-endian)
//	  value     vlen bytes
//	  crc       uint32, big-endian: CRC-32C of everything above it
//	zeros after the last entry (the file is preallocated)
//
// badger replays a log up to the first entry that does not decode or fails
// its CRC, takes that for the end, and truncates the file there: whatever
// followed is gone, silently. A crash can only leave a torn last entry, as
// writes go through the file's memory map in order, so an entry that
// decodes after one that does not is damage (a flipped bit, a bad sector),
// and the entries after it were acknowledged: scanLogs finds that case
// before badger.Open gets to truncate, as SQLite and the bolt store's log
// (package wal) refuse a damaged log rather than shorten it.
const (
	logHeaderSize = 20
	maxKeyLen     = 1 << 16
	bitTxn        = 1 << 6
	bitFinTxn     = 1 << 7
)

// logEntry is where an entry lies in a log, and what scanLog needs of it.
type logEntry struct {
	size int    // its encoded length
	ts   uint64 // its commit timestamp (0 if its key has no version)
	fin  bool   // it ends a transaction
}

// decodeLogEntry decodes the entry at the start of b. ok is false if b does
// not start with a whole entry whose CRC matches, or starts with the zero
// entry that ends a log (an empty key); cut is set too if it starts with
// the beginning of an entry that b ends inside of.
func decodeLogEntry(b []byte) (e logEntry, ok, cut bool) {
	if len(b) < 2 {
		return e, false, len(b) > 0
	}
	meta := b[0]
	p := 2
	var fields [3]uint64 // klen, vlen, expiresAt
	for i := range fields {
		v, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return e, false, n == 0 // 0: b ends inside the varint
		}
		fields[i], p = v, p+n
	}
	klen, vlen := fields[0], fields[1]
	if klen == 0 || klen >= maxKeyLen {
		return e, false, false
	}
	end := uint64(p) + klen + vlen
	if end+crc32.Size > uint64(len(b)) {
		return e, false, true
	}
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
		return e, false, false
	}
	key := b[p : uint64(p)+klen]
	if len(key) > 8 {
		e.ts = math.MaxUint64 - binary.BigEndian.Uint64(key[len(key)-8:])
	}
	e.size, e.fin = int(end+crc32.Size), meta&bitFinTxn != 0
	return e, true, false
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logDamage is what scanLog found wrong with a log: the offset of the first
// entry that does not decode, and, when entries that do decode follow it
// (damage), where the first of them is, how many transactions end after it
// and where the last entry ends. A zero value (Offset 0) means none.
type logDamage struct {
	Offset int64 // the first entry that does not decode; 0: none
	Tail   bool  // it is not the zero entry that ends a log, and nothing follows it
	// Cut: the file ends inside it. badger's logs are preallocated and
	// written in place, and badger cuts them only at an entry's end, so
	// a file that ends inside an entry was cut short by something else
	// (or the entry's length is damaged).
	Cut bool
	// Unended: the log decodes whole and ends at the file's end, with no
	// zero entry after its last entry (Offset is 0).
	Unended bool
	Next    int64 // the first entry that decodes after it; 0: none (a torn tail)
	Txns    int   // transactions that end from Next on
	End     int64 // where the last entry from Next on ends
}

// scanLog walks the entries of a badger log held in b (see the format
// above) and reports where the first one that does not decode is, and
// whether entries of a later commit decode after it: one whose timestamp
// is at least that of the last good entry, followed by a chain of entries
// up to a zero entry or the end of b. Stale entries of a reused file have
// older timestamps, and random bytes pass a CRC-32C once in four billion
// tries; the chain makes a false match as unlikely as that twice.
func scanLog(b []byte) logDamage {
	if len(b) <= logHeaderSize {
		return logDamage{}
	}
	off, last := logHeaderSize, uint64(0)
	var cut bool
	for {
		e, ok, c := decodeLogEntry(b[off:])
		if !ok {
			cut = c
			break
		}
		off += e.size
		last = max(last, e.ts)
	}
	if off == len(b) {
		return logDamage{Unended: true}
	}
	d := logDamage{Offset: int64(off)}
	if cut {
		d.Cut = true
		return d
	}
	for i := off + 1; i < len(b); i++ {
		if zeroEntry(b[i:]) {
			continue // most of a preallocated file
		}
		e, ok, _ := decodeLogEntry(b[i:])
		if !ok || e.ts < last {
			continue
		}
		txns, end, chained := chain(b, i)
		if !chained {
			continue
		}
		d.Next, d.Txns, d.End = int64(i), txns, int64(end)
		return d
	}
	if zeroEntry(b[off:]) {
		return logDamage{} // the end of the log
	}
	d.Tail = true
	return d
}

// zeroEntry reports whether b starts with what ends a log: an entry with a
// zero meta, user meta and key length (or too few bytes for one).
func zeroEntry(b []byte) bool {
	return len(b) < 3 || b[0] == 0 && b[1] == 0 && b[2] == 0
}

// chain walks the entries from off, which decodes, and reports how many
// transactions end among them, where the last one ends, and whether they
// end as a log does: at a zero entry (three zero bytes) or the end of b,
// with at least two entries or one that ends a transaction.
func chain(b []byte, off int) (txns, end int, ok bool) {
	n := 0
	for {
		e, good, _ := decodeLogEntry(b[off:])
		if !good {
			break
		}
		n++
		if e.fin {
			txns++
		}
		off += e.size
	}
	return txns, off, zeroEntry(b[off:]) && (n >= 2 || txns > 0)
}

// scanLogs checks every memtable and value log of the badger directory at
// path with scanLog. Damage followed by acknowledged entries, and a file
// that ends inside an entry, fail with an error matching errCorrupt that
// names the file and the offset, unless recover is set: then the first
// such file is reported in the returned Recovery (badger will cut it
// there) and Open goes on. A torn last entry is reported as Recovery.Tail
// (what a crash leaves; badger drops it).
//
// A file cut exactly at the end of an entry decodes whole. badger cuts a
// memtable log there itself when it replays one, and then writes to a new
// one, preallocated to memLogSize (zeros after its entries); so the newest
// memtable log, shorter than that and without a zero entry after its
// last, was cut by something else, and is reported as Truncated (Open
// goes on: what is in it is whole). The same file is left by a crash in
// badger's Open between its replay and the new log, which this reports
// too: a warning without a loss, where the other is a loss.
func scanLogs(path string, recover bool, memLogSize int64) (*storage.Recovery, error) {
	var names []string
	for _, pattern := range []string{"*.mem", "*.vlog"} {
		m, err := filepath.Glob(filepath.Join(path, pattern))
		if err != nil {
			return nil, err
		}
		names = append(names, m...)
	}
	slices.Sort(names)
	newestMem := ""
	for _, name := range names {
		if strings.HasSuffix(name, ".mem") {
			newestMem = name
		}
	}
	var report *storage.Recovery
	for _, name := range names {
		b, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("badger %s: %w", name, err)
		}
		d := scanLog(b)
		switch {
		case d.Next > 0 && !recover:
			return nil, fmt.Errorf("badger %s: %w: damaged entry at offset %d: entries of later commits follow at offset %d (%d transactions up to offset %d), which badger would drop",
				name, errCorrupt, d.Offset, d.Next, d.Txns, d.End)
		case d.Cut && !recover:
			return nil, fmt.Errorf("badger %s: %w: the file ends at %d, inside the entry at offset %d: it was cut short, or that entry's length is damaged",
				name, errCorrupt, len(b), d.Offset)
		case report != nil:
			// One report: the first file's.
		case d.Cut:
			report = &storage.Recovery{File: name, Offset: d.Offset, Bytes: int64(len(b)) - d.Offset, Truncated: true}
		case d.Next > 0:
			report = &storage.Recovery{File: name, Offset: d.Offset, Records: uint64(d.Txns), Bytes: d.End - d.Offset}
		case d.Tail:
			report = &storage.Recovery{File: name, Offset: d.Offset, Bytes: int64(len(b)) - d.Offset, Tail: true}
		case d.Unended && name == newestMem && int64(len(b)) < memLogSize && len(b) > logHeaderSize:
			report = &storage.Recovery{File: name, Offset: int64(len(b)), Truncated: true}
		}
	}
	return report, nil
}
