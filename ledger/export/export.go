// Package export writes a spend ledger's entries to a file as JSON lines,
// rotated by size, so that log shippers and tools (tail -f, jq) can follow
// spend without querying the database. It is a ledger.Exporter: the ledger
// hands it each entry once the entry's commit returned, and a slow disk
// costs dropped lines, counted, never a slower request.
package export

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/ledger"
)

// Limits of a File. The queue is bounded so that a stalled disk costs
// entries, counted, rather than the gateway's memory; the buffer bounds
// how much a crash can lose between flushes under a steady load.
const (
	defaultMaxBytes = 100 << 20 // bytes a file may reach; Open's maxBytes 0
	defaultKeep     = 5         // rotated files kept; Open's keep 0
	queueLen        = 64 << 10  // entries waiting to be written
	bufferSize      = 256 << 10 // bytes written between flushes, at most
)

// File writes the ledger's entries to a file as JSON lines, as their
// commits return (see ledger.Options.Export).
//
// Each line is one JSON object, json.Marshal of a ledger.Entry, followed by
// "\n": the shape of GET /admin/requests, with these fields in this
// order:
//
//	time                RFC 3339 in UTC with milliseconds: "2025-01-02T15:04:05.123Z"
//	request_id          the gateway's request ID (Ratestore-Request-Id)
//	key                 the key's id
//	team                the key's team; absent when it has none
//	model               the model asked for
//	route               the endpoint, e.g. "/v1/chat/completions"
//	upstream            the name of the upstream that answered, e.g. "azure-east"; absent when none did
//	status              the HTTP status the caller got
//	latency_ms          from the request's arrival to its end, whole milliseconds
//	input_tokens        prompt tokens, not counting the cached ones
//	output_tokens       output tokens, not counting reasoning
//	cache_read_tokens   prompt tokens read from the cache
//	cache_write_tokens  prompt tokens written to the cache
//	reasoning_tokens    reasoning tokens
//	cost_usd            the cost, a decimal number of USD exact to 1e-9 (0.000125, never 1.25e-04)
//	estimated           true when no usage was reported and the tokens are the gateway's estimate
//	end_user            the end user the request named, e.g. "u-17"; absent when it named none
//
// Lines are in the order the entries were written, which is their commit
// order: concurrent requests commit in batches, so it may differ slightly
// from the order of their times. Readers that need time order sort.
//
// When the next line would take the file past its size limit, the file is
// renamed path.1, the older ones shift (path.1 to path.2, and so on up to
// path.keep, which is replaced: the oldest is removed) and a new path is
// started. Rotation happens only between lines, so every file holds whole
// lines; a line longer than the limit goes alone in its file. A file found
// ending inside a line (a crash, a full disk) gets a "\n" before the next
// line, so that only the cut line is unreadable.
//
// Delivery is best effort, because a slow disk must never slow requests:
// Write queues, and an entry that finds the queue (64Ki entries) full, or
// the File closed, is dropped. Stats counts what became of each: once
// the file is closed (Close returned, and not for its ctx), Written +
// Dropped is the number of Writes.
type File struct {
	path     string
	maxBytes int64
	keep     int
	log      *slog.Logger
	born     time.Time // the clock of the log limits

	mu     sync.Mutex
	queue  []ledger.Entry // waiting for the writer, in Write order
	closed bool           // Close was called: Write drops

	wake     chan struct{} // a Write queued an entry (capacity 1)
	stop     chan struct{} // closed by Close
	stopOnce sync.Once
	aborted  atomic.Bool   // Close's ctx ended: drop what is queued
	done     chan struct{} // closed when the writer has closed the file
	err      error         // Close's: the final flush, fsync and close; read after done
	hold     chan struct{} // tests: the writer waits for it before starting

	written, dropped, rotations, errs atomic.Int64
	dropLog, errLog                   logLimit

	// The writer goroutine's own.
	f       *os.File // nil after a failed open: the next line retries
	w       *bufio.Writer
	size    int64 // bytes in the file, counting those in w
	good    int64 // bytes in the file after the last successful flush
	pending int64 // lines in w, not yet counted Written

	retryRotate time.Duration // after a failed rotation: since born, when to try again
}

