package ledger

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/sat"
)

// Refusals are counted in memory and written as totals: a refused request
// changed nothing, and a key holder sending a thousand requests a second
// that its policy refuses must not cost a thousand commits a second. The
// counts are written, added to the rollups of their keys and teams, with
// the next entry the ledger writes (its batch: no commit of their own),
// or a second after the first was counted when no entry comes
// (refusalDelay), or when maxRefusals distinct counts are waiting, and by
// Close. A crash loses the counts not written yet: at most those of the
// last second, or of the last maxRefusals distinct tuples. They meter
// refusals, which used nothing; no usage or spend is lost with them.
const (
	refusalDelay = time.Second
	maxRefusals  = 4096 // distinct (day, key, team, model, reason) counts waiting
)

// refusalID is what refusals are counted by.
type refusalID struct {
	d                                 day
	key, team, model, endUser, reason string
}

// refusal is the count of the refused requests of one refusalID.
type refusal struct {
	refusalID
	n int64
}

// Refused counts r, refused now, in its key's and team's rollups, by
// reason: in memory, written with the next entry or within refusalDelay
// (see maxRefusals). It writes only when maxRefusals distinct counts are
// waiting, and then returns the error of that write, with r not counted.
func (l *Ledger) Refused(ctx context.Context, r Refusal) error {
	if err := checkID("key", r.Key, true); err != nil {
		return err
	}
	if err := checkID("team", r.Team, false); err != nil {
		return err
	}
	if err := checkEndUser(r.EndUser); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	id := refusalID{dayOf(l.db.Now()), r.Key, r.Team, bounded(r.Model), r.EndUser, bounded(r.Reason)}
	l.mu.Lock()
	_, known := l.refusals[id]
	full := !known && len(l.refusals) >= maxRefusals
	l.mu.Unlock()
	if full {
		if err := l.Flush(ctx); err != nil {
			return err
		}
	}
	l.mu.Lock()
	first := len(l.refusals) == 0
	l.refusals[id] = sat.Add(l.refusals[id], 1)
	l.mu.Unlock()
	if first {
		select {
		case l.refusing <- struct{}{}:
		default:
		}
	}
	return nil
}

// Flush writes the refusals counted and not written yet, in a batch of
// their own, as the Ledger does on its own within refusalDelay. When the
// batch fails they wait for the next write.
func (l *Ledger) Flush(ctx context.Context) error {
	if l.opts.ReadOnly {
		return nil
	}
	l.mu.Lock()
	counts := l.takeRefusals(false)
	l.mu.Unlock()
	if len(counts) == 0 {
		return nil
	}
	var locks []string
	for _, c := range counts {
		locks = append(locks, c.key)
		if c.team != "" {
			locks = append(locks, c.team)
		}
	}
	slices.Sort(locks)
	var applied int
	err := l.db.Update(ctx, slices.Compact(locks), func(w backend.Batch) error {
		for _, c := range counts {
			if err := l.preload(w, c.d, c.key, c.team, c.endUser); err != nil {
				return err
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		applied = 0
		return l.putChanged(w, l.count(w, counts, &applied))
	})
	if err != nil {
		l.mu.Lock()
		l.giveBack(counts, applied)
		l.mu.Unlock()
	}
	return err
}

// countWith writes, in w, the batch of note n, the refusals waiting whose
// rollups are cached: on a DB, where the cache is what is written and
// nothing is read. On a shared store every rollup a batch writes is read
// in it first, before the ledger's lock is taken (see preload), and the
// refusals wait for Flush. The caller holds l.mu.
func (l *Ledger) countWith(n *Note, w batch) error {
	if l.shared || len(l.refusals) == 0 || n.refusals != nil {
		return nil
	}
	n.refusals = l.takeRefusals(true)
	var applied int
	if err := l.count(w, n.refusals, &applied); err != nil {
		l.giveBack(n.refusals, applied)
		n.refusals = nil
		return err
	}
	return nil
}

// takeRefusals returns the refusals waiting, in a stable order, and
// forgets them; if cached, only those of the days whose rollups are
// cached. The caller holds l.mu.
func (l *Ledger) takeRefusals(cached bool) []refusal {
	var out []refusal
	for id, n := range l.refusals {
		if cached && id.d < l.w.evicted {
			continue
		}
		out = append(out, refusal{id, n})
		delete(l.refusals, id)
	}
	slices.SortFunc(out, func(a, b refusal) int {
		return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.key, b.key), cmp.Compare(a.team, b.team),
			cmp.Compare(a.model, b.model), cmp.Compare(a.endUser, b.endUser), cmp.Compare(a.reason, b.reason))
	})
	return out
}

