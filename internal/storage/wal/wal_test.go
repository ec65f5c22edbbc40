package wal

import (
	"bytes"
	"encoding/binary"
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

// replay opens path and returns the records above after.
func replay(t *testing.T, path string, after uint64) (*Log, []rec) {
	t.Helper()
	l, err := Open(path, testID)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	var got []rec
	require.NoError(t, l.Replay(after, func(seq uint64, o []storage.Op) error {
		got = append(got, rec{seq, cloneOps(o)})
		return nil
	}))
	return l, got
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
	require.NoError(t, l.Replay(0, func(uint64, []storage.Op) error { return nil }))
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
	t.Run("truncated", func(t *testing.T) {
		path, ends := setup(t)
		for cut := ends[1] + 1; cut < ends[2]; cut++ {
			require.NoError(t, os.Truncate(path, cut))
			l, got := replay(t, path, 0)
			require.Len(t, got, 2, "cut at %d", cut)
			require.Equal(t, ends[1]-HeaderSize, l.Size())
			require.NoError(t, l.Close())
		}
	})
	t.Run("flipped byte", func(t *testing.T) {
		path, ends := setup(t)
		orig, err := os.ReadFile(path)
		require.NoError(t, err)
		for off := ends[1]; off < ends[2]; off++ {
			b := bytes.Clone(orig)
			b[off] ^= 0x40
			require.NoError(t, os.WriteFile(path, b, 0o600))
			_, got := replay(t, path, 0)
			require.Len(t, got, 2, "flip at %d", off)
		}
	})
	t.Run("garbage after the last record", func(t *testing.T) {
		path, ends := setup(t)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("\xff\x00\x00\x00garbage that is no record"), ends[2])
		require.NoError(t, err)
		require.NoError(t, f.Close())
		l, got := replay(t, path, 0)
		require.Len(t, got, 3)
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
		err = l.Replay(0, func(uint64, []storage.Op) error { return nil })
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
		"version 3":   func(h []byte) []byte { binary.LittleEndian.PutUint32(h[8:], 3); return h },
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
			if name == "version 3" || name == "flags" {
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
	err = l2.Replay(0, func(uint64, []storage.Op) error { return nil })
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
	err = l.Replay(0, func(uint64, []storage.Op) error { return nil })
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
	require.Equal(t, int64(HeaderSize), fi.Size())
	l, got := replay(t, path, 1)
	require.Empty(t, got)
	appendAll(t, l, ops("b", "2"))
	require.NoError(t, l.Close())
	_, got = replay(t, path, 1)
	require.Equal(t, []rec{{2, ops("b", "2")}}, got)
}
