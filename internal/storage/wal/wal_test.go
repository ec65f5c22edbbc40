package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/storage"
)

// testID is the database id of the tests' logs.
var (
	testID   = ID{0x72, 0x61, 0x74, 0x65, 0x73, 0x74, 0x6f, 0x72, 0x65, 1, 2, 3, 4, 5, 6, 7}
	testSalt = Salt(testID)
)

// rec is a replayed record, copied.
type rec struct {
	seq uint64
	ops []storage.Op
}

func ops(kv ...string) []storage.Op {
	var out []storage.Op
	for i := 0; i < len(kv); i += 2 {
		op := storage.Op{Key: []byte(kv[i])}
		if kv[i+1] != "<del>" {
			op.Value = []byte(kv[i+1])
		}
		out = append(out, op)
	}
	return out
}

func cloneOps(in []storage.Op) []storage.Op {
	out := make([]storage.Op, len(in))
	for i, op := range in {
		out[i].Key = bytes.Clone(op.Key)
		out[i].Value = bytes.Clone(op.Value)
	}
	return out
}

// replay opens path and returns the records above after, from a log that
// ends cleanly.
func replay(t *testing.T, path string, after uint64) (*Log, []rec) {
	t.Helper()
	l, got, dmg := replayDamaged(t, path, after)
	require.Zero(t, dmg, "a log written whole ends cleanly")
	return l, got
}

// replayDamaged is replay that returns what Replay reported.
func replayDamaged(t *testing.T, path string, after uint64) (*Log, []rec, Damage) {
	t.Helper()
	l, err := Open(path, testID)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	var got []rec
	dmg, err := l.Replay(after, func(seq uint64, o []storage.Op) error {
		got = append(got, rec{seq, cloneOps(o)})
		return nil
	})
	require.NoError(t, err)
	return l, got, dmg
}

// appendAll appends one record per batch and syncs.
func appendAll(t *testing.T, l *Log, batches ...[]storage.Op) {
	t.Helper()
	for _, b := range batches {
		require.NoError(t, l.Append(b))
	}
	require.NoError(t, l.Sync())
}

func newLog(t *testing.T) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db-wal")
	l, err := Open(path, testID)
	require.NoError(t, err)
	_, err = l.Replay(0, func(uint64, []storage.Op) error { return nil })
	require.NoError(t, err)
	return l, path
}

func TestRecordRoundTrip(t *testing.T) {
	in := ops("a", "1", "empty", "", "gone", "<del>")
	b, err := AppendRecord([]byte("prefix"), testSalt, 42, in)
	require.NoError(t, err)
	seq, out, n, err := DecodeRecord(b[len("prefix"):], testSalt)
	require.NoError(t, err)
	require.Equal(t, uint64(42), seq)
	require.Equal(t, len(b)-len("prefix"), n)
	require.Equal(t, in, out)
	require.NotNil(t, out[1].Value, "an empty put stays a put")
	require.Nil(t, out[2].Value, "a delete stays a delete")

	for cut := range n {
		_, _, _, err := DecodeRecord(b[len("prefix"):len("prefix")+cut], testSalt)
		require.ErrorIs(t, err, errEnd, "cut at %d", cut)
	}
}

func TestLogCreateAppendReplay(t *testing.T) {
	l, path := newLog(t)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.Equal(t, int64(HeaderSize+chunkSize), fi.Size(), "preallocated")
	_, err = os.Stat(path + ".tmp")
	require.ErrorIs(t, err, os.ErrNotExist)

	appendAll(t, l, ops("a", "1"), ops("b", "2", "a", "<del>"), ops("c", ""))
	require.Equal(t, uint64(3), l.Last())
	require.NoError(t, l.Close())

	_, got := replay(t, path, 0)
	require.Equal(t, []rec{
		{1, ops("a", "1")},
		{2, ops("b", "2", "a", "<del>")},
		{3, ops("c", "")},
	}, got)
	_, got = replay(t, path, 2)
	require.Equal(t, []rec{{3, ops("c", "")}}, got, "records up to the checkpoint are skipped")
}

