package ratestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/strategies"
)

// Update runs fn with a Batch, and returns once every change fn made
// through it is as durable as the DB's mode promises: on disk in Sync
// mode, at once in Async mode. It is how a package built on a DB (the key
// store) makes one request's changes to several states and records
// together: they join one commit, so after a crash either all of them are
// on disk or none is, and the caller waits for one fsync, shared with every
// concurrent caller, however many changes it made.
//
// A Batch is not a transaction. Each change is made, and seen by every
// other caller, the moment it is made; nothing is rolled back when fn
// returns an error (the changes made stand, and Update still waits for
// them). Callers that must check several limits before taking from any of
// them ask first (Limiter.PeekN) under a lock of their own.
//
// A failed commit fails Update as it fails Limiter.AllowN: with an error
// matching ErrUncertain when the batch's changes may be on disk (they stand
// in memory and are retried: do not run the batch again), with another
// error when they were not made (all of them undone in memory).
//
// The committer does not start a commit while an fn runs, so fn must be
// short: decisions and records, no I/O, no waiting for other goroutines,
// and no nested Update (which would wait for itself). ctx bounds only the
// wait for the commit, as for Limiter.AllowN.
//
// One exception to "all or none": a commit too large for one badger
// transaction (many thousands of changes in one Async interval) is split
// into several, limiter states first, then records, and a crash between
// them can keep a batch's states without its records. Callers that need
// an order across commits (write this, then that) call Flush between two
// Updates.
//
// locks is for the backend contract (backend.Store), and a DB ignores it:
// this process is its only writer, and callers that check before they
// take order the two with locks of their own.
//
// On a DB opened read-only fn runs as on any other, and its Batch reads
// (PeekN, Inspect, Get); its changes fail with ErrReadOnly, changing
// nothing.
func (db *DB) Update(ctx context.Context, locks []string, fn func(backend.Batch) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.batchMu.RLock()
	if db.closed.Load() {
		db.batchMu.RUnlock()
		return ErrClosed
	}
	b := &batch{db: db}
	err := fn(b)
	b.db = nil // a Batch used after fn returned would miss the commit
	db.batchMu.RUnlock()
	if b.gen == nil {
		return err
	}
	return errors.Join(err, db.committed(ctx, b.gen))
}

// UpdateCached is Update: a DB's values are in memory, and only this
// process changes them, so there is nothing to save and nothing to check.
func (db *DB) UpdateCached(ctx context.Context, locks []string, fn func(backend.Batch) error) error {
	return db.Update(ctx, locks, fn)
}

// batch makes changes for Update (a DB's backend.Batch): limiter calls
// that do not wait for their commit, and records. Its methods are those of
// Limiter, with the limiter as first argument, and act at once; only the
// wait is shared. It is valid only during the call of fn it was given to,
// and is not safe for concurrent use.
type batch struct {
	db  *DB
	gen *generation // the generation every change joins; nil: no change yet
}

// open checks that the batch is still open.
func (b *batch) open() error {
	if b.db == nil {
		return fmt.Errorf("ratestore: batch used after its Update returned: %w", ErrInvalid)
	}
	return nil
}

// use checks that the batch is still open and returns l as a limiter of
// its DB.
func (b *batch) use(bl backend.Limiter) (*Limiter, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	l, ok := bl.(*Limiter)
	switch {
	case !ok || l == nil:
		return nil, fmt.Errorf("ratestore: batch: %T is not a limiter of a DB: %w", bl, ErrInvalid)
	case l.db != b.db:
		return nil, fmt.Errorf("ratestore: batch: limiter %q belongs to another DB: %w", l.name, ErrInvalid)
	}
	return l, nil
}

// joined notes that a change joined generation g (nil: no change). Update
// holds the committer off, so every change joins the same one.
func (b *batch) joined(g *generation) {
	if g != nil {
		b.gen = g
	}
}

// Now is the instant of the batch's next call: each call reads the DB's
// clock when it is made.
func (b *batch) Now() time.Time { return b.db.Now() }

// PeekN is l.PeekN: it changes nothing, so it needs no batch, and sees
// the batch's changes, which are made at once. Like the batch's changes,
// it never waits for room in the table (noWait): the commit that would
// make room waits for the batch.
func (b *batch) PeekN(bl backend.Limiter, key string, n int64) (Result, error) {
	l, err := b.use(bl)
	if err != nil {
		return Result{}, err
	}
	return l.PeekN(noWait, key, n)
}

