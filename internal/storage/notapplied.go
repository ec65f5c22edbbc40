package storage

import "errors"

// ErrNotApplied is matched by an error of Store.Commit when the store knows
// that none of the ops was applied, and none ever will be: not in memory
// (Get returns what it did before), not on disk, not after a crash (no
// record of them will be replayed). A Commit that fails before it writes
// anything (a key it refuses, a closed store, a log append that failed
// with nothing of the record readable) wraps it, so that the engine can
// roll its own memory back and tell its callers that nothing changed.
// Any other Commit error, and any Sync error, means the ops may have been
// applied: the engine then reports ratestore.ErrUncertain. ErrTooBig implies
// it.
var ErrNotApplied = errors.New("nothing was applied")