// TestLogGrows: a record past the preallocated space extends the file by
// whole chunks, and the records still replay.
func TestLogGrows(t *testing.T) {
	l, path := newLog(t)
	big := ops("big", string(make([]byte, chunkSize+100)))
	appendAll(t, l, ops("a", "1"), big, ops("b", "2"))
	require.NoError(t, l.Close())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, int64(HeaderSize+2*chunkSize), fi.Size(), "grown by the one chunk the big record needed")
	_, got := replay(t, path, 0)
	require.Len(t, got, 3)
	require.Equal(t, big, got[1].ops)
}

// TestLogReuseAfterReset: after a Reset, new records overwrite the old
// ones from the start and the stale records left past them are not read,
// whether they are longer or shorter than the new ones.
func TestLogReuseAfterReset(t *testing.T) {
	for _, newVal := range []string{"x", string(make([]byte, 300))} {
		t.Run(fmt.Sprint(len(newVal)), func(t *testing.T) {
			l, path := newLog(t)
			appendAll(t, l, ops("a", "1"), ops("b", "22"), ops("c", "333"), ops("d", "4444"))
			require.NoError(t, l.Reset())
			require.Zero(t, l.Size())
			require.NoError(t, l.Close())

			l, got := replay(t, path, 4)
			require.Empty(t, got, "a reset log is empty")
			appendAll(t, l, ops("e", newVal))
			require.NoError(t, l.Close())

			_, got = replay(t, path, 4)
			require.Equal(t, []rec{{5, ops("e", newVal)}}, got)
		})
	}
}

// TestLogDropBefore: the records before a Tail are dropped and the later
// ones kept, in a file that replays them alone and takes more; a Tail at
// the end is a Reset.
func TestLogDropBefore(t *testing.T) {
	l, path := newLog(t)
	appendAll(t, l, ops("a", "1"), ops("b", "2"))
	tail := l.Tail()
	appendAll(t, l, ops("c", "3"), ops("d", "<del>"))
	require.NoError(t, l.DropBefore(tail))
	require.Equal(t, uint64(4), l.Last())
	_, err := os.Stat(path + ".tmp")
	require.ErrorIs(t, err, os.ErrNotExist)
	appendAll(t, l, ops("e", "5"))
	require.NoError(t, l.Close())

	l, got := replay(t, path, 2)
	require.Equal(t, []rec{{3, ops("c", "3")}, {4, ops("d", "<del>")}, {5, ops("e", "5")}}, got)
	require.NoError(t, l.DropBefore(l.Tail()))
	require.Zero(t, l.Size())
	require.Error(t, l.DropBefore(l.Tail()+1), "past the records")
	require.NoError(t, l.Close())
	_, got = replay(t, path, 5)
	require.Empty(t, got)
}

// TestLogResetNotOnDisk: if a crash lost the reset, the old records are
// all at or below the checkpoint and replay skips them.
func TestLogResetNotOnDisk(t *testing.T) {
	l, path := newLog(t)
	appendAll(t, l, ops("a", "1"), ops("b", "2"))
	require.NoError(t, l.Close())
	l, got := replay(t, path, 2)
	require.Empty(t, got)
	require.Equal(t, uint64(2), l.Last())
	require.Positive(t, l.Size(), "the skipped records are still there until a Reset")
}

