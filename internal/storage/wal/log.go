package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/ratestore/ratestore/internal/storage"
)

// chunkSize is how much zero-filled space the log adds when a record would
// run past the end of the file.
const chunkSize = 4 << 20

// keepSize is how large Reset lets the file stay. A checkpoint round that
// grew the log past it (one huge commit) gives the space back.
const keepSize = 64 << 20

var zeros [64 << 10]byte

// Log is an open write-ahead log file. It is not safe for concurrent use:
// its owner serializes the calls.
type Log struct {
	f    *os.File
	path string
	// The header: its version and size (where the first record goes), the
	// id it names (version 2) and the CRC salt of its records.
	version uint32
	hdr     int64
	fileID  ID
	salt    uint32
	id      ID // the database's id, written by an upgrade to version 2

	end  int64  // where the next record goes
	size int64  // the file's size; what lies past end is zeros or stale
	last uint64 // the sequence number of the newest record (or checkpoint)
	// unsynced: a record was written since the last fdatasync.
	unsynced bool
	readOnly bool // opened by OpenReadOnly: nothing may be written
	buf      []byte
}

// Open opens the log at path, or creates an empty one naming id, with mode
// 0600, if there is none. The creation is atomic (written to path+".tmp",
// synced, renamed, directory synced), so a log file that exists always has
// a whole header; one whose header is not ours or has an unknown version is
// refused with an error wrapping ErrNotLog or ErrVersion that names the
// file. Open does not compare an existing log's id with id (see FileID);
// id is what a version 1 log's header becomes at its first Reset.
//
// Open does not read the records: call Replay before the first Append.
func Open(path string, id ID) (*Log, error) {
	l, err := openFile(path, os.O_RDWR)
	if errors.Is(err, fs.ErrNotExist) {
		return create(path, id)
	}
	if err != nil {
		return nil, err
	}
	l.id = id
	return l, nil
}

// OpenReadOnly opens the existing log at path for Replay and Recover
// only: the file is opened read-only, and Append, Reset, Truncate and
// DropBefore fail with an error matching storage.ErrReadOnly, so that
// reading a database leaves its log's bytes as they were. A log that does
// not exist is an error matching fs.ErrNotExist; one whose header is not
// ours is refused as by Open.
func OpenReadOnly(path string) (*Log, error) {
	l, err := openFile(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	l.readOnly = true
	return l, nil
}

// openFile opens the log file at path with flag and reads its header.
func openFile(path string, flag int) (*Log, error) {
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("wal %s: %w", path, err)
	}
	l := &Log{f: f, path: path}
	if err := l.readHeader(); err != nil {
		f.Close()
		return nil, fmt.Errorf("wal %s: %w", path, err)
	}
	return l, nil
}

// writable returns nil, or for a log opened by OpenReadOnly an error
// matching storage.ErrReadOnly that names op.
func (l *Log) writable(op string) error {
	if l.readOnly {
		return fmt.Errorf("wal %s: %s: %w", l.path, op, storage.ErrReadOnly)
	}
	return nil
}

// FileID returns the id named by the log's header, and false for a version
// 1 log, which names none.
func (l *Log) FileID() (ID, bool) { return l.fileID, l.version >= 2 }

// Version is the format version of the log's header.
func (l *Log) Version() uint32 { return l.version }

// setHeader records the header's fields.
func (l *Log) setHeader(version uint32, id ID) {
	l.version, l.fileID = version, id
	l.hdr, l.salt = headerSizeV1, 0
	if version >= 2 {
		l.hdr, l.salt = HeaderSize, Salt(id)
	}
	l.end = l.hdr
}

