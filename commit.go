package ratestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/storage"
)

// generation is one commit, open while calls add changes to it and then
// written by the committer. done is closed when it is on disk (or failed,
// with err set before done is closed).
type generation struct {
	seq  uint64
	done chan struct{}
	err  error
}

// committer writes dirty states. It runs in one goroutine, so commits never
// overlap and generations complete in order.
type committer struct {
	gen     atomic.Pointer[generation] // the open generation
	durable atomic.Uint64              // the newest generation on disk

	// batchMu makes an Update's changes land in one commit: Update holds
	// it for reading while its function runs, the committer for writing
	// from the swap of the generation to the end of its sweep, so that no
	// batch has some of its changes swept and others left for the next
	// commit.
	batchMu sync.RWMutex

	records records // records written and not yet committed

	kick    chan struct{} // wakes the committer to commit now; buffered, 1
	closing chan struct{} // closed by Close: commit what is left and exit
	exited  chan struct{} // closed when the committer has exited
	exitErr error         // the final commit's error, read after exited

	// carried is set while changes of a failed, uncertain commit wait in
	// memory for a later one: a commit that then fails cannot be undone
	// (see rollback). Touched only by the committer.
	carried bool
	// sweptAhead is set when the last commit's sweep took changes made in
	// the generation after its own (see commit): some of the next
	// generation's callers then have their change in that commit, not in
	// the next one, which therefore cannot be undone either. Touched only
	// by the committer.
	sweptAhead bool

	stats commitStats // what DB.Stats reports of the commits

	// Buffers reused by every commit; touched only by the committer.
	ops   []storage.Op
	arena []byte
	swept []string // the keys (joinKey) of the states in the commit
}

// commitChunk bounds one backend transaction when a commit is too large
// for one: badger refuses transactions above a size derived from its
// memtable, and a commit after a long Async interval can hold many keys.
// States are independent per key, so a group may then span several
// transactions as long as each key's write is atomic and the whole group
// is synced before anyone is told it is durable. (A Batch loses its
// all-or-none promise in that case; see DB.Update.)
const commitChunk = 4096

func (db *DB) startCommitter(interval time.Duration) {
	db.gen.Store(&generation{seq: 1, done: make(chan struct{})})
	db.kick = make(chan struct{}, 1)
	db.closing = make(chan struct{})
	db.exited = make(chan struct{})
	go db.runCommitter(interval)
}

func (db *DB) runCommitter(interval time.Duration) {
	defer close(db.exited)
	var tick <-chan time.Time
	if db.async {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-db.kick:
		case <-tick:
		case <-db.closing:
			db.exitErr = db.commit()
			// No change can join the generation opened by that commit (Close
			// has passed its barrier), so it is complete as it is: release
			// any Flush waiting on it.
			last := db.gen.Load()
			last.err = db.exitErr
			close(last.done)
			return
		}
		db.commit()
	}
}

// stopCommitter makes the committer write what is left, waits for it to
// exit, and returns the error of that last commit.
func (db *DB) stopCommitter() error {
	close(db.closing)
	<-db.exited
	return db.exitErr
}

// wake asks the committer to start a commit. It never blocks: one pending
// wake-up is enough, as a commit takes every change made before it starts.
func (db *DB) wake() {
	select {
	case db.kick <- struct{}{}:
	default:
	}
}