// Inspect is l.Inspect, as PeekN is l.PeekN.
func (b *batch) Inspect(bl backend.Limiter, key string, fn func(st strategies.State, now int64) error) error {
	l, err := b.use(bl)
	if err != nil {
		return err
	}
	return l.Inspect(noWait, key, fn)
}

// Get is DB.Get: it sees the batch's Puts and Deletes.
func (b *batch) Get(key []byte) ([]byte, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	return b.db.Get(context.Background(), key)
}

// Reread is DB.Reread: there is nothing to read again.
func (b *batch) Reread(keys [][]byte) ([][]byte, error) { return nil, b.open() }

// Announce does nothing: only this process changes a DB, so no other
// process needs telling. It checks topic.
func (b *batch) Announce(topic string, msg []byte) error {
	if err := b.open(); err != nil {
		return err
	}
	return backend.ValidTopic(topic)
}

// Prefetch does nothing: a DB's states and records are read in memory.
func (b *batch) Prefetch(records [][]byte, key string, limiters ...backend.Limiter) error {
	return b.open()
}

// AllowN is l.AllowN(ctx, key, n) without the wait.
func (b *batch) AllowN(l backend.Limiter, key string, n int64) (r Result, err error) {
	err = b.call(l, key, strategies.Call{N: n}, &r)
	return r, err
}

// Record is l.Record(ctx, key, n) without the wait.
func (b *batch) Record(l backend.Limiter, key string, n int64) (r Result, err error) {
	err = b.call(l, key, strategies.Call{N: n, Record: true}, &r)
	return r, err
}

func (b *batch) call(bl backend.Limiter, key string, c strategies.Call, res *Result) error {
	l, err := b.use(bl)
	if err != nil {
		return err
	}
	return l.do(noWait, key, c, res, b)
}

// Reset is l.Reset(ctx, key) without the wait.
func (b *batch) Reset(bl backend.Limiter, key string) error {
	l, err := b.use(bl)
	if err != nil {
		return err
	}
	g, err := l.reset(noWait, key)
	b.joined(g)
	return err
}

// Modify replaces key's state under l by what fn returns, for the changes
// a strategy offers besides its decisions: strategies.RollingWindow.Merge
// (usage at an instant in the past) and Refund (usage given back). fn gets
// the key's current state (a fresh one if it has none), which it may change
// in place and return, and the instant of the call in Unix nanoseconds, as
// Call.Now. An error from fn changes nothing, provided fn changed nothing
// before returning it. Modify returns what Peek says after the change.
func (b *batch) Modify(bl backend.Limiter, key string, fn func(st strategies.State, now int64) (strategies.State, error)) (r Result, err error) {
	l, err := b.use(bl)
	if err != nil {
		return Result{}, err
	}
	if err := backend.ValidKey(key); err != nil {
		return Result{}, err
	}
	db := l.db
	if db.readOnly {
		return Result{}, l.writeRefused(key)
	}
	now := db.now()
	sh, i, err := l.entry(noWait, key, now)
	if err != nil {
		return Result{}, err
	}
	now = db.see(sh, i, l.d, now)
	e := &sh.slots[i]
	st := e.st
	if st == nil {
		st = l.d.NewState()
	}
	st, err = fn(st, now)
	if err == nil {
		if st == nil {
			err = errors.New("ratestore: Modify: the function returned a nil state")
		} else {
			r, err = l.d.Decide(st, strategies.Call{Now: now, DryRun: true})
		}
	}
	if err != nil {
		sh.mu.Unlock()
		return Result{}, fmt.Errorf("ratestore: limiter %q: key %q: modify: %w", l.name, key, err)
	}
	e.idleAt = sat.Add(now, int64(r.ResetAfter))
	if r.ResetAfter == 0 {
		st = nil // back at its initial value: delete rather than store
	}
	e.st = st
	b.joined(db.changed(sh, i))
	return r, nil
}

// Put stores value at key in the DB's records (see DB.Get), in the batch's
// commit. key is 1 to MaxKeyLen bytes and must not start with "s/", the
// prefix of limiter states.
func (b *batch) Put(key, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return b.write(key, value)
}

// Delete removes the record at key, if any, in the batch's commit.
func (b *batch) Delete(key []byte) error { return b.write(key, nil) }

