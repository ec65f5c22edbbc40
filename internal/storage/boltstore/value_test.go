package boltstore

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/ratestore/ratestore/strategies"
)

// TestValueChecksum: a stored value that was changed, cut, or found under
// another key fails Get and Scan with ErrCorrupt naming the key; the
// others still read.
func TestValueChecksum(t *testing.T) {
	for name, damage := range map[string]func(b *bolt.Bucket) error{
		"a flipped bit": func(b *bolt.Bucket) error {
			v := bytes.Clone(b.Get([]byte("b")))
			v[0] ^= 1
			return b.Put([]byte("b"), v)
		},
		"cut": func(b *bolt.Bucket) error { return b.Put([]byte("b"), []byte{1, 2}) },
		"another key's value": func(b *bolt.Bucket) error {
			return b.Put([]byte("b"), bytes.Clone(b.Get([]byte("a"))))
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t, dbPath(t))
			commitSync(t, s, put("a", "1"), put("b", "2"), put("c", "3"))
			s.wmu.Lock()
			require.NoError(t, s.checkpoint())
			s.wmu.Unlock()
			require.NoError(t, s.db.Update(func(tx *bolt.Tx) error { return damage(tx.Bucket(bucket)) }))

			_, err := s.Get([]byte("b"))
			require.ErrorIs(t, err, strategies.ErrCorrupt)
			require.ErrorContains(t, err, `key "b"`)
			require.ErrorContains(t, err, s.path)
			err = s.Scan(nil, nil, func(k, v []byte) error { return nil })
			require.ErrorIs(t, err, strategies.ErrCorrupt)
			require.ErrorContains(t, err, `key "b"`)
			for k, want := range map[string]string{"a": "1", "c": "3"} {
				v, err := s.Get([]byte(k))
				require.NoError(t, err)
				require.Equal(t, want, string(v))
			}
		})
	}
}

// TestLegacyValuesMigrated: a file from before checksums (values bare in
// LegacyBucket) has them moved into ValueBucket at Open, checksummed,
// whether it is whole or a crash stopped an earlier migration half way.
func TestLegacyValuesMigrated(t *testing.T) {
	for _, half := range []bool{false, true} {
		t.Run(fmt.Sprint("half migrated: ", half), func(t *testing.T) {
			path := dbPath(t)
			s := open(t, path)
			require.NoError(t, s.Close())
			const n = migrateChunk + 100 // two transactions
			want := map[string]string{}
			db, err := bolt.Open(path, 0o600, nil)
			require.NoError(t, err)
			require.NoError(t, db.Update(func(tx *bolt.Tx) error {
				require.NoError(t, tx.DeleteBucket(bucket))
				old, err := tx.CreateBucket([]byte(LegacyBucket))
				require.NoError(t, err)
				var moved *bolt.Bucket
				if half {
					moved, err = tx.CreateBucket(bucket)
					require.NoError(t, err)
				}
				for i := range n {
					k, v := fmt.Sprintf("k%05d", i), fmt.Sprint("value ", i)
					want[k] = v
					b, stored := old, []byte(v)
					if half && i%2 == 0 {
						b, stored = moved, encodeValue([]byte(k), []byte(v))
					}
					require.NoError(t, b.Put([]byte(k), stored))
				}
				return nil
			}))
			require.NoError(t, db.Close())

			s = open(t, path)
			requireState(t, s, want)
			require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
				require.Nil(t, tx.Bucket([]byte(LegacyBucket)), "the legacy bucket is dropped")
				return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
					_, err := DecodeValue(k, v)
					return err
				})
			}))
		})
	}
}

// FuzzDecodeValue: DecodeValue never panics, accepts exactly what
// encodeValue wrote for that key, and hands back the value.
func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), []byte{})
	f.Add([]byte("state:l\x00key"), []byte("\x01\x02\x03"), []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, key, value, stored []byte) {
		if v, err := DecodeValue(key, stored); err == nil {
			require.Equal(t, stored, encodeValue(key, v))
		}
		v, err := DecodeValue(key, encodeValue(key, value))
		require.NoError(t, err)
		require.Equal(t, value, v)
	})
}