// Stats count what became of the entries given to a File.
type Stats struct {
	Written   int64 // lines in the file (flushed to it)
	Dropped   int64 // entries lost: queue full, File closed, or a failed write
	Rotations int64 // files rotated
	Errors    int64 // failed file operations (open, write, rotation, fsync, close)
}

// Open opens path for appending, creating it with mode 0600 (the
// entries name keys and teams), and starts the goroutine that writes the
// entries given to Write. The file is rotated when the next line would
// take it past maxBytes, keeping keep old files. maxBytes 0 is 100 MiB;
// keep 0 is 5. log receives the write errors and drops; nil is
// slog.Default(). Call Close to write what is queued and close the file.
func Open(path string, maxBytes int64, keep int, log *slog.Logger) (*File, error) {
	x, err := openFile(path, maxBytes, keep, log)
	if err != nil {
		return nil, err
	}
	go x.run()
	return x, nil
}

// openFile is Open without the goroutine, which tests start
// themselves after setting hold.
func openFile(path string, maxBytes int64, keep int, log *slog.Logger) (*File, error) {
	switch {
	case path == "":
		return nil, fmt.Errorf("ledger: export: path is empty: %w", ledger.ErrInvalid)
	case maxBytes < 0:
		return nil, fmt.Errorf("ledger: export: maxBytes %d is negative: %w", maxBytes, ledger.ErrInvalid)
	case keep < 0:
		return nil, fmt.Errorf("ledger: export: keep %d is negative: %w", keep, ledger.ErrInvalid)
	}
	if maxBytes == 0 {
		maxBytes = defaultMaxBytes
	}
	if keep == 0 {
		keep = defaultKeep
	}
	if log == nil {
		log = slog.Default()
	}
	x := &File{
		path: path, maxBytes: maxBytes, keep: keep, log: log, born: time.Now(),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		w: bufio.NewWriterSize(nil, bufferSize),
	}
	if err := x.open(); err != nil {
		return nil, err
	}
	return x, nil
}

// Write queues e to be written. It never blocks: when the queue is full,
// or the File closed, e is dropped, counted in Stats, and logged at
// error level (once a second at most).
func (x *File) Write(e ledger.Entry) {
	x.mu.Lock()
	closed, full := x.closed, len(x.queue) >= queueLen
	if !closed && !full {
		x.queue = append(x.queue, e)
	}
	x.mu.Unlock()
	if closed || full {
		n := x.dropped.Add(1)
		if x.dropLog.allow(time.Since(x.born)) {
			x.log.Error("ledger: export: entry dropped", "path", x.path, "closed", closed,
				"queue_full", full, "dropped", n)
		}
		return
	}
	select {
	case x.wake <- struct{}{}:
	default: // the writer is awake already
	}
}

// Close stops taking entries, writes those queued, fsyncs the file and
// closes it. If ctx ends first, Close returns its error at once and the
// writer stops after the line in hand, dropping (and counting) the rest;
// calling Close again waits for the file's close. Close's error is that
// of ctx or of the final flush, fsync or close: entries lost earlier are
// in Stats and the log.
func (x *File) Close(ctx context.Context) error {
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
	x.stopOnce.Do(func() { close(x.stop) })
	select {
	case <-x.done:
		return x.err
	default:
	}
	select {
	case <-x.done:
		return x.err
	case <-ctx.Done():
		x.aborted.Store(true)
		return fmt.Errorf("ledger: export: close: %w", context.Cause(ctx))
	}
}

// Stats returns the file's counters so far.
func (x *File) Stats() Stats {
	return Stats{
		Written: x.written.Load(), Dropped: x.dropped.Load(),
		Rotations: x.rotations.Load(), Errors: x.errs.Load(),
	}
}

