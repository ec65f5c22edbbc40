package audit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ratestore/ratestore/backend"
)

// sweepBatch is how many events one commit of a sweep drops: a bounded
// batch (two deletes an event) and a bounded list in memory, however many
// events have expired.
const sweepBatch = 500

// Sweep drops the events older than the retention, sweepBatch of them a
// commit, and returns how many it dropped. It reads only those: they are
// the end of the log, from the retention's start on, one ScanFrom a
// batch. The background sweep calls it (Options.SweepInterval); several
// Logs sweeping one shared store at once drop each event once or twice,
// which is the same.
func (l *Log) Sweep(ctx context.Context) (int, error) {
	if l.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	start := timeKey(eventPrefix, l.db.Now().Add(-l.opts.Retention))
	n := 0
	for {
		events, err := l.expired(ctx, start)
		if err != nil || len(events) == 0 {
			return n, err
		}
		err = l.db.Update(ctx, nil, func(b backend.Batch) error {
			for _, d := range events {
				if err := b.Delete(d.key); err != nil {
					return err
				}
				if d.byTarget != nil {
					if err := b.Delete(d.byTarget); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return n, err
		}
		n += len(events)
		if len(events) < sweepBatch {
			return n, nil
		}
	}
}

// expiredEvent is the records of an event a sweep drops: its own, and
// its target's copy (nil when it has no target).
type expiredEvent struct{ key, byTarget []byte }

// expired returns the records of up to sweepBatch events from start on.
// An event whose value is not one Record wrote is dropped all the same,
// and logged: its target's copy, if any, is then left, to be read as that
// target's (a page of it fails with ErrCorrupt no more than it would).
func (l *Log) expired(ctx context.Context, start []byte) ([]expiredEvent, error) {
	var out []expiredEvent
	err := l.db.ScanFrom(ctx, []byte(eventPrefix), start, func(k, v []byte) error {
		if len(out) == sweepBatch {
			return errFull
		}
		d := expiredEvent{key: bytes.Clone(k)}
		pos, ok := parsePosition(k[len(eventPrefix):])
		e, err := decode(k, pos, v)
		switch {
		case !ok || err != nil:
			l.opts.Log.Warn("audit: dropping a corrupt record past the retention", slog.String("key", string(k)))
		case e.Target != "":
			d.byTarget = pos.key(targetPrefix(e.Target))
		}
		out = append(out, d)
		return nil
	})
	if errors.Is(err, errFull) {
		err = nil
	}
	return out, err
}

// background sweeps at Open and every Options.SweepInterval until Close.
func (l *Log) background() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.stop
		cancel()
	}()
	tick := time.NewTicker(l.opts.SweepInterval)
	defer tick.Stop()
	for {
		_, err := l.Sweep(ctx)
		if err != nil && ctx.Err() == nil && !errors.Is(err, backend.ErrClosed) {
			l.opts.Log.Warn("audit: dropping the events past the retention failed (the next sweep retries)", slog.String("error", err.Error()))
		}
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
	}
}
