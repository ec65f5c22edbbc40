// Package wal is the write-ahead log that boltstore keeps next to its bbolt
// file: an append-only file of checksummed records, each holding the ops of
// one storage.Store Commit.
//
// # File format (version 3)
//
// All integers are little-endian.
//
//	file header, 32 bytes:
//	  magic    [8]byte  "RSTORWAL"
//	  version  uint32   3
//	  reserved uint32   0 (a non-zero value is refused, like an unknown version)
//	  id       [16]byte the database's identity: random, made with the
//	                    database and also stored in its bbolt file
//	records, back to back from offset 32:
//	  length   uint32   bytes that follow the crc field (8 + len(ops))
//	  crc      uint32   CRC-32C (Castagnoli) of id followed by those bytes
//	  seq      uint64   the record's sequence number
//	  ops      count uvarint, then per op:
//	             kind   byte     0 delete, 1 put
//	             klen   uvarint, key bytes
//	             vlen   uvarint, value bytes   (puts only)
//	end marker, 8 zero bytes after the last record
//
// Every record is written together with an end marker after it (the next
// record overwrites it), and the file always has room for that marker:
// version 3's one change from version 2, and what lets the reader tell how
// the log ended (see below).
//
// The id in every record's CRC is a salt, as in SQLite's WAL frames: a
// record copied from another database's log (or left by one that used the
// same file) never validates here, so sequence numbers that happen to
// overlap cannot bring another database's state into this one. A log whose
// header names another id is refused outright (boltstore compares it with
// its bbolt file's).
//
// Version 1, written before database ids existed, is still read: its header
// is the first 16 bytes above and its CRCs cover the bytes after the crc
// field only. Version 2 is version 3 without end markers. The first Reset
// (or Truncate) rewrites an older header as version 3; records are written
// in version 3 only.
//
// A record is all or nothing: a reader accepts it only if it is complete and
// its CRC matches, which is what makes a Commit atomic across a crash.
//
// # Where the log ends, and damage
//
// The file is preallocated in zero-filled chunks (fdatasync after an
// overwrite inside the file's size need not journal a size change, as one
// after an append does, and so costs less), and it is reused after
// every checkpoint rather than truncated, so past the last record there may
// be zeros or records of earlier rounds. Sequence numbers only grow over the
// life of a database and the log writes them without gaps, so the records of
// earlier rounds are numbered at most the database's checkpoint.
//
// The reader takes records while each is the next one. At the first place
// that is not (a zero length: the reset or zero-filled tail; a record that
// is short or fails its CRC; a record not numbered one past the previous
// one), it scans the rest of the file for a record of this database, with
// a matching CRC, numbered at least the next expected number. Finding none,
// that place is the end (see below). Finding one means records in between were damaged after they were written (a
// flipped bit, a bad sector): Replay refuses the log with ErrCorrupt naming
// the offset, and Recover skips the damage and reports it (Damage).
//
// The scan costs one pass over the rest of the file, most of it zeros that
// the cheapest of its tests rules out, and only runs at Open.
//
// # How the log ended (version 3)
//
// With no record of this database after it, the place the reader stopped
// at is the log's end, and the end marker says how it ended:
//
//   - An end marker (zero length): a clean end. Replay reports nothing.
//   - The file ends there, or ends inside the record there: the file was
//     cut short after it was written (a crash never shortens it, as the
//     space for a record and its marker is allocated before it is written),
//     or the record's length field was damaged. Either way an unknown
//     number of acknowledged records may be gone: Replay refuses the log
//     with ErrCorrupt, and Recover reports it (Damage.Truncated).
//   - A record that fails its CRC: the write a crash cut short (never
//     acknowledged), or damage to the last acknowledged record. The two
//     look alike, and a crash is the likely one, so Replay drops it, as
//     SQLite drops a last frame that fails its checksum, but does not
//     drop it silently: Damage.Tail reports it, and the caller logs it.
//     (A zero length with the next sequence number behind it is a record
//     whose length field was zeroed: reported the same way.)
//
// Every version 3 log has an end marker: a new one gets one with its first
// chunk, Reset writes one, and Truncate (an empty log at Close) keeps one.
// What no reader can tell: a power loss that kept an unsynced record but
// not the unsynced one before it looks like damage (both were
// unacknowledged; Recover opens such a log). Version 1 and 2
// logs, which have no end markers, end at the first place that is not a
// next record, silently, as they always did.
package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/ratestore/ratestore/internal/storage"
)

