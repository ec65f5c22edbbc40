package ledger

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/sat"
	"github.com/ratestore/ratestore/internal/text"
	"github.com/ratestore/ratestore/keystore"
)

// writing is where a Ledger's writer is: its next seq, its open chunk,
// the span of chunks not sealed yet, and the day it last registered.
type writing struct {
	seq     uint32
	chunk   []byte // the open chunk's value: its entries, each a block of one, after its length
	cfirst  uint32 // the open chunk's first seq
	cday    day    // and its day
	first   uint32 // of the open span, a multiple of blockSize
	days    []day  // the open span's chunks are in
	today   day    // registered in L/w and L/x; -1: none yet
	evicted day    // the rollups of days below it left the cache
}

// span is a sealed run of chunks, to compact into one block per day.
type span struct {
	first uint32
	days  []day
}

// rollupID names a rollup of the writer: a key's day, or a team's.
type rollupID struct {
	team     bool
	endUsers bool // a key's rollup of end users (see addEndUser)
	d        day
	name     string
}

// rollup is a rollup's rows, sorted by key, and their encoding (see
// rowCode). Its rows change only through addTo, insert, remove and
// replace.
type rollup struct {
	rows    []row
	code    rowCode
	changed bool // in Ledger.changed, to put at the end of the batch
}

type row struct {
	k rowKey
	Totals
}

// Limits on what one entry or rollup holds: a key holder chooses model
// names, and must not grow the ledger by choosing many.
const (
	maxID      = 128 // bytes of a key or team id
	maxName    = 256 // bytes of a model, route, upstream or request id; longer ones are recorded as OtherModel
	maxRows    = 256 // rows of a rollup; more land in OtherModel's
	OtherModel = "(other)"
)

// Note is one request's entry on its way to the ledger: a
// keystore.Recorder, given to keystore.Admission.FinishWith so that the
// entry and its rollups are written in the batch that charges the
// request.
type Note struct {
	l        *Ledger
	e        Entry
	seq      uint32
	recorded bool
	refusals []refusal // the counts of refusals its batch writes too (see countWith)
}

// A Note is what keystore.Admission.FinishWith calls.
var _ keystore.Recorder = (*Note)(nil)

// Note returns the note of e, which a Finish writes. The entry's Time is
// set to the batch's. e.Key is required; ids may not contain "/".
func (l *Ledger) Note(e Entry) (*Note, error) {
	if err := checkID("key", e.Key, true); err != nil {
		return nil, err
	}
	if err := checkID("team", e.Team, false); err != nil {
		return nil, err
	}
	if err := checkEndUser(e.EndUser); err != nil {
		return nil, err
	}
	if l.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	e.Model, e.Route, e.Upstream, e.RequestID = bounded(e.Model), bounded(e.Route), bounded(e.Upstream), bounded(e.RequestID)
	return &Note{l: l, e: e}, nil
}

func checkID(field, id string, required bool) error {
	switch {
	case id == "" && required:
		return fmt.Errorf("ledger: entry without a %s: %w", field, ErrInvalid)
	case len(id) > maxID || strings.Contains(id, "/"):
		return fmt.Errorf("ledger: %s %.40q: want at most %d bytes and no \"/\": %w", field, id, maxID, ErrInvalid)
	}
	return nil
}

// MaxEndUser is the longest end user's name, in bytes.
const MaxEndUser = 256

// checkEndUser refuses an end user that is not at most MaxEndUser bytes
// of printable UTF-8, as the gateway does (400): the name is a part of
// the directory's record keys, which no control character may break.
func checkEndUser(endUser string) error {
	if p := text.Problem(endUser, MaxEndUser); p != "" {
		return fmt.Errorf("ledger: end user %.40q %s: want at most %d bytes of printable UTF-8: %w", endUser, p, MaxEndUser, ErrInvalid)
	}
	return nil
}

func bounded(s string) string {
	if len(s) > maxName {
		return OtherModel
	}
	return s
}

// Entry returns the note's entry, with its time once recorded.
func (n *Note) Entry() Entry { return n.e }

// Record appends the note's entry to the open chunk and adds it to its
// rollups, in w, at now. It is a keystore.Recorder's method. The ledger's
// lock is held while the values are put, so that the last value put of a
// chunk or rollup is the one holding every entry put before it.
func (n *Note) Record(w keystore.Records, now time.Time) error {
	l, e := n.l, &n.e
	e.Time = now.UTC().Truncate(time.Millisecond)
	d := dayOf(e.Time)
	if err := l.preload(w, d, e.Key, e.Team, e.EndUser); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n.recorded {
		return nil
	}
	return l.putChanged(w, n.record(w, d))
}

