package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Checkpoint thresholds (see the package doc).
//
// A checkpoint's cost per key is set by how many keys it writes per page
// of the file: K keys spread at random over P pages touch P(1-e^(-K/P))
// pages, each copied and written whole, so at K much below P every key
// costs a 4 KiB page write, and at K = 8P an eighth of one. The key
// threshold therefore grows with the file, checkpointPerPage keys a page:
// more keys a page cost less CPU a key and more memory (each key waiting
// in the overlay holds its key, its value and a map slot), with returns
// that fall off past 8 (bench/REPORT.md, BenchmarkStoreWrite).
//
// Its floor, checkpointKeys, is for small files, and for a file that
// grows from empty faster than checkpoints can keep its pages dense: a
// busy Async commit holds tens of thousands of keys, and a floor below
// that would send most commits over the hard limit into a foreground
// checkpoint. Its ceiling, checkpointMaxKeys, bounds the overlay's memory
// (about 175 bytes a key of 22 bytes; twice the threshold while a
// background checkpoint runs, hardLimitFactor times it at most) where the
// cache may be much smaller: past about 32k pages (a file of a few
// million keys) checkpoints cost more a key again. The log's size bounds
// the threshold too (32 MiB of log replays in well under a second).
const (
	checkpointKeys     = 64 << 10
	checkpointMaxKeys  = 256 << 10
	checkpointPerPage  = 8
	checkpointLogBytes = 32 << 20
	hardLimitFactor    = 4
)

// background is a checkpoint that runs in its own goroutine, of the
// overlay's frozen generation as of the log's record seq, which ends at
// tail. The goroutine puts the generation's keys in order and closes
// sorted (Scan waits for it), writes them, sets pages and err, and closes
// done; the Store takes the outcome in under wmu (settleBackground).
type background struct {
	seq    uint64
	tail   int64
	keys   []string // in order, once sorted is closed
	sorted chan struct{}
	done   chan struct{}
	pages  int
	err    error
}

// keyLimit is the overlay's key threshold: see checkpointPerPage.
func (s *Store) keyLimit() int { return max(s.ckptKeys, min(s.ckptPerPage*s.pages, checkpointMaxKeys)) }

// overLimit reports whether the overlay or the log reached factor times its
// checkpoint threshold.
func (s *Store) overLimit(factor int) bool {
	return s.ov.len() >= factor*s.keyLimit() || s.log.Size() >= int64(factor)*s.ckptBytes
}

// Sync implements storage.Store: one fdatasync of the log. It then starts
// a checkpoint in the background if one is due, or runs one in the
// foreground if the log failed, the last background one failed, or the
// overlay reached the hard limit (waiting for a background one first). If
// that checkpoint fails, Sync returns its error although the commits are
// durable in the log; retrying them is harmless.
func (s *Store) Sync() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.readOnly {
		return nil // nothing was committed
	}
	if !s.logBad {
		if err := s.log.Sync(); err != nil {
			// The page cache may have dropped what failed to reach the
			// disk, so the log can no longer be trusted: make the changes
			// durable in bbolt instead.
			s.logBad = true
			if cerr := s.checkpoint(); cerr != nil {
				return errors.Join(err, cerr)
			}
			return nil
		}
	}
	s.settleBackground(false)
	switch {
	case s.logBad || s.bgErr != nil || s.overLimit(hardLimitFactor):
		return s.checkpoint()
	case s.bg == nil && s.overLimit(1):
		s.startBackground()
	}
	return nil
}

// checkpoint writes the overlay into bbolt with the last record's sequence
// number, empties it and resets the log, in the foreground, once a
// background checkpoint has ended. The caller holds wmu. It does nothing
// if there is nothing to do.
func (s *Store) checkpoint() error {
	s.settleBackground(true)
	seq := s.log.Last()
	if seq == s.ckptSeq && s.log.Size() == 0 && !s.logBad {
		return nil
	}
	if seq != s.ckptSeq {
		keys := s.ov.keys()
		pages, err := s.writeBolt(keys, valuesOf(s.ov.m, keys), seq)
		if err != nil {
			return err
		}
		s.ckptSeq, s.pages = seq, pages
		s.mu.Lock()
		s.ov.reset()
		s.mu.Unlock()
	}
	if err := s.log.Reset(); err != nil {
		s.logBad = true
		return err
	}
	s.logBad, s.bgErr = false, nil
	return nil
}

