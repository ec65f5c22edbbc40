package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ratestore/ratestore/backend"
)

// DefaultRetention is how long entries are kept when Options.Retention
// is zero. Rollups are kept for good.
const DefaultRetention = 90 * 24 * time.Hour

// ErrInvalid is matched by the errors of bad queries, entries and
// options.
var ErrInvalid = backend.ErrInvalid

// ErrReadOnly is matched by the writes of a Ledger opened ReadOnly, or
// on a database opened read-only. It matches backend.ErrReadOnly.
var ErrReadOnly = fmt.Errorf("ledger: %w", backend.ErrReadOnly)

// Options configure a Ledger.
type Options struct {
	// Retention is how long entries are kept, in whole days (rounded
	// up); 0: DefaultRetention. Rollups are kept for good.
	Retention time.Duration
	// ReadOnly opens the ledger for queries only: nothing is written, not
	// even the retention's drops or a compaction, and no background work
	// runs (a CLI reading a database). A ledger on a database opened
	// read-only (ratestore.Options.ReadOnly) is read-only whatever this
	// says.
	ReadOnly bool
	// Export, if set, is sent every entry once its commit returned.
	Export Exporter
	// Log receives the ledger's warnings; nil: slog.Default().
	Log *slog.Logger
	// After is time.After on the clock of the database's Options.Now, for
	// the wait before refusals are written (tests); nil: time.After.
	After func(d time.Duration) <-chan time.Time
}

// Ledger keeps a database's spend ledger: an entry per finished request,
// and rollups per (day, key) and (day, team) with a row per model. Its
// methods are safe for concurrent use.
//
// Each Ledger writes as a writer of its own, an id drawn at Open: its
// entries and rollups are keyed by it, so several processes sharing a
// Redis never write the same record, and a writer's rollup is the sum of
// its own entries, written in the same batches. Queries add the writers
// up.
type Ledger struct {
	db     backend.Store
	opts   Options
	log    *slog.Logger
	writer string // 16 hex digits
	keep   int    // days of entries kept
	// chunkMax is how many entries a chunk holds: 16 on a store that only
	// this process writes (a DB, whose writes land in the order they are
	// made), 1 on a shared one, whose batches may commit in another order
	// than they wrote: there, two batches never write the same record.
	chunkMax uint32
	// shared: other processes write the store too, and a batch may fail
	// with a conflict after the next has been made. A rollup is then
	// written as the value the batch reads plus the request, not from the
	// cache, and the day's summaries are made from the stored rollups.
	shared bool

	mu      sync.Mutex
	w       writing
	rollups map[rollupID]*rollup
	changed []changed // cached rollups the batch under way changed (see addAt)
	pending []span    // blocks of chunks ready to be compacted
	closed  []day     // days to summarize
	buf     []byte
	// refusals are counted, not yet written (see Refused).
	refusals map[refusalID]int64
	closing  bool // Close has begun: the months of the days summarized are left too

	wake     chan struct{}
	refusing chan struct{} // a first refusal is waiting: flushRefusals' timer starts
	stop     chan struct{}
	done     chan struct{} // background has ended
	flushed  chan struct{} // flushRefusals has ended
	once     sync.Once
}

// Open returns the ledger kept in db, which must stay open while the
// Ledger is used. Open it once per database and process: two Ledgers of
// one process on one database write as two writers, which is correct
// but doubles the rollups.
func Open(db backend.Store, opts Options) (*Ledger, error) {
	if db == nil {
		return nil, fmt.Errorf("ledger: open: nil database: %w", ErrInvalid)
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("ledger: open: retention %v: want >= 0: %w", opts.Retention, ErrInvalid)
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if backend.ReadOnly(db) {
		opts.ReadOnly = true
	}
	var id [8]byte
	rand.Read(id[:])
	l := &Ledger{
		db: db, opts: opts, log: opts.Log, writer: hex.EncodeToString(id[:]),
		keep:    int((opts.Retention + 24*time.Hour - 1) / (24 * time.Hour)),
		rollups: make(map[rollupID]*rollup), refusals: make(map[refusalID]int64),
		wake: make(chan struct{}, 1), refusing: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), flushed: make(chan struct{}),
	}
	l.w.today = -1
	l.chunkMax = 16
	if shared, err := db.Reread(context.Background(), [][]byte{[]byte(dayPrefix)}); err != nil || len(shared) > 0 {
		// A chunk of one entry: batches on a shared store may fail with a
		// conflict, or commit in another order than they wrote, and a
		// chunk of several would then be stored without an entry put
		// before it, or with one that was taken back.
		l.chunkMax, l.shared = 1, true
	}
	if opts.ReadOnly {
		close(l.done)
		close(l.flushed)
		return l, nil
	}
	go l.background()
	go l.flushRefusals()
	return l, nil
}

// after is Options.After, or time.After.
func (l *Ledger) after(d time.Duration) <-chan time.Time {
	if l.opts.After != nil {
		return l.opts.After(d)
	}
	return time.After(d)
}

// Close writes the refusals counted, compacts what the ledger wrote and
// stops its background work, waiting for it until ctx ends. It does not
// close the database, which must be open.
func (l *Ledger) Close(ctx context.Context) error {
	l.once.Do(func() { close(l.stop) })
	for _, done := range []chan struct{}{l.done, l.flushed} {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if l.opts.ReadOnly {
		return nil
	}
	if err := l.Flush(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	l.closing = true
	l.sealSpan()
	if l.w.today >= 0 {
		l.closed = append(l.closed, l.w.today) // this writer writes no more
	}
	l.mu.Unlock()
	return l.Compact(ctx)
}

// background compacts blocks a few seconds after they fill (see compact),
// and drops the entries past the retention at start and every hour.
func (l *Ledger) background() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.stop
		cancel()
	}()
	l.sweep(ctx)
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			l.sweep(ctx)
		case <-l.wake:
			select {
			case <-time.After(settle):
			case <-l.stop:
				return
			}
			err := l.Compact(ctx)
			if errors.Is(err, backend.ErrClosed) {
				return // the database closed before the Ledger: nothing left to do
			}
			if err != nil && ctx.Err() == nil {
				l.log.Warn("ledger: compacting entries failed (they stay readable; the next compaction retries)", slog.String("error", err.Error()))
			}
		}
	}
}

// settle is how long a full block waits before compaction, so that the
// batches still writing its last entries (on a shared store, where a
// batch's writes are stored when it commits) have committed.
const settle = 2 * time.Second

func (l *Ledger) sweep(ctx context.Context) {
	if err := l.DropExpired(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, backend.ErrClosed) {
		l.log.Warn("ledger: dropping expired entries failed (the next sweep retries)", slog.String("error", err.Error()))
	}
}
