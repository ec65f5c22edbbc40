// Package dbcopy copies every stored record of a database into a new one,
// bolt to badger or badger to bolt, and verifies the copy record by
// record. It works through the engine's Export and Restore, so it copies
// records as they are stored, whatever they hold: limiter states, the key
// store's keys and the legacy usage still pending (which stays pending in
// the copy), the ledger's and the audit log's records.
package dbcopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/storage"
)

// Report says what Copy copied.
type Report struct {
	Records int   // records copied and verified
	Bytes   int64 // the bytes of their keys and values
}

// ErrMismatch is matched by the error of a Copy whose verification found
// the copy different from its source.
var ErrMismatch = errors.New("dbcopy: the copy differs from its source")

// Copy batches: at most copyBatchRecords records, and a batch is closed as
// soon as its keys and values reach copyBatchBytes. badger, with the 8 MiB
// memtables badgerstore sets, takes at most 13,105 entries and about 1.2 MB
// in one transaction, whichever comes first (a value of 1 KiB or more
// counts as a 12-byte pointer). A batch costs it at most 1,000 entries and
// about 270 KB. A batch that badger refuses all the same
// (storage.ErrTooBig: too large for one of its transactions, nothing
// applied) is split in two and retried.
const (
	copyBatchRecords = 1000
	copyBatchBytes   = 256 << 10
)

// Copy copies every record of src into dst, which must be empty, and then
// verifies the copy record by record: the same keys with the same values,
// in the same order. dst and src may have different backends: Copy is how a
// database moves from bolt to badger or back.
//
// Records are copied as they are stored: limiter states (the keys' token
// windows and request rates among them), API keys, their hash index and
// legacy usage still pending (it stays pending in the copy). A key's record
// holds its policy, every window's length and bucket included, so the copy
// enforces the same windows whatever keystore.Options its key store is
// opened with. Neither database may be used while Copy runs: a change to
// src would make the verification fail, and dst must hold no record and no
// limiter state (DB.Restore) when Copy starts, or Copy fails with an error
// matching ratestore.ErrInvalid that names dst's path. Do not open dst's
// key store (keystore.Open) before Copy: it reads the keys into memory when
// opened, and would not see the ones copied after.
//
// Records go over in batches (of 1,000 records, or fewer when large), each
// one atomic and durable; progress, if not nil, is called with the number
// of records copied so far after each. A Copy that fails may leave part of
// src in dst: remove dst and copy again. A verification that finds a
// difference fails with an error matching ErrMismatch that names the first
// key that differs, with its bytes outside printable ASCII hex-escaped.
func Copy(ctx context.Context, dst, src *ratestore.DB, progress func(records int)) (Report, error) {
	switch {
	case dst == nil || src == nil:
		return Report{}, fmt.Errorf("dbcopy: copy: nil database: %w", ratestore.ErrInvalid)
	case dst == src:
		return Report{}, fmt.Errorf("dbcopy: copy: %s onto itself: %w", dst.Path(), ratestore.ErrInvalid)
	}
	if progress == nil {
		progress = func(int) {}
	}
	if err := checkEmpty(ctx, dst); err != nil {
		return Report{}, err
	}
	var rep Report
	b := batcher{flush: func(recs []ratestore.Entry) error {
		if err := restore(ctx, dst, recs); err != nil {
			return err
		}
		rep.Records += len(recs)
		for _, r := range recs {
			rep.Bytes += int64(len(r.Key) + len(r.Value))
		}
		progress(rep.Records)
		return nil
	}}
	if err := b.run(ctx, src); err != nil {
		return rep, fmt.Errorf("dbcopy: copy %s to %s: %w", src.Path(), dst.Path(), err)
	}
	if err := verify(ctx, dst, src); err != nil {
		return rep, fmt.Errorf("dbcopy: copy %s to %s: verify: %w", src.Path(), dst.Path(), err)
	}
	return rep, nil
}

// errNotEmpty stops the scan of checkEmpty at the first record.
var errNotEmpty = errors.New("not empty")

// checkEmpty fails unless db holds no record.
func checkEmpty(ctx context.Context, db *ratestore.DB) error {
	err := db.Export(ctx, func(ratestore.Entry) error { return errNotEmpty })
	switch {
	case errors.Is(err, errNotEmpty):
		return fmt.Errorf("dbcopy: copy: the destination %s already holds records: copy only into a new database: %w",
			db.Path(), ratestore.ErrInvalid)
	case err != nil:
		return fmt.Errorf("dbcopy: copy: reading the destination %s: %w", db.Path(), err)
	}
	return nil
}