// record is Record's work under the ledger's lock, but for the puts of
// the rollups it changed (putChanged).
func (n *Note) record(w batch, d day) error {
	l, e := n.l, &n.e
	if err := l.register(w, d); err != nil {
		return err
	}
	n.seq = l.w.seq
	if err := l.appendChunk(w, d, n.seq, e); err != nil {
		return err
	}
	l.w.seq++
	if !slices.Contains(l.w.days, d) {
		l.w.days = append(l.w.days, d)
	}
	n.recorded = true
	add := Totals{Requests: 1, Tokens: e.Tokens, Cost: e.Cost}
	if err := l.addAll(w, d, e.Key, e.Team, e.Model, &add); err != nil {
		return err
	}
	if err := l.addEndUser(w, d, e.Key, e.Team, e.EndUser, &add); err != nil {
		return err
	}
	if err := l.addDirectory(w, e.Key, e.EndUser, &add, millis(e.Time)); err != nil {
		return err
	}
	if l.w.seq%blockSize == 0 {
		l.sealSpan()
	}
	return l.countWith(n, w)
}

// Done reports how the Finish that carried n ended: err is its error
// (nil, or matching backend.ErrUncertain, when the request was
// charged). A charged entry goes to the Exporter. An entry recorded in a
// batch that failed (a conflict on a shared store) is taken back out of
// the rollups the ledger holds in memory, so that its next write of them
// does not count it.
func (n *Note) Done(err error) {
	l := n.l
	if err == nil || errors.Is(err, backend.ErrUncertain) {
		if l.opts.Export != nil && n.recorded {
			l.opts.Export.Write(n.e)
		}
		return
	}
	n.Discard()
}