func TestLogTornTail(t *testing.T) {
	setup := func(t *testing.T) (path string, ends []int64) {
		l, path := newLog(t)
		for _, b := range [][]storage.Op{ops("a", "1"), ops("b", "2"), ops("c", "3")} {
			appendAll(t, l, b)
			ends = append(ends, HeaderSize+l.Size())
		}
		require.NoError(t, l.Close())
		return path, ends
	}
	t.Run("cut short after the end marker", func(t *testing.T) {
		path, ends := setup(t)
		require.NoError(t, os.Truncate(path, ends[2]+recordHeaderSize))
		_, got := replay(t, path, 0)
		require.Len(t, got, 3)
	})
	t.Run("truncated", func(t *testing.T) {
		// A file cut anywhere before the last record's end marker lost
		// records (how many, no reader can tell): refused, and Recover
		// keeps what is whole and says the file was truncated.
		path, ends := setup(t)
		orig, err := os.ReadFile(path)
		require.NoError(t, err)
		for cut := int64(HeaderSize); cut < ends[2]+recordHeaderSize; cut++ {
			require.NoError(t, os.WriteFile(path, orig[:cut], 0o600))
			l, err := Open(path, testID)
			require.NoError(t, err)
			_, err = l.Replay(0, func(uint64, []storage.Op) error { return nil })
			require.ErrorIs(t, err, ErrCorrupt, "cut at %d", cut)
			require.ErrorContains(t, err, fmt.Sprintf("ends at %d", cut))
			whole, start := 0, int64(HeaderSize) // whole records, and where the rest starts
			if cut >= ends[0] {
				whole = 1
			}
			if cut >= ends[1] {
				whole = 2
			}
			if cut >= ends[2] {
				whole = 3
			}
			var got int
			dmg, err := l.Recover(0, func(uint64, []storage.Op) error { got++; return nil })
			require.NoError(t, err)
			require.Equal(t, whole, got, "cut at %d", cut)
			require.True(t, dmg.Truncated, "cut at %d", cut)
			if whole > 0 {
				start = ends[whole-1]
			}
			require.Equal(t, start, dmg.Offset)
			require.Equal(t, start-HeaderSize, l.Size())
			require.NoError(t, l.Close())
		}
	})
	t.Run("flipped byte", func(t *testing.T) {
		// A flip in the last record looks like a torn write: dropped,
		// and reported.
		path, ends := setup(t)
		orig, err := os.ReadFile(path)
		require.NoError(t, err)
		for off := ends[1]; off < ends[2]; off++ {
			for _, flip := range []byte{0x40, 0xff} {
				b := bytes.Clone(orig)
				b[off] ^= flip
				require.NoError(t, os.WriteFile(path, b, 0o600))
				l, err := Open(path, testID)
				require.NoError(t, err)
				var got int
				dmg, err := l.Replay(0, func(uint64, []storage.Op) error { got++; return nil })
				require.NoError(t, l.Close())
				what := fmt.Sprintf("byte %d ^= %#x", off, flip)
				if off < ends[1]+4 && errors.Is(err, ErrCorrupt) {
					// The length field, grown past the end of the file.
					require.ErrorContains(t, err, "ends at", what)
					continue
				}
				require.NoError(t, err, what)
				require.Equal(t, 2, got, what)
				require.Equal(t, Damage{Offset: ends[1], Bytes: dmg.Bytes, Tail: true}, dmg, what)
			}
		}
	})
	t.Run("zeroed length", func(t *testing.T) {
		// The last record's length field zeroed reads as an end marker,
		// but the record's number behind it gives it away.
		path, ends := setup(t)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(make([]byte, 4), ends[1])
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, got, dmg := replayDamaged(t, path, 0)
		require.Len(t, got, 2)
		require.Equal(t, Damage{Offset: ends[1], Bytes: recordHeaderSize, Tail: true}, dmg)
	})
	t.Run("garbage after the last record", func(t *testing.T) {
		path, ends := setup(t)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("\xff\x00\x00\x00garbage that is no record"), ends[2])
		require.NoError(t, err)
		require.NoError(t, f.Close())
		// Garbage over the end marker: it cannot be told from a
		// record torn by a crash, and is reported as one.
		l, got, dmg := replayDamaged(t, path, 0)
		require.Len(t, got, 3)
		require.True(t, dmg.Tail)
		appendAll(t, l, ops("d", "4"))
		require.NoError(t, l.Close())
		_, got = replay(t, path, 0)
		require.Len(t, got, 4, "the next record overwrote the garbage")
	})
	t.Run("a later record than the next one", func(t *testing.T) {
		path, ends := setup(t)
		// A well-formed record numbered 5 where 3 should follow 2: records
		// are missing, which no crash does.
		b, err := AppendRecord(nil, testSalt, 5, ops("z", "9"))
		require.NoError(t, err)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(b, ends[1])
		require.NoError(t, err)
		require.NoError(t, f.Close())
		l, err := Open(path, testID)
		require.NoError(t, err)
		defer l.Close()
		_, err = l.Replay(0, func(uint64, []storage.Op) error { return nil })
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, fmt.Sprintf("offset %d", ends[1]))
	})
	t.Run("an earlier record than the next one", func(t *testing.T) {
		path, ends := setup(t)
		// Record 1 again where 3 should follow 2: data of an earlier
		// round, the end of the log.
		b, err := AppendRecord(nil, testSalt, 1, ops("z", "9"))
		require.NoError(t, err)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(b, ends[1])
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, got := replay(t, path, 0)
		require.Len(t, got, 2)
	})
}