// restore writes recs into db, in one Restore, or in halves if the backend
// finds them too many for one transaction.
func restore(ctx context.Context, db *ratestore.DB, recs []ratestore.Entry) error {
	err := db.Restore(ctx, recs)
	if errors.Is(err, storage.ErrTooBig) && len(recs) > 1 {
		half := len(recs) / 2
		if err := restore(ctx, db, recs[:half]); err != nil {
			return err
		}
		return restore(ctx, db, recs[half:])
	}
	return err
}

// batcher collects the records of an Export, copied, into batches, and
// hands each to flush, which may keep it.
type batcher struct {
	recs  []ratestore.Entry
	size  int
	flush func([]ratestore.Entry) error
}

// run exports db through the batcher, then flushes the last batch.
func (b *batcher) run(ctx context.Context, db *ratestore.DB) error {
	if err := db.Export(ctx, b.add); err != nil {
		return err
	}
	return b.drain()
}

func (b *batcher) add(r ratestore.Entry) error {
	v := make([]byte, len(r.Key)+len(r.Value))
	copy(v, r.Key)
	copy(v[len(r.Key):], r.Value)
	b.recs = append(b.recs, ratestore.Entry{Key: v[:len(r.Key):len(r.Key)], Value: v[len(r.Key):]})
	b.size += len(v)
	if len(b.recs) >= copyBatchRecords || b.size >= copyBatchBytes {
		return b.drain()
	}
	return nil
}

func (b *batcher) drain() error {
	if len(b.recs) == 0 {
		return nil
	}
	recs := b.recs
	b.recs, b.size = make([]ratestore.Entry, 0, len(recs)), 0
	return b.flush(recs)
}

// verify compares the records of dst and src, in order, exporting both at
// once; the first difference is an error matching ErrMismatch.
func verify(ctx context.Context, dst, src *ratestore.DB) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &cursor{batches: make(chan []ratestore.Entry, 2), done: make(chan error, 1)}
	go func() {
		defer close(c.batches)
		b := batcher{flush: func(recs []ratestore.Entry) error {
			select {
			case c.batches <- recs:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
		c.done <- b.run(ctx, dst)
	}()
	n := 0
	err := src.Export(ctx, func(s ratestore.Entry) error {
		d, ok, err := c.next()
		switch {
		case err != nil:
			return fmt.Errorf("reading the copy: %w", err)
		case !ok:
			return mismatch(n, s.Key, "in the source, missing from the copy")
		case bytes.Compare(s.Key, d.Key) < 0:
			return mismatch(n, s.Key, "in the source, missing from the copy")
		case bytes.Compare(s.Key, d.Key) > 0:
			return mismatch(n, d.Key, "in the copy, not in the source")
		case !bytes.Equal(s.Value, d.Value):
			return mismatch(n, s.Key, fmt.Sprintf("values differ (%d bytes in the source, %d in the copy)", len(s.Value), len(d.Value)))
		}
		n++
		return nil
	})
	if err == nil {
		d, ok, derr := c.next()
		switch {
		case derr != nil:
			err = fmt.Errorf("reading the copy: %w", derr)
		case ok:
			err = mismatch(n, d.Key, "in the copy, not in the source")
		}
	}
	cancel()
	c.close()
	return err
}

// cursor reads the records of an export made by another goroutine, which
// sends them in batches and then its error.
type cursor struct {
	batches chan []ratestore.Entry
	done    chan error
	cur     []ratestore.Entry
	ended   bool
	err     error
}

// next returns the next record; ok is false at the end, and err the
// export's error there.
func (c *cursor) next() (r ratestore.Entry, ok bool, err error) {
	for len(c.cur) == 0 {
		if c.ended {
			return ratestore.Entry{}, false, c.err
		}
		recs, ok := <-c.batches
		if !ok {
			c.ended, c.err = true, <-c.done
			continue
		}
		c.cur = recs
	}
	r, c.cur = c.cur[0], c.cur[1:]
	return r, true, nil
}

// close waits for the export to end; its ctx must be cancelled.
func (c *cursor) close() {
	for range c.batches {
	}
	if !c.ended {
		c.ended, c.err = true, <-c.done
	}
}

// mismatch is the error for the n-th record (from 0), at key.
func mismatch(n int, key []byte, why string) error {
	return fmt.Errorf("%w: record %d, key %s: %s", ErrMismatch, n, escapeKey(key), why)
}

// maxKeyShown is how many bytes of a key an error shows.
const maxKeyShown = 128

// escapeKey renders a stored key in quotes, with every byte outside
// printable ASCII (and the quote and backslash) as \xNN.
func escapeKey(k []byte) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range k[:min(len(k), maxKeyShown)] {
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	b.WriteByte('"')
	if len(k) > maxKeyShown {
		fmt.Fprintf(&b, "... (%d bytes)", len(k))
	}
	return b.String()
}
