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
	k := appendStoreKey(nil, joinKey(name, key))
	if err := db.store.Commit([]storage.Op{{Key: k, Value: raw}}); err != nil {
		return err
	}
	h, _ := db.stateHash(k)
	db.noteNew(h)
	return db.store.Sync()
}

// WaitFilter waits until the filter of stored keys is filled (see stored):
// from then on, a key never stored is not read from the store.
func (db *DB) WaitFilter() { db.filling.Wait() }