func TestLogRefused(t *testing.T) {
	cases := map[string]func(h []byte) []byte{
		"not ours":    func(h []byte) []byte { return append([]byte("NOTAWAL!"), h[8:]...) },
		"empty":       func([]byte) []byte { return nil },
		"short":       func(h []byte) []byte { return h[:10] },
		"version 4":   func(h []byte) []byte { binary.LittleEndian.PutUint32(h[8:], 4); return h },
		"flags":       func(h []byte) []byte { binary.LittleEndian.PutUint32(h[12:], 1); return h },
		"all zeroes":  func(h []byte) []byte { return make([]byte, len(h)) },
		"a bolt file": func(h []byte) []byte { return append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xed, 0xda, 0x0c, 0xed}, h...) },
	}
	for name, mangle := range cases {
		t.Run(name, func(t *testing.T) {
			l, path := newLog(t)
			appendAll(t, l, ops("a", "1"))
			require.NoError(t, l.Close())
			orig, err := os.ReadFile(path)
			require.NoError(t, err)
			b := append(mangle(bytes.Clone(orig[:HeaderSize])), orig[HeaderSize:]...)
			if name == "empty" || name == "short" {
				b = mangle(bytes.Clone(orig[:HeaderSize]))
			}
			require.NoError(t, os.WriteFile(path, b, 0o600))

			_, err = Open(path, testID)
			require.Error(t, err)
			require.Contains(t, err.Error(), path)
			if name == "version 4" || name == "flags" {
				require.ErrorIs(t, err, ErrVersion)
			} else {
				require.ErrorIs(t, err, ErrNotLog)
			}
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(b, after), "a refused log is left as it was")
		})
	}
}

// TestLogNotThisDatabase: a log whose first record does not follow the
// checkpoint is refused, not applied on top of the wrong state.
func TestLogNotThisDatabase(t *testing.T) {
	l, path := newLog(t)
	appendAll(t, l, ops("a", "1"), ops("b", "2"))
	require.NoError(t, l.Close())
	// Drop record 1: the log now starts at 2, the database at 0.
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	_, _, n, err := DecodeRecord(b[HeaderSize:], testSalt)
	require.NoError(t, err)
	b = append(b[:HeaderSize:HeaderSize], b[HeaderSize+n:]...)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	l2, err := Open(path, testID)
	require.NoError(t, err)
	defer l2.Close()
	_, err = l2.Replay(0, func(uint64, []storage.Op) error { return nil })
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), path)
}