// commit closes the open generation, writes every dirty state, syncs, and
// tells the waiters of that generation. It does so in three steps: sweep
// takes the changes out of memory, write puts them in the store and syncs,
// and settle decides the commit's outcome (durable, undone or uncertain)
// and makes memory agree with it.
//
// Why a change made during a commit is never lost or reported early: a call
// marks its entry dirty and reads the open generation under its shard lock.
// The generation is swapped before any shard is swept, so a call that read
// the old generation either marked its entry before that shard's sweep (and
// is written now) or read the swap; one that read the new generation waits
// for the next commit, which takes whatever this one did not.
//
// A call that read the new generation before its shard's sweep has its
// change written by this commit, one early, and still waits for the next:
// it is never told early, but a failed commit holding such a change ("ahead")
// cannot be undone (its caller may be told the next commit's success), nor
// can the next one (its caller's change is not in it): both are uncertain
// (see rollback).
func (db *DB) commit() error {
	old, sw := db.sweep()
	if db.readOnly {
		// What reads changed in passing (an idle state deleted, a state
		// clamped to the clock: see Options.ReadOnly) stays in memory,
		// clean, as if written; a reload gives the same answers.
		sw.ops = sw.ops[:0]
	}
	start := time.Now()
	applied, err := db.write(sw.ops)
	err = db.settle(old.seq, sw, applied, err)
	db.sweptAhead = sw.ahead
	if len(sw.ops) > 0 {
		db.stats.record(len(sw.ops), time.Since(start), err)
	}
	// The waiters are told last, so that one woken sees memory settled and
	// the commit counted in Stats.
	old.err = err
	close(old.done)
	db.recycle(sw)
	return err
}

// sweptChanges is what a commit's sweep took out of memory.
type sweptChanges struct {
	ops   []storage.Op // the writes: the states, then the records
	arena []byte       // holds the keys and values of the states' ops
	keys  []string     // the keys (joinKey) of the states swept
	ahead bool         // a change of the generation after the commit's own is swept
}

// sweep opens the next generation and takes every dirty state and record
// out of memory, returning the generation it closed and what it took.
//
// No Update runs from the swap of the generation to the end of the sweep,
// so an Update's changes are all in this commit or all in the next.
func (db *DB) sweep() (*generation, sweptChanges) {
	db.batchMu.Lock()
	defer db.batchMu.Unlock()
	old := db.gen.Load()
	db.gen.Store(&generation{seq: old.seq + 1, done: make(chan struct{})})

	sw := sweptChanges{ops: db.ops[:0], arena: db.arena[:0], keys: db.swept[:0]}
	now := db.now()
	for i := range db.shards {
		db.sweepShard(&db.shards[i], old.seq, now, &sw)
	}
	sw.ops = db.records.sweep(sw.ops)
	return old, sw
}

// sweepShard appends an op for every dirty entry of sh to sw and marks the
// entries clean. seq is the generation being committed: an entry marked
// in a later one is swept ahead (see commit).
//
// A state back at its initial value at now (see dropIfIdle) is a delete,
// and a delete of a key the store holds nothing of (entry.stored false) is
// no op at all: a key used once and idle before its commit, or reset
// before it was ever stored, costs the committer nothing. Whatever the
// commit's outcome, the store then holds what memory says, nothing, so
// the entry need not be retried (redirty) nor undone (rollback). A put
// marks the key stored, for good: a later delete must be written, and
// must be retried if its commit fails.
func (db *DB) sweepShard(sh *shard, seq uint64, now int64, sw *sweptChanges) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, j := range sh.dirty {
		e := &sh.slots[j]
		e.dirty = false
		if e.st != nil && e.idleAt <= now {
			e.st = nil
		}
		if e.st == nil && !e.stored {
			continue
		}
		e.stored = true
		sw.ahead = sw.ahead || e.gen > seq
		kstart := len(sw.arena)
		sw.arena = appendStoreKey(sw.arena, e.sk)
		key := sw.arena[kstart:len(sw.arena):len(sw.arena)]
		var val []byte
		if e.st != nil {
			vstart := len(sw.arena)
			sw.arena = e.st.AppendEncode(sw.arena)
			val = sw.arena[vstart:len(sw.arena):len(sw.arena)]
		}
		sw.ops = append(sw.ops, storage.Op{Key: key, Value: val})
		sw.keys = append(sw.keys, e.sk)
	}
	sh.dirty = sh.dirty[:0]
}