// run is the writer goroutine. It takes the queue a batch at a time, so
// that Write holds the lock only for an append, and flushes whenever the
// queue is empty, so that a reader following the file sees each line
// promptly, not when 256 KiB have gathered.
func (x *File) run() {
	defer close(x.done)
	if x.hold != nil {
		<-x.hold
	}
	var batch []ledger.Entry
	for {
		if x.aborted.Load() {
			x.dropQueued()
			x.err = x.finish()
			return
		}
		batch = x.take(batch)
		if len(batch) > 0 {
			x.writeBatch(batch)
			continue
		}
		_ = x.flush() // counted and logged; the next line retries
		select {
		case <-x.wake:
		case <-x.stop:
			if x.queued() == 0 { // Write adds nothing once closed
				x.err = x.finish()
				return
			}
		}
	}
}

// take swaps the queue for spare, emptied, and returns the queue.
func (x *File) take(spare []ledger.Entry) []ledger.Entry {
	clear(spare) // let the entries' strings go
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.queue
	x.queue = spare[:0]
	return b
}

func (x *File) queued() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.queue)
}

// dropQueued counts the queued entries as dropped, for Close's ctx ended.
func (x *File) dropQueued() {
	x.mu.Lock()
	n := len(x.queue)
	x.queue = nil
	x.mu.Unlock()
	x.dropped.Add(int64(n))
}

func (x *File) writeBatch(batch []ledger.Entry) {
	for i, e := range batch {
		if x.aborted.Load() {
			x.dropped.Add(int64(len(batch) - i))
			return
		}
		x.writeLine(e)
	}
}

// writeLine writes e's line to the file. An entry that cannot be
// written is counted dropped; the next one tries again.
func (x *File) writeLine(e ledger.Entry) {
	line, err := json.Marshal(e)
	if err != nil {
		x.lost(1, "encode", fmt.Errorf("ledger: export: encode: %w", err))
		return
	}
	line = append(line, '\n')
	if !x.ready(int64(len(line))) {
		x.dropped.Add(1) // the error that caused it is counted already
		return
	}
	// The line fits in the buffer, or is larger than the whole buffer,
	// which bufio then writes directly: a write error never mixes two
	// lines' bytes.
	x.pending++
	x.size += int64(len(line))
	if _, err := x.w.Write(line); err != nil {
		_ = x.failed(err) // counted and logged
	}
}

// ready makes room for a line of n bytes: it opens the file if an error
// closed it, rotates it if the line would take it past maxBytes, and
// flushes the buffer if the line does not fit in it. It reports whether
// the line can be written.
func (x *File) ready(n int64) bool {
	if x.f == nil {
		if err := x.open(); err != nil {
			x.fault("open", err)
			return false
		}
	}
	if x.size > 0 && x.size+n > x.maxBytes && time.Since(x.born) >= x.retryRotate {
		x.rotate()
		if x.f == nil {
			return false
		}
	}
	if x.w.Buffered() > 0 && int64(x.w.Available()) < n {
		return x.flush() == nil && x.f != nil
	}
	return true
}

// flush writes the buffer to the file and counts its lines Written.
func (x *File) flush() error {
	if x.f == nil {
		return nil
	}
	if err := x.w.Flush(); err != nil {
		return x.failed(err)
	}
	x.written.Add(x.pending)
	x.pending, x.good = 0, x.size
	return nil
}

// failed handles a failed write: the buffered lines are lost, and the
// file is cut back to its last whole line, so that the next line starts
// a line of its own. If that fails too the file is closed: reopening it
// ends the cut line (see open).
func (x *File) failed(err error) error {
	err = fmt.Errorf("ledger: export: write %s: %w", x.path, err)
	x.lost(x.pending, "write", err)
	x.pending, x.size = 0, x.good
	x.w.Reset(x.f)
	if terr := x.f.Truncate(x.good); terr != nil {
		_ = x.f.Close() // failing already; reopened on the next line
		x.f = nil
	}
	return err
}