// Discard takes the note's entry back out of the rollups the ledger holds
// in memory, when the batch that recorded it stored nothing, so that the
// ledger's next write of them does not count it. Record may then record it
// again. It is a keystore.Recorder's method.
func (n *Note) Discard() {
	l := n.l
	if !n.recorded {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n.recorded = false
	l.giveBack(n.refusals, len(n.refusals))
	n.refusals = nil
	if l.shared { // its rollups were read and written in the batch alone
		return
	}
	e := &n.e
	back := Totals{Requests: -1, Tokens: Tokens{-e.Tokens.Input, -e.Tokens.Output, -e.Tokens.CacheRead, -e.Tokens.CacheWrite, -e.Tokens.Reasoning}, Cost: -e.Cost}
	l.uncount(dayOf(e.Time), e.Key, e.Team, e.Model, &back)
	l.uncountEndUser(dayOf(e.Time), e.Key, e.Team, e.EndUser, &back)
}

// uncount adds back, a negative count, to the cached rollups of key's
// and team's day d that hold model's row: what was added to them for a
// batch that stored nothing.
func (l *Ledger) uncount(d day, key, team, model string, back *Totals) {
	for _, id := range []rollupID{{d: d, name: key}, {team: true, d: d, name: team}} {
		if r := l.rollups[id]; r != nil {
			k := rowKey{team, model}
			if id.team {
				k.team = ""
			}
			if i, ok := r.find(k); ok {
				r.addTo(i, back)
			}
		}
	}
}

// register writes that the writer has entries on day d, once a day.
// Crossing into a new day, it deletes the day's total, which a day left
// before may have (a batch whose clock was behind another's comes back
// to it), and drops the rollups of the days before yesterday from the
// cache.
func (l *Ledger) register(w batch, d day) error {
	if d == l.w.today && !l.shared {
		return nil
	}
	// On a shared store, in every batch: one that registered the day may
	// have failed with a conflict after others counted on it.
	if err := w.Put(appendKey(nil, writerPrefix, d, l.writer), []byte{}); err != nil {
		return err
	}
	if err := w.Put(appendKey(nil, dayPrefix, d), []byte{}); err != nil {
		return err
	}
	if d == l.w.today {
		return nil
	}
	if err := l.dropTotal(w, d); err != nil {
		return err
	}
	if l.w.today >= 0 && !l.opts.ReadOnly {
		l.closed = append(l.closed, l.w.today) // summarized by the compactor
		l.poke()
	}
	l.w.today = d
	if d-1 > l.w.evicted {
		l.w.evicted = d - 1
		for id := range l.rollups {
			if id.d < l.w.evicted && !slices.Contains(l.closed, id.d) { // kept until summarized
				delete(l.rollups, id)
			}
		}
	}
	return nil
}

// dropTotal deletes the writer's day total of day d, in w, the batch of
// a change to its rollups of d: a day total is read only where it holds
// what they hold, and the day's summaries write it again.
func (l *Ledger) dropTotal(w batch, d day) error {
	return w.Delete(appendKey(nil, totalPrefix, d, l.writer))
}

// addAll adds t to the rollups of key's and team's day d. Both are
// found before either changes, so that an error (a read of a rollup that
// left the cache) leaves both as they were.
func (l *Ledger) addAll(w batch, d day, key, team, model string, t *Totals) error {
	kid, tid := rollupID{d: d, name: key}, rollupID{team: true, d: d, name: team}
	kr, err := l.rollupIn(w, kid)
	if err != nil {
		return err
	}
	var tr *rollup
	if team != "" {
		if tr, err = l.rollupIn(w, tid); err != nil {
			return err
		}
	}
	if err := l.add(w, kid, kr, rowKey{team, model}, t); err != nil || tr == nil {
		return err
	}
	return l.add(w, tid, tr, rowKey{"", model}, t)
}

// add adds t to the row k of r, the rollup id, and puts it.
func (l *Ledger) add(w batch, id rollupID, r *rollup, k rowKey, t *Totals) error {
	i, ok := r.find(k)
	if !ok {
		if len(r.rows) >= maxRows-1 { // the last is OtherModel's
			k.model = OtherModel
			i, ok = r.find(k)
		}
		if !ok {
			r.insert(i, k)
		}
	}
	return l.addAt(w, id, r, i, t)
}

// addAt adds t to the row i of r, the rollup id, and puts it: on a
// shared store at once, as the batch reads it again from what it put; on
// a DB, where r is the cached rollup, by putChanged at the end of the
// batch, once however many entries or refusals of the batch changed it
// (a flush of refusals may add thousands of counts to one rollup of 8
// KB). Either way it is put in the batch that changed it.
func (l *Ledger) addAt(w batch, id rollupID, r *rollup, i int, t *Totals) error {
	r.addTo(i, t)
	if !l.shared {
		if !r.changed {
			r.changed = true
			l.changed = append(l.changed, changed{id, r})
		}
		return nil
	}
	return l.put(w, id, r)
}

// changed is a cached rollup changed in the batch under way, to put.
type changed struct {
	id rollupID
	r  *rollup
}

// putChanged puts in w, once each, the cached rollups the batch changed:
// whatever err the batch's work ended with, as what it changed of them
// before the error was put before too, and returns err or the first
// error of a put. The caller holds l.mu.
func (l *Ledger) putChanged(w batch, err error) error {
	for _, c := range l.changed {
		c.r.changed = false
		if perr := l.put(w, c.id, c.r); err == nil {
			err = perr
		}
	}
	clear(l.changed)
	l.changed = l.changed[:0]
	return err
}

// put puts r, the rollup id, in w.
func (l *Ledger) put(w batch, id rollupID, r *rollup) error {
	key := id.appendKey(l.buf[:0], l.writer)
	val := r.value(key[len(key):])
	l.buf = val[:0]
	return w.Put(key, val)
}

// preload reads in w, on a shared store, the rollups of key's and team's
// day d that rollupIn reads, and key's end users' of that day, and the
// directory's record of key's end user that addDirectory reads: before
// the ledger's lock is taken, since a read may wait for the locks of
// another batch, which may be waiting for the ledger's lock.
func (l *Ledger) preload(w batch, d day, key, team, endUser string) error {
	if !l.shared {
		return nil
	}
	recs := [][]byte{rollupID{d: d, name: key}.key(l.writer), rollupID{endUsers: true, d: d, name: key}.key(l.writer)}
	if team != "" {
		recs = append(recs, rollupID{team: true, d: d, name: team}.key(l.writer))
	}
	if endUser != "" {
		recs = append(recs, directoryKey(key, endUser))
	}
	for _, k := range recs {
		if _, err := w.Get(k); err != nil {
			return err
		}
	}
	return nil
}

// rollupIn returns the rollup id to add to in w: on a shared store, the
// one w reads (the batch's commit then checks it is still stored), and
// otherwise the cached one (see rollup).
func (l *Ledger) rollupIn(w batch, id rollupID) (*rollup, error) {
	if !l.shared {
		return l.rollup(id)
	}
	v, err := w.Get(id.key(l.writer))
	if err != nil {
		return nil, err
	}
	return decodeRows(v)
}

// key is the record key of the rollup id of writer.
func (id rollupID) key(writer string) []byte { return id.appendKey(nil, writer) }

// appendKey appends the record key of the rollup id of writer to b.
func (id rollupID) appendKey(b []byte, writer string) []byte {
	prefix := keyPrefix
	switch {
	case id.team:
		prefix = teamPrefix
	case id.endUsers:
		prefix = endUserPrefix
	}
	return appendKey(b, prefix, id.d, id.name, writer)
}

// decodeRows is the rollup stored as v (nil: none).
func decodeRows(v []byte) (*rollup, error) {
	r := &rollup{}
	if v == nil {
		return r, nil
	}
	err := decodeRollup(v, func(team, model []byte, t *Totals) {
		r.rows = append(r.rows, row{rowKey{decodeString(team), decodeString(model)}, *t})
	})
	return r, err
}

// rollup returns the cached rollup id: new, unless the writer may have
// written it before its day left the cache, when it is read.
func (l *Ledger) rollup(id rollupID) (*rollup, error) {
	if r := l.rollups[id]; r != nil {
		return r, nil
	}
	r := &rollup{}
	if id.d < l.w.evicted {
		v, err := l.db.Get(context.Background(), id.key(l.writer))
		if err == nil {
			r, err = decodeRows(v)
		}
		if err != nil {
			return nil, err
		}
	}
	l.rollups[id] = r
	return r, nil
}

func (r *rollup) find(k rowKey) (int, bool) {
	return slices.BinarySearchFunc(r.rows, k, func(a row, k rowKey) int {
		return cmp.Or(cmp.Compare(a.k.team, k.team), cmp.Compare(a.k.model, k.model))
	})
}

// add adds o to t, saturating.
func (t *Totals) add(o *Totals) {
	t.Requests = sat.Add(t.Requests, o.Requests)
	a, b := &t.Tokens, &o.Tokens
	a.Input, a.Output = sat.Add(a.Input, b.Input), sat.Add(a.Output, b.Output)
	a.CacheRead, a.CacheWrite = sat.Add(a.CacheRead, b.CacheRead), sat.Add(a.CacheWrite, b.CacheWrite)
	a.Reasoning = sat.Add(a.Reasoning, b.Reasoning)
	t.Cost = t.Cost.Add(o.Cost)
	t.Refused = sat.Add(t.Refused, o.Refused)
	for reason, n := range o.Reasons {
		if t.Reasons == nil {
			t.Reasons = make(map[string]int64)
		}
		if t.Reasons[reason] = sat.Add(t.Reasons[reason], n); t.Reasons[reason] == 0 {
			delete(t.Reasons, reason) // counted back out (uncount)
		}
	}
	if len(t.Reasons) == 0 {
		t.Reasons = nil
	}
}

// sealSpan moves the open span to the pending ones, and wakes the
// compactor. The next span starts at the next multiple of blockSize.
func (l *Ledger) sealSpan() {
	if l.w.seq == l.w.first {
		return
	}
	l.pending = append(l.pending, span{first: l.w.first, days: l.w.days})
	l.w.seq = (l.w.seq + blockSize - 1) / blockSize * blockSize
	l.w.first, l.w.days = l.w.seq, nil
	l.poke()
}

// poke wakes the compactor.
func (l *Ledger) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Add records e in a batch of its own, at the ledger's clock: for a
// request charged without an Admission (keystore.Store.RecordUsage).
func (l *Ledger) Add(ctx context.Context, e Entry) error {
	n, err := l.Note(e)
	if err != nil {
		return err
	}
	locks := []string{e.Key}
	if e.Team != "" {
		locks = append(locks, e.Team)
	}
	err = l.db.Update(ctx, locks, func(w backend.Batch) error { return n.Record(w, l.db.Now()) })
	n.Done(err)
	return err
}

// appendChunk appends e, of seq on day d, to the open chunk, starting a
// new one at each multiple of chunkMax and each new day, and puts the
// chunk. A chunk holds the entries of one commit or more: where batches
// commit in the order they write (a DB), the last value put is the one
// stored, holding every entry before it, and a commit writes a record
// per chunk rather than one per entry.
func (l *Ledger) appendChunk(w batch, d day, seq uint32, e *Entry) error {
	if len(l.w.chunk) == 0 || seq%l.chunkMax == 0 || d != l.w.cday {
		l.w.chunk, l.w.cfirst, l.w.cday = l.w.chunk[:0], seq, d
	}
	one := appendSingle(l.buf[:0], e)
	l.w.chunk = binary.AppendUvarint(l.w.chunk, uint64(len(one)))
	l.w.chunk = append(l.w.chunk, one...)
	key := appendSeq(appendKey(one[len(one):], entryPrefix, d, l.writer, ""), l.w.cfirst, 'c')
	l.buf = key[:0]
	return w.Put(key, l.w.chunk)
}