// write applies ops to the store and syncs it. When err is set, applied
// reports whether some of ops may have reached the store anyway: they did
// not only if the error says nothing was written (storage.ErrNotApplied,
// storage.ErrTooBig) and no earlier part of a split commit was written.
func (db *DB) write(ops []storage.Op) (applied bool, err error) {
	if len(ops) == 0 {
		return false, nil
	}
	// In key order, bbolt's cursor walks its tree forward instead of
	// seeking from the root for every put, and pages fill in order.
	slices.SortFunc(ops, func(a, b storage.Op) int { return bytes.Compare(a.Key, b.Key) })
	err = db.store.Commit(ops)
	if errors.Is(err, storage.ErrTooBig) {
		applied, err = db.writeInParts(ops)
	}
	if err == nil || !errors.Is(err, storage.ErrNotApplied) && !errors.Is(err, storage.ErrTooBig) {
		applied = true
	}
	if err == nil {
		err = db.store.Sync()
	}
	return applied, err
}

// writeInParts commits ops, too large for one backend transaction, in
// parts of commitChunk ops, and stops at the first part that fails.
// applied reports whether a part before the failed one was committed.
//
// The states go first: a crash between two parts then keeps a Batch's
// usage and loses its records, which may over-count (a legacy merge done
// twice) but never drops usage.
func (db *DB) writeInParts(ops []storage.Op) (applied bool, err error) {
	slices.SortStableFunc(ops, func(a, b storage.Op) int {
		switch sa, sb := isState(a.Key), isState(b.Key); {
		case sa == sb:
			return 0
		case sa:
			return -1
		}
		return 1
	})
	for start := 0; start < len(ops); start += commitChunk {
		if start > 0 {
			applied = true // the parts before this one
		}
		if err = db.store.Commit(ops[start:min(start+commitChunk, len(ops))]); err != nil {
			return applied, err
		}
	}
	return applied, nil
}

// commitOutcome is what a commit left on disk, and so what its callers
// are told.
type commitOutcome int

const (
	// commitDurable: every change swept is in the store and synced.
	commitDurable commitOutcome = iota
	// commitUndone: the commit failed before writing anything, and its
	// changes were undone in memory too (see rollback), so memory and disk
	// agree that nothing changed and its callers may retry.
	commitUndone
	// commitUncertain: the commit failed and its changes may or may not be
	// on disk, or it could not be undone. They stay in memory and later
	// commits retry them; its callers get ErrUncertain.
	commitUncertain
)

// outcome decides how a commit whose write returned applied and err ends.
// A failed commit is undone only if nothing reached the store, neither it
// nor the one before swept changes ahead (see commit), and rollback
// succeeds; rollback is tried only then, as it changes memory.
func (db *DB) outcome(sw sweptChanges, applied bool, err error) commitOutcome {
	switch {
	case err == nil:
		return commitDurable
	case !applied && !sw.ahead && !db.sweptAhead && db.rollback(sw.keys):
		return commitUndone
	}
	return commitUncertain
}

// settle decides the outcome of the commit of generation seq and makes
// memory agree with it: a durable commit marks seq durable and ends the
// records' flight; an undone one was undone by rollback; an uncertain one
// makes its states and records dirty again, for the next commit to retry.
// It returns the error the commit's callers get.
func (db *DB) settle(seq uint64, sw sweptChanges, applied bool, err error) error {
	switch db.outcome(sw, applied, err) {
	case commitDurable:
		db.records.landed(true)
		db.durable.Store(seq)
		db.carried = false
		return nil
	case commitUndone:
		err = fmt.Errorf("ratestore: commit of %d states and records failed before writing; nothing was changed: %w", len(sw.ops), err)
		db.log.Error("ratestore: commit failed; its changes were undone", "err", err)
		return err
	default: // commitUncertain
		err = fmt.Errorf("ratestore: commit of %d states and records: %w: %w", len(sw.ops), ErrUncertain, err)
		db.log.Error("ratestore: commit failed; changes stay in memory and will be retried", "err", err)
		db.records.landed(false)
		db.redirty(sw.keys)
		db.carried = true
		return err
	}
}

// recycle keeps the buffers of sw for the next commit, so that commits of
// a steady size allocate none (regrowing them made every large commit copy
// its ops and arena several times over, in fresh pages). Buffers grown past
// 4 MiB by a burst are dropped at the first commit that uses less than a
// quarter of them. It clears the keys so those of evicted entries can be
// collected.
func (db *DB) recycle(sw sweptChanges) {
	clear(sw.keys)
	if cap(sw.arena) > 4<<20 && len(sw.arena) < cap(sw.arena)/4 {
		db.ops, db.arena, db.swept = nil, nil, nil
		return
	}
	db.ops, db.arena, db.swept = sw.ops[:0], sw.arena[:0], sw.keys[:0]
}