// Version is the log format this package writes; it reads 1 to 3.
const Version = 3

// HeaderSize is the size of a version 2 or 3 file header; the first record
// starts here. headerSizeV1 is that of version 1.
const (
	HeaderSize   = 32
	headerSizeV1 = 16
)

// recordHeaderSize is the length and crc fields in front of every record,
// and the size of the end marker that follows the last one.
const recordHeaderSize = 8

// minRecordSize is the smallest record: its header, seq and an op count.
const minRecordSize = recordHeaderSize + 8 + 1

// maxBody bounds a record's length field.
const maxBody = math.MaxUint32

const (
	opDelete = 0
	opPut    = 1
)

var magic = [8]byte{'R', 'S', 'T', 'O', 'R', 'W', 'A', 'L'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ID is a database's identity, written in its log's header and folded into
// every record's CRC.
type ID [16]byte

// Salt is the CRC-32C of id: a record's CRC is crc32.Update(Salt(id), body),
// the CRC of id followed by the body. Version 1 records use a salt of 0.
func Salt(id ID) uint32 { return crc32.Checksum(id[:], castagnoli) }

var (
	// ErrNotLog: the file does not start with a version-1-or-later log
	// header. Open refuses it rather than discard what it holds.
	ErrNotLog = errors.New("not a ratestore write-ahead log")
	// ErrVersion: the header is ours but its version is not one this code
	// reads.
	ErrVersion = errors.New("unsupported write-ahead log version")
	// ErrCorrupt: records damaged after they were written (a record of
	// this database follows a bad one), a complete record with a matching
	// CRC that does not decode, or a log that does not continue from its
	// database's checkpoint. None of these comes from a crash.
	ErrCorrupt = errors.New("corrupt write-ahead log")
	// errEnd: b does not start with a complete record with a matching CRC
	// (the end of the log, or a record torn by a crash).
	errEnd = errors.New("end of log")
)

// appendHeader appends a version 3 file header naming id.
func appendHeader(dst []byte, id ID) []byte {
	dst = append(dst, magic[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, Version)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	return append(dst, id[:]...)
}

// parseHeader validates a file header (h holds the file's first bytes, up
// to HeaderSize of them) and returns its version and id (zero in version 1).
func parseHeader(h []byte) (version uint32, id ID, err error) {
	if len(h) < headerSizeV1 || [8]byte(h[:8]) != magic {
		return 0, id, ErrNotLog
	}
	v, flags := binary.LittleEndian.Uint32(h[8:]), binary.LittleEndian.Uint32(h[12:])
	if v < 1 || v > Version || flags != 0 {
		return 0, id, fmt.Errorf("%w %d (flags %#x); this build reads versions 1 to %d", ErrVersion, v, flags, Version)
	}
	if v == 1 {
		return v, id, nil
	}
	if len(h) < HeaderSize {
		return 0, id, fmt.Errorf("%w: %d bytes, shorter than a version %d header", ErrNotLog, len(h), v)
	}
	return v, ID(h[16:HeaderSize]), nil
}

// AppendRecord appends the record holding seq and ops to dst, its CRC
// seeded with salt (see Salt). A nil Value is a delete.
func AppendRecord(dst []byte, salt uint32, seq uint64, ops []storage.Op) ([]byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, recordSize(ops))
	dst = append(dst, make([]byte, recordHeaderSize)...)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for _, op := range ops {
		if op.Value == nil {
			dst = append(dst, opDelete)
		} else {
			dst = append(dst, opPut)
		}
		dst = binary.AppendUvarint(dst, uint64(len(op.Key)))
		dst = append(dst, op.Key...)
		if op.Value != nil {
			dst = binary.AppendUvarint(dst, uint64(len(op.Value)))
			dst = append(dst, op.Value...)
		}
	}
	body := dst[start+recordHeaderSize:]
	if len(body) > maxBody {
		return dst[:start], fmt.Errorf("wal: record of %d bytes exceeds the format's %d", len(body), maxBody)
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Update(salt, castagnoli, body))
	return dst, nil
}

// recordSize bounds the encoded size of a record of ops, so that
// AppendRecord grows its buffer once.
func recordSize(ops []storage.Op) int {
	n := recordHeaderSize + 8 + binary.MaxVarintLen64
	for _, op := range ops {
		n += 1 + 2*binary.MaxVarintLen64 + len(op.Key) + len(op.Value)
	}
	return n
}

// DecodeRecord decodes the record at the start of b and returns its
// sequence number, its ops (aliasing b; a nil Value is a delete) and its
// encoded size; salt is the one it was appended with. It never panics: bytes that are not a complete record with
// a matching CRC give an error wrapping errEnd, a record with a matching CRC
// that does not decode one wrapping ErrCorrupt.
func DecodeRecord(b []byte, salt uint32) (seq uint64, ops []storage.Op, n int, err error) {
	body, err := recordBody(b, salt)
	if err != nil {
		return 0, nil, 0, err
	}
	seq, ops, err = decodeBody(body, nil)
	return seq, ops, recordHeaderSize + len(body), err
}

// recordBody returns the checked body of the record at the start of b.
func recordBody(b []byte, salt uint32) ([]byte, error) {
	if len(b) < recordHeaderSize {
		return nil, errEnd
	}
	length := binary.LittleEndian.Uint32(b)
	if length < 8 || uint64(length) > uint64(len(b)-recordHeaderSize) {
		return nil, errEnd
	}
	body := b[recordHeaderSize : recordHeaderSize+int(length)]
	if crc32.Update(salt, castagnoli, body) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, errEnd
	}
	return body, nil
}