func (b *batch) write(key, value []byte) error {
	if err := b.open(); err != nil {
		return err
	}
	if err := validRecordKey(key); err != nil {
		return err
	}
	if b.db.readOnly {
		return fmt.Errorf("ratestore: record %.40q: %w", key, ErrReadOnly)
	}
	g, err := b.db.records.put(b.db, string(key), value)
	b.joined(g)
	return err
}

// validRecordKey checks the key of a record.
func validRecordKey(key []byte) error {
	switch {
	case len(key) == 0 || len(key) > MaxKeyLen:
		return fmt.Errorf("ratestore: record key of %d bytes: want 1 to %d: %w", len(key), MaxKeyLen, ErrInvalid)
	case strings.HasPrefix(string(key), statePrefix):
		return fmt.Errorf("ratestore: record key %.40q: %q is the prefix of limiter states: %w", key, statePrefix, ErrInvalid)
	}
	return nil
}

// Get returns a copy of the record stored at key, or nil if there is none.
// It sees every Put and Delete made before it, committed or not.
//
// Records are the small values an application keeps beside its limiter
// states, in the same database and the same commits (Batch.Put): the key
// store keeps its API keys there. Their keys must not start with "s/",
// which holds the states.
func (db *DB) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if db.closed.Load() {
		return nil, ErrClosed
	}
	if err := validRecordKey(key); err != nil {
		return nil, err
	}
	if v, ok := db.records.get(string(key)); ok {
		return v, nil
	}
	v, err := db.store.Get(key)
	if err != nil {
		return nil, fmt.Errorf("ratestore: get record %.40q: %w", key, err)
	}
	return v, nil
}

// Scan calls fn with every record whose key starts with prefix, in key
// order, after writing every pending change, until fn returns an error,
// which Scan returns. The slices passed to fn are valid only during the
// call; fn may call the DB. prefix must be a valid record key (see Put).
// Changes made while Scan runs may or may not be seen.
func (db *DB) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	if err := validRecordKey(prefix); err != nil {
		return err
	}
	if err := db.Flush(ctx); err != nil {
		return err
	}
	return db.store.Scan(prefix, nil, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(k, v)
	})
}

// ScanFrom is Scan beginning at the first key >= start (nil: the first
// key with prefix). bbolt and badger seek to start: a page of n records
// costs O(n + log N).
func (db *DB) ScanFrom(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	if err := validRecordKey(prefix); err != nil {
		return err
	}
	if err := db.Flush(ctx); err != nil {
		return err
	}
	return db.store.Scan(prefix, start, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(k, v)
	})
}

// Changes returns no message: only this process changes a DB, so there is
// nothing it has not seen (see backend.Store.Changes).
func (db *DB) Changes(ctx context.Context, topic, after string, max int) ([][]byte, string, error) {
	if db.closed.Load() {
		return nil, "", ErrClosed
	}
	if err := backend.ValidTopic(topic); err != nil {
		return nil, "", err
	}
	if max < 1 {
		return nil, "", fmt.Errorf("ratestore: changes: max %d: want at least 1: %w", max, ErrInvalid)
	}
	return nil, after, ctx.Err()
}

// Reread returns nothing: only this process changes a DB's records (Open
// locks the database), so what it stored is what is stored. It is for the
// backend contract (backend.Store), where a shared store reads keys again.
func (db *DB) Reread(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	return nil, ctx.Err()
}

// RereadPrefix calls nothing, as Reread returns nothing.
func (db *DB) RereadPrefix(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	_, err := db.Reread(ctx, nil)
	return err
}

// Attach returns the value attached to db under key, calling open to make
// it the first time key is asked for; open's error is returned and nothing
// is attached. Packages built on a DB use it to keep one instance of
// themselves per database (the key store: its concurrency slots and the
// keys it holds in memory must not be split between two instances). key
// should be a value of an unexported type of the caller's package, as for
// context.WithValue.
//
// Attach on a nil *DB is an error matching ErrInvalid: it is the first
// call of a package opened on a DB (keystore.Open), which so reports a DB
// that failed to open rather than panic on it.
func (db *DB) Attach(key any, open func() (any, error)) (any, error) {
	if db == nil {
		return nil, fmt.Errorf("ratestore: nil DB: %w", ErrInvalid)
	}
	return db.attached.Get(key, open)
}
