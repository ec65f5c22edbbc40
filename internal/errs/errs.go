// Package errs holds the sentinel errors that every layer of ratestore
// shares, from the pure arithmetic (rollingwindow, strategies) to the
// storage layer and the backends: one value each, so that errors.Is
// matches a bad argument or a corrupt value whichever package refused it.
// The public packages export them under their own names (ratestore,
// strategies, rollingwindow, backend, pricing and alert all have an
// ErrInvalid, and it is this one).
package errs

import "errors"

var (
	// ErrInvalid is matched by every error about a bad argument, option or
	// configuration.
	ErrInvalid = errors.New("invalid argument")

	// ErrCorrupt is matched by every error about stored bytes that cannot be
	// decoded: an unknown header, a malformed or out-of-range number,
	// trailing bytes, a sequence no state could have produced.
	ErrCorrupt = errors.New("corrupt state")

	// ErrReadOnly is matched by every change refused because the store was
	// opened read-only. Nothing was changed.
	ErrReadOnly = errors.New("opened read-only")
)