// ErrUncertain is matched by the error of a call whose change may or may
// not be on disk: the commit holding it failed after it may have reached
// the store (a log record written whose fdatasync failed, a bbolt
// transaction that failed while or after writing, a commit split in parts
// of which some were applied). The change stands in memory, where every
// later call counts it, and later commits retry it (Close too): a caller
// must not retry the call, which would count it twice. If the process
// stops before a later commit succeeds, the change is on disk after a
// restart, or not, whole either way.
//
// An error that does not match ErrUncertain from a call that changes state
// (AllowN, Record, Reset, Update) means the change was not made: a commit
// that failed before writing anything is undone in memory too, so memory
// and disk agree that nothing changed and the call may be retried.
var ErrUncertain = backend.ErrUncertain

// rollback undoes in memory a commit that applied nothing to the store,
// whose states are named by swept: their entries are dropped, and read
// back from the store, which holds what they replaced, when next used; its
// records are forgotten. It does so only if nothing else has changed
// those states or records since the sweep, and they carry no change from
// an earlier failed commit (carried): undoing the commit would then undo
// more than it held. The committer does not call it when the commit, or
// the one before, swept changes of the generation after its own (see
// commit). It reports whether it rolled back; if not, the commit
// is uncertain. All shard locks and the records' lock are held meanwhile,
// so no call sees the commit half undone. Only the committer calls it.
func (db *DB) rollback(swept []string) bool {
	if db.carried {
		return false
	}
	for i := range db.shards {
		db.shards[i].mu.Lock()
	}
	defer func() {
		for i := range db.shards {
			db.shards[i].mu.Unlock()
		}
	}()
	rs := &db.records
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for k := range rs.flight {
		if _, ok := rs.dirty[k]; ok {
			return false
		}
	}
	slots := make([]int, len(swept))
	for n, sk := range swept {
		at := db.locateKey(sk)
		name, key := splitKey(sk)
		i := db.shards[at.idx].find(at.h, name, key)
		if i < 0 || db.shards[at.idx].slots[i].dirty {
			return false // changed since the sweep (or, impossibly, gone)
		}
		slots[n] = i
	}
	for n, sk := range swept {
		// Entries never move while their shard is locked but for an
		// insertion: the slots found above still hold them.
		db.shards[db.locateKey(sk).idx].remove(slots[n])
	}
	rs.flight = nil
	return true
}

// isState reports whether a store key is a limiter state's.
func isState(key []byte) bool { return bytes.HasPrefix(key, []byte(statePrefix)) }

// redirty marks the entries of a failed commit, named by their keys, dirty
// again, so that the next commit retries them with their latest state. They
// are still in memory: an entry is evicted only once its latest change is
// durable, and a failed commit made nothing durable.
func (db *DB) redirty(sks []string) {
	for _, sk := range sks {
		at := db.locateKey(sk)
		sh := &db.shards[at.idx]
		sh.mu.Lock()
		name, key := splitKey(sk)
		if i := sh.find(at.h, name, key); i >= 0 {
			sh.markDirty(i, sh.slots[i].gen)
		}
		sh.mu.Unlock()
	}
}

// Flush writes every change made so far and returns once it is on disk. In
// Sync mode every call that changed a state already waited for that, so
// Flush only matters after Async calls; it is safe in both.
func (db *DB) Flush(ctx context.Context) error {
	if db.closed.Load() {
		return ErrClosed
	}
	g := db.gen.Load()
	db.wake()
	return db.wait(ctx, g)
}

// wait blocks until generation g is on disk, ctx is done, or the DB closes
// (whose final commit completes g too).
func (db *DB) wait(ctx context.Context, g *generation) error {
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return ctx.Err() // the change stands; only the wait ends
	}
}
