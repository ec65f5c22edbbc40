package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ratestore/ratestore/internal/storage"
)

// FuzzDecodeRecord: no input panics the decoder, and what it accepts
// encodes back to a record that decodes to the same thing.
func FuzzDecodeRecord(f *testing.F) {
	for _, seed := range [][]storage.Op{
		nil,
		ops("a", "1"),
		ops("k", "", "gone", "<del>", "longer key", "longer value"),
	} {
		b, err := AppendRecord(nil, testSalt, 7, seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(b, b...))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Add([]byte("\x08\x00\x00\x00\xff\xff\xff\xff12345678"))
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, got, n, err := DecodeRecord(b, testSalt)
		if err != nil {
			if !errors.Is(err, errEnd) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if n > len(b) {
			t.Fatalf("n %d > len %d", n, len(b))
		}
		again, err := AppendRecord(nil, testSalt, seq, got)
		if err != nil {
			t.Fatal(err)
		}
		seq2, got2, _, err := DecodeRecord(again, testSalt)
		if err != nil || seq2 != seq || len(got2) != len(got) {
			t.Fatalf("re-encoded record: seq %d/%d, %d/%d ops, %v", seq, seq2, len(got), len(got2), err)
		}
		for i := range got {
			if !bytes.Equal(got[i].Key, got2[i].Key) || !bytes.Equal(got[i].Value, got2[i].Value) ||
				(got[i].Value == nil) != (got2[i].Value == nil) {
				t.Fatalf("op %d differs", i)
			}
		}
	})
}

// FuzzReplay: whatever follows a valid header, Replay returns (records, or
// an error) without panicking, and a log it accepted takes new records;
// Recover never refuses a log for damage, and replays at least what Replay
// did.
func FuzzReplay(f *testing.F) {
	r1, _ := AppendRecord(nil, testSalt, 1, ops("a", "1"))
	r2, _ := AppendRecord(nil, testSalt, 2, ops("b", "<del>"))
	f.Add(append(r1, r2...), uint64(0))
	f.Add(append(r1, r2...), uint64(1))
	f.Add(r1[:5], uint64(0))
	f.Add(append(r1, make([]byte, 100)...), uint64(0))
	f.Add(append(r2, r1...), uint64(1))
	f.Fuzz(func(t *testing.T, body []byte, after uint64) {
		path := filepath.Join(t.TempDir(), "wal")
		if err := os.WriteFile(path, append(appendHeader(nil, testID), body...), 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(path, testID)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var recovered []uint64
		r, err := Open(path, testID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Recover(after, func(seq uint64, _ []storage.Op) error {
			recovered = append(recovered, seq)
			return nil
		})
		r.Close()
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		var replayed []uint64
		if _, err := l.Replay(after, func(seq uint64, _ []storage.Op) error {
			if seq <= after {
				t.Fatalf("record %d replayed after %d", seq, after)
			}
			replayed = append(replayed, seq)
			return nil
		}); err != nil {
			return
		}
		if len(recovered) < len(replayed) || !slices.Equal(recovered[:len(replayed)], replayed) {
			t.Fatalf("Replay took %v, Recover %v", replayed, recovered)
		}
		if l.Last() < after {
			t.Fatalf("Last %d < after %d", l.Last(), after)
		}
		if after < 1<<62 {
			if err := l.Append(ops("z", "z")); err != nil {
				t.Fatal(err)
			}
		}
	})
}
