package keystore

import (
	"context"
	"time"

	"github.com/ratestore/ratestore/pricing"
)

// Records are the records of the batch that charges a request, where a
// Recorder writes.
type Records interface {
	Put(key, value []byte) error
	Delete(key []byte) error
}

// A Recorder writes what a finished request leaves on record (an entry
// of a spend ledger, say) in the batch that charges the request
// (Admission.FinishWith), so that both are stored by one commit: no
// write of their own, and after a crash both or neither.
type Recorder interface {
	// Record writes to w. now is the batch's instant. It is called last
	// in the batch, once the request is charged, and at most once.
	Record(w Records, now time.Time) error
}

// FinishWith is FinishSpend, with rec writing its record of the request
// in the same batch. rec is not called when the request cannot be
// charged (finished already, its key deleted).
func (a *Admission) FinishWith(ctx context.Context, tokens int64, cost pricing.USD, rec Recorder) (Usage, error) {
	return a.finish(ctx, tokens, cost, rec)
}