func (l *Log) readHeader() error {
	fi, err := l.f.Stat()
	if err != nil {
		return err
	}
	l.size = fi.Size()
	var h [HeaderSize]byte
	n, err := l.f.ReadAt(h[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if n < headerSizeV1 {
		return fmt.Errorf("%w: %d bytes, shorter than a header", ErrNotLog, l.size)
	}
	version, id, err := parseHeader(h[:n])
	if err != nil {
		return err
	}
	l.setHeader(version, id)
	return nil
}

// create makes a new log. Errors name path, the file the caller asked for,
// and the temporary file only when it is the one that failed.
func create(path string, id ID) (*Log, error) {
	l, err := build(path, id, nil)
	if err != nil {
		return nil, fmt.Errorf("wal %s: create: %w", path, err)
	}
	return l, nil
}

// build makes a log at path naming id whose records are body (whole
// records, possibly none), atomically: it writes them after a header and
// before an end marker in path+".tmp", preallocates a chunk, syncs,
// renames it over path and syncs the directory. A crash leaves either the
// file that was at path or the new one, whole.
func build(path string, id ID, body []byte) (*Log, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	l := &Log{f: f, path: path, id: id, size: HeaderSize}
	l.setHeader(Version, id)
	err = l.writeFull(appendHeader(nil, id), 0)
	if err == nil {
		err = l.writeFull(body, l.hdr)
		l.end = l.hdr + int64(len(body))
		l.size = max(l.size, l.end)
	}
	if err == nil {
		err = l.grow(chunkSize) // zeros: the end marker after body, and room
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err == nil {
		// Reopen under the final name: errors of an *os.File name the
		// file it was opened as, and tmp no longer exists.
		var g *os.File
		if g, err = os.OpenFile(path, os.O_RDWR, 0); err == nil {
			f.Close()
			l.f = g
			return l, nil
		}
	}
	f.Close()
	os.Remove(tmp)
	return nil, err
}

// Tail is where the next record goes. A checkpoint of the records so far
// takes it first, and drops them once they are checkpointed with
// DropBefore, keeping the records appended meanwhile.
func (l *Log) Tail() int64 { return l.end }

// DropBefore empties the log of the records before off, a Tail taken
// earlier, which the caller has checkpointed, and keeps those after it:
// Reset if there are none, or else a new file holding them (see build),
// written and synced before it replaces this one, so that a crash leaves
// either log whole. The kept records are synced with it. Numbering carries
// on from Last.
func (l *Log) DropBefore(off int64) error {
	if err := l.writable("drop"); err != nil {
		return err
	}
	if off < l.hdr || off > l.end {
		return fmt.Errorf("wal %s: drop before offset %d, outside the records (%d to %d)", l.path, off, l.hdr, l.end)
	}
	if off == l.end {
		return l.Reset()
	}
	if l.version < Version {
		return fmt.Errorf("wal %s: drop before offset %d: a version %d log must be Reset first", l.path, off, l.version)
	}
	body := make([]byte, l.end-off)
	if _, err := l.f.ReadAt(body, off); err != nil {
		return fmt.Errorf("wal %s: drop: read the records kept: %w", l.path, err)
	}
	n, err := build(l.path, l.fileID, body)
	if err != nil {
		return fmt.Errorf("wal %s: drop: %w", l.path, err)
	}
	n.last = l.last
	l.f.Close()
	*l = *n
	return nil
}

// Path is the log's file name.
func (l *Log) Path() string { return l.path }

// Size is the number of bytes of records written since the last Reset (or,
// after Replay, found in the file).
func (l *Log) Size() int64 { return l.end - l.hdr }

// Last is the sequence number of the newest record appended, or the one
// Replay ended on.
func (l *Log) Last() uint64 { return l.last }

// Replay reads the records in order and calls fn for each one with a
// sequence number above after (the database's checkpoint; older records
// are already in it), with ops valid only during the call. It stops at the
// end of the log and leaves the log positioned there, with Last the newest
// sequence number seen or after, whichever is larger. A last record it
// could not read, and dropped, is reported in Damage.Tail (see the package
// doc: a torn write and a damaged record look alike); the rest of Damage
// is zero.
//
// Records are numbered without gaps from after+1 on. A log whose first
// record is numbered above after+1 does not continue this database (the
// bbolt file was swapped for an older one?), and a bad record followed by
// a good one of this database numbered after it is damage, not a crash:
// both are refused with an error wrapping ErrCorrupt that names the file
// and the offset, as is a record with a matching CRC that does not decode
// and a version 3 log whose file ends inside it.
func (l *Log) Replay(after uint64, fn func(seq uint64, ops []storage.Op) error) (Damage, error) {
	return l.replay(after, false, fn)
}

// Damage describes what Replay dropped and Recover skipped. The zero value
// means nothing.
type Damage struct {
	Offset  int64  // where the first damaged or dropped bytes start
	Records uint64 // how many sequence numbers are missing between records
	Bytes   int64  // how many bytes were skipped in all
	// Tail: the last record could not be read and was dropped, a write a
	// crash cut short or a damaged record (see the package doc). It is not
	// counted in Records: it may never have been acknowledged.
	Tail bool
	// Truncated: the file ends inside the log (Recover only; Replay
	// refuses such a log). Any number of records past the end may be gone.
	Truncated bool
}

// Recover is Replay that keeps going past damage: it skips the bad bytes
// and missing sequence numbers, applies every valid record after them, and
// reports what it skipped. It still fails on an I/O error or fn's error.
func (l *Log) Recover(after uint64, fn func(seq uint64, ops []storage.Op) error) (Damage, error) {
	return l.replay(after, true, fn)
}

// replay is Replay, and Recover when salvage is set.
func (l *Log) replay(after uint64, salvage bool, fn func(seq uint64, ops []storage.Op) error) (Damage, error) {
	p := &replayer{
		l:       l,
		after:   after,
		salvage: salvage,
		fn:      fn,
		off:     l.hdr,
		r:       bufio.NewReaderSize(l.section(l.hdr), 1<<20),
		rec:     make([]byte, recordHeaderSize),
	}
	for {
		more, err := p.next()
		if err != nil {
			return p.dmg, err
		}
		if !more {
			break
		}
	}
	if l.version >= 3 {
		if err := p.finish(); err != nil {
			return p.dmg, err
		}
	}
	l.end = p.off
	l.last = max(after, p.prev)
	return p.dmg, nil
}

// replayer is one pass of Replay or Recover over the records of a log.
type replayer struct {
	l       *Log
	after   uint64 // the checkpoint: records up to it are already applied
	salvage bool   // Recover: skip damage instead of refusing it
	fn      func(seq uint64, ops []storage.Op) error

	dmg  Damage
	off  int64         // where the record being read starts
	r    *bufio.Reader // reads the file from off
	rec  []byte        // the record being read, header first
	ops  []storage.Op  // its ops, decoded
	prev uint64        // sequence number of the previous record
	seen bool          // whether there was one
}

// want is the lowest number a record must have to matter: the next one,
// and above the checkpoint.
func (p *replayer) want() uint64 { return max(p.after, p.prev) + 1 }

// damaged counts bytes skipped and records missing at offset at; the
// first damage sets where it starts.
func (p *replayer) damaged(at, bytes int64, records uint64) {
	if p.dmg == (Damage{}) {
		p.dmg.Offset = at
	}
	p.dmg.Bytes += bytes
	p.dmg.Records += records
}

// next reads the record at p.off and, if it follows the previous one,
// applies it (if above the checkpoint) and moves past it. Where no such
// record is found, the log ends, unless damage is followed by a record
// that matters (see skip). It reports whether to go on.
func (p *replayer) next() (bool, error) {
	want := p.want()
	body, err := p.read()
	if err != nil {
		return false, err
	}
	var seq uint64
	if body != nil {
		seq = binary.LittleEndian.Uint64(body)
		ok, err := p.follows(seq, want)
		if err != nil {
			return false, err
		}
		if !ok {
			body = nil // a record of an earlier round
		}
	}
	if body != nil && seq > p.after {
		if _, p.ops, err = decodeBody(body, p.ops); err != nil {
			if !p.salvage {
				return false, fmt.Errorf("wal %s: at offset %d: %w", p.l.path, p.off, err)
			}
			body = nil
		}
	}
	if body == nil {
		return p.skip(want)
	}
	if seq > p.after {
		if err := p.fn(seq, p.ops); err != nil {
			return false, err
		}
	}
	p.prev, p.seen = seq, true
	p.off += int64(len(p.rec))
	return true, nil
}

// read reads the record at p.off into p.rec and returns its body, or nil
// if no whole record with this log's salt and a matching CRC is there.
func (p *replayer) read() ([]byte, error) {
	if _, err := io.ReadFull(p.r, p.rec[:recordHeaderSize]); err != nil {
		return nil, nil
	}
	length := int64(binary.LittleEndian.Uint32(p.rec))
	if length < 8 || length > p.l.size-p.off-recordHeaderSize {
		return nil, nil
	}
	p.rec = slices.Grow(p.rec[:recordHeaderSize], int(length))[:recordHeaderSize+length]
	if _, err := io.ReadFull(p.r, p.rec[recordHeaderSize:]); err != nil {
		return nil, fmt.Errorf("wal %s: read at %d: %w", p.l.path, p.off, err)
	}
	body, _ := recordBody(p.rec, p.l.salt)
	return body, nil
}

// follows reports whether the record numbered seq at p.off follows the
// previous one: it is numbered one past it or, as the first record, at
// most after+1 (records the checkpoint holds are read past, not applied).
// A record numbered want or more that does not follow means whole records
// are missing: Replay refuses that, Recover counts them as damage and
// takes the record. Any other is a record of an earlier round of the log:
// it does not follow.
func (p *replayer) follows(seq, want uint64) (bool, error) {
	switch {
	case p.seen && seq == p.prev+1, !p.seen && seq <= p.after+1:
		return true, nil // the next record
	case seq >= want:
		// Whole records are missing: not a crash, which only
		// ever cuts the log short.
		if !p.salvage {
			if !p.seen {
				return false, fmt.Errorf("wal %s: %w: its first record, at offset %d, is %d, but the database was checkpointed at %d (records are missing, or the log does not belong to this database file)",
					p.l.path, ErrCorrupt, p.off, seq, p.after)
			}
			return false, fmt.Errorf("wal %s: %w: at offset %d record %d follows record %d", p.l.path, ErrCorrupt, p.off, seq, p.prev)
		}
		p.damaged(p.off, 0, seq-want)
		return true, nil
	}
	return false, nil
}

// skip is reached where no record that follows could be read at p.off:
// the end of the log, unless a record that matters follows (damage).
// Replay refuses damage; Recover counts it and moves to that record. It
// reports whether to go on.
func (p *replayer) skip(want uint64) (bool, error) {
	next, nseq, err := p.l.scan(p.off, want)
	if err != nil {
		return false, err
	}
	if next < 0 {
		return false, nil
	}
	if !p.salvage {
		return false, fmt.Errorf("wal %s: %w: damaged record at offset %d: record %d follows at offset %d (expected %d at %d)",
			p.l.path, ErrCorrupt, p.off, nseq, next, want, p.off)
	}
	p.damaged(p.off, next-p.off, nseq-want)
	p.off, p.prev, p.seen = next, nseq-1, true
	p.r.Reset(p.l.section(p.off))
	return true, nil
}

// finish checks how a version 3 log ends at p.off. A torn last record is
// dropped and reported in Damage.Tail. A file that ends inside the log is
// refused by Replay; Recover reports it in Damage.Truncated.
func (p *replayer) finish() error {
	end, n, err := p.l.ending(p.off, p.want())
	if err != nil {
		return err
	}
	switch end {
	case endTruncated:
		if !p.salvage {
			return fmt.Errorf("wal %s: %w: the file ends at %d, inside the log (at the record at offset %d): it was cut short, or that record's length is damaged",
				p.l.path, ErrCorrupt, p.l.size, p.off)
		}
		p.damaged(p.off, p.l.size-p.off, 0)
		p.dmg.Truncated = true
	case endTorn:
		p.damaged(p.off, n, 0)
		p.dmg.Tail = true
	}
	return nil
}

// How a version 3 log ended (see the package doc).
const (
	endClean     = iota // an end marker
	endTorn             // a last record that fails its CRC
	endTruncated        // the end of the file
)

// ending tells how the log that stopped at off ended (want is the number
// its next record would have had) and, for a torn record, its size.
func (l *Log) ending(off int64, want uint64) (end int, n int64, err error) {
	if off+recordHeaderSize > l.size {
		return endTruncated, 0, nil // even Truncate leaves an end marker
	}
	var h [recordHeaderSize + 8]byte
	k, err := l.f.ReadAt(h[:min(int64(len(h)), l.size-off)], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, fmt.Errorf("wal %s: read at %d: %w", l.path, off, err)
	}
	length := int64(binary.LittleEndian.Uint32(h[:]))
	if length == 0 {
		if k == len(h) && binary.LittleEndian.Uint64(h[recordHeaderSize:]) == want {
			return endTorn, recordHeaderSize, nil // a record whose length was zeroed
		}
		return endClean, 0, nil
	}
	if off+recordHeaderSize+length > l.size {
		return endTruncated, 0, nil
	}
	rec := make([]byte, recordHeaderSize+length)
	if _, err := l.f.ReadAt(rec, off); err != nil {
		return 0, 0, fmt.Errorf("wal %s: read at %d: %w", l.path, off, err)
	}
	if body, err := recordBody(rec, l.salt); err == nil && binary.LittleEndian.Uint64(body) < want {
		// A record of an earlier round: the end marker after the last
		// record was lost with the rest of an unsynced write.
		return endClean, 0, nil
	}
	return endTorn, int64(len(rec)), nil
}

// section reads the file from off to its end.
func (l *Log) section(off int64) *io.SectionReader {
	return io.NewSectionReader(l.f, off, max(0, l.size-off))
}

// scan looks from off on for a record that matters after damage at from:
// whole, with this log's salt, numbered want or more, decodable, and no
// further past want than the records between could account for (each
// takes at least minRecordSize bytes: a cheap test that rules out nearly
// every offset before any CRC is computed). It returns its offset and
// sequence number, or -1 if there is none.
func (l *Log) scan(from int64, want uint64) (int64, uint64, error) {
	const window = 1 << 20
	buf := make([]byte, min(window+16, max(0, l.size-from)))
	var rec []byte
	for base := from; base+minRecordSize <= l.size; base += window {
		n, err := l.f.ReadAt(buf[:min(int64(len(buf)), l.size-base)], base)
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, 0, fmt.Errorf("wal %s: read at %d: %w", l.path, base, err)
		}
		b := buf[:n]
		for i := 0; i < window && i+16 <= len(b); i++ {
			length := int64(binary.LittleEndian.Uint32(b[i:]))
			if length < minRecordSize-recordHeaderSize {
				continue // zeros, mostly
			}
			off := base + int64(i)
			seq := binary.LittleEndian.Uint64(b[i+recordHeaderSize:])
			if length > l.size-off-recordHeaderSize || seq < want || seq-want > uint64(off-from)/minRecordSize {
				continue
			}
			rec = slices.Grow(rec[:0], int(recordHeaderSize+length))[:recordHeaderSize+length]
			if _, err := l.f.ReadAt(rec, off); err != nil {
				return -1, 0, fmt.Errorf("wal %s: read at %d: %w", l.path, off, err)
			}
			if body, err := recordBody(rec, l.salt); err == nil {
				if _, _, err := decodeBody(body, nil); err == nil {
					return off, seq, nil
				}
			}
		}
	}
	return -1, 0, nil
}

// Append writes one record numbered Last()+1 holding ops, and the end
// marker after it, with one write call at the end of the log. It is not
// durable until Sync. On error nothing is numbered, the next Append writes
// over whatever part of the record reached the file, and the error wraps
// storage.ErrNotApplied: no reader takes a record that is not whole.
func (l *Log) Append(ops []storage.Op) error {
	if err := l.writable("append"); err != nil {
		return fmt.Errorf("%w: %w", err, storage.ErrNotApplied)
	}
	var err error
	l.buf, err = AppendRecord(l.buf[:0], l.salt, l.last+1, ops)
	if err != nil {
		return fmt.Errorf("%w: %w", err, storage.ErrNotApplied)
	}
	n := int64(len(l.buf))
	l.buf = append(l.buf, zeros[:recordHeaderSize]...)
	if need := l.end + int64(len(l.buf)) - l.size; need > 0 {
		if err := l.grow(need); err != nil {
			return fmt.Errorf("wal %s: preallocate: %w: %w", l.path, err, storage.ErrNotApplied)
		}
	}
	if err := l.writeFull(l.buf, l.end); err != nil {
		return fmt.Errorf("wal %s: append: %w: %w", l.path, err, storage.ErrNotApplied)
	}
	l.end += n
	l.last++
	l.unsynced = true
	if cap(l.buf) > 1<<20 && int(n) < cap(l.buf)/4 {
		l.buf = nil // a burst's buffer, four times what records now need
	}
	return nil
}

// grow extends the file with zeros by at least need bytes, rounded up to a
// whole chunk.
//
// A grow that fails (a full disk) gives back what it added: those bytes
// are zeros past the last record, and the space is better left to the
// checkpoint that follows a failed append (boltstore then makes the
// changes durable in bbolt instead of the log).
func (l *Log) grow(need int64) error {
	old := l.size
	target := l.size + (need+chunkSize-1)/chunkSize*chunkSize
	for l.size < target {
		n := min(int64(len(zeros)), target-l.size)
		if err := l.writeFull(zeros[:n], l.size); err != nil {
			if l.f.Truncate(old) == nil {
				l.size = old
			}
			return err
		}
		l.size += n
	}
	return nil
}

func (l *Log) writeFull(b []byte, off int64) error {
	_, err := l.f.WriteAt(b, off)
	return err
}

// Sync makes the records appended so far durable: one fdatasync, skipped if
// nothing was appended since the last one.
func (l *Log) Sync() error {
	if !l.unsynced {
		return nil
	}
	if err := fdatasync(l.f); err != nil {
		return fmt.Errorf("wal %s: fdatasync: %w", l.path, err)
	}
	l.unsynced = false
	return nil
}

// Reset empties the log once its records are checkpointed: it zeroes the
// first record's header and syncs that, keeping the file's preallocated
// space (down to keepSize) for the next round. Records numbering carries on
// from Last. An older log becomes version 3 (its header names the id given
// to Open) in the same fdatasync: its old records were checkpointed (a
// version 1 log's fail the new salt's CRC).
func (l *Log) Reset() error {
	if err := l.writable("reset"); err != nil {
		return err
	}
	if l.size > keepSize {
		if err := l.f.Truncate(keepSize); err != nil {
			return fmt.Errorf("wal %s: shrink: %w", l.path, err)
		}
		l.size = keepSize
	}
	if err := l.upgrade(); err != nil {
		return err
	}
	if err := l.writeFull(zeros[:recordHeaderSize], l.hdr); err != nil {
		return fmt.Errorf("wal %s: reset: %w", l.path, err)
	}
	l.size = max(l.size, l.hdr+recordHeaderSize)
	l.unsynced = true
	if err := l.Sync(); err != nil {
		return err
	}
	l.end = l.hdr
	return nil
}

// upgrade rewrites an older header as version 3, unsynced. The caller has
// checkpointed every record.
func (l *Log) upgrade() error {
	if l.version >= Version {
		return nil
	}
	if err := l.writeFull(appendHeader(nil, l.id), 0); err != nil {
		return fmt.Errorf("wal %s: rewrite header: %w", l.path, err)
	}
	l.setHeader(Version, l.id)
	l.size = max(l.size, HeaderSize)
	l.unsynced = true
	return nil
}

// Truncate cuts the file back to its header and an end marker, and syncs
// that, for a log that is closed with nothing in it. The marker is written
// before the file is cut, so that no crash leaves a log without one: a log
// that ends without an end marker was cut short by something else.
func (l *Log) Truncate() error {
	if err := l.writable("truncate"); err != nil {
		return err
	}
	if err := l.upgrade(); err != nil {
		return err
	}
	if err := l.writeFull(zeros[:recordHeaderSize], l.hdr); err != nil {
		return fmt.Errorf("wal %s: truncate: %w", l.path, err)
	}
	size := l.hdr + recordHeaderSize
	if err := l.f.Truncate(size); err != nil {
		return fmt.Errorf("wal %s: truncate: %w", l.path, err)
	}
	l.size, l.end, l.unsynced = size, l.hdr, true
	return l.Sync()
}

// Close closes the file. It writes and syncs nothing: Sync first.
func (l *Log) Close() error { return l.f.Close() }
