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
	end  int64  // where the next record goes
	size int64  // the file's size; what lies past end is zeros or stale
	last uint64 // the sequence number of the newest record (or checkpoint)
	// unsynced: a record was written since the last fdatasync.
	unsynced bool
	buf      []byte
}

// Open opens the log at path, or creates an empty one with mode 0600 if
// there is none. The creation is atomic (written to path+".tmp", synced,
// renamed, directory synced), so a log file that exists always has a whole
// header; one whose header is not ours or has an unknown version is refused
// with an error wrapping ErrNotLog or ErrVersion that names the file.
//
// Open does not read the records: call Replay before the first Append.
func Open(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return create(path)
	}
	if err != nil {
		return nil, err
	}
	l := &Log{f: f, path: path, end: HeaderSize}
	if err := l.readHeader(); err != nil {
		f.Close()
		return nil, fmt.Errorf("wal %s: %w", path, err)
	}
	return l, nil
}

func (l *Log) readHeader() error {
	fi, err := l.f.Stat()
	if err != nil {
		return err
	}
	l.size = fi.Size()
	var h [HeaderSize]byte
	if _, err := l.f.ReadAt(h[:], 0); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: %d bytes, shorter than a header", ErrNotLog, l.size)
		}
		return err
	}
	return checkHeader(h[:])
}

func create(path string) (*Log, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	l := &Log{f: f, path: path, end: HeaderSize, size: HeaderSize}
	err = l.writeFull(appendHeader(nil), 0)
	if err == nil {
		err = l.grow(chunkSize)
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
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("wal %s: create: %w", path, err)
	}
	return l, nil
}

// Path is the log's file name.
func (l *Log) Path() string { return l.path }

// Size is the number of bytes of records written since the last Reset (or,
// after Replay, found in the file).
func (l *Log) Size() int64 { return l.end - HeaderSize }

// Last is the sequence number of the newest record appended, or the one
// Replay ended on.
func (l *Log) Last() uint64 { return l.last }

// Replay reads the records in order and calls fn for each one with a
// sequence number above after (the database's checkpoint; older records
// are already in it), with ops valid only during the call. It stops at the
// end of the log (see the package doc: a torn record ends it too) and
// leaves the log positioned there, with Last the newest sequence number
// seen or after, whichever is larger.
//
// Records are numbered without gaps from after+1 on. A log whose first
// record is numbered above after+1 does not continue this database (the
// bbolt file was swapped for an older one?) and is refused with ErrCorrupt,
// as is a record with a matching CRC that does not decode.
func (l *Log) Replay(after uint64, fn func(seq uint64, ops []storage.Op) error) error {
	r := bufio.NewReaderSize(io.NewSectionReader(l.f, HeaderSize, max(0, l.size-HeaderSize)), 1<<20)
	off := int64(HeaderSize)
	var (
		rec  = make([]byte, recordHeaderSize) // the record being read, header first
		ops  []storage.Op
		prev uint64 // sequence number of the previous record
		seen bool   // whether there was one
	)
	for {
		if _, err := io.ReadFull(r, rec[:recordHeaderSize]); err != nil {
			break // a tail shorter than a record header
		}
		length := int64(binary.LittleEndian.Uint32(rec))
		if length < 8 || length > l.size-off-recordHeaderSize {
			break // zero (the end), or torn
		}
		rec = slices.Grow(rec[:recordHeaderSize], int(length))[:recordHeaderSize+length]
		if _, err := io.ReadFull(r, rec[recordHeaderSize:]); err != nil {
			return fmt.Errorf("wal %s: read at %d: %w", l.path, off, err)
		}
		body, err := recordBody(rec)
		if err != nil {
			break // torn
		}
		seq := binary.LittleEndian.Uint64(body)
		if seen && seq != prev+1 {
			break // a record of an earlier round
		}
		if !seen && seq > after+1 {
			return fmt.Errorf("wal %s: %w: its first record is %d, but the database was checkpointed at %d (the log does not belong to this database file)",
				l.path, ErrCorrupt, seq, after)
		}
		if seq > after {
			if _, ops, err = decodeBody(body, ops); err != nil {
				return fmt.Errorf("wal %s: at offset %d: %w", l.path, off, err)
			}
			if err := fn(seq, ops); err != nil {
				return err
			}
		}
		prev, seen = seq, true
		off += recordHeaderSize + length
	}
	l.end = off
	l.last = max(after, prev)
	return nil
}

// Append writes one record numbered Last()+1 holding ops, with one write
// call at the end of the log. It is not durable until Sync. On error
// nothing is numbered and the next Append writes over whatever part of the
// record reached the file.
func (l *Log) Append(ops []storage.Op) error {
	var err error
	l.buf, err = AppendRecord(l.buf[:0], l.last+1, ops)
	if err != nil {
		return err
	}
	if need := l.end + int64(len(l.buf)) - l.size; need > 0 {
		if err := l.grow(need); err != nil {
			return fmt.Errorf("wal %s: preallocate: %w", l.path, err)
		}
	}
	if err := l.writeFull(l.buf, l.end); err != nil {
		return fmt.Errorf("wal %s: append: %w", l.path, err)
	}
	l.end += int64(len(l.buf))
	l.last++
	l.unsynced = true
	if cap(l.buf) > 1<<20 {
		l.buf = nil // do not keep a huge commit's buffer
	}
	return nil
}

// grow extends the file with zeros by at least need bytes, rounded up to a
// whole chunk.
func (l *Log) grow(need int64) error {
	target := l.size + (need+chunkSize-1)/chunkSize*chunkSize
	for l.size < target {
		n := min(int64(len(zeros)), target-l.size)
		if err := l.writeFull(zeros[:n], l.size); err != nil {
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
// from Last.
func (l *Log) Reset() error {
	if l.size > keepSize {
		if err := l.f.Truncate(keepSize); err != nil {
			return fmt.Errorf("wal %s: shrink: %w", l.path, err)
		}
		l.size = keepSize
	}
	if l.size >= HeaderSize+recordHeaderSize {
		if err := l.writeFull(zeros[:recordHeaderSize], HeaderSize); err != nil {
			return fmt.Errorf("wal %s: reset: %w", l.path, err)
		}
	}
	l.unsynced = true
	if err := l.Sync(); err != nil {
		return err
	}
	l.end = HeaderSize
	return nil
}

// Truncate cuts the file back to its header and syncs that, for a log that
// is closed with nothing in it.
func (l *Log) Truncate() error {
	if err := l.f.Truncate(HeaderSize); err != nil {
		return fmt.Errorf("wal %s: truncate: %w", l.path, err)
	}
	l.size, l.end, l.unsynced = HeaderSize, HeaderSize, true
	return l.Sync()
}

// Close closes the file. It writes and syncs nothing: Sync first.
func (l *Log) Close() error { return l.f.Close() }
