package ratestore

import "github.com/ratestore/ratestore/internal/storage"

// RawState returns the stored bytes of key under limiter name, or nil.
// Tests use it to see exactly what reached the store.
func (db *DB) RawState(name, key string) ([]byte, error) {
	return db.store.Get(appendStoreKey(nil, joinKey(name, key)))
}

// PutRawState stores raw as the state of key under limiter name, bypassing
// the engine: tests plant legacy or corrupt encodings with it. The key must
// not be in memory yet.
func (db *DB) PutRawState(name, key string, raw []byte) error {
	if err := db.store.Commit([]storage.Op{{Key: appendStoreKey(nil, joinKey(name, key)), Value: raw}}); err != nil {
		return err
	}
	return db.store.Sync()
}