// decodeBody decodes a body whose CRC matched, reusing ops for its ops.
func decodeBody(body []byte, ops []storage.Op) (uint64, []storage.Op, error) {
	seq := binary.LittleEndian.Uint64(body)
	p := body[8:]
	count, k := binary.Uvarint(p)
	// Every op takes at least two bytes. ops grows as ops decode, so a
	// forged count cannot size an allocation.
	if k <= 0 || count > uint64(len(p)-k)/2 {
		return seq, nil, fmt.Errorf("%w: record %d: bad op count", ErrCorrupt, seq)
	}
	p = p[k:]
	ops = ops[:0]
	for i := range count {
		if len(p) == 0 || p[0] > opPut {
			return seq, nil, fmt.Errorf("%w: record %d, op %d: bad kind", ErrCorrupt, seq, i)
		}
		kind := p[0]
		key, rest, ok := cutBytes(p[1:])
		if !ok {
			return seq, nil, fmt.Errorf("%w: record %d, op %d: bad key length", ErrCorrupt, seq, i)
		}
		op := storage.Op{Key: key}
		if kind == opPut {
			if op.Value, rest, ok = cutBytes(rest); !ok {
				return seq, nil, fmt.Errorf("%w: record %d, op %d: bad value length", ErrCorrupt, seq, i)
			}
		}
		ops = append(ops, op)
		p = rest
	}
	if len(p) != 0 {
		return seq, nil, fmt.Errorf("%w: record %d: %d bytes after its ops", ErrCorrupt, seq, len(p))
	}
	return seq, ops, nil
}

// cutBytes splits a uvarint length and that many bytes off the front of p.
// The bytes are never nil, so that an empty value stays a put.
func cutBytes(p []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, false
	}
	end := k + int(n)
	return p[k:end:end], p[end:], true
}
