package boltstore

import (
	"fmt"
	"testing"

	"github.com/ratestore/ratestore/internal/storage"
)

// BenchmarkCheckpoint measures one checkpoint: keys overwrites (a GCRA-sized
// value each) folded from the overlay into a database of dbKeys keys: how
// long a background checkpoint runs, or a foreground one holds writers
// back.
func BenchmarkCheckpoint(b *testing.B) {
	for _, c := range []struct{ keys, dbKeys int }{{10_000, 10_000}, {16 << 10, 200_000}} {
		b.Run(fmt.Sprintf("keys=%d/db=%d", c.keys, c.dbKeys), func(b *testing.B) {
			s, err := Open(b.TempDir() + "/db")
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			noCheckpoints(s)
			key := func(i int) []byte { return fmt.Appendf(nil, "s/bench\x00user:%07d", i) }
			ops := make([]storage.Op, 0, 4096)
			flush := func() {
				if err := s.Commit(ops); err != nil {
					b.Fatal(err)
				}
				ops = ops[:0]
			}
			for i := range c.dbKeys {
				if ops = append(ops, storage.Op{Key: key(i), Value: make([]byte, 16)}); len(ops) == cap(ops) {
					flush()
				}
			}
			flush()
			s.wmu.Lock()
			s.checkpoint()
			s.wmu.Unlock()
			stride := c.dbKeys / c.keys
			for b.Loop() {
				b.StopTimer()
				for i := range c.keys {
					if ops = append(ops, storage.Op{Key: key(i * stride), Value: []byte("0123456789abcdef")}); len(ops) == cap(ops) {
						flush()
					}
				}
				flush()
				b.StartTimer()
				s.wmu.Lock()
				if err := s.checkpoint(); err != nil {
					b.Fatal(err)
				}
				s.wmu.Unlock()
			}
		})
	}
}