// rotate renames the file path.1, after shifting the older ones, and
// starts a new one. The old file is fsynced first, so that a rotated file
// is whole even after a crash. If a rename fails the file is reopened and
// grows past maxBytes, its lines kept rather than its limit, and the
// rotation is tried again a second later, not on every line.
func (x *File) rotate() {
	_ = x.flush() // counted and logged; the lines are lost either way
	if x.f == nil {
		return
	}
	if err := x.f.Sync(); err != nil {
		x.fault("fsync", fmt.Errorf("ledger: export: fsync %s: %w", x.path, err))
	}
	if err := x.f.Close(); err != nil {
		x.fault("close", fmt.Errorf("ledger: export: close %s: %w", x.path, err))
	}
	x.f = nil
	if err := x.shift(); err != nil {
		x.fault("rotate", fmt.Errorf("ledger: export: rotate: %w", err))
		x.retryRotate = time.Since(x.born) + time.Second
	} else {
		x.rotations.Add(1)
	}
	if err := x.open(); err != nil {
		x.fault("open", err)
	}
}

// shift renames path.keep-1 to path.keep (replacing the oldest), ...,
// path.1 to path.2, and path to path.1. Missing old files are skipped.
func (x *File) shift() error {
	for i := x.keep - 1; i >= 1; i-- {
		err := os.Rename(x.old(i), x.old(i+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return os.Rename(x.path, x.old(1))
}

// old returns the name of the i-th newest rotated file.
func (x *File) old(i int) string { return x.path + "." + strconv.Itoa(i) }

// open opens the file for appending. A file that ends inside a line (a
// crash, a failed write that could not be cut back) gets a "\n" first,
// so that the cut line does not swallow the next one.
func (x *File) open() error {
	f, err := os.OpenFile(x.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("ledger: export: %w", err)
	}
	size, err := endLine(f)
	if err != nil {
		_ = f.Close() // the error that matters is endLine's
		return fmt.Errorf("ledger: export: %s: %w", x.path, err)
	}
	x.f, x.size, x.good = f, size, size
	x.w.Reset(f)
	return nil
}

// endLine returns the size of f, after appending "\n" if it does not end
// with one.
func endLine(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], fi.Size()-1); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if last[0] == '\n' {
		return fi.Size(), nil
	}
	if _, err := f.Write([]byte{'\n'}); err != nil {
		return 0, err
	}
	return fi.Size() + 1, nil
}

// finish flushes, fsyncs and closes the file, for Close.
func (x *File) finish() error {
	ferr := x.flush()
	if x.f == nil {
		return ferr
	}
	serr := x.f.Sync()
	if serr != nil {
		serr = fmt.Errorf("ledger: export: fsync %s: %w", x.path, serr)
		x.fault("fsync", serr)
	}
	cerr := x.f.Close()
	if cerr != nil {
		cerr = fmt.Errorf("ledger: export: close %s: %w", x.path, cerr)
		x.fault("close", cerr)
	}
	x.f = nil
	return errors.Join(ferr, serr, cerr)
}

// lost counts n entries dropped by a failed operation, and the failure,
// and logs them.
func (x *File) lost(n int64, op string, err error) {
	dropped := x.dropped.Add(n)
	errs := x.errs.Add(1)
	if x.errLog.allow(time.Since(x.born)) {
		x.log.Error("ledger: export failed", "path", x.path, "op", op, "err", err,
			"lost", n, "errors", errs, "dropped", dropped)
	}
}

// fault counts and logs a failed operation that lost no entry itself.
func (x *File) fault(op string, err error) { x.lost(0, op, err) }

// logLimit lets a message through once a second at most, so that a full
// disk or a stalled writer does not flood the log, which may well be on
// the same disk.
type logLimit struct {
	next atomic.Int64 // when the next message may pass, as time since File.born
}

func (l *logLimit) allow(now time.Duration) bool {
	next := l.next.Load()
	return int64(now) >= next && l.next.CompareAndSwap(next, int64(now+time.Second))
}