// TestLogCorruptRecord: a record whose CRC matches but whose ops do not
// decode is refused, not taken for the end of the log.
func TestLogCorruptRecord(t *testing.T) {
	l, path := newLog(t)
	appendAll(t, l, ops("a", "1"))
	body := binary.LittleEndian.AppendUint64(nil, 2)
	body = append(body, 5, 7) // five ops, then a bad kind
	require.NoError(t, l.writeFull(rawRecord(body), HeaderSize+l.Size()))
	require.NoError(t, l.Close())
	l, err := Open(path, testID)
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Replay(0, func(uint64, []storage.Op) error { return nil })
	require.ErrorIs(t, err, ErrCorrupt)
}

// rawRecord frames body with its length and CRC.
func rawRecord(body []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Update(testSalt, castagnoli, body))
	return append(b, body...)
}

func TestLogTruncate(t *testing.T) {
	l, path := newLog(t)
	appendAll(t, l, ops("a", "1"))
	require.NoError(t, l.Truncate())
	require.NoError(t, l.Close())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, int64(HeaderSize+recordHeaderSize), fi.Size(), "the header and an end marker")
	l, got := replay(t, path, 1)
	require.Empty(t, got)
	appendAll(t, l, ops("b", "2"))
	require.NoError(t, l.Close())
	_, got = replay(t, path, 1)
	require.Equal(t, []rec{{2, ops("b", "2")}}, got)
}

// TestLogVersion2: a version 2 log (no end markers) is read as it always
// was, its end never reported, and the first Reset makes it version 3.
func TestLogVersion2(t *testing.T) {
	l, path := newLog(t)
	appendAll(t, l, ops("a", "1"), ops("b", "2"))
	require.NoError(t, l.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	binary.LittleEndian.PutUint32(b[8:], 2)
	b = b[:HeaderSize+l.Size()+5] // no end marker, and cut
	require.NoError(t, os.WriteFile(path, b, 0o600))

	l, got := replay(t, path, 0)
	require.Len(t, got, 2)
	require.Equal(t, uint32(2), l.Version())
	require.NoError(t, l.Reset())
	require.Equal(t, uint32(3), l.Version())
	appendAll(t, l, ops("c", "3"))
	require.NoError(t, l.Close())
	l, got = replay(t, path, 2)
	require.Len(t, got, 1)
	require.Equal(t, uint32(3), l.Version())
}

// TestOpenReadOnly: a log opened read-only replays as Open's does, and
// every method that writes fails with storage.ErrReadOnly (an Append with
// storage.ErrNotApplied too) and leaves the file's bytes as they were. A
// log that does not exist is not created.
func TestOpenReadOnly(t *testing.T) {
	l, path := newLog(t)
	appendAll(t, l, ops("a", "1"), ops("b", "2"))
	require.NoError(t, l.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	ro, err := OpenReadOnly(path)
	require.NoError(t, err)
	var got []rec
	_, err = ro.Replay(0, func(seq uint64, o []storage.Op) error {
		got = append(got, rec{seq, cloneOps(o)})
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []rec{{1, ops("a", "1")}, {2, ops("b", "2")}}, got)

	err = ro.Append(ops("c", "3"))
	require.ErrorIs(t, err, storage.ErrReadOnly)
	require.ErrorIs(t, err, storage.ErrNotApplied)
	for name, write := range map[string]func() error{
		"Reset": ro.Reset, "Truncate": ro.Truncate, "DropBefore": func() error { return ro.DropBefore(HeaderSize) },
	} {
		require.ErrorIs(t, write(), storage.ErrReadOnly, name)
	}
	require.NoError(t, ro.Sync(), "nothing to sync")
	require.NoError(t, ro.Close())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
	_, err = os.Stat(path + ".tmp")
	require.ErrorIs(t, err, os.ErrNotExist, "DropBefore built no new log")

	missing := filepath.Join(t.TempDir(), "none-wal")
	_, err = OpenReadOnly(missing)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist, "not created")
}
