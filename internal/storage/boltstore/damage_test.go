package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/wal"
	"github.com/ratestore/ratestore/strategies"
)

// damagedLog leaves a database whose log holds ten synced records, one key
// each, and returns the offsets where they start.
func damagedLog(t *testing.T) (path string, starts []int64) {
	path = dbPath(t)
	s := open(t, path)
	noCheckpoints(s)
	for i := range 10 {
		starts = append(starts, wal.HeaderSize+s.log.Size())
		commitSync(t, s, put(fmt.Sprint("k", i), "v"))
	}
	s.abandon()
	return path, starts
}

// TestDamagedRecordRefused: a bad record with good ones after it is not a
// torn tail: Open refuses the log, naming it and the offset, and changes
// nothing; with Recover it keeps every other record and reports the one
// dropped.
func TestDamagedRecordRefused(t *testing.T) {
	path, starts := damagedLog(t)
	flip(t, path+"-wal", starts[3]+12)

	_, err := Open(path)
	require.ErrorIs(t, err, wal.ErrCorrupt)
	require.ErrorIs(t, err, strategies.ErrCorrupt)
	require.ErrorContains(t, err, path+"-wal")
	require.ErrorContains(t, err, fmt.Sprintf("offset %d", starts[3]))

	s, err := OpenWith(path, Options{Recover: true})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, &storage.Recovery{File: path + "-wal", Offset: starts[3], Records: 1, Bytes: starts[4] - starts[3]}, s.Recovery())
	want := map[string]string{}
	for i := range 10 {
		if i != 3 {
			want[fmt.Sprint("k", i)] = "v"
		}
	}
	requireState(t, s, want)
}

// TestMissingRecordsRefused: records cut out of the middle of a log (the
// rest moved up) are missing sequence numbers, not a crash.
func TestMissingRecordsRefused(t *testing.T) {
	path, starts := damagedLog(t)
	raw, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	raw = append(raw[:starts[2]:starts[2]], raw[starts[5]:]...)
	require.NoError(t, os.WriteFile(path+"-wal", raw, 0o600))
	_, err = Open(path)
	require.ErrorIs(t, err, strategies.ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("offset %d", starts[2]))

	s, err := OpenWith(path, Options{Recover: true})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, &storage.Recovery{File: path + "-wal", Offset: starts[2], Records: 3}, s.Recovery())
	requireMissing(t, s, "k2", "k3", "k4")
}

// TestLogHeaderDamageRefused: any byte of the header damaged, the log is
// refused (a version field damaged into 1 included: the id after it gives
// it away).
func TestLogHeaderDamageRefused(t *testing.T) {
	path, _ := damagedLog(t)
	orig, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	for off := range int64(wal.HeaderSize) {
		for _, x := range []byte{0x01, 0x03, 0x80} {
			b := append([]byte(nil), orig...)
			b[off] ^= x
			require.NoError(t, os.WriteFile(path+"-wal", b, 0o600))
			if off == 8 && x == 0x01 {
				// Version 3 read as 2, which differs only in telling how
				// the log ended: every record is still read (in a copy,
				// as Open checkpoints them).
				other, _ := damagedLog(t)
				flipBits(t, other+"-wal", off, x)
				s, err := Open(other)
				require.NoError(t, err)
				all := map[string]string{}
				for i := range 10 {
					all[fmt.Sprint("k", i)] = "v"
				}
				requireState(t, s, all)
				require.NoError(t, s.Close())
				continue
			}
			for _, recover := range []bool{false, true} {
				_, err := OpenWith(path, Options{Recover: recover})
				require.Error(t, err, "byte %d ^= %#x", off, x)
				require.ErrorContains(t, err, path+"-wal")
				if off >= 8 && off < 16 && errors.Is(err, wal.ErrVersion) {
					continue // the version or flags field: a version not read
				}
				require.ErrorIs(t, err, strategies.ErrCorrupt, "byte %d ^= %#x", off, x)
			}
		}
	}
}

// TestVersion1LogUpgraded: a database from before ids (no id in bbolt, a
// version 1 log with records) replays its log, gets an id, and its log is
// rewritten as the current version naming it.
func TestVersion1LogUpgraded(t *testing.T) {
	path := dbPath(t)
	s := open(t, path)
	commitSync(t, s, put("base", "0"))
	require.NoError(t, s.Close())
	// Take the id out, and write a version 1 log of two records.
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Delete(idKey) }))
	require.NoError(t, db.Close())
	v1 := []byte("RSTORWAL\x01\x00\x00\x00\x00\x00\x00\x00")
	for i, op := range []storage.Op{put("a", "1"), put("b", "2")} {
		var err error
		v1, err = wal.AppendRecord(v1, 0, uint64(2+i), []storage.Op{op})
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(path+"-wal", v1, 0o600))

	s = open(t, path)
	requireState(t, s, map[string]string{"base": "0", "a": "1", "b": "2"})
	var id []byte
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		id = append(id, tx.Bucket(metaBucket).Get(idKey)...)
		return nil
	}))
	require.Len(t, id, 16)
	fileID, ok := s.log.FileID()
	require.True(t, ok, "the log names an id")
	require.Equal(t, id, fileID[:])
	commitSync(t, s, put("c", "3"))
	s.abandon()
	raw, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	require.Equal(t, uint32(wal.Version), binary.LittleEndian.Uint32(raw[8:]))
	s = open(t, path)
	requireState(t, s, map[string]string{"base": "0", "a": "1", "b": "2", "c": "3"})
}

// TestForeignLogRefused: the log of another database, its records numbered
// like this one's, is refused whatever its sequence numbers.
func TestForeignLogRefused(t *testing.T) {
	other, _ := damagedLog(t)
	path, _ := damagedLog(t)
	raw, err := os.ReadFile(other + "-wal")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+"-wal", raw, 0o600))
	for _, recover := range []bool{false, true} {
		_, err = OpenWith(path, Options{Recover: recover})
		require.ErrorIs(t, err, strategies.ErrCorrupt)
		require.ErrorContains(t, err, path+"-wal")
		require.ErrorContains(t, err, "belongs to another database")
	}
}

// TestGuardRecoversPanics: a panic or a memory fault under bbolt becomes
// an error matching ErrCorrupt that names the file and the key, and the
// goroutine's fault setting is restored.
func TestGuardRecoversPanics(t *testing.T) {
	key := []byte("k1")
	err := guard("/x/db", "get", &key, func() error {
		var p *bolt.Bucket
		p.Get(key) // a nil pointer, as a missing bucket gives
		return nil
	})
	require.ErrorIs(t, err, strategies.ErrCorrupt)
	require.ErrorContains(t, err, "/x/db")
	require.ErrorContains(t, err, `"k1"`)
	require.NoError(t, guard("/x/db", "get", nil, func() error { return nil }))
}
