package fakeprovider

import (
	"slices"
	"time"
)

// minute is the span of a provider's quotas: what was charged in the last
// minute counts against them.
const minute = time.Minute

// never is the wait of a request that no minute can hold: it asks for
// more than the limit.
const never time.Duration = -1

// window is one quota of a provider, a rolling minute of a quantity
// (tokens or requests): a log of what was charged and when, kept for a
// minute, and what the requests in flight hold. A request is admitted
// only when the last minute's charges, the holds and its own need fit the
// limit; since a request is charged at most what it held (see
// Provider.commit), what is charged in any minute never passes the limit,
// which a test can count on.
type window struct {
	limit int64    // 0: none (nothing is logged)
	log   []charge // by instant
	used  int64    // the sum of log
	held  int64    // what the requests in flight hold
}

// charge is what was charged to a window at an instant.
type charge struct {
	at time.Time
	n  int64
}

// expire drops the charges of a minute or more before now.
func (w *window) expire(now time.Time) {
	i := 0
	for i < len(w.log) && !now.Before(w.log[i].at.Add(minute)) {
		w.used -= w.log[i].n
		i++
	}
	w.log = slices.Delete(w.log, 0, i)
}

// room returns how long from now until n more fit in w: 0 when they fit
// now; the time until enough charges expire; a minute when the holds of
// requests in flight stand in the way (they are charged when they end,
// which nobody knows, and stay a minute); never when n is more than the
// limit.
func (w *window) room(now time.Time, n int64) time.Duration {
	if w.limit <= 0 {
		return 0
	}
	if n > w.limit {
		return never
	}
	w.expire(now)
	over := w.used + w.held + n - w.limit
	if over <= 0 {
		return 0
	}
	for _, c := range w.log {
		if over -= c.n; over <= 0 {
			return c.at.Add(minute).Sub(now)
		}
	}
	return minute
}

// add charges n at now. A clock that went back charges in the past, kept
// in order.
func (w *window) add(now time.Time, n int64) {
	if w.limit <= 0 || n == 0 {
		return
	}
	i := len(w.log)
	for i > 0 && w.log[i-1].at.After(now) {
		i--
	}
	w.log = slices.Insert(w.log, i, charge{now, n})
	w.used += n
}

// inUse is what w counts at now: the last minute's charges and the holds.
func (w *window) inUse(now time.Time) int64 {
	w.expire(now)
	return w.used + w.held
}