// startBackground starts a checkpoint of the overlay as it is now, in its
// own goroutine, so that commits and Syncs go on meanwhile. The caller
// holds wmu.
//
// Why commits may go on: the overlay keeps the checkpoint's keys, frozen,
// until the checkpoint has committed in bbolt, and takes the commits made
// meanwhile in its new generation. Get and Scan read both generations
// first, so whether they see bbolt before or after the checkpoint, they
// get the newest value. Once bbolt holds it, the frozen generation goes,
// and the log's records it covered (wal.Log.DropBefore): the records
// appended meanwhile stay in the log, as their keys in the overlay, for
// the next checkpoint. A crash before the log is rewritten leaves bbolt
// ahead of some of its records, which replay skips.
func (s *Store) startBackground() {
	if s.log.Last() == s.ckptSeq {
		return
	}
	bg := &background{seq: s.log.Last(), tail: s.log.Tail(), sorted: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	frozen, sorted, added := s.ov.freeze()
	s.mu.Unlock()
	s.bg = bg
	go func() {
		bg.keys = merge(sorted, added)
		close(bg.sorted)
		bg.pages, bg.err = s.writeBolt(bg.keys, valuesOf(frozen, bg.keys), bg.seq)
		if s.afterBolt != nil {
			s.afterBolt()
		}
		close(bg.done)
	}()
}

// settleBackground takes in the outcome of the background checkpoint, if
// one ran and has ended, or, with wait, once it ends. The caller holds
// wmu; the goroutine never takes it, so waiting under it cannot deadlock.
// A checkpoint that succeeded drops the overlay's frozen generation and
// the log's records it covered; one that failed moves the frozen keys
// back and leaves its error in bgErr, for the next Sync to retry in the
// foreground.
func (s *Store) settleBackground(wait bool) {
	bg := s.bg
	if bg == nil {
		return
	}
	if wait {
		<-bg.done
	} else {
		select {
		case <-bg.done:
		default:
			return
		}
	}
	s.bg = nil
	s.mu.Lock()
	s.ov.thaw(bg.err == nil)
	s.mu.Unlock()
	if bg.err != nil {
		s.bgErr = bg.err
		return
	}
	s.ckptSeq, s.pages = bg.seq, bg.pages
	if !s.logBad {
		// A log that failed is reset by the foreground checkpoint that
		// the next Sync runs; its records up to seq are skipped until then.
		if err := s.log.DropBefore(bg.tail); err != nil {
			s.logBad = true
		}
	}
}

// writeBolt writes keys (in order: bbolt's cursor walks forward) with
// their values (nil: a delete) into bbolt in one transaction, which also
// stores seq, and returns the file's size in pages after it. It changes
// no field of s: a background checkpoint runs it without wmu.
func (s *Store) writeBolt(keys []string, values [][]byte, seq uint64) (pages int, err error) {
	var at []byte // the key being written, for guard's error
	err = s.update("checkpoint", &at, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for i, k := range keys {
			var err error
			at = []byte(k)
			if v := values[i]; v == nil {
				err = b.Delete(at)
			} else {
				err = b.Put(at, encodeValue(at, v))
			}
			if err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
		}
		at = nil
		pages = filePages(tx)
		return tx.Bucket(metaBucket).Put(seqKey, binary.BigEndian.AppendUint64(nil, seq))
	})
	if err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	return pages, nil
}

// filePages is the size of tx's database in pages: its pages in use and
// free alike, as bbolt's file never shrinks.
func filePages(tx *bolt.Tx) int { return int(tx.Size() / int64(tx.DB().Info().PageSize)) }

// frozenKeys returns the keys of the overlay's frozen generation in order,
// once the background checkpoint has sorted them, or nil if there is none.
// The caller holds wmu.
func (s *Store) frozenKeys() []string {
	if s.bg == nil {
		return nil
	}
	<-s.bg.sorted
	return s.bg.keys
}