// count adds counts to their rollups in w, counting in applied those
// added. The caller holds l.mu.
func (l *Ledger) count(w batch, counts []refusal, applied *int) error {
	for _, c := range counts {
		if err := l.registerDay(w, c.d); err != nil {
			return err
		}
		t := Totals{Refused: c.n, Reasons: map[string]int64{c.reason: c.n}}
		if err := l.addAll(w, c.d, c.key, c.team, c.model, &t); err != nil {
			return err
		}
		if err := l.addEndUser(w, c.d, c.key, c.team, c.endUser, &t); err != nil {
			return err
		}
		if err := l.addDirectory(w, c.key, c.endUser, &t, 0); err != nil {
			return err
		}
		*applied++
	}
	return nil
}

// giveBack makes counts wait again, taken by a batch that stored
// nothing, having taken the first applied of them, which it added to the
// cached rollups, back out of those. The caller holds l.mu.
func (l *Ledger) giveBack(counts []refusal, applied int) {
	for _, c := range counts[:applied] {
		if !l.shared {
			back := Totals{Refused: -c.n, Reasons: map[string]int64{c.reason: -c.n}}
			l.uncount(c.d, c.key, c.team, c.model, &back)
			l.uncountEndUser(c.d, c.key, c.team, c.endUser, &back)
		}
	}
	l.restore(counts)
}

// restore makes counts wait again, and the flusher write them.
func (l *Ledger) restore(counts []refusal) {
	for _, c := range counts {
		l.refusals[c.refusalID] = sat.Add(l.refusals[c.refusalID], c.n)
	}
	if len(counts) > 0 {
		select {
		case l.refusing <- struct{}{}:
		default:
		}
	}
}

// registerDay is register for the day d of a refusal, which may be
// before the writer's: that day is marked again, its total deleted, and
// summarized again if its rollups are still cached (yesterday's: a count
// waits at most a second, unless writes fail). A day older than that
// keeps a summary without the count, which its key's and team's rollups
// have, and no day total.
func (l *Ledger) registerDay(w batch, d day) error {
	if d >= l.w.today {
		return l.register(w, d)
	}
	if err := l.dropTotal(w, d); err != nil {
		return err
	}
	if err := w.Put(appendKey(nil, writerPrefix, d, l.writer), []byte{}); err != nil {
		return err
	}
	if err := w.Put(appendKey(nil, dayPrefix, d), []byte{}); err != nil {
		return err
	}
	if d >= l.w.evicted && !slices.Contains(l.closed, d) {
		l.closed = append(l.closed, d)
		l.poke()
	}
	return nil
}

// flushRefusals writes the refusals refusalDelay after the first of them
// was counted, until the ledger closes; a write that fails is tried
// again refusalDelay later.
func (l *Ledger) flushRefusals() {
	defer close(l.flushed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		select {
		case <-l.stop:
			return
		case <-l.refusing:
		}
		select {
		case <-l.stop:
			return
		case <-l.after(refusalDelay):
		}
		if err := l.Flush(ctx); err != nil && !errors.Is(err, context.Canceled) {
			l.log.Warn("ledger: writing the counts of refused requests failed (they wait for the next write)", slog.String("error", err.Error()))
		}
	}
}

// addWaiting adds the refusals counted and not written yet to a: this
// process's own, which a query sees at once.
func (l *Ledger) addWaiting(a *aggregator) {
	first, last := dayOf(a.q.From), dayOf(a.q.To.Add(-time.Nanosecond))
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, n := range l.refusals {
		if id.d >= first && id.d <= last {
			t := Totals{Refused: n, Reasons: map[string]int64{id.reason: n}}
			a.add(a.in.idOf(id.key), a.in.idOf(id.team), a.in.idOf(a.modelOf(id.model, id.endUser)), id.d.time().Unix(), &t)
		}
	}
}
