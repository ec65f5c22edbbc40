package boltstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	bolt "go.etcd.io/bbolt"

	"github.com/ratestore/ratestore/internal/storage"
)

// Values in bbolt carry a checksum. bbolt checksums its meta pages only: a
// flipped bit in a leaf page changes a value and nothing notices, and most
// such changes still decode as a state, a wrong one, without an error. So
// every value is stored as
//
//	value || CRC-32C(key || value), little-endian
//
// and checked when read: a mismatch is an error matching
// errs.ErrCorrupt that names the key. The key is in the checksum so
// that a value found under another key (a damaged branch page pointing at
// the wrong leaf) fails too. The log has checksums of its own (package
// wal); the overlay holds values without one.
//
// Databases from before checksums keep their values in LegacyBucket; Open
// moves them into ValueBucket with their checksums (see migrate).
const (
	ValueBucket  = "ratestore-v2"
	LegacyBucket = "ratestore"
)

// crcSize is the size of a stored value's checksum.
const crcSize = 4

// migrateChunk is how many values migrate moves per transaction.
const migrateChunk = 16 << 10

// encodeValue returns v as stored under key.
func encodeValue(key, v []byte) []byte {
	out := make([]byte, len(v), len(v)+crcSize)
	copy(out, v)
	return binary.LittleEndian.AppendUint32(out, valueCRC(key, v))
}

// DecodeValue checks a value read from ValueBucket under key and returns
// it without its checksum (aliasing stored). Its errors match
// errs.ErrCorrupt; they do not name the key.
func DecodeValue(key, stored []byte) ([]byte, error) {
	if len(stored) < crcSize {
		return nil, fmt.Errorf("stored value of %d bytes, shorter than its checksum: %w", len(stored), errCorrupt)
	}
	v := stored[:len(stored)-crcSize]
	if binary.LittleEndian.Uint32(stored[len(v):]) != valueCRC(key, v) {
		return nil, fmt.Errorf("stored value fails its checksum: %w", errCorrupt)
	}
	return v, nil
}

func valueCRC(key, v []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, v)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// migrate moves the values of a database from before checksums from
// LegacyBucket into ValueBucket, with their checksums, migrateChunk of
// them per transaction (each moves its values whole: a crash leaves every
// key in one bucket or the other, and the next Open carries on), and then
// drops LegacyBucket. It does nothing if there is no LegacyBucket. A
// database it has migrated cannot be opened by a build from before it.
func (s *Store) migrate() error {
	var legacy bool
	if err := s.view("read buckets", nil, func(tx *bolt.Tx) error {
		legacy = tx.Bucket([]byte(LegacyBucket)) != nil
		return nil
	}); err != nil || !legacy {
		return err // nothing is written to a file that needs no migration
	}
	if s.readOnly {
		return fmt.Errorf("its values are in bucket %q, from before checksums, which a writable open migrates (open it writable once): %w", LegacyBucket, storage.ErrReadOnly)
	}
	for done := false; !done; {
		err := s.update("migrate values", nil, func(tx *bolt.Tx) error {
			old := tx.Bucket([]byte(LegacyBucket))
			if old == nil {
				done = true
				return nil
			}
			b, err := tx.CreateBucketIfNotExists([]byte(ValueBucket))
			if err != nil {
				return err
			}
			var keys, values [][]byte
			c := old.Cursor()
			for k, v := c.First(); k != nil && len(keys) < migrateChunk; k, v = c.Next() {
				keys, values = append(keys, k), append(values, v)
			}
			if len(keys) == 0 {
				done = true
				return tx.DeleteBucket([]byte(LegacyBucket))
			}
			for i, k := range keys {
				// k and values[i] point into the mmap, valid for the
				// transaction; Put copies them before Delete frees them.
				if err := b.Put(k, encodeValue(k, values[i])); err != nil {
					return fmt.Errorf("key %q: %w", k, err)
				}
				if err := old.Delete(k); err != nil {
					return fmt.Errorf("key %q: %w", k, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
