package keystore

import (
	"context"
	"time"

	"github.com/ratestore/ratestore/pricing"
)

// Records are the records of the batch that charges a request, where a
// Recorder reads and writes.
type Records interface {
	Get(key []byte) ([]byte, error)
	Put(key, value []byte) error
	Delete(key []byte) error
}

// A Recorder writes what a finished request leaves on record (an entry
// of a spend ledger, say) in the batch that charges the request
// (Admission.FinishWith), so that both are stored by one commit: no
// write of their own, and after a crash both or neither.
type Recorder interface {
	// Record writes to w. now is the batch's instant. It is called last
	// in the batch, once the request is charged, and once, unless Discard
	// is called after it.
	Record(w Records, now time.Time) error
	// Discard takes back what Record did outside w, when the batch stored
	// nothing: on a shared store, another process had changed the key, and
	// the batch runs again, calling Record again.
	Discard()
}

// FinishWith is FinishSpend, with rec writing its record of the request
// in the same batch. rec is not called when the request cannot be
// charged (finished already, its key deleted).
func (a *Admission) FinishWith(ctx context.Context, tokens int64, cost pricing.USD, rec Recorder) (Usage, error) {
	return a.finish(ctx, tokens, cost, rec)
}
