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

// Recovery reports what a store's Open dropped from its logs: a last record
// it could not read (Tail), and, when the caller asked it to recover
// rather than refuse, damaged records and the end of a file cut short.
type Recovery struct {
	File    string // the log
	Offset  int64  // where the first damaged or dropped bytes start
	Records uint64 // how many records (commits) are missing, when known
	Bytes   int64  // how many bytes of the log were skipped
	// Tail: the last record could not be read and was dropped: a write a
	// crash cut short (never acknowledged) or a damaged record; the two
	// look alike.
	Tail bool
	// Truncated: the file ends inside the log; an unknown number of
	// records after the end are gone.
	Truncated bool
}
