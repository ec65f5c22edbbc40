package backend

import (
	"errors"

	"github.com/ratestore/ratestore/internal/errs"
)

var (
	// ErrInvalid is matched by every error about a bad argument or
	// configuration: key, limiter name, n, strategy, topic.
	ErrInvalid = errs.ErrInvalid
	// ErrCorrupt is matched by errors about a stored state or record that
	// cannot be decoded; the message names the key.
	ErrCorrupt = errs.ErrCorrupt
	// ErrReadOnly is matched by every call that would change a store
	// opened read-only; nothing was changed. It does not match
	// ErrInvalid: the call and its arguments are good, the store is not
	// open to take it.
	ErrReadOnly = errs.ErrReadOnly
	// ErrClosed is returned by any call after Close.
	ErrClosed = errors.New("ratestore: database closed")
	// ErrConflict is matched by an Update of a shared store that stored
	// nothing because a value its batch read was changed by another writer
	// before the commit (see UpdateCached): the caller may run its
	// change again. A store this process alone changes never returns it.
	ErrConflict = errors.New("ratestore: a value read by the batch changed before its commit")
	// ErrGap is matched by Store.Changes when messages after the position
	// asked for were dropped before they were read: the caller has missed
	// changes and must read what it keeps again.
	ErrGap = errors.New("ratestore: changes were dropped before they were read")
)

// ErrUncertain is matched by the error of a call that changed state when
// the backend cannot tell whether the change was stored (a commit that
// failed while or after writing, a reply lost on the way back). The change
// stands where the backend decides, and later calls count it: a caller
// must not retry the call, which would count it twice.
//
// An error that does not match ErrUncertain from a call that changes state
// (AllowN, Record, Reset, Update) means the change was not made, and the
// call may be retried.
var ErrUncertain = errors.New("the change may or may not be on disk")
