// Package errs holds the two sentinel errors that every layer of ratestore
// shares, from the pure arithmetic (rollingwindow, strategies) to the
// storage layer and the backends: one value each, so that errors.Is
// matches a bad argument or a corrupt value whichever package refused it.
// The public packages export them under their own names (ratestore,
// strategies, rollingwindow, backend, pricing and alert all have an
// ErrInvalid, and it is this one).
package errs

import "errors"

var (
	// Invalid is matched by every error about a bad argument, option or
	// configuration.
	Invalid = errors.New("invalid argument")

	// Corrupt is matched by every error about stored bytes that cannot be
	// decoded: an unknown header, a malformed or out-of-range number,
	// trailing bytes, a sequence no state could have produced.
	Corrupt = errors.New("corrupt state")
)
