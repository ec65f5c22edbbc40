package keystore

import (
	"bytes"
	"crypto/sha256"
	"fmt"
)

// CheckRecord decodes one stored entry of the key store, as read raw from
// the database (ratestore check does, offline, for every entry). ours
// reports whether key is in the key store's namespace; err, if the value
// cannot be decoded, matches ErrCorrupt and names the key. For a
// secret's hash, id is the key id it points to (so that a caller can check
// that the record exists); it is "" otherwise. The usage windows are
// limiter states, which strategies.Describe decodes.
func CheckRecord(key, value []byte) (ours bool, id string, err error) {
	switch {
	case bytes.HasPrefix(key, []byte(recordPrefix)):
		_, err = decodeRecord(string(key[len(recordPrefix):]), value, nil)
		return true, "", err
	case bytes.HasPrefix(key, []byte(legacyPrefix)):
		_, err = decodeLegacy(string(key[len(legacyPrefix):]), value)
		return true, "", err
	case bytes.HasPrefix(key, []byte(hashPrefix)):
		if len(key) != len(hashPrefix)+sha256.Size {
			return true, "", fmt.Errorf("keystore: secret hash entry %q: %d bytes of hash, want %d: %w", key, len(key)-len(hashPrefix), sha256.Size, ErrCorrupt)
		}
		if len(value) == 0 {
			return true, "", fmt.Errorf("keystore: secret hash entry %q: names no key id: %w", key, ErrCorrupt)
		}
		return true, string(value), nil
	}
	return false, "", nil
}

// RecordKey is the storage key of the record of key id, for a caller of
// CheckRecord that checks a hash's id.
func RecordKey(id string) []byte { return recordKey(id) }
