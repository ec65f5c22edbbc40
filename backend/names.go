package backend

import (
	"fmt"

	"github.com/ratestore/ratestore/internal/text"
)

// MaxKeyLen is the longest key a limiter accepts, and the longest record
// key, in bytes.
const MaxKeyLen = 1024

// MaxNameLen is the longest limiter name, in bytes.
const MaxNameLen = 64

// ValidName checks a limiter name: 1 to MaxNameLen bytes of
// [A-Za-z0-9_.:@+-]. The error matches ErrInvalid.
func ValidName(name string) error {
	if !text.Name(name, MaxNameLen) {
		return fmt.Errorf("ratestore: limiter name %q: want 1 to %d bytes of [A-Za-z0-9_.:@+-]: %w", name, MaxNameLen, ErrInvalid)
	}
	return nil
}

// ValidKey checks a limiter's key: 1 to MaxKeyLen bytes. The error
// matches ErrInvalid.
func ValidKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("ratestore: key of %d bytes: want 1 to %d: %w", len(key), MaxKeyLen, ErrInvalid)
	}
	return nil
}

// ValidTopic checks a topic of Batch.Announce and Store.Changes: 1 to 64
// bytes of a limiter name's characters. The error matches ErrInvalid.
func ValidTopic(topic string) error {
	if !text.Name(topic, 64) {
		return fmt.Errorf("ratestore: topic %.70q: want 1 to 64 of [A-Za-z0-9_.:@+-]: %w", topic, ErrInvalid)
	}
	return nil
}
